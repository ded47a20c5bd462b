package node

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createAssigned creates a topic of one partition on the replicas given,
// with configs, through node i.
func (c *simCluster) createAssigned(i int, name string, replicas []int32, configs map[string]string) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: replicas}}
	for k, v := range configs {
		v := v
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.do(i, req)
	require.NoError(c.t, err)
	require.Zero(c.t, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, "create %s", name)
}

// describePartition0 returns partition 0 of topic as node i describes it.
func (c *simCluster) describePartition0(i int, topic string) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	c.t.Helper()
	resp := c.describeTopicPartitions(i, []string{topic}, 0, nil)
	require.Len(c.t, resp.Topics, 1)
	require.Len(c.t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// electUnclean sends ElectLeaders of type unclean for partition 0 of each
// topic to node i and returns the error code per topic.
func (c *simCluster) electUnclean(i int, topics ...string) map[string]int16 {
	c.t.Helper()
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, 1, 30000
	for _, name := range topics {
		req.Topics = append(req.Topics, kmsg.ElectLeadersRequestTopic{Topic: name, Partitions: []int32{0}})
	}
	resp, err := c.do(i, req)
	require.NoError(c.t, err)
	er := resp.(*kmsg.ElectLeadersResponse)
	require.Zero(c.t, er.ErrorCode)
	out := map[string]int16{}
	for _, rt := range er.Topics {
		require.Len(c.t, rt.Partitions, 1)
		out[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	return out
}

func (c *simCluster) killFor(i int, d time.Duration) {
	c.world.Node(c.host(i)).Kill()
	c.brokers[i], c.clients[i] = nil, nil
	c.world.Run(d)
}

// Eligible leader replicas end to end, with one replica per partition
// (until replication exists; raftmeta's transcripts cover more replicas):
// broker 4, not a voter, is killed, so "solo", which it alone holds, has no
// leader, 4 in its ELR and as its last known leader, as
// DescribeTopicPartitions shows; an unclean ElectLeaders finds no replica
// that may lead. 4 restarts without a clean shutdown: it leaves the ELR,
// and leads solo again as its last known leader.
func TestClusterKeepsEligibleLeaderReplicasAndAnswersUncleanElections(t *testing.T) {
	c := newSimClusterOf(t, 21, 3, 1, nil)
	observer := 0
	c.createAssigned(observer, "solo", []int32{4}, map[string]string{"min.insync.replicas": "1"})
	c.createAssigned(observer, "other", []int32{1}, nil)
	c.world.Run(2 * time.Second)
	s := c.describePartition0(observer, "solo")
	require.Equal(t, []int32{4}, s.ISR)
	require.Empty(t, s.EligibleLeaderReplicas)
	require.Empty(t, s.LastKnownELR)

	c.killFor(3, 15*time.Second) // past broker.session.timeout.ms
	s = c.describePartition0(observer, "solo")
	require.Equal(t, int32(-1), s.LeaderID)
	require.Empty(t, s.ISR)
	require.Equal(t, []int32{4}, s.EligibleLeaderReplicas, "the last ISR member went into the ELR")
	require.Equal(t, []int32{4}, s.LastKnownELR)
	require.Equal(t, []int32{4}, s.OfflineReplicas)
	require.Equal(t, map[string]int16{"solo": kerr.EligibleLeadersNotAvailable.Code, "other": kerr.ElectionNotNeeded.Code,
		"nope": kerr.UnknownTopicOrPartition.Code}, c.electUnclean(observer, "solo", "other", "nope"))

	c.world.Node(c.host(3)).Restart()
	c.waitRunning(3)
	require.True(t, c.world.RunUntil(func() bool {
		return c.brokers[observer].image.TopicByName("solo").Partitions[0].Leader == 4
	}, time.Minute), "4 leads solo again, as its last known leader")
	s = c.describePartition0(observer, "solo")
	require.Equal(t, []int32{4}, s.ISR)
	require.Empty(t, s.EligibleLeaderReplicas)
	require.Empty(t, s.LastKnownELR)
}

// unclean.leader.election.enable is a boolean topic config, false unless
// set, shown by DescribeConfigs; the controller reads the value the topic
// sets.
func TestUncleanLeaderElectionIsABooleanTopicConfig(t *testing.T) {
	s := newSimBroker(t, 22, nil)
	s.mustCreate("t")
	describe := func() kmsg.DescribeConfigsResponseResourceConfig {
		res := s.do(describeTopic(3, "t", "unclean.leader.election.enable")).(*kmsg.DescribeConfigsResponse).Resources[0]
		require.Zero(t, res.ErrorCode)
		require.Len(t, res.Configs, 1)
		return res.Configs[0]
	}
	c := describe()
	require.Equal(t, "false", *c.Value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, c.Source)
	require.Equal(t, kmsg.ConfigTypeBoolean, c.ConfigType)

	bad := s.do(incrementalSet("t", "unclean.leader.election.enable", "yes")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	require.Equal(t, kerr.InvalidConfig.Code, bad.ErrorCode)
	require.Zero(t, s.do(incrementalSet("t", "unclean.leader.election.enable", "true")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
	c = describe()
	require.Equal(t, "true", *c.Value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source)
	require.Equal(t, "true", s.broker.image.TopicByName("t").Configs[raftmeta.UncleanLeaderElectionConfig])
}
