package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// nodeRack is node i's broker.rack in the rack-aware clusters below.
func nodeRack(i int) string { return fmt.Sprintf("rack-%d", i+1) }

// newRackCluster is three nodes, each in a rack of its own, with the given
// replica.selector.class.
func newRackCluster(t *testing.T, seed uint64, selector string, tweak func(int, *Config)) *simCluster {
	return newSimCluster(t, seed, 3, func(i int, cfg *Config) {
		cfg.BrokerRack = nodeRack(i)
		cfg.ReplicaSelectorClass = selector
		if tweak != nil {
			tweak(i, cfg)
		}
	})
}

// consumerFetch is a consumer's fetch (v12) from a client in rack (""
// none) that knows leaderEpoch (-1 none).
func consumerFetch(topic string, partition int32, offset int64, rack string, leaderEpoch int32) *kmsg.FetchRequest {
	req := fetchRequest(topic, partition, offset, 0)
	req.Rack = rack
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = leaderEpoch
	return req
}

// fetchAt sends req to node i and returns its one partition's answer and
// records.
func (c *simCluster) fetchAt(i int, req *kmsg.FetchRequest) (kmsg.FetchResponseTopicPartition, []wire.Record) {
	c.t.Helper()
	resp, err := c.do(i, req)
	require.NoError(c.t, err)
	fr := resp.(*kmsg.FetchResponse)
	require.Zero(c.t, fr.ErrorCode, "fetch: %v", kerr.ErrorForCode(fr.ErrorCode))
	require.Len(c.t, fr.Topics, 1)
	rp := fr.Topics[0].Partitions[0]
	recs, err := wire.DecodeBatches(rp.RecordBatches)
	require.NoError(c.t, err)
	return rp, recs
}

// replicatedTo produces values to the leader of topic's partition 0 (acks
// all) and runs the world until every replica's high watermark has them and
// the leader has seen every follower fetch past them; it returns the
// leader's index and the end offset.
func (c *simCluster) replicatedTo(topic string, values ...string) (leader int, end int64) {
	c.t.Helper()
	var got kmsg.ProduceResponseTopicPartition
	for attempt := 0; attempt < 50; attempt++ {
		// The image may name the leader before its replica serves.
		leader = c.leaderOf(0, topic, 0)
		if got = c.produceAt(leader, topic, 0, -1, values...); got.ErrorCode == 0 {
			break
		}
		c.world.Run(100 * time.Millisecond)
	}
	require.Zero(c.t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	end = got.BaseOffset + int64(len(values))
	require.True(c.t, c.world.RunUntil(func() bool {
		lp := c.replicaOf(leader, topic, 0)
		for i := range c.brokers {
			p := c.replicaOf(i, topic, 0)
			if p == nil || p.hw < end || (i != leader && lp.rep.FollowerOffset(int32(i+1)) < end) {
				return false
			}
		}
		return true
	}, time.Minute), "the records never reached every replica")
	return leader, end
}

func requireValues(t *testing.T, recs []wire.Record, want ...string) {
	t.Helper()
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	require.Equal(t, want, got)
}

func TestConsumerInAFollowersRackIsSentToItAndReadsTheSameRecordsThere(t *testing.T) {
	c := newRackCluster(t, 31, RackAwareSelectorClass, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "events", 1, 3))
	leader, end := c.replicatedTo("events", "a", "b", "c")
	follower := (leader + 1) % 3

	rp, recs := c.fetchAt(leader, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Zero(t, rp.ErrorCode, "%v", kerr.ErrorForCode(rp.ErrorCode))
	require.Equal(t, int32(follower+1), rp.PreferredReadReplica, "the follower in the client's rack")
	require.Empty(t, recs, "no records with a preferred read replica, as Kafka skips the read")
	require.Equal(t, end, rp.HighWatermark)
	require.Equal(t, end, rp.LastStableOffset)
	require.Zero(t, rp.LogStartOffset)

	rp, recs = c.fetchAt(follower, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Zero(t, rp.ErrorCode, "%v", kerr.ErrorForCode(rp.ErrorCode))
	require.Equal(t, int32(-1), rp.PreferredReadReplica, "a follower never redirects")
	require.Equal(t, end, rp.HighWatermark)
	requireValues(t, recs, "a", "b", "c")

	// The leader serves a client without a rack, one in its own rack, and
	// one in a rack no replica is in.
	for _, rack := range []string{"", nodeRack(leader), "rack-elsewhere"} {
		rp, recs = c.fetchAt(leader, consumerFetch("events", 0, 0, rack, -1))
		require.Zero(t, rp.ErrorCode, "rack %q: %v", rack, kerr.ErrorForCode(rp.ErrorCode))
		require.Equal(t, int32(-1), rp.PreferredReadReplica, "rack %q", rack)
		requireValues(t, recs, "a", "b", "c")
	}
	// A v10 consumer knows nothing of read replicas: the leader serves it.
	old := consumerFetch("events", 0, 0, "", -1)
	old.Version = 10
	rp, recs = c.fetchAt(leader, old)
	require.Equal(t, int32(-1), rp.PreferredReadReplica)
	requireValues(t, recs, "a", "b", "c")
	// A fetch offset past the follower's log end: the follower cannot
	// serve it, so the leader keeps the client (and says the offset is out
	// of range).
	rp, _ = c.fetchAt(leader, consumerFetch("events", 0, end+1, nodeRack(follower), -1))
	require.Equal(t, int32(-1), rp.PreferredReadReplica)
	require.Equal(t, kerr.OffsetOutOfRange.Code, rp.ErrorCode)
}

// Without replica.selector.class (Kafka's default) every consumer is told
// nothing and reads at the leader; a v11+ consumer that fetches from a
// follower anyway is still served there, as Kafka serves it (client
// metadata lifts fetchOnlyLeader), while a v10 consumer is not.
func TestWithoutASelectorTheLeaderServesButAFollowerAnswersRackAwareConsumers(t *testing.T) {
	c := newRackCluster(t, 32, "", nil)
	require.Zero(t, c.createTopicRF(c.controller(), "events", 1, 3))
	leader, _ := c.replicatedTo("events", "a", "b")
	follower := (leader + 2) % 3

	rp, recs := c.fetchAt(leader, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Equal(t, int32(-1), rp.PreferredReadReplica)
	requireValues(t, recs, "a", "b")

	rp, recs = c.fetchAt(follower, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Zero(t, rp.ErrorCode, "%v", kerr.ErrorForCode(rp.ErrorCode))
	requireValues(t, recs, "a", "b")

	old := consumerFetch("events", 0, 0, "", -1)
	old.Version = 10
	rp, _ = c.fetchAt(follower, old)
	require.Equal(t, kerr.NotLeaderForPartition.Code, rp.ErrorCode, "v10: the leader only")
}

// Kafka picks only ISR members: a follower cut off from its leader, once
// out of the ISR, is no longer chosen for its rack even though its broker
// is alive and unfenced.
func TestAFollowerOutOfTheISRIsNotPreferred(t *testing.T) {
	c := newRackCluster(t, 33, RackAwareSelectorClass, func(_ int, cfg *Config) { cfg.ReplicaLagTimeMax = 2 * time.Second })
	ctl := c.controller()
	require.Zero(t, c.createTopicRF(ctl, "events", 1, 3))
	leader, end := c.replicatedTo("events", "a")
	// A follower that is not the active controller keeps its session
	// (heartbeats go to the controller), wherever the leader is.
	follower := -1
	for i := range c.brokers {
		if i != leader && (i != ctl || leader == ctl) {
			follower = i
			break
		}
	}
	if leader != ctl && follower == ctl {
		follower = 3 - leader - ctl
	}
	require.NotEqual(t, -1, follower)
	rp, _ := c.fetchAt(leader, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Equal(t, int32(follower+1), rp.PreferredReadReplica, "in the ISR: chosen")

	c.world.Net().Partition(c.host(leader), c.host(follower))
	c.world.Net().Partition(c.host(follower), c.host(leader))
	got := c.produceAt(leader, "events", 0, 1, "b")
	require.Zero(t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	id := int32(follower + 1)
	require.True(t, c.world.RunUntil(func() bool {
		return !slices.Contains(c.replicaOf(leader, "events", 0).rep.Metadata().ISR, id)
	}, time.Minute), "the cut-off follower never left the ISR")
	require.False(t, c.brokers[leader].image.Brokers[id].Fenced, "the follower keeps its session")

	rp, recs := c.fetchAt(leader, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Equal(t, int32(-1), rp.PreferredReadReplica, "out of the ISR: not chosen")
	require.Zero(t, rp.ErrorCode)
	require.Equal(t, end+1, rp.HighWatermark)
	requireValues(t, recs, "a", "b")
}

// A follower checks a consumer's CurrentLeaderEpoch against the epoch it
// knows: older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, equal
// is served.
func TestAFollowerFencesAStaleLeaderEpoch(t *testing.T) {
	c := newRackCluster(t, 34, RackAwareSelectorClass, nil)
	ctl := c.controller()
	require.Zero(t, c.createTopicRF(ctl, "events", 1, 3))
	first, _ := c.replicatedTo("events", "a")
	// A new leader, at a newer epoch.
	c.world.Node(c.host(first)).Kill()
	c.brokers[first], c.clients[first] = nil, nil
	other := (first + 1) % 3
	require.True(t, c.world.RunUntil(func() bool {
		l, ok := c.leaders(other, "events")[0]
		return ok && l >= 0 && int(l-1) != first
	}, time.Minute), "no new leader")
	c.world.Node(c.host(first)).Restart()
	c.waitRunning(first)
	leader, _ := c.replicatedTo("events", "b")
	follower := (leader + 1) % 3
	var epoch int32
	require.True(t, c.world.RunUntil(func() bool {
		p := c.replicaOf(follower, "events", 0)
		epoch = p.leaderEpoch
		return p.rep.Role() == isr.RoleFollower && epoch > 0
	}, time.Minute))

	for _, tc := range []struct {
		epoch int32
		code  int16
	}{
		{epoch - 1, kerr.FencedLeaderEpoch.Code},
		{epoch + 1, kerr.UnknownLeaderEpoch.Code},
		{epoch, 0},
		{-1, 0},
	} {
		rp, recs := c.fetchAt(follower, consumerFetch("events", 0, 0, "", tc.epoch))
		require.Equal(t, tc.code, rp.ErrorCode, "epoch %d (follower's %d): %v", tc.epoch, epoch, kerr.ErrorForCode(rp.ErrorCode))
		if tc.code == 0 {
			requireValues(t, recs, "a", "b")
		} else {
			require.Empty(t, recs)
		}
	}
}

// A follower serves only below its own high watermark: an offset between it
// and the follower's log end returns nothing, one past the log end is
// OFFSET_OUT_OF_RANGE, and a fetch parked at the high watermark is woken
// when the follower learns a newer one.
func TestAFollowerServesBelowItsHighWatermarkAndWakesParkedConsumers(t *testing.T) {
	c := newRackCluster(t, 35, RackAwareSelectorClass, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "events", 1, 3))
	leader, end := c.replicatedTo("events", "a")
	follower := (leader + 1) % 3
	fp := c.replicaOf(follower, "events", 0)
	got := c.produceAt(leader, "events", 0, 1, "b", "c")
	require.Zero(t, got.ErrorCode)
	// Stop the follower between its append and the fetch that tells it
	// the new high watermark.
	require.True(t, c.world.RunUntil(func() bool {
		return fp.log.DurableOffset() == end+2 && fp.hw == end
	}, time.Minute), "the follower never held records above its high watermark")
	c.world.Net().Partition(c.host(leader), c.host(follower))

	rp, recs := c.fetchAt(follower, consumerFetch("events", 0, end, "", -1))
	require.Zero(t, rp.ErrorCode, "%v", kerr.ErrorForCode(rp.ErrorCode))
	require.Equal(t, end, rp.HighWatermark, "the follower's own high watermark")
	require.Empty(t, recs, "between the high watermark and the log end: nothing")
	rp, _ = c.fetchAt(follower, consumerFetch("events", 0, end+3, "", -1))
	require.Equal(t, kerr.OffsetOutOfRange.Code, rp.ErrorCode, "past the follower's log end")

	maxWait := 20 * time.Second
	parked := consumerFetch("events", 0, end, "", -1)
	parked.MaxWaitMillis = int32(maxWait / time.Millisecond)
	healAt := 2 * time.Second
	c.world.After(healAt, "heal", func() { c.world.Net().Heal(c.host(leader), c.host(follower)) })
	start := c.world.Now()
	rp, recs = c.fetchAt(follower, parked)
	waited := c.world.Now() - start
	require.Zero(t, rp.ErrorCode)
	requireValues(t, recs, "b", "c")
	require.Equal(t, end+2, rp.HighWatermark)
	require.GreaterOrEqual(t, waited, healAt, "answered before the follower could know")
	require.Less(t, waited, maxWait/2, "woken by the high watermark, not by the deadline")
}

// A dead follower is not chosen once its broker is fenced: a fenced broker
// has no endpoint (Kafka's getPartitionReplicaEndpoints leaves it out), and
// the controller takes it out of the ISR too, so either rule excludes it
// here; TestSelectRackAwareAsKafkasRackAwareReplicaSelector checks the
// endpoint rule alone.
func TestAFencedFollowerIsNotPreferred(t *testing.T) {
	c := newRackCluster(t, 36, RackAwareSelectorClass, nil)
	ctl := c.controller()
	require.Zero(t, c.createTopicRF(ctl, "events", 1, 3))
	leader, _ := c.replicatedTo("events", "a")
	follower := (leader + 1) % 3
	if follower == ctl {
		follower = (leader + 2) % 3
	}
	rp, _ := c.fetchAt(leader, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Equal(t, int32(follower+1), rp.PreferredReadReplica, "alive: chosen")

	c.world.Node(c.host(follower)).Kill()
	c.brokers[follower], c.clients[follower] = nil, nil
	id := int32(follower + 1)
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[leader].image.Brokers[id].Fenced }, time.Minute),
		"the dead follower was never fenced")
	rp, recs := c.fetchAt(leader, consumerFetch("events", 0, 0, nodeRack(follower), -1))
	require.Equal(t, int32(-1), rp.PreferredReadReplica, "fenced: not chosen")
	requireValues(t, recs, "a")
}
