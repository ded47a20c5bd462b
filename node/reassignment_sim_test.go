package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reassignAt sends AlterPartitionReassignments for one partition (nil
// replicas cancels) to node i, retrying what a client retries, and returns
// the partition's answer.
func (c *simCluster) reassignAt(i int, topic string, partition int32, replicas []int32) kmsg.AlterPartitionAssignmentsResponseTopicPartition {
	c.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = partition, replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.do(i, req)
		if err == nil {
			r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
			retry := r.ErrorCode == kerr.NotController.Code || r.ErrorCode == kerr.RequestTimedOut.Code
			if !retry {
				require.Len(c.t, r.Topics, 1)
				require.Len(c.t, r.Topics[0].Partitions, 1)
				got := r.Topics[0].Partitions[0]
				if got.ErrorCode != kerr.NotController.Code && got.ErrorCode != kerr.RequestTimedOut.Code {
					return got
				}
			}
		}
		c.world.Run(200 * time.Millisecond)
	}
	c.t.Fatalf("reassigning %s-%d on node %d never got past NOT_CONTROLLER", topic, partition, i+1)
	return kmsg.AlterPartitionAssignmentsResponseTopicPartition{}
}

// listReassignmentsAt asks node i for every reassignment in progress.
func (c *simCluster) listReassignmentsAt(i int) *kmsg.ListPartitionReassignmentsResponse {
	c.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		req.TimeoutMillis = 30000
		resp, err := c.do(i, req)
		if err == nil {
			if r := resp.(*kmsg.ListPartitionReassignmentsResponse); r.ErrorCode == 0 {
				return r
			}
		}
		c.world.Run(200 * time.Millisecond)
	}
	c.t.Fatalf("listing reassignments on node %d never succeeded", i+1)
	return nil
}

// imagePartitionOf is node i's image of the partition.
func (c *simCluster) imagePartitionOf(i int, topic string, partition int32) raftmeta.Partition {
	c.t.Helper()
	t := c.brokers[i].image.TopicByName(topic)
	require.NotNil(c.t, t, "node %d has no topic %s", i+1, topic)
	return t.Partitions[partition]
}

// awaitReplicas runs the world until every node's image shows the
// partition with exactly these replicas and no reassignment.
func (c *simCluster) awaitReplicas(topic string, partition int32, want []int32, within time.Duration) {
	c.t.Helper()
	require.True(c.t, c.world.RunUntil(func() bool {
		for i, b := range c.brokers {
			if b == nil {
				continue
			}
			mp := c.imagePartitionOf(i, topic, partition)
			if !slices.Equal(mp.Replicas, want) || mp.Reassigning() {
				return false
			}
		}
		return true
	}, within), "the replicas of %s-%d never became %v: %v", topic, partition, want, c.imagePartitionOf(0, topic, partition))
}

// produceValues produces n acks=all records "v0".. to the partition's leader.
func (c *simCluster) produceValues(topic string, partition int32, n int) {
	c.t.Helper()
	for k := 0; k < n; k++ {
		leader := c.leaderOf(0, topic, partition)
		got := c.produceAt(leader, topic, partition, -1, fmt.Sprintf("v%d", k))
		require.Zero(c.t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	}
}

// readAllAt fetches the partition from node i from offset 0 until it has
// n records.
func (c *simCluster) readAllAt(i int, topic string, partition int32, n int) []wire.Record {
	c.t.Helper()
	var records []wire.Record
	require.True(c.t, c.world.RunUntil(func() bool {
		resp, err := c.do(i, fetchRequest(topic, partition, 0, 0))
		if err != nil {
			return false
		}
		fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if fp.ErrorCode != 0 || fp.HighWatermark < int64(n) {
			return false
		}
		records, err = wire.DecodeBatches(fp.RecordBatches)
		require.NoError(c.t, err)
		return len(records) >= n
	}, time.Minute), "node %d never served %d records of %s-%d", i+1, n, topic, partition)
	return records
}

// outsider returns a node (id) that holds no replica of the partition.
func outsider(mp raftmeta.Partition, nodes int) int32 {
	for id := int32(1); id <= int32(nodes); id++ {
		if !slices.Contains(mp.Replicas, id) {
			return id
		}
	}
	return -1
}

func TestReassignmentMovesAFollowerToANewBroker(t *testing.T) {
	c := newSimCluster(t, 31, 4, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "moves", 1, 3))
	c.produceValues("moves", 0, 20)
	before := c.imagePartitionOf(0, "moves", 0)
	added := outsider(before, 4)
	var removed int32 = -1
	for _, r := range before.Replicas {
		if r != before.Leader {
			removed = r
		}
	}
	target := []int32{}
	for _, r := range before.Replicas {
		if r == removed {
			r = added
		}
		target = append(target, r)
	}
	removedDir := partitionDir("moves", 0)
	_, err := c.brokers[removed-1].env.FS.Stat(removedDir)
	require.NoError(t, err, "the replica to remove has its directory")

	got := c.reassignAt(0, "moves", 0, target)
	require.Zero(t, got.ErrorCode, "reassign: %v", kerr.ErrorForCode(got.ErrorCode))
	c.awaitReplicas("moves", 0, target, time.Minute)

	// The added replica caught up and is in the ISR; the removed one is
	// gone, its directory too; the leader kept its place and every record.
	after := c.imagePartitionOf(0, "moves", 0)
	require.Contains(t, after.ISR, added)
	require.NotContains(t, after.ISR, removed)
	require.Equal(t, before.Leader, after.Leader)
	require.Greater(t, after.LeaderEpoch, before.LeaderEpoch, "a removed replica is fenced by the leader epoch")
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(int(removed-1), "moves", 0) == nil }, time.Minute))
	require.True(t, c.world.RunUntil(func() bool {
		_, err := c.brokers[removed-1].env.FS.Stat(removedDir)
		return err != nil
	}, time.Minute), "node %d kept the directory of its removed replica", removed)
	require.Equal(t, 1, c.brokers[removed-1].replStats.ReplicasRemoved)
	p := c.replicaOf(int(added-1), "moves", 0)
	require.NotNil(t, p)
	require.GreaterOrEqual(t, p.log.LogEndOffset(), int64(20))
	records := c.readAllAt(int(after.Leader-1), "moves", 0, 20)
	for k, r := range records {
		require.Equal(t, fmt.Sprintf("v%d", k), string(r.Value))
	}
	require.Empty(t, c.listReassignmentsAt(0).Topics)
	// New writes go on to the new set.
	c.produceValues("moves", 0, 1)
}

func TestReassignmentMovingTheLeaderAwayElectsANewOne(t *testing.T) {
	c := newSimCluster(t, 32, 4, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "moves", 1, 3))
	c.produceValues("moves", 0, 10)
	before := c.imagePartitionOf(0, "moves", 0)
	added := outsider(before, 4)
	target := []int32{added}
	for _, r := range before.Replicas {
		if r != before.Leader {
			target = append(target, r)
		}
	}
	got := c.reassignAt(1, "moves", 0, target)
	require.Zero(t, got.ErrorCode, "reassign: %v", kerr.ErrorForCode(got.ErrorCode))
	c.awaitReplicas("moves", 0, target, time.Minute)
	after := c.imagePartitionOf(0, "moves", 0)
	require.NotEqual(t, before.Leader, after.Leader)
	require.Contains(t, target, after.Leader)
	require.Greater(t, after.LeaderEpoch, before.LeaderEpoch)
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(int(before.Leader-1), "moves", 0) == nil }, time.Minute))
	records := c.readAllAt(int(after.Leader-1), "moves", 0, 10)
	require.Len(t, records, 10)
	c.produceValues("moves", 0, 1)
}

func TestReassignmentCancelRevertsToTheOriginalReplicas(t *testing.T) {
	c := newSimCluster(t, 33, 4, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "moves", 1, 3))
	c.leaderOf(0, "moves", 0)
	before := c.imagePartitionOf(0, "moves", 0)
	added := outsider(before, 4)
	// The new broker cannot catch up: it is cut off from the leader.
	c.world.Net().Partition(c.host(int(added-1)), c.host(int(before.Leader-1)))
	c.world.Net().Partition(c.host(int(before.Leader-1)), c.host(int(added-1)))
	got := c.reassignAt(int(before.Leader-1), "moves", 0, []int32{added, before.Replicas[1], before.Replicas[2]})
	require.Zero(t, got.ErrorCode, "reassign: %v", kerr.ErrorForCode(got.ErrorCode))
	require.True(t, c.world.RunUntil(func() bool {
		return len(c.listReassignmentsAt(int(before.Leader-1)).Topics) == 1
	}, time.Minute))
	list := c.listReassignmentsAt(int(before.Leader - 1))
	lp := list.Topics[0].Partitions[0]
	require.Equal(t, []int32{added}, lp.AddingReplicas)
	require.Equal(t, []int32{before.Replicas[0]}, lp.RemovingReplicas)
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(int(added-1), "moves", 0) != nil }, time.Minute),
		"the adding replica opens its log")

	got = c.reassignAt(int(before.Leader-1), "moves", 0, nil)
	require.Zero(t, got.ErrorCode, "cancel: %v", kerr.ErrorForCode(got.ErrorCode))
	c.awaitReplicas("moves", 0, before.Replicas, time.Minute)
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(int(added-1), "moves", 0) == nil }, time.Minute),
		"the adding replica is deleted again")
	got = c.reassignAt(int(before.Leader-1), "moves", 0, nil)
	require.Equal(t, kerr.NoReassignmentInProgress.Code, got.ErrorCode)
}

func TestReassignmentErrorCodes(t *testing.T) {
	c := newSimCluster(t, 34, 3, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "moves", 1, 3))
	for _, tc := range []struct {
		topic     string
		partition int32
		replicas  []int32
		code      *kerr.Error
	}{
		{"nope", 0, []int32{1}, kerr.UnknownTopicOrPartition},
		{"moves", 7, []int32{1}, kerr.UnknownTopicOrPartition},
		{"moves", -1, []int32{1}, kerr.UnknownTopicOrPartition},
		{"moves", 0, []int32{}, kerr.InvalidReplicaAssignment},
		{"moves", 0, []int32{1, 1}, kerr.InvalidReplicaAssignment},
		{"moves", 0, []int32{1, 9}, kerr.InvalidReplicaAssignment},
		{"moves", 0, []int32{-1}, kerr.InvalidReplicaAssignment},
		{"moves", 0, nil, kerr.NoReassignmentInProgress},
	} {
		got := c.reassignAt(1, tc.topic, tc.partition, tc.replicas)
		require.Equal(t, tc.code.Code, got.ErrorCode, "%s-%d %v: got %v", tc.topic, tc.partition, tc.replicas, kerr.ErrorForCode(got.ErrorCode))
		require.NotNil(t, got.ErrorMessage)
	}
	// KIP-860: v1 with AllowReplicationFactorChange false keeps the length.
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version, req.TimeoutMillis, req.AllowReplicationFactorChange = 1, 30000, false
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "moves"
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Replicas = []int32{1, 2}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.do(c.controller(), req)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidReplicationFactor.Code, resp.(*kmsg.AlterPartitionAssignmentsResponse).Topics[0].Partitions[0].ErrorCode)
	// A timeout of zero is REQUEST_TIMED_OUT.
	req.Version, req.TimeoutMillis = 0, 0
	resp, err = c.do(c.controller(), req)
	require.NoError(t, err)
	require.Equal(t, kerr.RequestTimedOut.Code, resp.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode)
	require.Empty(t, c.listReassignmentsAt(2).Topics)
}
