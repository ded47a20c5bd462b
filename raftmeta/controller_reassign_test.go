package raftmeta

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// reassignHarness is brokers 1-5, unfenced, and topic "t" of two
// partitions on 1 2 3 led by 1.
func reassignHarness(t *testing.T) *harness {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(5)
	res, records := h.c.CreateTopics([]TopicSpec{{Name: "t", Assignment: [][]int32{{1, 2, 3}, {1, 2, 3}}}})
	require.Nil(t, res[0].Err)
	h.propose(records)
	return h
}

func (h *harness) reassign(rs ...Reassignment) []ReassignmentResult {
	res, records := h.c.AlterPartitionReassignments(rs)
	h.propose(records)
	return res
}

func (h *harness) alterISR(partition int32, isr ...int32) AlterPartitionReply {
	topic := h.c.View().TopicByName("t")
	p := topic.Partitions[partition]
	reply, records := h.c.AlterPartition(AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.c.View().Brokers[p.Leader].Epoch,
		Topic: topic.ID, Partition: partition, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr})
	h.propose(records)
	return reply
}

func (h *harness) partition(i int32) Partition { return h.committed.TopicByName("t").Partitions[i] }

// The start keeps the leader epoch (nobody leaves); the completion raises
// it once (replicas leave), so the removed replica is fenced.
func TestReassignmentRaisesTheLeaderEpochOnlyWhenAReplicaLeaves(t *testing.T) {
	h := reassignHarness(t)
	start := h.partition(0)
	require.Nil(t, h.reassign(Reassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 4}})[0].Err)
	p := h.partition(0)
	require.Equal(t, start.LeaderEpoch, p.LeaderEpoch)
	require.Equal(t, []int32{1, 2, 4, 3}, p.Replicas)
	require.Equal(t, []int32{4}, p.AddingReplicas)
	require.Equal(t, []int32{3}, p.RemovingReplicas)
	// Catching up partway (4 in, 3 still in) completes it.
	reply := h.alterISR(0, 1, 2, 3, 4)
	require.Nil(t, reply.Err)
	p = h.partition(0)
	require.Equal(t, []int32{1, 2, 4}, p.Replicas)
	require.Equal(t, []int32{1, 2, 4}, p.ISR)
	require.False(t, p.Reassigning())
	require.Equal(t, start.LeaderEpoch+1, p.LeaderEpoch)
	require.Equal(t, p, reply.Partition, "the leader's answer is the completed partition")
}

// Without every adding replica in the ISR nothing completes, whatever
// else the ISR does.
func TestReassignmentWaitsForEveryAddingReplica(t *testing.T) {
	h := reassignHarness(t)
	require.Nil(t, h.reassign(Reassignment{Topic: "t", Partition: 0, Replicas: []int32{4, 5}})[0].Err)
	require.Nil(t, h.alterISR(0, 1, 2, 3, 4).Err)
	p := h.partition(0)
	require.True(t, p.Reassigning())
	require.Equal(t, []int32{4, 5, 1, 2, 3}, p.Replicas)
	require.Nil(t, h.alterISR(0, 1, 4).Err)
	require.True(t, h.partition(0).Reassigning())
	require.Nil(t, h.alterISR(0, 1, 4, 5).Err)
	p = h.partition(0)
	require.False(t, p.Reassigning())
	require.Equal(t, []int32{4, 5}, p.Replicas)
	require.Equal(t, int32(4), p.Leader, "the removed leader's successor is the target's first in the ISR")
	require.Equal(t, []int32{4, 5}, p.ISR)
}

// One request's partitions are decided in order, each against the view
// the ones before it left; failures do not stop the others.
func TestReassignmentsOfOneRequestAreDecidedInOrder(t *testing.T) {
	h := reassignHarness(t)
	res := h.reassign(
		Reassignment{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 4}},
		Reassignment{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 5}},
		Reassignment{Topic: "t", Partition: 9, Replicas: []int32{1}},
		Reassignment{Topic: "t", Partition: 1},
		Reassignment{Topic: "t", Partition: 1, Replicas: []int32{3, 2, 1}},
	)
	require.Nil(t, res[0].Err)
	require.Nil(t, res[1].Err)
	require.Equal(t, kerr.UnknownTopicOrPartition, res[2].Err)
	require.Equal(t, kerr.NoReassignmentInProgress, res[3].Err)
	require.Nil(t, res[4].Err)
	// The second started from the first's merged replicas: 4, adding
	// before, is being removed now.
	p := h.partition(0)
	require.Equal(t, []int32{2, 3, 5, 4, 1}, p.Replicas)
	require.Equal(t, []int32{5}, p.AddingReplicas)
	require.Equal(t, []int32{4, 1}, p.RemovingReplicas)
	// A reorder completes at once.
	require.Equal(t, []int32{3, 2, 1}, h.partition(1).Replicas)
	require.False(t, h.partition(1).Reassigning())
	require.Equal(t, []OngoingReassignment{{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 5, 4, 1},
		Adding: []int32{5}, Removing: []int32{4, 1}}}, h.c.ListPartitionReassignments(nil))
	require.Empty(t, h.c.ListPartitionReassignments([]TopicPartitions{{Topic: "t", Partitions: []int32{1, 7, -1}}, {Topic: "x"}}))
}

// A cancel puts the partition back and takes the adding replicas out of
// the ISR and the ELR.
func TestReassignmentCancelKeepsTheLeaderInTheRevertedISR(t *testing.T) {
	h := reassignHarness(t)
	require.Nil(t, h.reassign(Reassignment{Topic: "t", Partition: 0, Replicas: []int32{4, 5, 1}})[0].Err)
	require.Nil(t, h.alterISR(0, 1, 2, 4).Err)
	before := h.partition(0)
	require.Nil(t, h.reassign(Reassignment{Topic: "t", Partition: 0})[0].Err)
	p := h.partition(0)
	require.Equal(t, []int32{1, 2, 3}, p.Replicas)
	require.Equal(t, []int32{1, 2}, p.ISR)
	require.Equal(t, int32(1), p.Leader)
	require.False(t, p.Reassigning())
	require.Equal(t, before.LeaderEpoch+1, p.LeaderEpoch, "the adding replicas that leave are fenced")
}
