package node

import "github.com/sluicemq/sluice/raftmeta"

// TODO(log): partition logs arrive with package log; until then topics exist
// in metadata only.

func (b *Broker) openPartitions() error { return nil }

func (b *Broker) openTopicPartitions(t *raftmeta.Topic) error { return nil }

func (b *Broker) closePartitions(done func(error)) { b.env.Loop.Post(func() { done(nil) }) }
