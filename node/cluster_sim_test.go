package node

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/simnet"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simCluster is n combined (broker,controller) nodes n1..nN and a client
// node c1 in one simulated world, configured as a KRaft cluster with a
// static quorum of every node.
type simCluster struct {
	t       *testing.T
	world   *sim.World
	cfgs    []Config
	brokers []*Broker
	clients []*wire.Client
	// answered is the partition callAlterPartition last saw answered.
	answered raftmeta.Partition
}

func newSimCluster(t *testing.T, seed uint64, n int, tweak func(int, *Config)) *simCluster {
	return newSimClusterOf(t, seed, n, 0, tweak)
}

// newSimClusterOf makes voters nodes n1.. of the quorum (combined nodes, or
// controller-only ones if tweak says so) and brokers broker-only nodes
// after them, which follow the log as learners.
func newSimClusterOf(t *testing.T, seed uint64, voterCount, brokers int, tweak func(int, *Config)) *simCluster {
	t.Helper()
	n := voterCount + brokers
	c := &simCluster{t: t, world: sim.New(seed), brokers: make([]*Broker, n), clients: make([]*wire.Client, n)}
	if os.Getenv("SLUICE_LOG") != "" {
		c.world.SetLog(os.Stderr, slog.LevelDebug)
	}
	var voters []Voter
	for i := 0; i < voterCount; i++ {
		voters = append(voters, Voter{ID: int32(i + 1), Host: c.host(i), Port: 9093})
	}
	for i := 0; i < n; i++ {
		cfg := DefaultConfig()
		cfg.NodeID = int32(i + 1)
		cfg.ProcessRoles = Roles{Broker: true, Controller: true}
		cfg.ControllerQuorumVoters = voters
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: c.host(i), Port: 9092}, {Name: "CONTROLLER", Host: c.host(i), Port: 9093}}
		if i >= voterCount {
			cfg.ProcessRoles = Roles{Broker: true}
			cfg.Listeners = cfg.Listeners[:1]
		}
		if tweak != nil {
			tweak(i, &cfg)
		}
		require.NoError(t, cfg.Validate())
		c.cfgs = append(c.cfgs, cfg)
		i := i
		c.world.AddNode(c.host(i), func(e env.Env) {
			b, err := New(e, c.cfgs[i])
			require.NoError(t, err)
			c.brokers[i] = b
			b.Start(func(err error) { require.NoError(t, err, "node %d start", i+1) })
		})
	}
	c.world.AddNode("c1", func(env.Env) {})
	for i := 0; i < n; i++ {
		c.waitRunning(i)
	}
	return c
}

// kafkaSessions gives a node Kafka's broker.session.timeout.ms and
// broker.heartbeat.interval.ms (9 s and 2 s; Sluice's are 2 s and 400 ms),
// for tests whose cuts must not fence anyone.
func kafkaSessions(_ int, cfg *Config) {
	cfg.BrokerSessionTimeout, cfg.BrokerHeartbeatInterval = 9*time.Second, 2*time.Second
}

func (c *simCluster) host(i int) string { return fmt.Sprintf("n%d", i+1) }

func (c *simCluster) waitRunning(i int) {
	c.t.Helper()
	ok := c.world.RunUntil(func() bool { return c.brokers[i] != nil && c.brokers[i].state == stateRunning }, 2*time.Minute)
	require.True(c.t, ok, "node %d did not start", i+1)
}

// controller returns the index of the active controller, running the
// world until there is one.
func (c *simCluster) controller() int {
	c.t.Helper()
	at := -1
	ok := c.world.RunUntil(func() bool {
		for i, b := range c.brokers {
			if b != nil && c.world.Node(c.host(i)).Up() && b.meta.activeTerm != 0 {
				at = i
				return true
			}
		}
		return false
	}, 2*time.Minute)
	require.True(c.t, ok, "no active controller")
	return at
}

// do sends req to node i from the client node and runs the world until the
// answer, dialing first if need be; a broken connection is redialed.
func (c *simCluster) do(i int, req kmsg.Request) (kmsg.Response, error) {
	c.t.Helper()
	client := c.world.Node("c1")
	if c.clients[i] == nil {
		var dialErr error
		done := false
		client.Post(func() {
			wire.Dial(client.Env().Net, c.host(i)+":9092", "test", func(cl *wire.Client, err error) {
				c.clients[i], dialErr, done = cl, err, true
			})
		})
		require.True(c.t, c.world.RunUntil(func() bool { return done }, time.Minute), "dial node %d", i+1)
		if dialErr != nil {
			return nil, dialErr
		}
	}
	var resp kmsg.Response
	var err error
	done := false
	cl := c.clients[i]
	client.Post(func() { cl.Request(req, func(r kmsg.Response, e error) { resp, err, done = r, e, true }) })
	require.True(c.t, c.world.RunUntil(func() bool { return done }, 5*time.Minute), "no answer from node %d to %s", i+1, kmsg.NameForKey(req.Key()))
	if err != nil {
		c.clients[i] = nil
	}
	return resp, err
}

// createTopic asks node i to create a topic, retrying NOT_CONTROLLER and
// broken connections as a client does, and returns the final error code.
func (c *simCluster) createTopic(i int, name string, partitions int32) int16 {
	c.t.Helper()
	return c.createTopicRF(i, name, partitions, 1)
}

// createTopicRF is createTopic with replicationFactor replicas and the
// given topic configs ("key=value").
func (c *simCluster) createTopicRF(i int, name string, partitions int32, replicationFactor int16, configs ...string) int16 {
	c.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, replicationFactor
		for _, kv := range configs {
			k, v, _ := strings.Cut(kv, "=")
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = k, &v
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := c.do(i, req)
		if err == nil {
			code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
			if code != kerr.NotController.Code && code != kerr.RequestTimedOut.Code {
				return code
			}
		}
		c.world.Run(200 * time.Millisecond)
	}
	c.t.Fatalf("creating %s on node %d never got past NOT_CONTROLLER", name, i+1)
	return 0
}

// metadata asks node i for every topic.
func (c *simCluster) metadata(i int) *kmsg.MetadataResponse {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp, err := c.do(i, req)
	require.NoError(c.t, err)
	return resp.(*kmsg.MetadataResponse)
}

func topicNamesOf(resp *kmsg.MetadataResponse) []string {
	var names []string
	for _, t := range resp.Topics {
		names = append(names, *t.Topic)
	}
	return names
}

func TestClusterCreatesTopicsThatEveryNodeDescribes(t *testing.T) {
	c := newSimCluster(t, 1, 3, nil)
	ctl := c.controller()
	other := (ctl + 1) % 3
	// Through a node that is not the controller: forwarded, and answered
	// once the node that answers has applied it.
	require.Zero(t, c.createTopic(other, "orders", 6))
	md := c.metadata(other)
	require.Equal(t, []string{"orders"}, topicNamesOf(md))
	require.Len(t, md.Brokers, 3)
	leaders := map[int32]int{}
	for _, p := range md.Topics[0].Partitions {
		require.Zero(t, p.ErrorCode)
		leaders[p.Leader]++
	}
	require.Len(t, leaders, 3, "partitions spread over the brokers: %v", leaders)
	c.world.Run(time.Second)
	for i := 0; i < 3; i++ {
		require.Equal(t, []string{"orders"}, topicNamesOf(c.metadata(i)), "node %d", i+1)
	}
	require.Equal(t, kerr.TopicAlreadyExists.Code, c.createTopic(ctl, "orders", 1))
}

func TestClusterProduceToANonLeaderNamesTheLeader(t *testing.T) {
	c := newSimCluster(t, 2, 3, nil)
	require.Zero(t, c.createTopic(0, "events", 3))
	md := c.metadata(0)
	var partition, leader int32 = -1, -1
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != 1 {
			partition, leader = p.Partition, p.Leader
			break
		}
	}
	require.NotEqual(t, int32(-1), partition)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 12
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "events"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = wire.AppendBatch(nil, wire.NoProducer, []wire.Record{{Value: []byte("v")}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.do(0, req)
	require.NoError(t, err)
	pr := resp.(*kmsg.ProduceResponse)
	got := pr.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, got.ErrorCode)
	require.Equal(t, leader, got.CurrentLeader.LeaderID)
	require.Len(t, pr.Brokers, 1)
	require.Equal(t, leader, pr.Brokers[0].NodeID)
	require.Equal(t, c.host(int(leader-1)), pr.Brokers[0].Host)
}

func TestClusterControllerFailoverKeepsAcknowledgedTopics(t *testing.T) {
	c := newSimCluster(t, 3, 3, nil)
	var created []string
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("before-%d", i)
		require.Zero(t, c.createTopic(i, name, 1))
		created = append(created, name)
	}
	old := c.controller()
	c.world.Node(c.host(old)).Kill()
	c.brokers[old] = nil
	c.clients[old] = nil
	survivor := (old + 1) % 3
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("after-%d", i)
		require.Zero(t, c.createTopic(survivor, name, 1))
		created = append(created, name)
	}
	require.NotEqual(t, old, c.controller())
	c.world.Node(c.host(old)).Restart()
	c.waitRunning(old)
	require.True(t, c.world.RunUntil(func() bool { return len(c.brokers[old].image.Topics) == len(created) }, time.Minute))
	for i := 0; i < 3; i++ {
		require.ElementsMatch(t, created, topicNamesOf(c.metadata(i)), "node %d", i+1)
	}
}

func (c *simCluster) leaders(i int, topic string) map[int32]int32 {
	c.t.Helper()
	out := map[int32]int32{}
	for _, t := range c.metadata(i).Topics {
		if *t.Topic == topic {
			for _, p := range t.Partitions {
				out[p.Partition] = p.Leader
			}
		}
	}
	return out
}

func TestClusterCreatePartitionsThroughAnyNode(t *testing.T) {
	c := newSimCluster(t, 4, 3, nil)
	require.Zero(t, c.createTopic(0, "grow", 2))
	other := (c.controller() + 1) % 3
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 5
	req.Topics = append(req.Topics, rt)
	resp, err := c.do(other, req)
	require.NoError(t, err)
	require.Zero(t, resp.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode)
	require.Len(t, c.leaders(other, "grow"), 5, "applied on the answering node before the answer")

	rt.Count = 4
	req.Topics[0] = rt
	resp, err = c.do(other, req)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidPartitions.Code, resp.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode)
}

// CreatePartitions with a manual assignment takes replica lists of the
// topic's replication factor, and refuses others as Kafka does.
func TestClusterCreatePartitionsWithReplicatedAssignment(t *testing.T) {
	c := newSimCluster(t, 4, 3, nil)
	require.Zero(t, c.createTopicRF(0, "rf3", 1, 3))
	grow := func(count int32, lists ...[]int32) (int16, string) {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "rf3", count
		for _, l := range lists {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = l
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := c.do(1, req)
		require.NoError(t, err)
		got := resp.(*kmsg.CreatePartitionsResponse).Topics[0]
		msg := ""
		if got.ErrorMessage != nil {
			msg = *got.ErrorMessage
		}
		return got.ErrorCode, msg
	}
	for _, bad := range []struct {
		lists [][]int32
		says  string
	}{
		{[][]int32{{1, 2}}, "which have 3 replica(s)"},
		{[][]int32{{1, 1, 2}}, "more than once"},
		{[][]int32{{1, 2, 9}}, "broker 9"},
		{[][]int32{{1, 2, 3}, {2, 3, 1}}, "2 assignment(s)"},
	} {
		code, msg := grow(2, bad.lists...)
		require.Equal(t, kerr.InvalidReplicaAssignment.Code, code, "%v: %s", bad.lists, msg)
		require.Contains(t, msg, bad.says)
	}
	code, msg := grow(2, []int32{3, 1, 2})
	require.Zero(t, code, msg)
	for _, tp := range c.metadata(1).Topics {
		if *tp.Topic == "rf3" {
			require.Len(t, tp.Partitions, 2)
			for _, p := range tp.Partitions {
				if p.Partition == 1 {
					require.Equal(t, []int32{3, 1, 2}, p.Replicas)
				}
			}
		}
	}
}

// A broker that stops heartbeating is fenced once its session runs out,
// and the partitions it led have no leader (one replica each); when it
// comes back and is unfenced, they are its again.
func TestClusterFencesASilentBrokerAndReturnsItsPartitions(t *testing.T) {
	c := newSimCluster(t, 5, 3, nil)
	require.Zero(t, c.createTopic(0, "spread", 6))
	ctl := c.controller()
	victim := (ctl + 1) % 3
	observer := (ctl + 2) % 3
	id := int32(victim + 1)
	led := 0
	for _, leader := range c.leaders(observer, "spread") {
		if leader == id {
			led++
		}
	}
	require.Positive(t, led)
	c.world.Node(c.host(victim)).Kill()
	c.brokers[victim], c.clients[victim] = nil, nil
	c.world.Run(15 * time.Second) // past broker.session.timeout.ms
	for p, leader := range c.leaders(observer, "spread") {
		require.NotEqual(t, id, leader, "partition %d still led by the fenced broker", p)
	}
	require.True(t, c.brokers[ctl].image.Brokers[id].Fenced)

	c.world.Node(c.host(victim)).Restart()
	c.waitRunning(victim)
	require.True(t, c.world.RunUntil(func() bool {
		n := 0
		for _, tp := range c.brokers[observer].image.TopicByName("spread").Partitions {
			if tp.Leader == id {
				n++
			}
		}
		return n == led
	}, time.Minute), "the returning broker leads its partitions again")

	req := kmsg.NewPtrElectLeadersRequest()
	req.TimeoutMillis = 30000
	resp, err := c.do(observer, req)
	require.NoError(t, err)
	require.Zero(t, resp.(*kmsg.ElectLeadersResponse).ErrorCode)
	require.Empty(t, resp.(*kmsg.ElectLeadersResponse).Topics, "every preferred leader leads already")
}

// A broker shut down cleanly gives up its leaderships first (controlled
// shutdown), so the cluster does not wait for its session to run out.
func TestClusterControlledShutdownMovesLeadershipAtOnce(t *testing.T) {
	c := newSimCluster(t, 6, 3, nil)
	require.Zero(t, c.createTopic(0, "spread", 6))
	ctl := c.controller()
	leaving := (ctl + 1) % 3
	id := int32(leaving + 1)
	stopped := false
	c.world.Node(c.host(leaving)).Post(func() { c.brokers[leaving].Shutdown(func(error) { stopped = true }) })
	require.True(t, c.world.RunUntil(func() bool { return stopped }, time.Minute))
	for p, tp := range c.brokers[ctl].image.TopicByName("spread").Partitions {
		require.NotEqual(t, id, tp.Leader, "partition %d", p)
	}
	require.Less(t, c.world.Now(), 2*time.Minute)
}

// doController sends req to node i's CONTROLLER listener, where admin
// clients with --bootstrap-controller send DescribeQuorum.
func (c *simCluster) doController(i int, req kmsg.Request) kmsg.Response {
	c.t.Helper()
	client := c.world.Node("c1")
	var resp kmsg.Response
	var err error
	done := false
	client.Post(func() {
		wire.Dial(client.Env().Net, c.host(i)+":9093", "test", func(cl *wire.Client, derr error) {
			if derr != nil {
				err, done = derr, true
				return
			}
			cl.Request(req, func(r kmsg.Response, e error) { resp, err, done = r, e, true; cl.Close() })
		})
	})
	require.True(c.t, c.world.RunUntil(func() bool { return done }, time.Minute))
	require.NoError(c.t, err)
	return resp
}

func TestClusterDescribeQuorumNamesEveryVoter(t *testing.T) {
	c := newSimCluster(t, 7, 3, nil)
	require.Zero(t, c.createTopic(0, "t", 1))
	ctl := c.controller()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.DescribeQuorumRequestTopicPartition{Partition: 0})
	req.Topics = append(req.Topics, rt)
	c.world.Run(time.Second)
	resp := c.doController(ctl, req).(*kmsg.DescribeQuorumResponse)
	p := resp.Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	require.Equal(t, int32(ctl+1), p.LeaderID)
	require.Len(t, p.CurrentVoters, 3)
	for _, v := range p.CurrentVoters {
		require.Equal(t, p.HighWatermark, v.LogEndOffset, "voter %d has caught up", v.ReplicaID)
	}
	require.Len(t, resp.Nodes, 3)

	other := (ctl + 1) % 3
	p = c.doController(other, req).(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, p.ErrorCode)
	require.Equal(t, int32(ctl+1), p.LeaderID)
}

// Three controller-only voters and two broker-only learners: the brokers
// find the controller through the voters, are added as learners when they
// register, and serve topics placed on them alone.
func TestClusterOfControllersAndBrokerOnlyLearners(t *testing.T) {
	c := newSimClusterOf(t, 8, 3, 2, func(i int, cfg *Config) {
		if i < 3 {
			cfg.ProcessRoles = Roles{Controller: true}
			cfg.Listeners = cfg.Listeners[1:]
		}
	})
	require.Zero(t, c.createTopic(3, "on-brokers", 4))
	md := c.metadata(4)
	require.Len(t, md.Brokers, 2, "only broker nodes are brokers")
	for _, p := range md.Topics[0].Partitions {
		require.Contains(t, []int32{4, 5}, p.Leader)
	}
	st := c.brokers[c.controller()].meta.node.Status()
	require.ElementsMatch(t, []uint64{raftIDOf(4), raftIDOf(5)}, st.Config.GetLearners())
	require.ElementsMatch(t, []uint64{raftIDOf(1), raftIDOf(2), raftIDOf(3)}, st.Config.GetVoters())

	// The learners keep following through a controller failover.
	old := c.controller()
	c.world.Node(c.host(old)).Kill()
	c.brokers[old] = nil
	require.Zero(t, c.createTopic(4, "after-failover", 2))
	require.ElementsMatch(t, []string{"on-brokers", "after-failover"}, topicNamesOf(c.metadata(4)), "applied where it was answered")
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[3].image.TopicByName("after-failover") != nil }, time.Minute),
		"the other learner follows too")
}

// With snapshots every few KiB of records, the metadata log is compacted
// behind them; a node restarts from its latest snapshot plus the log after
// it, and a node that was down while the others moved on catches up.
func TestClusterRestartsFromSnapshots(t *testing.T) {
	c := newSimCluster(t, 9, 3, func(_ int, cfg *Config) { cfg.MetadataLogMaxRecordBytesBetweenSnapshots = 1024 })
	c.world.Node(c.host(2)).Kill()
	c.brokers[2], c.clients[2] = nil, nil
	var names []string
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("t%02d", i)
		require.Zero(t, c.createTopic(i%2, name, 2))
		names = append(names, name)
	}
	for i := 0; i < 2; i++ {
		files, err := c.world.Node(c.host(i)).Disk().List("__cluster_metadata-0")
		require.NoError(t, err)
		snapshots := 0
		for _, f := range files {
			if strings.HasSuffix(f, ".checkpoint") {
				snapshots++
			}
		}
		require.Positive(t, snapshots, "node %d took a snapshot: %v", i+1, files)
	}
	c.world.Node(c.host(2)).Restart()
	c.waitRunning(2)
	require.True(t, c.world.RunUntil(func() bool { return len(c.brokers[2].image.Topics) == len(names) }, time.Minute))
	for i := 0; i < 3; i++ {
		c.world.Node(c.host(i)).Crash()
		c.brokers[i], c.clients[i] = nil, nil
		c.world.Node(c.host(i)).Restart()
	}
	for i := 0; i < 3; i++ {
		c.waitRunning(i)
		require.ElementsMatch(t, names, topicNamesOf(c.metadata(i)), "node %d after a restart of every node", i+1)
	}
	// Images agree at one applied index: the restarts' registrations and
	// unfencings may still be reaching some nodes.
	sameApplied := func() bool {
		a := c.brokers[0].image.Applied
		return c.brokers[1].image.Applied == a && c.brokers[2].image.Applied == a
	}
	require.True(t, c.world.RunUntil(sameApplied, time.Minute), "the nodes never reached one applied index")
	for i := 1; i < 3; i++ {
		require.Equal(t, c.brokers[0].image.Digest(), c.brokers[i].image.Digest(), "node %d's image at applied index %d", i+1, c.brokers[0].image.Applied)
	}
}

// A node cut off from the controller answers a forwarded request within
// the request's own timeout, with a retriable error, never a hang; once
// the partition heals the same request succeeds.
func TestClusterNodeCutOffFromTheControllerAnswersInTime(t *testing.T) {
	// Kafka's session, longer than the cut: the node stays registered.
	c := newSimCluster(t, 10, 3, kafkaSessions)
	ctl := c.controller()
	lone := (ctl + 1) % 3
	for i := 0; i < 3; i++ {
		if i != lone {
			c.world.Net().Partition(c.host(lone), c.host(i))
			c.world.Net().Partition(c.host(i), c.host(lone))
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 3000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cut-off", 1, 1
	req.Topics = append(req.Topics, rt)
	start := c.world.Now()
	resp, err := c.do(lone, req)
	require.NoError(t, err)
	code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	require.Contains(t, []int16{kerr.RequestTimedOut.Code, kerr.NotController.Code}, code, "a retriable error")
	require.LessOrEqual(t, c.world.Now()-start, 4*time.Second, "answered within the request's timeout")
	c.world.Net().HealAll()
	require.Zero(t, c.createTopic(lone, "cut-off", 1))
}

// A heartbeat that takes longer than broker.heartbeat.interval.ms does not
// end the broker's heartbeats: the next goes out once it is answered (or
// has timed out), and when the link is fast again the broker keeps its
// session. (The timer that came due while a heartbeat was in flight used
// to return without arming the next, and the broker was fenced for good
// while it ran.)
func TestSlowHeartbeatsDoNotEndTheSession(t *testing.T) {
	c := newSimCluster(t, 12, 3, nil)
	ctl := c.controller()
	slow := (ctl + 1) % 3
	id := int32(slow + 1)
	c.world.Net().SetLatency(c.host(slow), c.host(ctl), simnet.Fixed(3*time.Second))
	c.world.Run(6 * time.Second)
	c.world.Net().SetLatency(c.host(slow), c.host(ctl), nil)
	c.world.Run(30 * time.Second)
	require.Equal(t, ctl, c.controller(), "the controller changed: the test needs one")
	require.False(t, c.brokers[ctl].image.Brokers[id].Fenced, "broker %d fenced after its link to the controller was slow", id)
	require.False(t, c.brokers[slow].hb.fenced, "broker %d believes it is fenced", id)
	require.False(t, c.brokers[slow].hb.inFlight && c.brokers[slow].hb.timer == nil && !c.brokers[slow].hb.due, "no heartbeat is coming")
}

// A partition whose broker was fenced while it was down opens when the
// broker is unfenced again, after it started: it serves only once its
// recovered tail is durable, so the first fetch that succeeds already
// reports the high watermark it had. (It used to serve at once with the
// high watermark recovery reported, 0, until the next produce.)
func TestClusterPartitionReopenedAfterARestartKeepsItsHighWatermark(t *testing.T) {
	c := newSimCluster(t, 13, 3, nil)
	ctl := c.controller()
	require.Zero(t, c.createTopic(ctl, "events", 3))
	// A partition that a broker other than the controller leads.
	leaders := c.leaders(ctl, "events")
	partition := int32(-1)
	for p := int32(0); p < 3; p++ {
		if int(leaders[p]-1) != ctl {
			partition = p
			break
		}
	}
	require.NotEqual(t, int32(-1), partition, "the controller leads every partition: %v", leaders)
	i := int(leaders[partition] - 1)
	resp, err := c.do(i, produceRequest("events", partition, -1, valueBatch(wire.NoProducer, 1, "a", "b", "c", "d", "e")))
	require.NoError(t, err)
	require.Zero(t, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)

	c.world.Node(c.host(i)).Kill()
	c.brokers[i], c.clients[i] = nil, nil
	// Down past its session: fenced, and the partition without a leader.
	require.True(t, c.world.RunUntil(func() bool { return c.leaders(ctl, "events")[partition] == -1 }, time.Minute))
	c.world.Node(c.host(i)).Restart()
	c.waitRunning(i)
	var hw int64 = -1
	require.True(t, c.world.RunUntil(func() bool {
		resp, err := c.do(i, fetchRequest("events", partition, 0, 0))
		if err != nil {
			return false
		}
		fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if fp.ErrorCode != 0 {
			return false
		}
		hw = fp.HighWatermark
		return true
	}, time.Minute), "the partition never served again")
	require.Equal(t, int64(5), hw, "the first fetch after the partition reopened")
}

// With no quorum to reserve a block of producer ids, InitProducerId is
// answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry (Kafka's
// RPCProducerIdManager answers it while its next block is not there), and
// once the quorum is back the retry gets an id.
func TestInitProducerIDWithoutAQuorumIsRetriable(t *testing.T) {
	c := newSimCluster(t, 31, 3, nil)
	c.controller()
	for _, i := range []int{1, 2} {
		c.world.Node(c.host(i)).Kill()
		c.brokers[i], c.clients[i] = nil, nil
	}
	resp, err := c.do(0, kmsg.NewPtrInitProducerIDRequest())
	require.NoError(t, err)
	require.Equal(t, kerr.CoordinatorLoadInProgress.Code, resp.(*kmsg.InitProducerIDResponse).ErrorCode)

	for _, i := range []int{1, 2} {
		c.world.Node(c.host(i)).Restart()
	}
	require.True(t, c.world.RunUntil(func() bool {
		resp, err := c.do(0, kmsg.NewPtrInitProducerIDRequest())
		if err != nil {
			return false
		}
		got := resp.(*kmsg.InitProducerIDResponse)
		if got.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
			c.world.Run(100 * time.Millisecond)
			return false
		}
		require.Zero(t, got.ErrorCode)
		return got.ProducerID >= 0
	}, 2*time.Minute), "no producer id once the quorum is back")
}

// A CreateTopics answer describes the topic as that create made it, even
// when a CreatePartitions the controller took meanwhile (against its view,
// the create still in flight) commits and is applied with it: the answer says 2
// partitions, not the 5 the topic has by then (sim seed 58 of the 5-node,
// 2-broker-only sweep, whose metadata checker held the create to 4).
func TestClusterCreateTopicsAnswerIsTheCreatesEvenWhenPartitionsAreAddedAtOnce(t *testing.T) {
	c := newSimCluster(t, 4, 3, nil)
	ctl := c.controller()
	creator, grower := c.dialNew(ctl), c.dialNew(ctl)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 7, 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "racing", 2, 1
	create.Topics = append(create.Topics, ct)
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.TimeoutMillis = 30000
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "racing", 5
	grow.Topics = append(grow.Topics, gt)
	var created *kmsg.CreateTopicsResponse
	var grown *kmsg.CreatePartitionsResponse
	// The controller is cut off from its followers for a moment (shorter
	// than an election timeout), so that both changes commit together.
	for i := range 3 {
		if i != ctl {
			c.world.Net().Partition(c.host(ctl), c.host(i))
			c.world.Net().Partition(c.host(i), c.host(ctl))
		}
	}
	c.world.Node("c1").Post(func() {
		creator.Request(create, func(r kmsg.Response, err error) {
			require.NoError(t, err)
			created = r.(*kmsg.CreateTopicsResponse)
		})
		grower.Request(grow, func(r kmsg.Response, err error) {
			require.NoError(t, err)
			grown = r.(*kmsg.CreatePartitionsResponse)
		})
	})
	c.world.Run(200 * time.Millisecond)
	require.Nil(t, created, "answered before the create could commit")
	c.world.Net().HealAll()
	require.True(t, c.world.RunUntil(func() bool { return created != nil && grown != nil }, time.Minute))
	require.Zero(t, created.Topics[0].ErrorCode)
	require.Zero(t, grown.Topics[0].ErrorCode, "the add was decided against the view, with the create in flight")
	require.Equal(t, int32(2), created.Topics[0].NumPartitions)
	require.Len(t, c.leaders(ctl, "racing"), 5)
}

// A refusal the controller decides against its view waits for what the
// view holds in flight: with the controller cut off from its followers, a
// grow of a topic to 4 partitions is proposed and cannot commit; a second
// grow to 4 is not refused INVALID_PARTITIONS on the strength of the
// first (which never commits: the controller loses the quorum), but
// answered NOT_CONTROLLER with it, an unknown outcome (sim seed 952 of
// the three-node sweep).
func TestClusterRefusalWaitsForTheProposalsItWasDecidedAgainst(t *testing.T) {
	c := newSimCluster(t, 4, 3, nil)
	require.Zero(t, c.createTopic(0, "grown", 1))
	ctl := c.controller()
	first, second := c.dialNew(ctl), c.dialNew(ctl)
	grow := func() *kmsg.CreatePartitionsRequest {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30000
		gt := kmsg.NewCreatePartitionsRequestTopic()
		gt.Topic, gt.Count = "grown", 4
		req.Topics = append(req.Topics, gt)
		return req
	}
	for i := range 3 {
		if i != ctl {
			c.world.Net().Partition(c.host(ctl), c.host(i))
			c.world.Net().Partition(c.host(i), c.host(ctl))
		}
	}
	var a, b *kmsg.CreatePartitionsResponse
	c.world.Node("c1").Post(func() {
		first.Request(grow(), func(r kmsg.Response, err error) {
			require.NoError(t, err)
			a = r.(*kmsg.CreatePartitionsResponse)
		})
	})
	c.world.Run(50 * time.Millisecond)
	c.world.Node("c1").Post(func() {
		second.Request(grow(), func(r kmsg.Response, err error) {
			require.NoError(t, err)
			b = r.(*kmsg.CreatePartitionsResponse)
		})
	})
	c.world.Run(200 * time.Millisecond)
	require.Nil(t, b, "refused before the grow it was decided against committed")
	require.True(t, c.world.RunUntil(func() bool { return a != nil && b != nil }, time.Minute))
	require.Equal(t, kerr.NotController.Code, a.Topics[0].ErrorCode, "the first grow's proposal was lost")
	require.Equal(t, kerr.NotController.Code, b.Topics[0].ErrorCode, "so the refusal decided against it is no answer either")
	c.world.Net().HealAll()
	require.Len(t, c.leaders(c.controller(), "grown"), 1, "nothing grew")
}

// dialNew opens a connection of its own from the client node to node i's
// broker listener, for tests that keep several requests in flight.
func (c *simCluster) dialNew(i int) *wire.Client {
	c.t.Helper()
	var cl *wire.Client
	c.world.Node("c1").Post(func() {
		wire.Dial(c.world.Node("c1").Env().Net, c.host(i)+":9092", "test", func(got *wire.Client, err error) {
			require.NoError(c.t, err)
			cl = got
		})
	})
	require.True(c.t, c.world.RunUntil(func() bool { return cl != nil }, time.Minute))
	return cl
}
