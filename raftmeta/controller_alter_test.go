package raftmeta

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newAlterHarness has brokers 1-3 and topic t with partitions [1,2,3] and
// [1,3,2], both led by broker 1.
func newAlterHarness(t *testing.T) (*harness, *Topic) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(3)
	res, records := h.c.CreateTopics([]TopicSpec{{Name: "t", Assignment: [][]int32{{1, 2, 3}, {1, 3, 2}}}})
	require.Nil(t, res[0].Err, res[0].Message)
	h.propose(records)
	return h, h.committed.TopicByName("t")
}

// alterOf is broker 1's request to give partition i of t the ISR isr.
func (h *harness) alterOf(t *Topic, i int32, isr ...int32) AlterPartition {
	p := h.c.View().Topics[t.ID].Partitions[i]
	return AlterPartition{BrokerID: 1, BrokerEpoch: h.c.View().Brokers[1].Epoch, Topic: t.ID, Partition: i,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr}
}

func TestAlterPartitionChecksEachMembersBrokerEpoch(t *testing.T) {
	h, topic := newAlterHarness(t)
	epochs := func(ids ...int32) []int64 {
		out := make([]int64, len(ids))
		for i, id := range ids {
			out[i] = h.c.View().Brokers[id].Epoch
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		epochs []int64
		want   *kerr.Error
	}{
		{"member 2 restarted since", []int64{epochs(1)[0], epochs(2)[0] - 1}, kerr.IneligibleReplica},
		{"member 2 from the future", []int64{epochs(1)[0], epochs(2)[0] + 1}, kerr.IneligibleReplica},
		{"one epoch for two members", epochs(1), kerr.InvalidRequest},
	} {
		req := h.alterOf(topic, 0, 1, 2)
		req.ISREpochs = tc.epochs
		reply, records := h.c.AlterPartition(req)
		require.Equal(t, tc.want, reply.Err, tc.name)
		require.Empty(t, records, tc.name)
	}
	// -1 skips the check, as v0-v2 requests (no epochs) do.
	req := h.alterOf(topic, 0, 1, 2)
	req.ISREpochs = []int64{-1, -1}
	reply, records := h.c.AlterPartition(req)
	require.Nil(t, reply.Err, reply.Message)
	h.propose(records)
	req = h.alterOf(topic, 0, 1, 3)
	req.ISREpochs = epochs(1, 3)
	reply, records = h.c.AlterPartition(req)
	require.Nil(t, reply.Err, reply.Message)
	h.propose(records)
	require.Equal(t, []int32{1, 3}, h.committed.TopicByName("t").Partitions[0].ISR)
}

func TestAlterPartitionRefusesARecoveringLeader(t *testing.T) {
	h, topic := newAlterHarness(t)
	req := h.alterOf(topic, 0, 1)
	req.LeaderRecoveryState = 1
	reply, records := h.c.AlterPartition(req)
	require.Equal(t, kerr.InvalidRequest, reply.Err)
	require.Empty(t, records)
}

func TestAlterPartitionsDecidesEveryPartitionInOneBatch(t *testing.T) {
	h, topic := newAlterHarness(t)
	err, _, replies, records := h.c.AlterPartitions(1, h.c.View().Brokers[1].Epoch, []AlterPartition{h.alterOf(topic, 0, 1, 2), h.alterOf(topic, 1, 1, 3)})
	require.Nil(t, err)
	require.Len(t, replies, 2)
	require.Len(t, records, 2, "one record per partition, in one batch")
	for i, want := range [][]int32{{1, 2}, {1, 3}} {
		require.Nil(t, replies[i].Err, replies[i].Message)
		require.Equal(t, want, replies[i].Partition.ISR)
		require.Equal(t, int32(1), replies[i].Partition.PartitionEpoch)
	}
	require.Equal(t, 2, h.c.Pending(), "two pending batches")
	h.propose(records)
	require.Zero(t, h.c.Pending(), "one commit ends both")
	for i, want := range [][]int32{{1, 2}, {1, 3}} {
		require.Equal(t, want, h.committed.TopicByName("t").Partitions[i].ISR)
	}
}

// A partition named twice: the second is decided after the first, not
// against the state before the request.
func TestAlterPartitionsDecidesADuplicateAfterTheFirst(t *testing.T) {
	h, topic := newAlterHarness(t)
	first, again := h.alterOf(topic, 0, 1, 2), h.alterOf(topic, 0, 1)
	err, _, replies, records := h.c.AlterPartitions(1, h.c.View().Brokers[1].Epoch, []AlterPartition{first, again})
	require.Nil(t, err)
	require.Nil(t, replies[0].Err)
	require.Equal(t, kerr.InvalidUpdateVersion, replies[1].Err, replies[1].Message)
	require.Len(t, records, 1)
	h.propose(records)
	require.Equal(t, []int32{1, 2}, h.committed.TopicByName("t").Partitions[0].ISR)

	// The same ISR twice at the current epochs changes nothing, twice.
	same := h.alterOf(topic, 0, 1, 2)
	err, _, replies, records = h.c.AlterPartitions(1, h.c.View().Brokers[1].Epoch, []AlterPartition{same, same})
	require.Nil(t, err)
	require.Nil(t, replies[0].Err)
	require.Nil(t, replies[1].Err)
	require.Empty(t, records)
}

func TestAlterPartitionsRefusesAStaleRequesterWhole(t *testing.T) {
	h, topic := newAlterHarness(t)
	for _, tc := range []struct {
		name   string
		change func(*AlterPartition)
		want   *kerr.Error
	}{
		{"stale epoch", func(r *AlterPartition) { r.BrokerEpoch-- }, kerr.StaleBrokerEpoch},
		{"unknown broker", func(r *AlterPartition) { r.BrokerID = 9 }, kerr.BrokerIDNotRegistered},
	} {
		reqs := []AlterPartition{h.alterOf(topic, 0, 1, 2), h.alterOf(topic, 1, 1, 3)}
		for i := range reqs {
			tc.change(&reqs[i])
		}
		err, _, replies, records := h.c.AlterPartitions(reqs[0].BrokerID, reqs[0].BrokerEpoch, reqs)
		require.Equal(t, tc.want, err, tc.name)
		require.Nil(t, replies, tc.name)
		require.Empty(t, records, tc.name)
		err, _, _, _ = h.c.AlterPartitions(reqs[0].BrokerID, reqs[0].BrokerEpoch, nil)
		require.Equal(t, tc.want, err, "%s, naming no partition", tc.name)
	}
	err, _, replies, records := h.c.AlterPartitions(1, h.c.View().Brokers[1].Epoch, nil)
	require.Nil(t, err)
	require.Empty(t, replies)
	require.Nil(t, records)
}
