package node

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
)

// addDynamicController adds node n<k+1> to c: a controller-only node whose
// node.id is in no controller.quorum.voters (it names the quorum by
// controller.quorum.bootstrap.servers), which starts with an empty
// metadata log and waits to be added.
func (c *simCluster) addDynamicController(tweak func(*Config)) int {
	c.t.Helper()
	i := len(c.brokers)
	cfg := DefaultConfig()
	cfg.NodeID = int32(i + 1)
	cfg.ProcessRoles = Roles{Controller: true}
	for k := 0; k < i; k++ {
		cfg.ControllerQuorumBootstrapServers = append(cfg.ControllerQuorumBootstrapServers, c.host(k)+":9093")
	}
	cfg.ControllerListenerNames = []string{"CONTROLLER"}
	cfg.Listeners = []Listener{{Name: "CONTROLLER", Host: c.host(i), Port: 9093}}
	if tweak != nil {
		tweak(&cfg)
	}
	require.NoError(c.t, cfg.Validate())
	c.cfgs = append(c.cfgs, cfg)
	c.brokers = append(c.brokers, nil)
	c.clients = append(c.clients, nil)
	c.world.AddNode(c.host(i), func(e env.Env) {
		b, err := New(e, c.cfgs[i])
		require.NoError(c.t, err)
		c.brokers[i] = b
		b.Start(func(err error) { require.NoError(c.t, err, "node %d start", i+1) })
	})
	c.waitRunning(i)
	return i
}

func addVoterRequest(c *simCluster, id int32, host string) *kmsg.AddRaftVoterRequest {
	req := kmsg.NewPtrAddRaftVoterRequest()
	clusterID := c.brokers[0].image.ClusterID
	req.ClusterID, req.TimeoutMillis, req.VoterID = &clusterID, 30000, id
	req.Listeners = append(req.Listeners, kmsg.AddRaftVoterRequestListener{Name: "CONTROLLER", Host: host, Port: 9093})
	return req
}

func removeVoterRequest(c *simCluster, id int32) *kmsg.RemoveRaftVoterRequest {
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	clusterID := c.brokers[0].image.ClusterID
	req.ClusterID, req.VoterID = &clusterID, id
	return req
}

func describeQuorumV2() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.DescribeQuorumRequestTopicPartition{Partition: 0})
	req.Topics = append(req.Topics, rt)
	return req
}

// quorumVoters asks the active controller for the voters and their
// endpoints, as node id -> host:port.
func (c *simCluster) quorumVoters() map[int32]string {
	c.t.Helper()
	resp := c.doController(c.controller(), describeQuorumV2()).(*kmsg.DescribeQuorumResponse)
	p := resp.Topics[0].Partitions[0]
	require.Zero(c.t, p.ErrorCode)
	addrs := map[int32]string{}
	for _, n := range resp.Nodes {
		require.Len(c.t, n.Listeners, 1)
		addrs[n.NodeID] = joinHostPort(n.Listeners[0].Host, int32(n.Listeners[0].Port))
	}
	var ids []int32
	for _, v := range p.CurrentVoters {
		ids = append(ids, v.ReplicaID)
	}
	require.ElementsMatch(c.t, sortedKeys(addrs), ids, "Nodes lists the current voters")
	return addrs
}

func errorCodeOf(resp kmsg.Response) int16 {
	switch resp := resp.(type) {
	case *kmsg.AddRaftVoterResponse:
		return resp.ErrorCode
	case *kmsg.RemoveRaftVoterResponse:
		return resp.ErrorCode
	}
	panic("no error code")
}

// TestVotersAddedAndRemovedSurviveARestartOfEveryNode: a controller in no
// static configuration joins with AddRaftVoter (sent to a broker, which
// forwards it), a static voter leaves with RemoveRaftVoter (and follows the
// log as a learner), the quorum commits throughout, and after every node
// restarts (snapshots taken after every entry, so the membership changes
// are no longer in the log) the new voter is still reached: the quorum
// commits without one of the remaining static voters.
func TestVotersAddedAndRemovedSurviveARestartOfEveryNode(t *testing.T) {
	n := 4
	if v, err := strconv.Atoi(os.Getenv("SLUICE_SEEDS")); err == nil && v > 0 {
		n = v
	}
	for seed := uint64(0); seed < uint64(n); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testVotersAddedAndRemoved(t, 21+seed) })
	}
}

func testVotersAddedAndRemoved(t *testing.T, seed uint64) {
	small := func(cfg *Config) { cfg.MetadataLogMaxRecordBytesBetweenSnapshots = 1 }
	c := newSimCluster(t, seed, 3, func(_ int, cfg *Config) { small(cfg) })
	require.Zero(t, c.createTopic(0, "before", 1))
	n4 := c.addDynamicController(small)
	require.Equal(t, map[int32]string{1: "n1:9093", 2: "n2:9093", 3: "n3:9093"}, c.quorumVoters())

	ctl := c.controller()
	other := (ctl + 1) % 3
	// Refusals: another controller, another cluster, no controller
	// listener, a voter already.
	require.Equal(t, kerr.NotLeaderForPartition.Code, errorCodeOf(c.doController(other, addVoterRequest(c, 4, "n4"))))
	bad := addVoterRequest(c, 4, "n4")
	wrong := "another-cluster"
	bad.ClusterID = &wrong
	require.Equal(t, kerr.InconsistentClusterID.Code, errorCodeOf(c.doController(ctl, bad)))
	bad = addVoterRequest(c, 4, "n4")
	bad.Listeners[0].Name = "PLAINTEXT"
	require.Equal(t, kerr.InvalidRequest.Code, errorCodeOf(c.doController(ctl, bad)))
	require.Equal(t, kerr.DuplicateVoter.Code, errorCodeOf(c.doController(ctl, addVoterRequest(c, int32(other+1), c.host(other)))))

	// Sent to another node's broker listener, it is forwarded to the
	// active controller.
	resp, err := c.do(other, addVoterRequest(c, 4, "n4"))
	require.NoError(t, err)
	require.Zero(t, errorCodeOf(resp))
	require.Equal(t, map[int32]string{1: "n1:9093", 2: "n2:9093", 3: "n3:9093", 4: "n4:9093"}, c.quorumVoters())
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[n4].image.TopicByName("before") != nil }, time.Minute),
		"the new voter caught up")
	require.Zero(t, c.createTopic(0, "with-four", 1))
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[n4].image.TopicByName("with-four") != nil }, time.Minute))

	// Remove a static voter that is not the controller: a combined node,
	// it goes on following the log as a learner.
	ctl = c.controller()
	victim := (ctl + 1) % 3
	if victim == n4 {
		victim = (ctl + 2) % 3
	}
	require.Equal(t, kerr.VoterNotFound.Code, errorCodeOf(c.doController(ctl, removeVoterRequest(c, 9))))
	require.Zero(t, errorCodeOf(c.doController(ctl, removeVoterRequest(c, int32(victim+1)))))
	require.Equal(t, kerr.VoterNotFound.Code, errorCodeOf(c.doController(ctl, removeVoterRequest(c, int32(victim+1)))))
	want := map[int32]string{1: "n1:9093", 2: "n2:9093", 3: "n3:9093", 4: "n4:9093"}
	delete(want, int32(victim+1))
	require.Equal(t, want, c.quorumVoters())
	require.Contains(t, c.brokers[c.controller()].meta.node.Status().Config.GetLearners(), raftIDOf(int32(victim+1)))
	live := []int{}
	for i := 0; i < 3; i++ {
		if i != victim {
			live = append(live, i)
		}
	}
	require.Zero(t, c.createTopic(live[0], "with-three", 1))
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[victim].image.TopicByName("with-three") != nil }, time.Minute),
		"the demoted voter follows the log")
	c.world.Run(2 * time.Second)
	addIndex := c.brokers[c.controller()].meta.applied
	for _, i := range []int{0, 1, 2, n4} {
		require.True(t, c.world.RunUntil(func() bool { return c.brokers[i].meta.node.Status().Snapshot >= addIndex }, time.Minute),
			"node %d snapshots past the membership changes", i+1)
	}

	// Restart every node.
	all := []int{0, 1, 2, n4}
	for _, i := range all {
		c.world.Node(c.host(i)).Kill()
		c.brokers[i], c.clients[i] = nil, nil
	}
	for _, i := range all {
		c.world.Node(c.host(i)).Restart()
	}
	for _, i := range all {
		c.waitRunning(i)
	}
	require.Equal(t, want, c.quorumVoters())
	for _, i := range live {
		addr, ok := c.brokers[i].voterAddrOf(raftIDOf(4))
		require.True(t, ok, "node %d knows the added voter's address", i+1)
		require.Equal(t, "n4:9093", addr)
	}
	require.Zero(t, c.createTopic(live[0], "after-restart", 1))
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[victim].image.TopicByName("after-restart") != nil }, time.Minute),
		"the demoted voter follows the log after its restart")
	c.world.Node(c.host(victim)).Kill()
	c.brokers[victim], c.clients[victim] = nil, nil

	// Without one of the static voters left, the quorum of {static, n4}
	// still commits: the added voter is reached and votes.
	down := live[0]
	if c.controller() != live[1] {
		down = live[1]
	}
	up := live[0] + live[1] - down
	c.world.Node(c.host(down)).Kill()
	c.brokers[down], c.clients[down] = nil, nil
	require.Zero(t, c.createTopic(up, "two-of-three", 1))
	require.True(t, c.world.RunUntil(func() bool { return c.brokers[n4].image.TopicByName("two-of-three") != nil }, time.Minute))
}

// sendController sends req to node i's CONTROLLER listener without
// waiting; the answer lands in *resp.
func (c *simCluster) sendController(i int, req kmsg.Request, resp *kmsg.Response) {
	client := c.world.Node("c1")
	client.Post(func() {
		wire.Dial(client.Env().Net, c.host(i)+":9093", "test", func(cl *wire.Client, derr error) {
			require.NoError(c.t, derr)
			cl.Request(req, func(r kmsg.Response, e error) {
				require.NoError(c.t, e)
				*resp = r
				cl.Close()
			})
		})
	})
}

// TestAddRaftVoterOfAnUnreachableNodeTimesOutAndLeavesTheQuorumCommitting:
// the node is added as a learner, never catches up, and is not made a
// voter (a one-voter quorum would need it for every commit after);
// another change meanwhile is refused as Kafka refuses it.
func TestAddRaftVoterOfAnUnreachableNodeTimesOutAndLeavesTheQuorumCommitting(t *testing.T) {
	c := newSimCluster(t, 31, 1, nil)
	require.Zero(t, c.createTopic(0, "before", 1))
	ctl := c.controller()
	var first kmsg.Response
	req := addVoterRequest(c, 7, "n7")
	req.TimeoutMillis = 5000
	c.sendController(ctl, req, &first)
	c.world.Run(time.Second)
	require.Nil(t, first)
	require.Equal(t, kerr.RequestTimedOut.Code, errorCodeOf(c.doController(ctl, addVoterRequest(c, 8, "n8"))),
		"a second change while the first is in flight")
	require.Equal(t, kerr.RequestTimedOut.Code, errorCodeOf(c.doController(ctl, removeVoterRequest(c, 1))))
	require.True(t, c.world.RunUntil(func() bool { return first != nil }, time.Minute))
	require.Equal(t, kerr.RequestTimedOut.Code, errorCodeOf(first))
	require.Contains(t, c.brokers[ctl].meta.node.Status().Config.GetLearners(), raftIDOf(7))
	require.Equal(t, map[int32]string{1: "n1:9093"}, c.quorumVoters())
	require.Zero(t, c.createTopic(0, "after", 1))
	require.Equal(t, kerr.VoterNotFound.Code, errorCodeOf(c.doController(ctl, removeVoterRequest(c, 7))), "a learner is no voter")
}

func TestRemoveRaftVoterRefusesTheLastVoter(t *testing.T) {
	c := newSimCluster(t, 32, 1, nil)
	require.Zero(t, c.createTopic(0, "t", 1))
	require.Equal(t, kerr.InvalidRequest.Code, errorCodeOf(c.doController(0, removeVoterRequest(c, 1))))
	require.Equal(t, map[int32]string{1: "n1:9093"}, c.quorumVoters())
}

// TestAddRaftVoterAnswersNotLeaderWhenTheControllerLosesTheQuorum: cut off
// from the other voters while the new voter catches up, the controller
// steps down and says so; the next change goes to the new controller.
func TestAddRaftVoterAnswersNotLeaderWhenTheControllerLosesTheQuorum(t *testing.T) {
	c := newSimCluster(t, 33, 3, nil)
	require.Zero(t, c.createTopic(0, "before", 1))
	ctl := c.controller()
	var resp kmsg.Response
	req := addVoterRequest(c, 7, "n7")
	req.TimeoutMillis = 120000
	c.sendController(ctl, req, &resp)
	c.world.Run(time.Second)
	require.Nil(t, resp)
	for i := 0; i < 3; i++ {
		if i != ctl {
			c.world.Net().Partition(c.host(ctl), c.host(i))
			c.world.Net().Partition(c.host(i), c.host(ctl))
		}
	}
	require.True(t, c.world.RunUntil(func() bool { return resp != nil }, time.Minute), "no answer")
	require.Equal(t, kerr.NotLeaderForPartition.Code, errorCodeOf(resp))
	c.world.Net().HealAll()
	next := c.controller()
	require.Equal(t, kerr.VoterNotFound.Code, errorCodeOf(c.doController(next, removeVoterRequest(c, 7))),
		"the new controller takes the next change")
}

// TestAddRaftVoterPromotesALearnerNoTransportHasAnAddressFor: a combined
// voter removed before it registered as a broker leaves the quorum (not
// demoted to a learner), and every node forgets its address; when it
// registers, the controller adds it back as a learner, with no address, as
// it adds any broker. AddRaftVoter must still make it a voter, dialing it
// at the request's address (seed 165 of the three-node sweep: the
// catch-up check waited for a connection no node would ever make).
func TestAddRaftVoterPromotesALearnerNoTransportHasAnAddressFor(t *testing.T) {
	c := newSimCluster(t, 34, 3, nil)
	require.Zero(t, c.createTopic(0, "before", 1))
	ctl := c.controller()
	gone := 2
	if gone == ctl {
		gone = 1
	}
	// RemoveRaftVoter of a node in no broker registration: what the
	// handler proposes then, made directly (the node has registered by
	// now).
	id := raftIDOf(int32(gone + 1))
	var removed error = errors.New("not yet")
	c.brokers[ctl].meta.node.ChangeMembership(&raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: &id}}}, func(err error) { removed = err })
	require.True(t, c.world.RunUntil(func() bool { return removed == nil }, time.Minute))
	for i := range 3 {
		require.True(t, c.world.RunUntil(func() bool { return i == gone || c.brokers[i].meta.transport.PeerAddr(id) == "" }, time.Minute),
			"node %d forgot the removed node's address", i+1)
	}
	// It registers again after a restart, and is added as a learner.
	c.killFor(gone, time.Second)
	c.world.Node(c.host(gone)).Restart()
	c.waitRunning(gone)
	require.True(t, c.world.RunUntil(func() bool {
		return slices.Contains(c.brokers[ctl].meta.node.Status().Config.GetLearners(), id)
	}, time.Minute), "the node came back as a learner")
	require.Empty(t, c.brokers[ctl].meta.transport.PeerAddr(id))

	var resp kmsg.Response
	c.sendController(ctl, addVoterRequest(c, int32(gone+1), c.host(gone)), &resp)
	require.True(t, c.world.RunUntil(func() bool { return resp != nil }, time.Minute), "no answer")
	require.Zero(t, errorCodeOf(resp), "%v", resp)
	require.Len(t, c.quorumVoters(), 3)
	for i := range 3 {
		require.True(t, c.world.RunUntil(func() bool {
			return c.brokers[i].meta.transport.PeerAddr(id) == c.host(gone)+":9093" || i == gone
		}, time.Minute), "node %d learned the voter's address", i+1)
	}
	require.Zero(t, c.createTopic(ctl, "after", 1))
}

// An AddRaftVoter naming an address the learner does not listen at times
// out, and the controller's transport forgets the address again, so the
// learner still hears the leader on its own connections.
func TestAddRaftVoterAtAWrongAddressLeavesTheLearnerFollowing(t *testing.T) {
	c := newSimClusterOf(t, 35, 3, 1, nil)
	require.Zero(t, c.createTopic(0, "before", 1))
	ctl := c.controller()
	learner := raftIDOf(4)
	req := addVoterRequest(c, 4, "n9")
	req.TimeoutMillis = 3000
	require.Equal(t, kerr.RequestTimedOut.Code, errorCodeOf(c.doController(ctl, req)))
	require.Empty(t, c.brokers[ctl].meta.transport.PeerAddr(learner))
	require.Zero(t, c.createTopic(0, "after", 1))
	require.True(t, c.world.RunUntil(func() bool {
		return c.brokers[3].image.TopicByName("after") != nil
	}, time.Minute), "the learner applies what is committed after")
}
