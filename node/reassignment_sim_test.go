package node

import (
	"fmt"
	"slices"
	"strings"
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

// setConfigAt sets (value non-nil) or deletes one config of a resource
// through node i, retrying what a client retries, and returns the code.
func (c *simCluster) setConfigAt(i int, typ kmsg.ConfigResourceType, name, key string, value *string) int16 {
	c.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = key, value
		if value == nil {
			cfg.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		res.Configs = append(res.Configs, cfg)
		req.Resources = append(req.Resources, res)
		resp, err := c.do(i, req)
		if err == nil {
			code := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
			if code != kerr.NotController.Code && code != kerr.RequestTimedOut.Code {
				return code
			}
		}
		c.world.Run(200 * time.Millisecond)
	}
	c.t.Fatalf("altering %s on node %d never got past NOT_CONTROLLER", key, i+1)
	return 0
}

// throttle sets the cluster's leader.replication.throttled.rate and the
// topic's leader.replication.throttled.replicas "*".
func (c *simCluster) throttle(topic string, rate int64) {
	c.t.Helper()
	v, all := fmt.Sprint(rate), "*"
	require.Zero(c.t, c.setConfigAt(0, kmsg.ConfigResourceTypeBroker, "", leaderThrottledRateConfig, &v))
	require.Zero(c.t, c.setConfigAt(0, kmsg.ConfigResourceTypeTopic, topic, leaderThrottledReplicasConfig, &all))
}

func TestReassignmentCancelRevertsToTheOriginalReplicas(t *testing.T) {
	c := newSimCluster(t, 33, 4, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "moves", 1, 3))
	c.produceValues("moves", 0, 20)
	// The new broker cannot catch up: the leader serves it a byte a second.
	c.throttle("moves", 1)
	before := c.imagePartitionOf(0, "moves", 0)
	added := outsider(before, 4)
	got := c.reassignAt(0, "moves", 0, []int32{added, before.Replicas[1], before.Replicas[2]})
	require.Zero(t, got.ErrorCode, "reassign: %v", kerr.ErrorForCode(got.ErrorCode))
	list := c.listReassignmentsAt(1)
	require.Len(t, list.Topics, 1)
	lp := list.Topics[0].Partitions[0]
	require.Equal(t, []int32{added, before.Replicas[1], before.Replicas[2], before.Replicas[0]}, lp.Replicas)
	require.Equal(t, []int32{added}, lp.AddingReplicas)
	require.Equal(t, []int32{before.Replicas[0]}, lp.RemovingReplicas)
	// Metadata shows the adding replica among the replicas, as Kafka's does.
	for _, mt := range c.metadata(2).Topics {
		if *mt.Topic == "moves" {
			require.Contains(t, mt.Partitions[0].Replicas, added)
		}
	}
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(int(added-1), "moves", 0) != nil }, time.Minute),
		"the adding replica opens its log")
	c.world.Run(10 * time.Second)
	require.True(t, c.imagePartitionOf(0, "moves", 0).Reassigning(), "the throttled replica caught up")

	got = c.reassignAt(1, "moves", 0, nil)
	require.Zero(t, got.ErrorCode, "cancel: %v", kerr.ErrorForCode(got.ErrorCode))
	// The replicas without the adding one, in their merged order, as
	// Kafka's revert leaves them.
	c.awaitReplicas("moves", 0, []int32{before.Replicas[1], before.Replicas[2], before.Replicas[0]}, time.Minute)
	require.Equal(t, before.Leader, c.imagePartitionOf(0, "moves", 0).Leader)
	require.True(t, c.world.RunUntil(func() bool { return c.replicaOf(int(added-1), "moves", 0) == nil }, time.Minute),
		"the adding replica is deleted again")
	got = c.reassignAt(1, "moves", 0, nil)
	require.Equal(t, kerr.NoReassignmentInProgress.Code, got.ErrorCode)
	require.Empty(t, c.listReassignmentsAt(2).Topics)
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

// catchUpTime reassigns the partition to take in a broker outside it and
// returns the simulated time until that broker is in the ISR.
func (c *simCluster) catchUpTime(topic string) time.Duration {
	c.t.Helper()
	before := c.imagePartitionOf(0, topic, 0)
	added := outsider(before, len(c.brokers))
	target := append(slices.Clone(before.Replicas), added)
	start := c.world.Now()
	got := c.reassignAt(0, topic, 0, target)
	require.Zero(c.t, got.ErrorCode, "reassign: %v", kerr.ErrorForCode(got.ErrorCode))
	c.awaitReplicas(topic, 0, target, 10*time.Minute)
	require.Contains(c.t, c.imagePartitionOf(0, topic, 0).ISR, added)
	return c.world.Now() - start
}

// fill produces n acks=all batches of one record of size bytes each and
// returns the partition's size in bytes, as a fetch from offset 0 reads it.
func (c *simCluster) fill(topic string, n, size int) int64 {
	c.t.Helper()
	value := strings.Repeat("x", size)
	for k := 0; k < n; k++ {
		leader := c.leaderOf(0, topic, 0)
		got := c.produceAt(leader, topic, 0, -1, value)
		require.Zero(c.t, got.ErrorCode, "produce: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	resp, err := c.do(c.leaderOf(0, topic, 0), fetchRequest(topic, 0, 0, 0))
	require.NoError(c.t, err)
	fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	require.Equal(c.t, int64(n), fp.HighWatermark)
	return int64(len(fp.RecordBatches))
}

// The leader's throttle bounds a catch-up to its rate: M bytes at N B/s take
// about (M-N)/N simulated seconds (the bucket starts with one second's
// worth), where the same catch-up unthrottled takes a moment.
func TestReplicationThrottleSlowsCatchUpToItsRate(t *testing.T) {
	c := newSimCluster(t, 35, 4, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "slow", 1, 3))
	require.Zero(t, c.createTopicRF(c.controller(), "fast", 1, 3))
	size := c.fill("slow", 40, 500)
	require.Equal(t, size, c.fill("fast", 40, 500))
	const rate = 2000
	c.throttle("slow", rate)

	fast := c.catchUpTime("fast")
	require.Less(t, fast, 2*time.Second, "an unthrottled topic's catch-up")
	slow := c.catchUpTime("slow")
	want := time.Duration(float64(size-rate) / rate * float64(time.Second))
	t.Logf("%d bytes at %d B/s: caught up in %v (unthrottled %v, expected about %v)", size, rate, slow, fast, want)
	require.Greater(t, slow, want*7/10)
	require.Less(t, slow, want*3/2+time.Second)
	leader := c.leaderOf(0, "slow", 0)
	require.Positive(t, c.brokers[leader].replStats.ThrottledFetches)

	// Once in the ISR the new replica is no longer throttled: acks=all
	// produces go on at once.
	start := c.world.Now()
	c.produceValues("slow", 0, 5)
	require.Less(t, c.world.Now()-start, 2*time.Second)
}

func TestThrottleConfigsAreValidated(t *testing.T) {
	c := newSimCluster(t, 36, 3, nil)
	require.Zero(t, c.createTopicRF(c.controller(), "t", 1, 3))
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		typ       kmsg.ConfigResourceType
		name, key string
		value     *string
		code      *kerr.Error
	}{
		{kmsg.ConfigResourceTypeBroker, "", leaderThrottledRateConfig, str("1000"), nil},
		{kmsg.ConfigResourceTypeBroker, "2", followerThrottledRateConfig, str("0"), nil},
		{kmsg.ConfigResourceTypeBroker, "", leaderThrottledRateConfig, str("-1"), kerr.InvalidConfig},
		{kmsg.ConfigResourceTypeBroker, "", leaderThrottledRateConfig, str("fast"), kerr.InvalidConfig},
		{kmsg.ConfigResourceTypeBroker, "x", leaderThrottledRateConfig, str("1"), kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBroker, "", leaderThrottledRateConfig, nil, nil},
		{kmsg.ConfigResourceTypeTopic, "t", leaderThrottledReplicasConfig, str("*"), nil},
		{kmsg.ConfigResourceTypeTopic, "t", leaderThrottledReplicasConfig, str("0:1,0:2"), nil},
		{kmsg.ConfigResourceTypeTopic, "t", followerThrottledReplicasConfig, str("0:3"), nil},
		{kmsg.ConfigResourceTypeTopic, "t", leaderThrottledReplicasConfig, str("0-1"), kerr.InvalidConfig},
		{kmsg.ConfigResourceTypeTopic, "t", leaderThrottledReplicasConfig, str("*,0:1"), kerr.InvalidConfig},
		{kmsg.ConfigResourceTypeTopic, "t", followerThrottledReplicasConfig, str("a:1"), kerr.InvalidConfig},
	} {
		want := int16(0)
		if tc.code != nil {
			want = tc.code.Code
		}
		got := c.setConfigAt(1, tc.typ, tc.name, tc.key, tc.value)
		require.Equal(t, want, got, "%s %q %s=%v: got %v", tc.typ, tc.name, tc.key, tc.value, kerr.ErrorForCode(got))
	}
	im := c.brokers[c.controller()].image
	require.Equal(t, "0", im.BrokerConfigs["2"][followerThrottledRateConfig])
	require.NotContains(t, im.BrokerConfigs[""], leaderThrottledRateConfig)
	require.Equal(t, "0:1,0:2", im.TopicByName("t").Configs[leaderThrottledReplicasConfig])
}

func TestThrottledReplicasNameThisBrokersPartitions(t *testing.T) {
	for _, tc := range []struct {
		value             string
		partition, broker int32
		want              bool
	}{
		{"*", 3, 1, true},
		{"", 0, 1, false},
		{"0:1,1:2", 0, 1, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1, 1:2", 1, 2, true},
		{"0:1,1:2", 0, 2, false},
		{"10:1", 1, 1, false},
	} {
		require.Equal(t, tc.want, throttledReplicasName(tc.value, tc.partition, tc.broker), "%q p%d b%d", tc.value, tc.partition, tc.broker)
	}
}

func TestTokenBucketRefillsAtItsRateWithoutLosingFractions(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newTokenBucket(1000, start)
	require.Equal(t, int64(1000), tb.available(start))
	tb.take(1500)
	require.Zero(t, tb.available(start))
	// 1,000 B/s in steps of 100µs (0.1 byte each): 0.6s earns 600 bytes.
	now := start
	for k := 0; k < 6000; k++ {
		now = now.Add(100 * time.Microsecond)
		tb.available(now)
	}
	require.Equal(t, int64(100), tb.available(now))
	// Never above one second's worth, and a clock stepping back earns
	// nothing.
	require.Equal(t, int64(1000), tb.available(now.Add(time.Hour)))
	tb.take(1000)
	require.Zero(t, tb.available(now))
	// A lower rate keeps at most its own second's worth.
	tb.setRate(10, now.Add(2*time.Hour))
	require.Equal(t, int64(10), tb.available(now.Add(2*time.Hour)))
}

// DescribeConfigs shows the throttle rates: the cluster default under the
// empty name, and on a broker its own value over the default over
// unlimited.
func TestDescribeConfigsShowsTheThrottleRates(t *testing.T) {
	c := newSimCluster(t, 37, 3, nil)
	ctl := c.controller()
	describe := func(name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		req.IncludeSynonyms = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
		req.Resources = append(req.Resources, rr)
		resp, err := c.do(ctl, req)
		require.NoError(t, err)
		res := resp.(*kmsg.DescribeConfigsResponse).Resources[0]
		require.Zero(t, res.ErrorCode)
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, e := range res.Configs {
			out[e.Name] = e
		}
		return out
	}
	self := fmt.Sprint(ctl + 1)
	require.Empty(t, describe(""))
	require.Equal(t, "9223372036854775807", *describe(self)[leaderThrottledRateConfig].Value)
	v, w := "1000", "500"
	require.Zero(t, c.setConfigAt(ctl, kmsg.ConfigResourceTypeBroker, "", leaderThrottledRateConfig, &v))
	defaults := describe("")
	require.Len(t, defaults, 1)
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, defaults[leaderThrottledRateConfig].Source)
	require.Zero(t, c.setConfigAt(ctl, kmsg.ConfigResourceTypeBroker, self, leaderThrottledRateConfig, &w))
	e := describe(self)[leaderThrottledRateConfig]
	require.Equal(t, "500", *e.Value)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, e.Source)
	require.False(t, e.ReadOnly)
	require.Len(t, e.ConfigSynonyms, 3)
	require.Equal(t, "1000", *e.ConfigSynonyms[1].Value)
}
