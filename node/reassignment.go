package node

import (
	"github.com/sluicemq/sluice/raftmeta"
)

// A partition's replicas change under reassignment (KIP-455,
// raftmeta/controller_reassign.go): a broker added to a partition opens
// its replica when the change is applied (servePartitions opens every
// partition whose replicas hold this node) and fetches from the leader
// like any follower; a broker removed closes its replica and deletes its
// directory once the change that removes it is applied here. The change
// that removes it also raises the leader epoch, so a fetch it still sends
// is fenced.

// leaveReplica closes and deletes this node's replica of the partition
// key, which the image no longer lists in its replicas: p when it is open
// (nil when it is not: an offline one's directory goes too). It stops
// fetching, what waits on it as leader is answered (fetches
// NOT_LEADER_OR_FOLLOWER, produces waiting for replication fail), and its
// directory goes as a deleted topic's does, so that the partition
// reassigned back here later opens empty once the removal is done.
func (b *Broker) leaveReplica(key partitionKey, p *partition) {
	t := b.image.Topics[key.topic]
	if t == nil || (p == nil && b.offline[key] == nil) {
		return
	}
	b.env.Log.Info("replica removed from the partition's replicas; deleting it", "topic", t.Name, "partition", key.index)
	b.replStats.ReplicasRemoved++
	if p != nil {
		b.leadershipLost(p)
	}
	b.dropTopic(&raftmeta.Topic{Name: t.Name, ID: t.ID, Partitions: []raftmeta.Partition{{Index: key.index}}})
	if p != nil {
		// No longer in b.partitions: its fetcher lets it go.
		p.fetching, p.query = false, nil
		b.assignFetcher(p)
	}
}

// leaveUnassignedReplicas removes every replica of an existing topic the
// image no longer assigns to this node (after a snapshot replaced the
// image).
func (b *Broker) leaveUnassignedReplicas() {
	for _, key := range b.sortedPartitionKeys() {
		if mp, ok := b.imagePartition(key); ok && !assigned(mp, b.cfg.NodeID) {
			b.leaveReplica(key, b.partitions[key])
		}
	}
}

// assigned reports whether the partition's replicas hold the node.
func assigned(mp raftmeta.Partition, id int32) bool {
	for _, r := range mp.Replicas {
		if r == id {
			return true
		}
	}
	return false
}
