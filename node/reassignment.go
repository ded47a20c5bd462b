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

// leaveReplica closes and deletes this node's replica p, which the image
// no longer lists in its partition's replicas: it stops fetching, what
// waits on it as leader is answered (fetches NOT_LEADER_OR_FOLLOWER,
// produces waiting for replication fail), and its directory goes as a
// deleted topic's does, so that the partition reassigned back here later
// opens empty once the removal is done.
func (b *Broker) leaveReplica(p *partition) {
	b.env.Log.Info("replica removed from the partition's replicas; deleting it", "topic", p.topic, "partition", p.index)
	b.replStats.ReplicasRemoved++
	b.leadershipLost(p)
	b.dropTopic(&raftmeta.Topic{Name: p.topic, ID: p.topicID, Partitions: []raftmeta.Partition{{Index: p.index}}})
	// No longer in b.partitions: its fetcher lets it go.
	p.fetching, p.query = false, nil
	b.assignFetcher(p)
}

// leaveUnassignedReplicas removes every replica of an existing topic the
// image no longer assigns to this node (after a snapshot replaced the
// image).
func (b *Broker) leaveUnassignedReplicas() {
	for _, key := range b.sortedPartitionKeys() {
		p := b.partitions[key]
		if mp, ok := b.imagePartition(key); ok && !assigned(mp, b.cfg.NodeID) {
			b.leaveReplica(p)
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
