package node

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createReplicatedTopic creates topic name, one partition per replica
// list, through the active controller's raftmeta.Controller itself:
// CreateTopics refuses a replication factor above 1 until replication
// exists (node/topics.go), and these tests need partitions with several
// replicas. It waits until every node has applied it.
func (c *simCluster) createReplicatedTopic(name string, replicas ...[]int32) {
	c.t.Helper()
	ctl := c.controller()
	b := c.brokers[ctl]
	var err error
	done := false
	c.world.Node(c.host(ctl)).Post(func() {
		res, records := b.ctl.CreateTopics([]raftmeta.TopicSpec{{Name: name, Assignment: replicas}})
		require.Nil(c.t, res[0].Err, res[0].Message)
		b.propose(records, func(e error) { err, done = e, true })
	})
	require.True(c.t, c.world.RunUntil(func() bool { return done }, time.Minute))
	require.NoError(c.t, err)
	c.waitApplied(func(im *raftmeta.Image) bool { return im.TopicByName(name) != nil })
}

// waitApplied runs the world until every node's image satisfies ok.
func (c *simCluster) waitApplied(ok func(*raftmeta.Image) bool) {
	c.t.Helper()
	require.True(c.t, c.world.RunUntil(func() bool {
		for i, b := range c.brokers {
			if b == nil || !c.world.Node(c.host(i)).Up() || !ok(b.image) {
				return false
			}
		}
		return true
	}, time.Minute))
}

// partitionAt is a partition as the controller's committed image has it.
func (c *simCluster) partitionAt(name string, i int32) raftmeta.Partition {
	c.t.Helper()
	t := c.brokers[c.controller()].image.TopicByName(name)
	require.NotNil(c.t, t, name)
	return t.Partitions[i]
}

// alterRequest is broker requester's AlterPartition of the given version
// asking partition i of name for isr, at the partition's current epochs
// and (v3) the members' current broker epochs.
func (c *simCluster) alterRequest(version int16, requester int32, name string, i int32, isr ...int32) *kmsg.AlterPartitionRequest {
	c.t.Helper()
	im := c.brokers[c.controller()].image
	t := im.TopicByName(name)
	p := t.Partitions[i]
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = version
	req.BrokerID, req.BrokerEpoch = requester, im.Brokers[requester].Epoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = name, t.ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = i, p.LeaderEpoch, p.PartitionEpoch
	if version >= 3 {
		for _, id := range isr {
			m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			m.BrokerID, m.BrokerEpoch = id, im.Brokers[id].Epoch
			rp.NewEpochISR = append(rp.NewEpochISR, m)
		}
	} else {
		rp.NewISR = isr
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// alter sends req to the controller's CONTROLLER listener, where brokers
// send it.
func (c *simCluster) alter(req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	c.t.Helper()
	return c.doController(c.controller(), req).(*kmsg.AlterPartitionResponse)
}

// onePartition is the answer's only partition.
func onePartition(t *testing.T, resp *kmsg.AlterPartitionResponse) kmsg.AlterPartitionResponseTopicPartition {
	t.Helper()
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// nonControllers are the ids of the two nodes that are not the active
// controller, and the controller's id.
func (c *simCluster) nonControllers() (int32, int32, int32) {
	ctl := c.controller()
	return int32((ctl+1)%3 + 1), int32((ctl+2)%3 + 1), int32(ctl + 1)
}

func TestAlterPartitionShrinkCommitsAndEveryNodeShowsIt(t *testing.T) {
	c := newSimCluster(t, 11, 3, nil)
	c.createReplicatedTopic("r", []int32{1, 2, 3})
	before := c.partitionAt("r", 0)
	require.Equal(t, []int32{1, 2, 3}, before.ISR)

	got := onePartition(t, c.alter(c.alterRequest(3, 1, "r", 0, 1, 2)))
	require.Zero(t, got.ErrorCode)
	require.Equal(t, []int32{1, 2}, got.ISR)
	require.Equal(t, int32(1), got.LeaderID)
	require.Equal(t, before.LeaderEpoch, got.LeaderEpoch, "the leader stays")
	require.Equal(t, before.PartitionEpoch+1, got.PartitionEpoch)
	require.Zero(t, got.LeaderRecoveryState)
	// Answered once committed and applied on the controller.
	after := c.partitionAt("r", 0)
	require.Equal(t, []int32{1, 2}, after.ISR)
	require.Equal(t, got.PartitionEpoch, after.PartitionEpoch)
	c.waitApplied(func(im *raftmeta.Image) bool {
		p := im.TopicByName("r").Partitions[0]
		return slices.Equal(p.ISR, []int32{1, 2}) && p.PartitionEpoch == got.PartitionEpoch
	})

	// The same ISR again, at the new epochs: nothing to write, same answer.
	again := onePartition(t, c.alter(c.alterRequest(3, 1, "r", 0, 1, 2)))
	require.Zero(t, again.ErrorCode)
	require.Equal(t, got.PartitionEpoch, again.PartitionEpoch)
}

func TestAlterPartitionRefusalsCarryKafkasCodes(t *testing.T) {
	c := newSimCluster(t, 12, 3, nil)
	c.createReplicatedTopic("r", []int32{1, 2, 3})
	// Partition epoch 1 after this; requests at 0 are stale.
	require.Zero(t, onePartition(t, c.alter(c.alterRequest(3, 1, "r", 0, 1, 2, 3))).ErrorCode)
	stale := c.alterRequest(3, 1, "r", 0, 1, 2)
	require.Zero(t, onePartition(t, c.alter(c.alterRequest(3, 1, "r", 0, 1, 2))).ErrorCode)

	for _, tc := range []struct {
		name string
		req  func() *kmsg.AlterPartitionRequest
		want *kerr.Error
	}{
		{"stale partition epoch", func() *kmsg.AlterPartitionRequest { return stale }, kerr.InvalidUpdateVersion},
		{"not the leader", func() *kmsg.AlterPartitionRequest { return c.alterRequest(3, 2, "r", 0, 1, 2) }, kerr.InvalidRequest},
		{"epochs ahead of the controller", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(3, 1, "r", 0, 1, 3)
			req.Topics[0].Partitions[0].LeaderEpoch++
			return req
		}, kerr.NotController},
		{"unknown topic id", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(3, 1, "r", 0, 1, 3)
			req.Topics[0].TopicID = [16]byte{9}
			return req
		}, kerr.UnknownTopicID},
		{"unknown topic id, zero", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(2, 1, "r", 0, 1, 3)
			req.Topics[0].TopicID = [16]byte{}
			return req
		}, kerr.UnknownTopicID},
		{"unknown topic name (v1)", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(1, 1, "r", 0, 1, 3)
			req.Topics[0].Topic = "nope"
			return req
		}, kerr.UnknownTopicOrPartition},
		{"unknown partition", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(3, 1, "r", 0, 1, 3)
			req.Topics[0].Partitions[0].Partition = 7
			return req
		}, kerr.UnknownTopicOrPartition},
		{"a member's broker epoch is stale", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(3, 1, "r", 0, 1, 2, 3)
			req.Topics[0].Partitions[0].NewEpochISR[2].BrokerEpoch--
			return req
		}, kerr.IneligibleReplica},
		{"recovering leader", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(3, 1, "r", 0, 1)
			req.Topics[0].Partitions[0].LeaderRecoveryState = 1
			return req
		}, kerr.InvalidRequest},
		{"ISR without the leader", func() *kmsg.AlterPartitionRequest { return c.alterRequest(3, 1, "r", 0, 2, 3) }, kerr.InvalidRequest},
		{"not a replica", func() *kmsg.AlterPartitionRequest { return c.alterRequest(3, 1, "r", 0, 1, 4) }, kerr.InvalidRequest},
		{"a member twice", func() *kmsg.AlterPartitionRequest { return c.alterRequest(3, 1, "r", 0, 1, 2, 1) }, kerr.InvalidRequest},
		{"empty ISR", func() *kmsg.AlterPartitionRequest { return c.alterRequest(3, 1, "r", 0) }, kerr.InvalidRequest},
		{"empty ISR (v2)", func() *kmsg.AlterPartitionRequest { return c.alterRequest(2, 1, "r", 0) }, kerr.InvalidRequest},
		{"negative partition", func() *kmsg.AlterPartitionRequest {
			req := c.alterRequest(3, 1, "r", 0, 1)
			req.Topics[0].Partitions[0].Partition = -1
			return req
		}, kerr.UnknownTopicOrPartition},
	} {
		got := onePartition(t, c.alter(tc.req()))
		require.Equal(t, tc.want.Code, got.ErrorCode, "%s: got %v", tc.name, kerr.ErrorForCode(got.ErrorCode))
	}
	require.Equal(t, []int32{1, 2}, c.partitionAt("r", 0).ISR, "no refusal changed the partition")

	req := c.alterRequest(3, 1, "r", 0, 1, 3)
	req.BrokerEpoch--
	resp := c.alter(req)
	require.Equal(t, kerr.StaleBrokerEpoch.Code, resp.ErrorCode, "the requester's epoch answers the whole request")
	require.Empty(t, resp.Topics)
	req = c.alterRequest(3, 1, "r", 0, 1, 3)
	req.BrokerID = 9
	require.Equal(t, kerr.BrokerIDNotRegistered.Code, c.alter(req).ErrorCode)
	// The requester is checked first, even when no partition reaches the
	// controller's decision.
	req = c.alterRequest(1, 1, "r", 0, 1, 3)
	req.Topics[0].Topic = "nope"
	req.BrokerEpoch--
	require.Equal(t, kerr.StaleBrokerEpoch.Code, c.alter(req).ErrorCode)
}

func TestAlterPartitionV0NamesTheTopic(t *testing.T) {
	c := newSimCluster(t, 13, 3, nil)
	c.createReplicatedTopic("r", []int32{2, 3, 1})
	for _, version := range []int16{0, 1} {
		isr := []int32{2, 3}
		if version == 1 {
			isr = []int32{2, 3, 1}
		}
		resp := c.alter(c.alterRequest(version, 2, "r", 0, isr...))
		require.Equal(t, "r", resp.Topics[0].Topic)
		got := onePartition(t, resp)
		require.Zero(t, got.ErrorCode, "v%d: %v", version, kerr.ErrorForCode(got.ErrorCode))
		require.Equal(t, isr, got.ISR, "v%d", version)
		require.Equal(t, isr, c.partitionAt("r", 0).ISR, "v%d", version)
	}
}

// Several partitions of several topics in one request: decided in order
// (a partition named twice sees its first change), one proposal.
func TestAlterPartitionDecidesABatchInOneProposal(t *testing.T) {
	c := newSimCluster(t, 14, 3, nil)
	c.createReplicatedTopic("a", []int32{1, 2, 3}, []int32{1, 3, 2})
	c.createReplicatedTopic("b", []int32{1, 2, 3})
	req := c.alterRequest(3, 1, "a", 0, 1, 2)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, c.alterRequest(3, 1, "a", 1, 1, 3).Topics[0].Partitions[0])
	req.Topics = append(req.Topics, c.alterRequest(3, 1, "b", 0, 1, 3).Topics[0])
	twice := c.alterRequest(3, 1, "a", 0, 1)
	req.Topics = append(req.Topics, twice.Topics[0])
	ctl := c.brokers[c.controller()]
	entries, records := ctl.meta.applied, ctl.image.Applied

	resp := c.alter(req)
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Topics, 3)
	codes := func(rt kmsg.AlterPartitionResponseTopic) (out []int16) {
		for _, rp := range rt.Partitions {
			out = append(out, rp.ErrorCode)
		}
		return out
	}
	require.Equal(t, []int16{0, 0}, codes(resp.Topics[0]))
	require.Equal(t, []int16{0}, codes(resp.Topics[1]))
	require.Equal(t, []int16{kerr.InvalidUpdateVersion.Code}, codes(resp.Topics[2]), "a's partition 0, named again at the epochs its first change moved past")
	require.Equal(t, [][]int32{{1, 2}, {1, 3}}, [][]int32{resp.Topics[0].Partitions[0].ISR, resp.Topics[0].Partitions[1].ISR})
	require.Equal(t, []int32{1, 3}, resp.Topics[1].Partitions[0].ISR)
	require.Equal(t, records+3, ctl.image.Applied, "three records")
	require.Equal(t, entries+1, ctl.meta.applied, "in one raft entry")
	require.Equal(t, []int32{1, 2}, c.partitionAt("a", 0).ISR)
}

// A stale leader epoch, and a fenced member: the leader is killed, the
// controller fences it and moves the leadership.
func TestAlterPartitionAfterTheLeaderIsFenced(t *testing.T) {
	c := newSimCluster(t, 15, 3, nil)
	leader, next, ctlID := c.nonControllers()
	c.createReplicatedTopic("r", []int32{leader, next, ctlID})
	old := c.alterRequest(3, next, "r", 0, next, ctlID)
	c.world.Node(c.host(int(leader - 1))).Kill()
	c.brokers[leader-1], c.clients[leader-1] = nil, nil
	c.world.Run(15 * time.Second) // past broker.session.timeout.ms
	p := c.partitionAt("r", 0)
	require.Equal(t, next, p.Leader)
	require.Equal(t, []int32{next, ctlID}, p.ISR)

	got := onePartition(t, c.alter(old))
	require.Equal(t, kerr.FencedLeaderEpoch.Code, got.ErrorCode, "%v", kerr.ErrorForCode(got.ErrorCode))
	for version, want := range map[int16]*kerr.Error{3: kerr.IneligibleReplica, 2: kerr.IneligibleReplica, 1: kerr.OperationNotAttempted} {
		got := onePartition(t, c.alter(c.alterRequest(version, next, "r", 0, next, ctlID, leader)))
		require.Equal(t, want.Code, got.ErrorCode, "v%d: %v", version, kerr.ErrorForCode(got.ErrorCode))
	}
	require.Equal(t, []int32{next, ctlID}, c.partitionAt("r", 0).ISR)
}

// callAlterPartition calls b.alterPartition on node id's loop and runs the
// world until done. c.answered is then the partition as the calling
// broker's image had it when the answer came (the partition's leader
// changes its ISR of its own accord afterwards).
func (c *simCluster) callAlterPartition(id int32, req raftmeta.AlterPartition) (raftmeta.AlterPartitionReply, error) {
	c.t.Helper()
	var reply raftmeta.AlterPartitionReply
	var err error
	calls := 0
	c.world.Node(c.host(int(id - 1))).Post(func() {
		c.brokers[id-1].alterPartition(req, func(r raftmeta.AlterPartitionReply, e error) {
			reply, err = r, e
			calls++
			if t := c.brokers[id-1].image.Topics[req.Topic]; t != nil {
				c.answered = t.Partitions[req.Partition]
			}
		})
	})
	require.True(c.t, c.world.RunUntil(func() bool { return calls > 0 }, time.Minute))
	c.world.Run(alterPartitionTimeout + time.Second)
	require.Equal(c.t, 1, calls, "done is called once")
	return reply, err
}

func (c *simCluster) alterOf(requester int32, name string, i int32, isr ...int32) raftmeta.AlterPartition {
	im := c.brokers[requester-1].image
	t := im.TopicByName(name)
	p := t.Partitions[i]
	return raftmeta.AlterPartition{BrokerID: requester, BrokerEpoch: c.brokers[requester-1].brokerEpoch, Topic: t.ID,
		Partition: i, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr}
}

func TestBrokerAlterPartitionReachesTheController(t *testing.T) {
	c := newSimCluster(t, 16, 3, nil)
	leader, other, ctlID := c.nonControllers()
	c.createReplicatedTopic("r", []int32{leader, other, ctlID}, []int32{ctlID, leader, other})

	// From a broker that is not the controller: AlterPartition v3.
	req := c.alterOf(leader, "r", 0, leader, ctlID)
	req.ISREpochs = []int64{c.brokers[leader-1].brokerEpoch, -1}
	reply, err := c.callAlterPartition(leader, req)
	require.NoError(t, err)
	require.Nil(t, reply.Err)
	// The committed state, replicas from the broker's image. (The
	// partition's leader, this very broker, may already have added the
	// follower back by the time the answer arrives: only the answer's own
	// fields are compared.)
	require.Equal(t, []int32{leader, ctlID}, reply.Partition.ISR)
	require.Equal(t, c.answered.Replicas, reply.Partition.Replicas)
	require.Equal(t, req.PartitionEpoch+1, reply.Partition.PartitionEpoch)
	require.Equal(t, req.LeaderEpoch, reply.Partition.LeaderEpoch)

	// Refused: the controller's code in Err.
	reply, err = c.callAlterPartition(leader, req)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidUpdateVersion, reply.Err)
	req = c.alterOf(leader, "r", 0, leader)
	req.BrokerEpoch--
	reply, err = c.callAlterPartition(leader, req)
	require.NoError(t, err)
	require.Equal(t, kerr.StaleBrokerEpoch, reply.Err)

	// On the controller itself: decided there.
	reply, err = c.callAlterPartition(ctlID, c.alterOf(ctlID, "r", 1, ctlID, other))
	require.NoError(t, err)
	require.Nil(t, reply.Err, reply.Message)
	require.Equal(t, c.answered.Replicas, reply.Partition.Replicas)
	require.Equal(t, []int32{ctlID, other}, reply.Partition.ISR)
	c.waitApplied(func(im *raftmeta.Image) bool {
		return im.TopicByName("r").Partitions[1].PartitionEpoch >= reply.Partition.PartitionEpoch
	})
}

// A broker cut off from the controller gets an error within
// alterPartitionTimeout, and done only once; healed, a retry goes through.
func TestBrokerAlterPartitionTimesOutWithoutTheController(t *testing.T) {
	c := newSimCluster(t, 17, 3, kafkaSessions)
	leader, other, ctlID := c.nonControllers()
	c.createReplicatedTopic("r", []int32{leader, other, ctlID})
	req := c.alterOf(leader, "r", 0, leader, other)
	for _, id := range []int32{other, ctlID} {
		c.world.Net().Partition(c.host(int(leader-1)), c.host(int(id-1)))
		c.world.Net().Partition(c.host(int(id-1)), c.host(int(leader-1)))
	}
	start := c.world.Now()
	var answered time.Duration
	calls := 0
	c.world.Node(c.host(int(leader - 1))).Post(func() {
		c.brokers[leader-1].alterPartition(req, func(_ raftmeta.AlterPartitionReply, err error) {
			// errControllerTimeout, or the failure of the connection
			// another request's timeout closed first.
			require.Error(t, err)
			answered = c.world.Now() - start
			calls++
		})
	})
	c.world.Run(alterPartitionTimeout + time.Second) // less than broker.session.timeout.ms: the leader is not fenced
	require.Equal(t, 1, calls)
	require.LessOrEqual(t, answered, alterPartitionTimeout)
	c.world.Net().HealAll()
	// The request that timed out may still land once the link heals (its
	// outcome is unknown): the retry asks again from the state the broker
	// knows by then, and is answered either way.
	c.world.Run(time.Second)
	reply, err := c.callAlterPartition(leader, c.alterOf(leader, "r", 0, leader, other))
	require.NoError(t, err, "healed, the retry reaches the controller")
	require.Nil(t, reply.Err)
	require.Equal(t, []int32{leader, other}, reply.Partition.ISR)
}

func TestAlterPartitionElsewhereAnswersNotController(t *testing.T) {
	c := newSimCluster(t, 18, 3, nil)
	c.createReplicatedTopic("r", []int32{1, 2, 3})
	leader, other, _ := c.nonControllers()
	req := c.alterRequest(3, 1, "r", 0, 1, 2)
	for _, id := range []int32{leader, other} {
		resp := c.doController(int(id-1), req).(*kmsg.AlterPartitionResponse)
		require.Equal(t, kerr.NotController.Code, resp.ErrorCode, "node %d's CONTROLLER listener", id)
		require.Empty(t, resp.Topics)
		r, err := c.do(int(id-1), req)
		require.NoError(t, err)
		require.Equal(t, kerr.NotController.Code, r.(*kmsg.AlterPartitionResponse).ErrorCode, "node %d's broker listener", id)
	}
	require.Equal(t, []int32{1, 2, 3}, c.partitionAt("r", 0).ISR)
}

// toController's own timeout is reported as errControllerTimeout (the
// caller answers REQUEST_TIMED_OUT), not as the failure of the connection
// it closes on the way.
func TestToControllerReportsItsTimeoutAsATimeout(t *testing.T) {
	c := newSimCluster(t, 19, 3, nil)
	leader, other, ctlID := c.nonControllers()
	c.createReplicatedTopic("r", []int32{leader, other, ctlID})
	b := c.brokers[leader-1]
	require.NotNil(t, b.ctlConn, "heartbeats keep a connection to the controller")
	c.world.Net().Partition(c.host(int(leader-1)), c.host(int(ctlID-1)))
	c.world.Net().Partition(c.host(int(ctlID-1)), c.host(int(leader-1)))
	var err error
	calls := 0
	c.world.Node(c.host(int(leader - 1))).Post(func() {
		b.toController(alterPartitionRequest(c.alterOf(leader, "r", 0, leader)), 100*time.Millisecond, func(_ kmsg.Response, e error) { err = e; calls++ })
	})
	c.world.Run(time.Second)
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, errControllerTimeout)
}
