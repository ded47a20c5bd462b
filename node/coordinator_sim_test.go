package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/groups"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupClient is one group member's own connection from the client node,
// so that its parked JoinGroup or SyncGroup does not hold the others'.
type simGroupClient struct {
	c    *simCluster
	to   int
	conn *wire.Client
}

// dialMember opens a connection from c1 to node i.
func (c *simCluster) dialMember(i int) *simGroupClient {
	c.t.Helper()
	m := &simGroupClient{c: c, to: i}
	client := c.world.Node("c1")
	var err error
	done := false
	client.Post(func() {
		wire.Dial(client.Env().Net, c.host(i)+":9092", "member", func(cl *wire.Client, e error) { m.conn, err, done = cl, e, true })
	})
	require.True(c.t, c.world.RunUntil(func() bool { return done }, time.Minute))
	require.NoError(c.t, err)
	return m
}

// send sends req and returns a function that reports its answer once it
// has come (nil before).
func (m *simGroupClient) send(req kmsg.Request) func() kmsg.Response {
	var resp kmsg.Response
	m.c.world.Node("c1").Post(func() {
		m.conn.Request(req, func(r kmsg.Response, err error) {
			require.NoError(m.c.t, err)
			resp = r
		})
	})
	return func() kmsg.Response { return resp }
}

// await runs the world until every answer has come.
func (c *simCluster) await(answers ...func() kmsg.Response) []kmsg.Response {
	c.t.Helper()
	require.True(c.t, c.world.RunUntil(func() bool {
		for _, a := range answers {
			if a() == nil {
				return false
			}
		}
		return true
	}, 5*time.Minute), "no answer")
	out := make([]kmsg.Response, len(answers))
	for i, a := range answers {
		out[i] = a()
	}
	return out
}

// findCoordinator asks node i for the group's coordinator until one is
// named, as a client retries, and returns its index.
func (c *simCluster) findCoordinator(i int, group string) int {
	c.t.Helper()
	at := -1
	require.True(c.t, c.world.RunUntil(func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKeys = 4, []string{group}
		resp, err := c.do(i, req)
		if err != nil {
			return false
		}
		co := resp.(*kmsg.FindCoordinatorResponse).Coordinators[0]
		if co.ErrorCode != 0 {
			require.Equal(c.t, kerr.CoordinatorNotAvailable.Code, co.ErrorCode)
			c.world.Run(100 * time.Millisecond)
			return false
		}
		require.Equal(c.t, c.host(int(co.NodeID-1)), co.Host)
		at = int(co.NodeID - 1)
		return true
	}, 2*time.Minute), "no coordinator for %s", group)
	return at
}

// retryCoordinator sends req (built anew each time) to node i until its
// answer's coordinator error, which code reads, is gone.
func (c *simCluster) retryCoordinator(i int, build func() kmsg.Request, code func(kmsg.Response) int16) kmsg.Response {
	c.t.Helper()
	var got kmsg.Response
	require.True(c.t, c.world.RunUntil(func() bool {
		resp, err := c.do(i, build())
		if err != nil {
			return false
		}
		switch code(resp) {
		case kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
			c.world.Run(100 * time.Millisecond)
			return false
		}
		got = resp
		return true
	}, 2*time.Minute))
	return got
}

func joinRequest(group, member string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 7
	req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("subscription")
	req.Protocols = append(req.Protocols, p)
	return req
}

// joinBoth joins two members to group at node co (KIP-394's second join
// with the member id), and returns their JoinGroup answers.
func (c *simCluster) joinBoth(co int, group string) (*simGroupClient, *simGroupClient, []*kmsg.JoinGroupResponse) {
	c.t.Helper()
	a, b := c.dialMember(co), c.dialMember(co)
	first := c.await(a.send(joinRequest(group, "")), b.send(joinRequest(group, "")))
	var ids [2]string
	for i, r := range first {
		jr := r.(*kmsg.JoinGroupResponse)
		require.Equal(c.t, kerr.MemberIDRequired.Code, jr.ErrorCode)
		ids[i] = jr.MemberID
	}
	second := c.await(a.send(joinRequest(group, ids[0])), b.send(joinRequest(group, ids[1])))
	var out []*kmsg.JoinGroupResponse
	for _, r := range second {
		jr := r.(*kmsg.JoinGroupResponse)
		require.Zero(c.t, jr.ErrorCode, "join: %v", kerr.ErrorForCode(jr.ErrorCode))
		out = append(out, jr)
	}
	require.Equal(c.t, out[0].Generation, out[1].Generation)
	return a, b, out
}

func commitRequest(group, member string, generation int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range sortedKeys(offsets) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offsets[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchOffsets asks node i for every offset of group (OffsetFetch v8,
// batched), retrying coordinator errors.
func (c *simCluster) fetchOffsets(i int, group string) map[int32]int64 {
	c.t.Helper()
	build := func() kmsg.Request {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		return req
	}
	resp := c.retryCoordinator(i, build, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode })
	g := resp.(*kmsg.OffsetFetchResponse).Groups[0]
	require.Zero(c.t, g.ErrorCode)
	out := map[int32]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			require.Zero(c.t, p.ErrorCode)
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// offsetsPartition is node i's replica of the group's __consumer_offsets
// partition.
func (c *simCluster) offsetsPartition(i int, group string) *partition {
	index, ok := c.brokers[i].shardOf(group)
	require.True(c.t, ok)
	return c.replicaOf(i, offsetsTopic, index)
}

func TestGroupOfTwoCommitsAndEveryAcknowledgedCommitSurvivesTheCoordinatorsDeath(t *testing.T) {
	c := newSimCluster(t, 71, 3, func(_ int, cfg *Config) { cfg.OffsetsTopicNumPartitions = 3 })
	require.Zero(t, c.createTopicRF(c.controller(), "events", 4, 3))
	const group = "billing"
	co := c.findCoordinator(0, group)

	md := c.metadata(0)
	var internal *kmsg.MetadataResponseTopic
	for i, mt := range md.Topics {
		if *mt.Topic == offsetsTopic {
			internal = &md.Topics[i]
		}
	}
	require.NotNil(t, internal, "FindCoordinator created %s", offsetsTopic)
	require.True(t, internal.IsInternal)
	require.Len(t, internal.Partitions, 3)
	for _, p := range internal.Partitions {
		require.Len(t, p.Replicas, 3, "offsets.topic.replication.factor 3 on a cluster of 3")
	}
	require.Equal(t, "compact", c.brokers[0].image.TopicByName(offsetsTopic).Configs["cleanup.policy"])

	a, b, joins := c.joinBoth(co, group)
	gen := joins[0].Generation
	leader, follower := 0, 1
	if joins[1].LeaderID == joins[1].MemberID {
		leader, follower = 1, 0
	}
	members := []*simGroupClient{a, b}
	require.Len(t, joins[leader].Members, 2, "the leader is told every member")

	assignment := map[string][]byte{joins[0].MemberID: []byte("p0,p1"), joins[1].MemberID: []byte("p2,p3")}
	sync := func(j int, withAssignment bool) *kmsg.SyncGroupRequest {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 5
		req.Group, req.MemberID, req.Generation = group, joins[j].MemberID, gen
		req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		if withAssignment {
			for _, id := range sortedKeys(assignment) {
				ga := kmsg.NewSyncGroupRequestGroupAssignment()
				ga.MemberID, ga.MemberAssignment = id, assignment[id]
				req.GroupAssignment = append(req.GroupAssignment, ga)
			}
		}
		return req
	}
	syncs := c.await(members[follower].send(sync(follower, false)), members[leader].send(sync(leader, true)))
	for k, j := range []int{follower, leader} {
		sr := syncs[k].(*kmsg.SyncGroupResponse)
		require.Zero(t, sr.ErrorCode, "sync: %v", kerr.ErrorForCode(sr.ErrorCode))
		require.Equal(t, assignment[joins[j].MemberID], sr.MemberAssignment)
	}

	for j, m := range members {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = 4
		hb.Group, hb.MemberID, hb.Generation = group, joins[j].MemberID, gen
		require.Zero(t, c.await(m.send(hb))[0].(*kmsg.HeartbeatResponse).ErrorCode)
	}

	// Each commit is answered only once the high watermark has passed its
	// records: checked at the moment the answer arrives, on the loop.
	want := map[int32]int64{}
	for round := int64(1); round <= 3; round++ {
		for j, m := range members {
			offsets := map[int32]int64{int32(2 * j): 10 * round, int32(2*j + 1): 10*round + 1}
			var hw, end int64
			answer := m.send(commitRequest(group, joins[j].MemberID, gen, "events", offsets))
			c.await(func() kmsg.Response {
				r := answer()
				if r != nil && end == 0 {
					p := c.offsetsPartition(co, group)
					hw, end = p.hw, p.log.LogEndOffset()
				}
				return r
			})
			cr := answer().(*kmsg.OffsetCommitResponse)
			for _, p := range cr.Topics[0].Partitions {
				require.Zero(t, p.ErrorCode, "commit: %v", kerr.ErrorForCode(p.ErrorCode))
			}
			require.Equal(t, end, hw, "a commit was acknowledged before the high watermark passed it")
			for p, o := range offsets {
				want[p] = o
			}
		}
	}
	require.Equal(t, want, c.fetchOffsets(co, group))

	// Another node is not the coordinator.
	other := (co + 1) % 3
	resp, err := c.do(other, commitRequest(group, joins[0].MemberID, gen, "events", map[int32]int64{0: 99}))
	require.NoError(t, err)
	require.Equal(t, kerr.NotCoordinator.Code, resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)

	c.world.Node(c.host(co)).Kill()
	c.brokers[co], c.clients[co] = nil, nil
	next := -1
	require.True(t, c.world.RunUntil(func() bool {
		next = c.findCoordinator(other, group)
		if next == co {
			c.world.Run(200 * time.Millisecond)
		}
		return next != co
	}, 2*time.Minute), "the coordinator never moved")
	require.Equal(t, want, c.fetchOffsets(next, group), "every acknowledged commit is fetched back from the new coordinator")

	// The members' generation survived: they heartbeat on at the new one.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation = group, joins[0].MemberID, gen
	got := c.retryCoordinator(next, func() kmsg.Request { return hb }, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode })
	require.Zero(t, got.(*kmsg.HeartbeatResponse).ErrorCode)
}

func TestSingleNodeCreatesTheOffsetsTopicWithOneReplicaAndSaysSo(t *testing.T) {
	var logs bytes.Buffer
	s := newSimBroker(t, 72, nil)
	s.world.SetLog(&logs, slog.LevelInfo)
	var co kmsg.FindCoordinatorResponse
	require.True(t, s.world.RunUntil(func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest() // v0: a group key, as kafka-python sends
		req.CoordinatorKey = "g"
		co = *s.do(req).(*kmsg.FindCoordinatorResponse)
		if co.ErrorCode == kerr.CoordinatorNotAvailable.Code {
			s.world.Run(100 * time.Millisecond)
			return false
		}
		return true
	}, time.Minute))
	require.Zero(t, co.ErrorCode)
	require.Equal(t, int32(1), co.NodeID)
	tp := s.broker.image.TopicByName(offsetsTopic)
	require.NotNil(t, tp)
	require.Len(t, tp.Partitions, 50, "offsets.topic.num.partitions defaults to 50")
	for _, p := range tp.Partitions {
		require.Equal(t, []int32{1}, p.Replicas)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "fewer replicas than offsets.topic.replication.factor"), logs.String())

	// The group works at once on its shard.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 2, "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = offsetsTopic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = groups.PartitionFor("g", 50), 7
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var cr *kmsg.OffsetCommitResponse
	require.True(t, s.world.RunUntil(func() bool {
		cr = s.do(req).(*kmsg.OffsetCommitResponse)
		return cr.Topics[0].Partitions[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code
	}, time.Minute))
	require.Zero(t, cr.Topics[0].Partitions[0].ErrorCode, "commit: %v", kerr.ErrorForCode(cr.Topics[0].Partitions[0].ErrorCode))

	// Only the coordinator writes its topic.
	pr := s.do(produceRequest(offsetsTopic, 0, -1, valueBatch(wire.NoProducer, 1, "garbage"))).(*kmsg.ProduceResponse)
	require.Equal(t, kerr.InvalidTopicException.Code, pr.Topics[0].Partitions[0].ErrorCode)
}

func TestOffsetsTopicWaitsForEveryBrokerRatherThanFewerReplicas(t *testing.T) {
	c := newSimCluster(t, 73, 3, func(_ int, cfg *Config) { cfg.OffsetsTopicNumPartitions = 2 })
	c.world.Node(c.host(2)).Kill()
	c.brokers[2], c.clients[2] = nil, nil
	// Once node 3 is fenced, two brokers are registered of the three the
	// replication factor asks for.
	require.True(t, c.world.RunUntil(func() bool {
		b := c.brokers[0]
		br, ok := b.image.Brokers[3]
		return !ok || br.Fenced
	}, time.Minute))
	for k := 0; k < 10; k++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = 3, "g"
		resp, err := c.do(0, req)
		require.NoError(t, err)
		require.Equal(t, kerr.CoordinatorNotAvailable.Code, resp.(*kmsg.FindCoordinatorResponse).ErrorCode)
		c.world.Run(500 * time.Millisecond)
	}
	require.Nil(t, c.brokers[0].image.TopicByName(offsetsTopic), "created with fewer replicas than configured")

	c.world.Node(c.host(2)).Restart()
	c.waitRunning(2)
	c.findCoordinator(0, "g")
	for _, p := range c.brokers[0].image.TopicByName(offsetsTopic).Partitions {
		require.Len(t, p.Replicas, 3)
	}
}

func TestFindCoordinatorAnswersEachKeyType(t *testing.T) {
	s := newSimBroker(t, 74, nil)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 6, 1, []string{"txn"}
	co := s.do(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	require.Equal(t, kerr.CoordinatorNotAvailable.Code, co.ErrorCode, "no transaction coordinator yet")
	require.Equal(t, int32(-1), co.NodeID)
	req.CoordinatorType = 2
	co = s.do(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	require.Equal(t, kerr.CoordinatorNotAvailable.Code, co.ErrorCode, "no share coordinator")
	req.Version = 5
	co = s.do(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	require.Equal(t, kerr.InvalidRequest.Code, co.ErrorCode, "share keys before v6")
	req.CoordinatorType = 7
	co = s.do(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	require.Equal(t, kerr.InvalidRequest.Code, co.ErrorCode)
	require.Nil(t, s.broker.image.TopicByName(offsetsTopic), "only a group key creates the offsets topic")

	// Group requests before this broker has the topic are NOT_COORDINATOR,
	// as Kafka's broker that does not own the group's partition answers (the
	// client finds the coordinator again); an empty group id is
	// INVALID_GROUP_ID before any routing.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g", "m"
	require.Equal(t, kerr.NotCoordinator.Code, s.do(hb).(*kmsg.HeartbeatResponse).ErrorCode)
	hb.Group = ""
	require.Equal(t, kerr.InvalidGroupID.Code, s.do(hb).(*kmsg.HeartbeatResponse).ErrorCode)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 1, "g"
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic, ot.Partitions = "t", []int32{0, 1}
	of.Topics = append(of.Topics, ot)
	got := s.do(of).(*kmsg.OffsetFetchResponse)
	require.Len(t, got.Topics[0].Partitions, 2, "v1 carries the error on every partition")
	require.Equal(t, kerr.NotCoordinator.Code, got.Topics[0].Partitions[1].ErrorCode)
	require.Equal(t, int64(-1), got.Topics[0].Partitions[1].Offset)
}

// simpleCommit commits offset on every partition of topic for a group
// without members (generation -1), as admin tools and simple consumers do.
func simpleCommit(group, topic string, partitions int32, offset int64) *kmsg.OffsetCommitRequest {
	offsets := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = offset
	}
	req := commitRequest(group, "", -1, topic, offsets)
	req.Version = 2
	return req
}

// doCoordinated sends req until its coordinator error, which code reads,
// is gone.
func (s *simBroker) doCoordinated(req kmsg.Request, code func(kmsg.Response) int16) kmsg.Response {
	s.t.Helper()
	var got kmsg.Response
	require.True(s.t, s.world.RunUntil(func() bool {
		got = s.do(req)
		switch code(got) {
		case kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
			s.world.Run(50 * time.Millisecond)
			return false
		}
		return true
	}, time.Minute))
	return got
}

func commitCode(r kmsg.Response) int16 {
	return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// fetchAll fetches every offset of group (OffsetFetch v7, null topics).
func (s *simBroker) fetchAll(group string) map[string]int64 {
	s.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, group
	resp := s.doCoordinated(req, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).ErrorCode }).(*kmsg.OffsetFetchResponse)
	out := map[string]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[t.Topic+"-"+string(rune('0'+p.Partition))] = p.Offset
		}
	}
	return out
}

func TestCoordinatorSnapshotsMoveTheLogStartAndALoadInManyStepsRestoresTheOffsets(t *testing.T) {
	s := newSimBroker(t, 75, func(cfg *Config) {
		cfg.OffsetsTopicNumPartitions = 1
		cfg.coordLoadStepBytes = 512
	})
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 2, 1
	create.Topics = append(create.Topics, rt)
	require.Zero(t, s.do(create).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey = "g"
	require.True(t, s.world.RunUntil(func() bool { return s.do(find).(*kmsg.FindCoordinatorResponse).ErrorCode == 0 }, time.Minute))
	// 2 records a commit: past groups.DefaultSnapshotMinRecords the
	// shard restates its state and the log start moves up to it.
	const commits = 700
	for i := int64(1); i <= commits; i++ {
		require.Zero(t, commitCode(s.doCoordinated(simpleCommit("g", "t", 2, i), commitCode)))
	}
	p := s.broker.partitions[partitionKey{s.broker.image.TopicByName(offsetsTopic).ID, 0}]
	require.Greater(t, p.log.LogStartOffset(), int64(0), "a committed snapshot moves the log start")
	require.Less(t, p.log.LogEndOffset()-p.log.LogStartOffset(), int64(2*commits))
	require.Equal(t, map[string]int64{"t-0": commits, "t-1": commits}, s.fetchAll("g"))

	s.restart()
	require.Equal(t, map[string]int64{"t-0": commits, "t-1": commits}, s.fetchAll("g"), "replayed from the snapshot")
	require.Greater(t, s.broker.coord.loadSteps, 10, "a load of many steps")

	// Deleting the topic deletes the group's offsets of it.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"t"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("t")
	del.Topics = append(del.Topics, dt)
	require.Zero(t, s.do(del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	require.True(t, s.world.RunUntil(func() bool { return len(s.fetchAll("g")) == 0 }, time.Minute), "offsets of a deleted topic stay")
}

func TestBatchedGroupRequestsAreSplitByShardAndMergedInOrder(t *testing.T) {
	s := newSimBroker(t, 76, func(cfg *Config) { cfg.OffsetsTopicNumPartitions = 4 })
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey = "g"
	require.True(t, s.world.RunUntil(func() bool { return s.do(find).(*kmsg.FindCoordinatorResponse).ErrorCode == 0 }, time.Minute))
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	create.Topics = append(create.Topics, rt)
	require.Zero(t, s.do(create).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)

	// Groups on at least three different shards, in an order no shard's is.
	names := []string{"g-a", "g-b", "g-c", "g-d", "g-e", "g-f"}
	shards := map[int32]bool{}
	for i, g := range names {
		shards[groups.PartitionFor(g, 4)] = true
		require.Zero(t, commitCode(s.doCoordinated(simpleCommit(g, "t", 1, int64(10+i)), commitCode)))
	}
	require.GreaterOrEqual(t, len(shards), 3)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	for _, g := range append([]string{"unknown"}, names...) {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		of.Groups = append(of.Groups, rg)
	}
	fetched := s.do(of).(*kmsg.OffsetFetchResponse)
	require.Len(t, fetched.Groups, len(names)+1)
	require.Equal(t, "unknown", fetched.Groups[0].Group)
	require.Empty(t, fetched.Groups[0].Topics)
	for i, g := range names {
		got := fetched.Groups[i+1]
		require.Equal(t, g, got.Group)
		require.Zero(t, got.ErrorCode)
		require.Equal(t, int64(10+i), got.Topics[0].Partitions[0].Offset)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g-f", "g-a", "g-c"}
	described := s.do(dg).(*kmsg.DescribeGroupsResponse)
	require.Len(t, described.Groups, 3)
	for i, g := range dg.Groups {
		require.Equal(t, g, described.Groups[i].Group)
		require.Equal(t, "Empty", described.Groups[i].State)
	}

	listed := s.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	require.Zero(t, listed.ErrorCode)
	var ids []string
	for _, g := range listed.Groups {
		ids = append(ids, g.Group)
	}
	require.ElementsMatch(t, names, ids, "every shard's groups")

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g-e", "nope", "g-b"}
	deleted := s.do(del).(*kmsg.DeleteGroupsResponse)
	require.Len(t, deleted.Groups, 3)
	require.Equal(t, "g-e", deleted.Groups[0].Group)
	require.Zero(t, deleted.Groups[0].ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, deleted.Groups[1].ErrorCode)
	require.Zero(t, deleted.Groups[2].ErrorCode)
	listed = s.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	require.Len(t, listed.Groups, len(names)-2)
}

func TestAParkedJoinIsAnsweredNotCoordinatorWhenTheCoordinatorIsCutOff(t *testing.T) {
	c := newSimCluster(t, 77, 3, func(_ int, cfg *Config) { cfg.OffsetsTopicNumPartitions = 1 })
	const group = "cut"
	co := c.findCoordinator(0, group)
	a, b := c.dialMember(co), c.dialMember(co)
	// a joins alone and is Stable (after the initial rebalance delay).
	first := c.await(a.send(joinRequest(group, "")))[0].(*kmsg.JoinGroupResponse)
	joined := c.await(a.send(joinRequest(group, first.MemberID)))[0].(*kmsg.JoinGroupResponse)
	require.Zero(t, joined.ErrorCode)
	// b's join starts a rebalance that parks it until a rejoins or a's
	// rebalance timeout (10 s) runs out.
	second := c.await(b.send(joinRequest(group, "")))[0].(*kmsg.JoinGroupResponse)
	parked := b.send(joinRequest(group, second.MemberID))
	c.world.Run(time.Second)
	require.Nil(t, parked(), "b's join is parked")

	// Cut the coordinator off from the other brokers: its lease runs out
	// and another node leads the partition.
	for i := range c.brokers {
		if i != co {
			c.world.Net().Partition(c.host(co), c.host(i))
			c.world.Net().Partition(c.host(i), c.host(co))
		}
	}
	got := c.await(parked)[0].(*kmsg.JoinGroupResponse)
	require.Equal(t, kerr.NotCoordinator.Code, got.ErrorCode, "a broker that lost its lease answers nothing for the group")

	next := c.findCoordinator((co+1)%3, group)
	require.NotEqual(t, co, next)
	require.Empty(t, c.fetchOffsets(next, group))
}

// A commit whose records the followers cannot replicate is answered
// COORDINATOR_NOT_AVAILABLE after offsets.commit.timeout.ms (Kafka turns
// its REQUEST_TIMED_OUT so), not held until the ISR shrinks; the write may
// still commit, and does once the followers fetch again.
func TestACommitNotReplicatedInTimeIsAnsweredCoordinatorNotAvailable(t *testing.T) {
	c := newSimCluster(t, 78, 3, func(_ int, cfg *Config) {
		cfg.OffsetsTopicNumPartitions = 1
		cfg.ReplicaLagTimeMax = time.Minute // the ISR keeps the cut followers
		cfg.OffsetsCommitTimeout = time.Second
	})
	const group = "slow"
	co := c.findCoordinator(0, group)
	commit := func() *kmsg.OffsetCommitResponse {
		return c.retryCoordinator(co, func() kmsg.Request {
			return commitRequest(group, "", -1, "t", map[int32]int64{0: 7})
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }).(*kmsg.OffsetCommitResponse)
	}
	require.Zero(t, c.createTopicRF(co, "t", 1, 3))
	require.Zero(t, commit().Topics[0].Partitions[0].ErrorCode, "a commit the followers replicate is answered")

	// The followers can no longer fetch from the coordinator; its lease
	// and the controller are untouched.
	for i := range c.brokers {
		if i != co {
			c.world.Net().PartitionPort(c.host(i), c.host(co), 9092)
			c.world.Net().PartitionPort(c.host(co), c.host(i), 9092)
		}
	}
	m := c.dialMember(co)
	sent := c.world.Now()
	answer := m.send(commitRequest(group, "", -1, "t", map[int32]int64{0: 9}))
	got := c.await(answer)[0].(*kmsg.OffsetCommitResponse)
	require.Equal(t, kerr.CoordinatorNotAvailable.Code, got.Topics[0].Partitions[0].ErrorCode)
	waited := c.world.Now() - sent
	require.True(t, waited >= time.Second && waited < 3*time.Second, "answered after %s", waited)
	require.Equal(t, co, c.findCoordinator(co, group), "the coordinator is still the partition's leader")

	for i := range c.brokers {
		if i != co {
			c.world.Net().HealPort(c.host(i), c.host(co), 9092)
			c.world.Net().HealPort(c.host(co), c.host(i), 9092)
		}
	}
	require.Equal(t, map[int32]int64{0: 9}, c.fetchOffsets(co, group), "the timed-out commit committed once replicated")
}
