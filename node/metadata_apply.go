package node

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/raftmeta"
)

// What a node does when committed metadata changes what it serves. Every
// node runs this for every entry, whoever proposed it: the partitions of a
// topic open on the brokers that lead them when its creation is applied
// there, and their data goes when its deletion is.

// applyRecords applies an entry's records to the image and brings this
// node's partitions in line with each. A deletion is seen before it
// applies, since the image forgets the topic.
func (b *Broker) applyRecords(records []raftmeta.Record) error {
	for i, r := range records {
		var deleted *raftmeta.Topic
		if d, ok := r.(raftmeta.DeleteTopicRecord); ok {
			deleted = b.image.Topics[d.ID]
		}
		if err := b.image.Apply(r); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if b.state != stateRunning {
			// Start opens what the image assigns once it has caught up.
			continue
		}
		switch r := r.(type) {
		case raftmeta.RegisterBrokerRecord:
			b.leaderRegistered(r.Broker.ID)
		case raftmeta.CreateTopicRecord:
			b.servePartitions(b.image.Topics[r.Topic.ID])
		case raftmeta.DeleteTopicRecord:
			b.dropTopic(deleted)
			if deleted != nil {
				b.shardsTopicDeleted(deleted.Name)
			}
		case raftmeta.CreatePartitionsRecord:
			b.servePartitions(b.image.Topics[r.Topic])
		case raftmeta.PartitionChangeRecord:
			b.followLeadership(r)
		case raftmeta.ConfigRecord:
			if r.Resource == raftmeta.ConfigTopic {
				b.reconfigureTopic(r.Name)
			}
		}
	}
	if b.state == stateRunning {
		b.syncShards()
	}
	return nil
}

// servePartitions opens the partitions of t that this node holds, each
// once any removal of a deleted topic's directory of the same name has
// finished (a new topic may reuse a deleted one's name at once).
func (b *Broker) servePartitions(t *raftmeta.Topic) {
	if t == nil {
		return
	}
	var waitFor []string
	for _, mp := range t.Partitions {
		if !slices.Contains(mp.Replicas, b.cfg.NodeID) {
			continue
		}
		if dir := partitionDir(t.Name, mp.Index); b.removing[dir] != nil {
			waitFor = append(waitFor, dir)
		}
	}
	if len(waitFor) > 0 {
		id := t.ID
		b.removing[waitFor[0]].add(func(error) { b.servePartitions(b.image.Topics[id]) })
		return
	}
	opened, err := b.openTopicPartitions(t)
	if err != nil {
		b.env.Log.Error("open partitions of new topic", "topic", t.Name, "err", err)
	}
	b.recoverOpened(opened)
}

// dropTopic closes and deletes this node's partitions of a deleted topic.
// Until a partition's directory is gone, a new topic of the same name waits
// to open it; a directory that cannot be removed is removed by the new
// topic's open or the next start, which tell it by its partition.metadata.
func (b *Broker) dropTopic(t *raftmeta.Topic) {
	if t == nil {
		return
	}
	var dirs []string
	for _, mp := range t.Partitions {
		key := partitionKey{t.ID, mp.Index}
		if b.partitions[key] == nil && b.offline[key] == nil {
			continue
		}
		dir := partitionDir(t.Name, mp.Index)
		if b.removing[dir] == nil {
			b.removing[dir] = &waiters{}
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return
	}
	b.removeTopicPartitions(t, func(stranded bool, err error) {
		if err != nil {
			b.env.Log.Error("remove partitions of deleted topic", "topic", t.Name, "id", t.ID.String(), "err", err)
		}
		if stranded {
			// Its partition.metadata names the deleted topic: a new topic of
			// the name removes it before it opens, and a start removes it.
			b.env.Log.Error("a deleted topic's partition directory is left on disk, to be removed when a topic of that name opens it or at the next start",
				"topic", t.Name, "id", t.ID.String())
		}
		for _, dir := range dirs {
			w := b.removing[dir]
			delete(b.removing, dir)
			w.wake(err)
		}
	})
}

// reconcilePartitions brings every partition in line with the image, after
// the image was replaced wholesale (a snapshot): open what this node holds,
// drop what no longer exists.
func (b *Broker) reconcilePartitions() {
	for _, key := range b.sortedPartitionKeys() {
		p := b.partitions[key]
		if b.image.Topics[key.topic] == nil {
			b.dropTopic(&raftmeta.Topic{Name: p.topic, ID: p.topicID, Partitions: []raftmeta.Partition{{Index: p.index}}})
		}
	}
	for _, key := range sortedPartitionKeysOf(b.offline) {
		if b.image.Topics[key.topic] == nil {
			delete(b.offline, key)
		}
	}
	b.leaveUnassignedReplicas()
	for _, name := range b.image.TopicNames() {
		b.servePartitions(b.image.TopicByName(name))
	}
}

// followLeadership hands a partition change (leader, epochs, ISR) to this
// node's replica of the partition, opening it if it has none yet.
func (b *Broker) followLeadership(r raftmeta.PartitionChangeRecord) {
	key := partitionKey{r.Topic, r.Partition}
	mp, ok := b.imagePartition(key)
	if !ok {
		return
	}
	p := b.partitions[key]
	if !slices.Contains(mp.Replicas, b.cfg.NodeID) {
		b.leaveReplica(key, p) // reassigned away (reassignment.go)
		return
	}
	if p == nil {
		b.servePartitions(b.image.Topics[r.Topic])
		return
	}
	b.followMetadata(p, mp)
}
