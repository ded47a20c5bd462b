package node

import (
	"maps"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// epochQuery is one partition of an OffsetForLeaderEpoch request.
func epochQuery(partition, currentLeaderEpoch, leaderEpoch int32) kmsg.OffsetForLeaderEpochRequestTopicPartition {
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, currentLeaderEpoch, leaderEpoch
	return rp
}

// offsetForLeaderEpochRequest asks about partitions of one topic, as a
// consumer does (replica id -1).
func offsetForLeaderEpochRequest(version int16, topic string, partitions ...kmsg.OffsetForLeaderEpochRequestTopicPartition) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = version, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	return req
}

// epochEnd asks (v4) for one partition's end of epoch, checking the current
// leader epoch against current.
func (s *simBroker) epochEnd(topic string, partition, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	s.t.Helper()
	resp := s.do(offsetForLeaderEpochRequest(4, topic, epochQuery(partition, current, epoch))).(*kmsg.OffsetForLeaderEpochResponse)
	require.Len(s.t, resp.Topics, 1)
	require.Equal(s.t, topic, resp.Topics[0].Topic)
	require.Len(s.t, resp.Topics[0].Partitions, 1)
	got := resp.Topics[0].Partitions[0]
	require.Equal(s.t, partition, got.Partition)
	return got
}

// epochAndEnd is an answer without its error code (which must be none).
type epochAndEnd struct {
	epoch int32
	end   int64
}

func (s *simBroker) requireEpochEnds(topic string, current int32, want map[int32]epochAndEnd) {
	s.t.Helper()
	for _, epoch := range slices.Sorted(maps.Keys(want)) {
		got := s.epochEnd(topic, 0, current, epoch)
		require.Zero(s.t, got.ErrorCode, "epoch %d: %v", epoch, kerr.ErrorForCode(got.ErrorCode))
		require.Equal(s.t, want[epoch], epochAndEnd{got.LeaderEpoch, got.EndOffset}, "epoch %d", epoch)
	}
}

// threeEpochs makes topic t's partition 0 hold two records in each of
// leader epochs 0, 2 and 4 (a single broker's restart raises the epoch by
// two: fenced, then unfenced), and leaves it led in epoch 6 with nothing
// written there yet.
func threeEpochs(t *testing.T, seed uint64) (*simBroker, partitionKey) {
	s := newSimBroker(t, seed, nil)
	key := partitionKey{s.createTopic("t", 1), 0}
	for i := 0; i < 3; i++ {
		require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "a", "b")).ErrorCode)
		s.restart()
	}
	p := s.broker.partitions[key]
	require.Equal(t, int32(6), p.leaderEpoch)
	require.Equal(t, []int32{0, 2, 4}, epochsOf(p))
	return s, key
}

func epochsOf(p *partition) []int32 {
	var out []int32
	for _, e := range p.log.Epochs() {
		out = append(out, e.Epoch)
	}
	return out
}

func TestApiVersionsAdvertisesOffsetForLeaderEpoch(t *testing.T) {
	s := newSimBroker(t, 230, nil)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	for _, k := range s.do(req).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 23 {
			require.Equal(t, [2]int16{0, 4}, [2]int16{k.MinVersion, k.MaxVersion})
			return
		}
	}
	t.Fatal("ApiVersions does not list OffsetForLeaderEpoch")
}

// TestOffsetForLeaderEpochEveryVersionRoundTrips: each version is decoded
// and answered in its own version. v0 carries no epoch in the answer (the
// client reads the default, -1), and below v2 CurrentLeaderEpoch is not
// sent, so a stale one fences nothing.
func TestOffsetForLeaderEpochEveryVersionRoundTrips(t *testing.T) {
	s, _ := threeEpochs(t, 231)
	for v := int16(0); v <= 4; v++ {
		req := offsetForLeaderEpochRequest(v, "t", epochQuery(0, 6, 2), epochQuery(0, 1, 3))
		req.ReplicaID = 1 // a follower's id changes nothing
		resp := s.do(req).(*kmsg.OffsetForLeaderEpochResponse)
		require.Equal(t, v, resp.Version)
		require.Len(t, resp.Topics, 1, "v%d", v)
		parts := resp.Topics[0].Partitions
		require.Len(t, parts, 2, "v%d", v)
		wantEpoch := int32(2)
		if v == 0 {
			wantEpoch = -1
		}
		require.Equal(t, int16(0), parts[0].ErrorCode, "v%d", v)
		require.Equal(t, epochAndEnd{wantEpoch, 4}, epochAndEnd{parts[0].LeaderEpoch, parts[0].EndOffset}, "v%d", v)
		if v < 2 {
			require.Equal(t, int16(0), parts[1].ErrorCode, "v%d", v)
			require.Equal(t, epochAndEnd{wantEpoch, 4}, epochAndEnd{parts[1].LeaderEpoch, parts[1].EndOffset}, "v%d", v)
		} else {
			require.Equal(t, kerr.FencedLeaderEpoch.Code, parts[1].ErrorCode, "v%d", v)
			require.Equal(t, epochAndEnd{-1, -1}, epochAndEnd{parts[1].LeaderEpoch, parts[1].EndOffset}, "v%d", v)
		}
	}
}

// TestOffsetForLeaderEpochAnswersEachEpochsEnd: an epoch ends where the
// next newer one starts, paired with the newest epoch not above it; the
// leader's own ends at the log end, also before anything is written in it
// (as Kafka's leader, which caches its epoch when elected); -1 and an epoch
// above the leader's are UNDEFINED.
func TestOffsetForLeaderEpochAnswersEachEpochsEnd(t *testing.T) {
	s, key := threeEpochs(t, 232)
	undefined := epochAndEnd{-1, -1}
	s.requireEpochEnds("t", -1, map[int32]epochAndEnd{
		-1: undefined,
		0:  {0, 2}, 1: {0, 2},
		2: {2, 4}, 3: {2, 4},
		4: {4, 6},
		5: {4, 6}, // the log knows no epoch after 4: Kafka's leader knows 6 starts at 6
		6: {6, 6}, // the leader's epoch, nothing written in it
		7: undefined, 1 << 30: undefined,
	})

	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "c", "d", "e")).ErrorCode)
	require.Equal(t, []int32{0, 2, 4, 6}, epochsOf(s.broker.partitions[key]))
	s.requireEpochEnds("t", 6, map[int32]epochAndEnd{
		4: {4, 6}, 5: {4, 6},
		6: {6, 9}, // the log end
		7: undefined,
	})
}

// TestOffsetForLeaderEpochBelowTheEarliest: records deleted from the start
// take their epochs' starts with them; an epoch older than any left is
// answered with itself and the start of the first epoch left (Kafka's
// "may be inaccurate" case), which is where the log now starts.
func TestOffsetForLeaderEpochBelowTheEarliest(t *testing.T) {
	s, key := threeEpochs(t, 233)
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: 0, Offset: 3})
	req.Topics = append(req.Topics, rt)
	dr := s.do(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	require.Zero(t, dr.ErrorCode, kerr.ErrorForCode(dr.ErrorCode))
	require.Equal(t, []log.EpochEntry{{Epoch: 2, StartOffset: 3}, {Epoch: 4, StartOffset: 4}}, s.broker.partitions[key].log.Epochs())
	s.requireEpochEnds("t", 6, map[int32]epochAndEnd{
		0: {0, 3}, 1: {1, 3},
		2: {2, 4}, 3: {2, 4},
		4: {4, 6}, 6: {6, 6},
	})
}

// TestOffsetForLeaderEpochErrors: each partition gets its own error, and a
// partition named twice is answered twice.
func TestOffsetForLeaderEpochErrors(t *testing.T) {
	s, _ := threeEpochs(t, 234)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, s.epochEnd("missing", 0, -1, 0).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, s.epochEnd("t", 1, -1, 0).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, s.epochEnd("t", -1, -1, 0).ErrorCode)
	require.Equal(t, kerr.FencedLeaderEpoch.Code, s.epochEnd("t", 0, 5, 0).ErrorCode)
	require.Equal(t, kerr.FencedLeaderEpoch.Code, s.epochEnd("t", 0, 0, 0).ErrorCode)
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, s.epochEnd("t", 0, 7, 0).ErrorCode)
	for _, current := range []int32{-1, 6} {
		got := s.epochEnd("t", 0, current, 0)
		require.Zero(t, got.ErrorCode, "current leader epoch %d", current)
		require.Equal(t, epochAndEnd{0, 2}, epochAndEnd{got.LeaderEpoch, got.EndOffset})
	}
	for _, current := range []int32{4, 8} {
		got := s.epochEnd("t", 0, current, 2)
		require.NotZero(t, got.ErrorCode)
		require.Equal(t, epochAndEnd{-1, -1}, epochAndEnd{got.LeaderEpoch, got.EndOffset}, "an error carries no offset")
	}

	req := offsetForLeaderEpochRequest(4, "t", epochQuery(0, -1, 2), epochQuery(3, -1, 2), epochQuery(0, -1, 4))
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic, rt.Partitions = "nope", []kmsg.OffsetForLeaderEpochRequestTopicPartition{epochQuery(0, -1, 0)}
	req.Topics = append(req.Topics, rt)
	resp := s.do(req).(*kmsg.OffsetForLeaderEpochResponse)
	require.Len(t, resp.Topics, 2)
	require.Equal(t, "t", resp.Topics[0].Topic)
	var got []kmsg.OffsetForLeaderEpochResponseTopicPartition
	for _, p := range resp.Topics[0].Partitions {
		got = append(got, kmsg.OffsetForLeaderEpochResponseTopicPartition{Partition: p.Partition, ErrorCode: p.ErrorCode, LeaderEpoch: p.LeaderEpoch, EndOffset: p.EndOffset})
	}
	require.Equal(t, []kmsg.OffsetForLeaderEpochResponseTopicPartition{
		{Partition: 0, LeaderEpoch: 2, EndOffset: 4},
		{Partition: 3, ErrorCode: kerr.UnknownTopicOrPartition.Code, LeaderEpoch: -1, EndOffset: -1},
		{Partition: 0, LeaderEpoch: 4, EndOffset: 6},
	}, got)
	require.Equal(t, "nope", resp.Topics[1].Topic)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].Partitions[0].ErrorCode)
}

func TestOffsetForLeaderEpochOfAnOfflinePartitionIsAStorageError(t *testing.T) {
	s := newSimBroker(t, 235, nil)
	require.NoError(t, s.world.Node("n1").Disk().FailNext(simfs.OpMkdir, env.ErrIO))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	require.Equal(t, kerr.LeaderNotAvailable.Code, s.do(req).(*kmsg.MetadataResponse).Topics[0].Partitions[0].ErrorCode)
	got := s.epochEnd("t", 0, -1, 0)
	require.Equal(t, kerr.KafkaStorageError.Code, got.ErrorCode)
	require.Equal(t, epochAndEnd{-1, -1}, epochAndEnd{got.LeaderEpoch, got.EndOffset})
}

// TestClusterOffsetForLeaderEpochOnlyFromTheLeader: a broker that does not
// lead the partition answers NOT_LEADER_OR_FOLLOWER to consumers,
// followers and the debugging replica id -2 alike (Kafka's
// fetchOnlyFromLeader is always true for this API); the leader answers.
func TestClusterOffsetForLeaderEpochOnlyFromTheLeader(t *testing.T) {
	c := newSimCluster(t, 236, 3, nil)
	require.Zero(t, c.createTopic(0, "events", 1))
	leader := c.leaders(0, "events")[0]
	require.GreaterOrEqual(t, leader, int32(1))
	ask := func(node int, replica int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := offsetForLeaderEpochRequest(4, "events", epochQuery(0, -1, 0))
		req.ReplicaID = replica
		resp, err := c.do(node, req)
		require.NoError(t, err)
		return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	for node := 0; node < 3; node++ {
		follower := int32((node+1)%3 + 1)
		for _, replica := range []int32{-2, -1, follower} {
			got := ask(node, replica)
			if int32(node+1) == leader {
				require.Zero(t, got.ErrorCode, "leader, replica id %d", replica)
				continue
			}
			require.Equal(t, kerr.NotLeaderForPartition.Code, got.ErrorCode, "node %d, replica id %d", node+1, replica)
			require.Equal(t, epochAndEnd{-1, -1}, epochAndEnd{got.LeaderEpoch, got.EndOffset})
		}
	}
}
