package node

import (
	"cmp"
	"maps"
	"slices"

	"github.com/sluicemq/sluice/groups"
	"github.com/sluicemq/sluice/raftmeta"
)

// What a simulator (or an operator's probe) may read of a node's metadata
// quorum from outside, without changing it: the harness samples it to
// check the quorum's safety (jepsen.CheckLeaders, CheckAppliedLogs) and
// convergence (CheckConverged). Nothing here is called by the node itself.

// MetadataView is a node's metadata quorum as it stands now.
type MetadataView struct {
	// Leader is the node.id of the quorum leader this node knows of, -1
	// for none; Term is raft's current term as the node last heard it (0
	// before the quorum has reported any).
	Leader int32
	Term   uint64
	// Applied is the raft index of the last entry applied to the image.
	Applied uint64
	// Running says the node has started and serves clients (its start
	// finished and its metadata log has not failed).
	Running bool
	// Controller says the node is the active controller.
	Controller bool
	// Snapshots and Restores count the metadata snapshots this process
	// took and installed (loaded at start or sent by the leader).
	Snapshots, Restores int
	// Unconfirmed counts the answers this process decided as the active
	// controller, without writing, that a quorum then did not confirm: it
	// had been deposed without knowing it (they were NOT_CONTROLLER).
	Unconfirmed int
	// LeaseWithheld counts the heartbeats the controller answered
	// unfenced but not caught up: this broker's image lagged the
	// committed log, so they renewed no leader lease.
	LeaseWithheld int
}

// MetadataView returns the node's metadata quorum state. It must be called
// on the node's loop, or while the node runs nothing (a simulator between
// events).
func (b *Broker) MetadataView() MetadataView {
	return MetadataView{
		Leader:        nodeIDOfRaft(b.meta.leader),
		Term:          b.meta.term,
		Applied:       b.meta.applied,
		Running:       b.state == stateRunning && b.metaErr == nil,
		Controller:    b.meta.activeTerm != 0,
		Snapshots:     b.meta.snapshots,
		Restores:      b.meta.restores,
		Unconfirmed:   b.meta.unconfirmed,
		LeaseWithheld: b.hb.withheld,
	}
}

// QuorumConfig returns the metadata quorum's configuration as this node
// applied it: the voters and the learners, by node.id, in order (nil
// before its quorum node started). A harness compares it across nodes and
// with the reconfigurations it made. It must be called as MetadataView is.
func (b *Broker) QuorumConfig() (voters, learners []int32) {
	if b.meta.node == nil {
		return nil, nil
	}
	cs := b.meta.node.Status().Config
	for _, id := range currentVoters(cs) {
		voters = append(voters, nodeIDOfRaft(id))
	}
	for _, id := range slices.Sorted(slices.Values(append(slices.Clone(cs.GetLearners()), cs.GetLearnersNext()...))) {
		learners = append(learners, nodeIDOfRaft(id))
	}
	return voters, slices.Compact(learners)
}

// MetadataImage returns the node's metadata image, as of
// MetadataView().Applied. The caller must not modify it, and must not keep
// it past the node's next event.
func (b *Broker) MetadataImage() *raftmeta.Image { return b.image }

// ReplicationView counts what this process's replicas did, so that a
// simulator can tell which replication paths its faults reached.
type ReplicationView struct {
	// Truncations counts follower truncations (after an epoch query or a
	// log behind the leader's start).
	Truncations int
	// ShrinksProposed and ExpandsProposed count ISR changes this broker's
	// leaders proposed; ISRRefused those the controller refused.
	ShrinksProposed, ExpandsProposed, ISRRefused int
	// ISRStale counts the refusals for an old partition epoch
	// (INVALID_UPDATE_VERSION): changes decided before the controller
	// changed the partition some other way.
	ISRStale int
	// FencedFetches counts follower fetches and epoch queries a leader
	// answered FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH (one side's
	// metadata behind the other's).
	FencedFetches int
	// ReplicasRemoved counts replicas this broker closed and deleted
	// because a reassignment moved them away (reassignment.go);
	// ThrottledFetches the follower fetches its leaders answered with
	// fewer bytes (or none) for a replication throttle (throttle.go).
	ReplicasRemoved, ThrottledFetches int
	// RetriesDeduped counts idempotent producers' batches its leaders
	// found already in their logs and answered with the original offsets;
	// RetriesDedupedAcrossEpochs those of them stamped with an earlier
	// leader epoch than the leader's: appended by an earlier leadership,
	// which a failover or a leader move ended before the answer arrived.
	RetriesDeduped, RetriesDedupedAcrossEpochs int
}

// ReplicationView returns the counts; on the node's loop, as MetadataView.
func (b *Broker) ReplicationView() ReplicationView { return b.replStats }

// PartitionView is one replica this broker holds, as it stands.
type PartitionView struct {
	Topic     string
	Partition int32
	// Role is the replica's (isr.Role: leader, follower, or none while
	// it recovers); LeaderEpoch the epoch it knows.
	Role        string
	LeaderEpoch int32
	// ISR is the in-sync set as the replica knows it (the leader's view
	// is the one that counts).
	ISR []int32
	// LogStart, HighWatermark and LogEnd are its offsets.
	LogStart, HighWatermark, LogEnd int64
	Recovered                       bool
}

// PartitionViews returns every replica this broker holds, by topic name
// and partition; on the node's loop, as MetadataView.
func (b *Broker) PartitionViews() []PartitionView {
	out := make([]PartitionView, 0, len(b.partitions))
	for _, k := range slices.SortedFunc(maps.Keys(b.partitions), comparePartitionKeys) {
		p := b.partitions[k]
		v := PartitionView{Topic: p.topic, Partition: p.index, LeaderEpoch: p.leaderEpoch, HighWatermark: p.hw, Recovered: p.recovered}
		if p.log != nil {
			v.LogStart, v.LogEnd = p.log.LogStartOffset(), p.log.LogEndOffset()
		}
		if p.rep != nil {
			v.Role, v.ISR = p.rep.Role().String(), slices.Clone(p.rep.Metadata().ISR)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y PartitionView) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

// CoordinatedGroup is a group this broker coordinates, and the
// __consumer_offsets partition whose shard holds it.
type CoordinatedGroup struct {
	Shard int32
	groups.GroupView
}

// GroupViews returns the groups of every coordinator shard this broker has
// loaded, by shard and id; on the node's loop, as MetadataView.
func (b *Broker) GroupViews() []CoordinatedGroup {
	var out []CoordinatedGroup
	for _, index := range sortedKeys(b.coord.shards) {
		cs := b.coord.shards[index]
		if cs == nil || cs.loading {
			continue
		}
		for _, g := range cs.shard.Groups() {
			out = append(out, CoordinatedGroup{Shard: index, GroupView: g})
		}
	}
	return out
}
