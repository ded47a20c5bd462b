package node

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaOf is node i's replica of topic's partition, nil when it has none.
func (c *simCluster) replicaOf(i int, topic string, partition int32) *partition {
	b := c.brokers[i]
	if b == nil {
		return nil
	}
	t := b.image.TopicByName(topic)
	if t == nil {
		return nil
	}
	return b.partitions[partitionKey{t.ID, partition}]
}

// leaderOf runs the world until node i's image names a leader of the
// partition, and returns its index.
func (c *simCluster) leaderOf(i int, topic string, partition int32) int {
	c.t.Helper()
	leader := int32(-1)
	require.True(c.t, c.world.RunUntil(func() bool {
		l, ok := c.leaders(i, topic)[partition]
		leader = l
		if !ok || l < 0 {
			return false
		}
		// The leader itself must know it leads (node i's image may be
		// ahead of the leader's), or a request sent there at once finds
		// no such partition.
		own, ok := c.leaders(int(l-1), topic)[partition]
		return ok && own == l
	}, time.Minute), "no leader of %s-%d", topic, partition)
	return int(leader - 1)
}

// produceAt sends one batch of values to node i and returns the partition's
// answer.
func (c *simCluster) produceAt(i int, topic string, partition int32, acks int16, values ...string) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp, err := c.do(i, produceRequest(topic, partition, acks, valueBatch(wire.NoProducer, 1, values...)))
	require.NoError(c.t, err)
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func TestReplicatedProduceReachesEveryReplicaBeforeItIsAcknowledged(t *testing.T) {
	c := newSimCluster(t, 21, 3, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "events", 1, 3))
	leader := c.leaderOf(0, "events", 0)
	got := c.produceAt(leader, "events", 0, -1, "a", "b", "c")
	require.Zero(t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	require.Equal(t, int64(0), got.BaseOffset)
	// Acknowledged: the high watermark passed the records, so every ISR
	// member has them on its disk.
	for i := range c.brokers {
		p := c.replicaOf(i, "events", 0)
		require.NotNil(t, p, "node %d holds no replica", i+1)
		require.GreaterOrEqual(t, p.log.DurableOffset(), int64(3), "node %d", i+1)
	}
	lp := c.replicaOf(leader, "events", 0)
	require.Equal(t, int64(3), lp.hw)
	require.Equal(t, isr.RoleLeader, lp.rep.Role())
	// The followers learn the high watermark with their next fetch.
	require.True(t, c.world.RunUntil(func() bool {
		for i := range c.brokers {
			if c.replicaOf(i, "events", 0).hw != 3 {
				return false
			}
		}
		return true
	}, time.Minute))
}

func TestReplicatedRecordsSurviveTheLeadersDeath(t *testing.T) {
	c := newSimCluster(t, 22, 3, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "events", 1, 3))
	leader := c.leaderOf(0, "events", 0)
	for _, v := range []string{"a", "b", "c"} {
		got := c.produceAt(leader, "events", 0, -1, v)
		require.Zero(t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	c.world.Node(c.host(leader)).Kill()
	c.brokers[leader], c.clients[leader] = nil, nil
	other := (leader + 1) % 3
	var next int
	require.True(t, c.world.RunUntil(func() bool {
		l, ok := c.leaders(other, "events")[0]
		next = int(l - 1)
		return ok && l >= 0 && next != leader
	}, time.Minute), "no new leader")
	var records []wire.Record
	require.True(t, c.world.RunUntil(func() bool {
		resp, err := c.do(next, fetchRequest("events", 0, 0, 0))
		if err != nil {
			return false
		}
		fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if fp.ErrorCode != 0 || fp.HighWatermark < 3 {
			return false
		}
		records, err = wire.DecodeBatches(fp.RecordBatches)
		require.NoError(t, err)
		return true
	}, time.Minute), "the new leader never served the records")
	require.Len(t, records, 3)
	require.Equal(t, "a", string(records[0].Value))
	require.Equal(t, "c", string(records[2].Value))
	// New writes are acknowledged by the two left.
	got := c.produceAt(next, "events", 0, -1, "d")
	require.Zero(t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	require.Equal(t, int64(3), got.BaseOffset)
}

func TestPageCacheModeAcknowledgesWhatIsNotYetOnDisk(t *testing.T) {
	c := newSimCluster(t, 23, 3, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "kafka-like", 1, 3, "flush.messages=1000"))
	leader := c.leaderOf(0, "kafka-like", 0)
	got := c.produceAt(leader, "kafka-like", 0, -1, "a", "b")
	require.Zero(t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	// Acknowledged once every ISR member has it in its log, synced or not
	// (flush.messages above 1 is Kafka's page-cache mode).
	lp := c.replicaOf(leader, "kafka-like", 0)
	require.Equal(t, int64(2), lp.hw)
	require.Less(t, lp.log.DurableOffset(), int64(2), "the leader synced though flush.messages=1000")

	// The default, for contrast: on every ISR member's disk.
	require.Zero(t, c.createTopicRF(c.controller(), "safe", 1, 3))
	leader = c.leaderOf(0, "safe", 0)
	got = c.produceAt(leader, "safe", 0, -1, "a", "b")
	require.Zero(t, got.ErrorCode)
	for i := range c.brokers {
		require.GreaterOrEqual(t, c.replicaOf(i, "safe", 0).log.DurableOffset(), int64(2), "node %d", i+1)
	}
}

// A leader whose lease ran out (its heartbeats stopped) is fenced and
// replaced, learns it is a follower and takes its new leader's high
// watermark. A produce that waited on it as leader must fail then, and
// never be acknowledged by that high watermark (the cluster sweep found
// two acks=all produces acknowledged at one offset so: the leader was
// already not serving when the change came, so nothing failed them).
func TestAProduceWaitingOnAReplacedLeaderFailsAndIsNeverAcknowledged(t *testing.T) {
	c := newSimCluster(t, 24, 3, func(_ int, cfg *Config) {
		cfg.BrokerSessionTimeout = 3 * time.Second
		cfg.BrokerHeartbeatInterval = 500 * time.Millisecond
	})
	ctl := c.controller()
	require.Zero(t, c.createTopicRF(ctl, "events", 1, 3))
	leader := c.leaderOf(ctl, "events", 0)
	if leader == ctl {
		t.Skip("the seed made the controller the leader") // the test needs them apart
	}
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(leader, "events", 0).serving() }, time.Minute))
	got := c.produceAt(leader, "events", 0, -1, "a")
	require.Zero(t, got.ErrorCode)

	var outcomes []error
	lb, lp := c.brokers[leader], c.replicaOf(leader, "events", 0)
	c.world.Node(c.host(leader)).Post(func() {
		// As if an append of 1000 records waited for its replicas; then
		// the broker's heartbeats stop, and its lease with them.
		lp.whenReplicated(1001, func(err error) { outcomes = append(outcomes, err) })
		lb.stopHeartbeats()
		lb.hb.leaseUntil = time.Time{}
	})
	require.True(t, c.world.RunUntil(func() bool {
		l, ok := c.leaders(ctl, "events")[0]
		return ok && l >= 0 && int(l-1) != leader
	}, time.Minute), "no new leader")
	next := c.leaderOf(ctl, "events", 0)
	// The new leader writes well past offset 1001.
	for i := 0; i < 20; i++ {
		vs := make([]string, 60)
		for j := range vs {
			vs[j] = "v"
		}
		require.Zero(t, c.produceAt(next, "events", 0, 1, vs...).ErrorCode)
	}
	require.True(t, c.world.RunUntil(func() bool { return lp.rep.Role() == isr.RoleFollower && lp.hw > 1001 }, time.Minute),
		"the old leader never followed past offset 1001")
	require.Len(t, outcomes, 1, "the waiting produce was answered once")
	require.ErrorIs(t, outcomes[0], errNotLeader)
}
