package raftmeta

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition reassignment (KIP-455), as Kafka's ReplicationControlManager
// and PartitionChangeBuilder do it in KRaft:
//
//   - Start: a target replica list, checked as a manual assignment is
//     (not empty, distinct, registered brokers: INVALID_REPLICA_ASSIGNMENT
//     with Kafka's messages). The replicas become the target followed by
//     the current replicas outside it; AddingReplicas are the target's
//     members that were not replicas, RemovingReplicas the replicas
//     outside the target. The ISR and the leader stay. A reassignment
//     started while one is in progress starts from the current (merged)
//     replicas, as Kafka's does.
//   - Completion, checked at every change of the partition (applyChange:
//     the leader's AlterPartition, fencing, shutdowns, elections, the
//     start itself): once every adding replica is in the ISR and the ISR
//     holds a replica that is not being removed, one that may lead, the
//     replicas become the target, the ISR, ELR and last known ELR lose
//     the removed ones, and the reassignment ends. A removed leader is
//     replaced by the election rule (controller_elect.go) from the new
//     ISR. The leader epoch goes up whenever a replica leaves, so a
//     removed replica is fenced. A start that adds nobody (a reorder, a
//     shrink) completes at once.
//   - Cancel (a nil target): NO_REASSIGNMENT_IN_PROGRESS unless one is in
//     progress; else the replicas go back to the current ones without the
//     adding replicas (in their current order, the target's members
//     first: as Kafka's revert, the original order is not kept), the ISR
//     is restricted to them, and the leader is elected again if it was an
//     adding replica. If no ISR member would be left (a leaderless
//     partition's empty ISR included, as in Kafka's
//     PartitionReassignmentRevert), the cancel needs an unclean election:
//     refused (INVALID_REPLICA_ASSIGNMENT) unless the topic allows one.
//
// Differences from Kafka: a fenced broker may not be added
// (INVALID_REPLICA_ASSIGNMENT; Kafka accepts it and the reassignment waits
// for it to come back), and completion also waits for a remaining ISR
// member that may lead, so a completion never leaves the partition
// without a leader.

// Reassignment asks for one partition's replicas to become Replicas; nil
// Replicas cancels the reassignment in progress.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
	// KeepReplicationFactor refuses a target of another length than the
	// partition's replicas without those being added (KIP-860's
	// AllowReplicationFactorChange false): INVALID_REPLICATION_FACTOR.
	KeepReplicationFactor bool
}

// ReassignmentResult answers one partition of AlterPartitionReassignments.
type ReassignmentResult struct {
	Topic     string
	Partition int32
	Err       *kerr.Error
	Message   string
}

// OngoingReassignment is a reassignment in progress, as
// ListPartitionReassignments reports it.
type OngoingReassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// AlterPartitionReassignments starts or cancels each reassignment, in
// request order, each against the view the ones before it left (see the
// rules above). The records of those that succeed form one batch.
func (c *Controller) AlterPartitionReassignments(req []Reassignment) ([]ReassignmentResult, []Record) {
	out := make([]ReassignmentResult, len(req))
	b := c.batch()
	for i, r := range req {
		out[i] = ReassignmentResult{Topic: r.Topic, Partition: r.Partition}
		if c.failed != nil {
			continue
		}
		out[i].Err, out[i].Message = c.reassign(b, r)
	}
	records := b.done()
	if c.failed != nil {
		for i := range out {
			out[i].Err, out[i].Message = c.failedErr()
		}
	}
	return out, records
}

func (c *Controller) reassign(b *batch, r Reassignment) (*kerr.Error, string) {
	t := c.view.TopicByName(r.Topic)
	if t == nil {
		return kerr.UnknownTopicOrPartition, fmt.Sprintf("Unable to find a topic named %s.", r.Topic)
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition, fmt.Sprintf("Unable to find partition %s:%d.", r.Topic, r.Partition)
	}
	if r.Replicas == nil {
		return c.cancelReassignment(b, t, int(r.Partition))
	}
	if p := &t.Partitions[r.Partition]; r.KeepReplicationFactor {
		if have := len(p.Replicas) - len(p.AddingReplicas); have != len(r.Replicas) {
			return kerr.InvalidReplicationFactor, fmt.Sprintf("The replication factor is changed from %d to %d", have, len(r.Replicas))
		}
	}
	return c.startReassignment(b, t, int(r.Partition), r.Replicas)
}

func (c *Controller) startReassignment(b *batch, t *Topic, i int, target []int32) (*kerr.Error, string) {
	if why := c.assignmentProblem(target, -1); why != "" {
		return kerr.InvalidReplicaAssignment, why
	}
	p := &t.Partitions[i]
	merged := append([]int32(nil), target...)
	var adding, removing []int32
	for _, r := range target {
		if indexOf(p.Replicas, r) < 0 {
			if br := c.view.Brokers[r]; br.Fenced {
				return kerr.InvalidReplicaAssignment, fmt.Sprintf("The manual partition assignment includes broker %d, which is fenced.", r)
			}
			adding = append(adding, r)
		}
	}
	for _, r := range p.Replicas {
		if indexOf(target, r) < 0 {
			merged = append(merged, r)
			removing = append(removing, r)
		}
	}
	b.applyChange(t, i, partitionChange{leader: p.Leader, exclude: NoLeader, uncleanShutdown: NoLeader,
		replicas: merged, adding: nonNil(adding), removing: nonNil(removing)})
	return nil, ""
}

func (c *Controller) cancelReassignment(b *batch, t *Topic, i int) (*kerr.Error, string) {
	p := &t.Partitions[i]
	if !p.Reassigning() {
		return kerr.NoReassignmentInProgress, kerr.NoReassignmentInProgress.Description
	}
	replicas := withoutAll(p.Replicas, p.AddingReplicas)
	isr := withoutAll(p.ISR, p.AddingReplicas)
	ch := partitionChange{isr: isr, leader: p.Leader, exclude: NoLeader, uncleanShutdown: NoLeader,
		replicas: replicas, adding: []int32{}, removing: []int32{}}
	if len(isr) == 0 {
		if !c.uncleanAllowed(t) {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("Unable to revert partition assignment for %s:%d because it would require an unclean leader election.", t.Name, i)
		}
		ch.unclean = true
	}
	ch.elect = indexOf(isr, p.Leader) < 0
	b.applyChange(t, i, ch)
	return nil, ""
}

// ListPartitionReassignments returns the reassignments in progress: of
// every partition (nil req, topics by name), or of the partitions named
// (unknown topics and partitions, and those not being reassigned, are left
// out, as in Kafka).
func (c *Controller) ListPartitionReassignments(req []TopicPartitions) []OngoingReassignment {
	var out []OngoingReassignment
	add := func(t *Topic, i int32) {
		if i < 0 || int(i) >= len(t.Partitions) || !t.Partitions[i].Reassigning() {
			return
		}
		p := &t.Partitions[i]
		out = append(out, OngoingReassignment{Topic: t.Name, Partition: i, Replicas: p.Replicas,
			Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
	}
	if req == nil {
		for _, name := range c.view.TopicNames() {
			t := c.view.TopicByName(name)
			for i := range t.Partitions {
				add(t, int32(i))
			}
		}
		return out
	}
	for _, tp := range req {
		if t := c.view.TopicByName(tp.Topic); t != nil {
			for _, i := range tp.Partitions {
				add(t, i)
			}
		}
	}
	return out
}

// reassigned is p with the replicas and reassignment ch asks for, and the
// ISR isr; when that completes the reassignment, without the replicas it
// removes (returned as removed). Its ISR, ELR and last known ELR are p's,
// kept to its replicas (the ELR rule compares against the old ISR); the
// new ISR is returned apart.
func (c *Controller) reassigned(p *Partition, ch partitionChange, isr []int32) (Partition, []int32, []int32) {
	q := *p
	if ch.replicas != nil {
		q.Replicas = ch.replicas
	}
	if ch.adding != nil {
		q.AddingReplicas = nilIfEmpty(ch.adding)
	}
	if ch.removing != nil {
		q.RemovingReplicas = nilIfEmpty(ch.removing)
	}
	var removed []int32
	if q.Reassigning() && c.reassignmentDone(&q, isr) {
		removed = q.RemovingReplicas
		q.Replicas = withoutAll(q.Replicas, removed)
		q.AddingReplicas, q.RemovingReplicas = nil, nil
	}
	q.ISR = keepOnly(p.ISR, q.Replicas)
	q.ELR = nilIfEmpty(keepOnly(p.ELR, q.Replicas))
	q.LastKnownELR = nilIfEmpty(keepOnly(p.LastKnownELR, q.Replicas))
	return q, keepOnly(isr, q.Replicas), removed
}

// reassignmentDone reports whether q's reassignment completes with the
// ISR isr: every adding replica is in it, and so is a replica that stays
// and may lead.
func (c *Controller) reassignmentDone(q *Partition, isr []int32) bool {
	for _, r := range q.AddingReplicas {
		if indexOf(isr, r) < 0 {
			return false
		}
	}
	for _, r := range isr {
		if indexOf(q.RemovingReplicas, r) < 0 && c.eligible(r) {
			return true
		}
	}
	return false
}

// withoutAll returns ids without any of drop, in order.
func withoutAll(ids, drop []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, v := range ids {
		if indexOf(drop, v) < 0 {
			out = append(out, v)
		}
	}
	return out
}

// keepOnly returns the members of ids that are in keep, in order.
func keepOnly(ids, keep []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, v := range ids {
		if indexOf(keep, v) >= 0 {
			out = append(out, v)
		}
	}
	return out
}

// nonNil returns ids, or an empty list for nil (a change that clears).
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
