package node

import "github.com/sluicemq/sluice/raftmeta"

// TODO(log): partition logs arrive with package log; until then topics exist
// in metadata only.

func (b *Broker) openPartitions() error { return nil }

// openTopicPartitions opens (creating) the logs of a topic just created.
func (b *Broker) openTopicPartitions(t *raftmeta.Topic) error { return nil }

// removeTopicPartitions closes and deletes the logs of a topic whose
// deletion has committed; done runs on the loop.
func (b *Broker) removeTopicPartitions(t *raftmeta.Topic, done func(error)) {
	b.env.Loop.Post(func() { done(nil) })
}

func (b *Broker) closePartitions(done func(error)) { b.env.Loop.Post(func() { done(nil) }) }
