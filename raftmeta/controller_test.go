package raftmeta

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRegistrationRefusesMalformedRequests(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	ok := []Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}
	for _, tc := range []struct {
		name string
		req  BrokerRegistration
		want *kerr.Error
	}{
		{"negative id", BrokerRegistration{BrokerID: -1, IncarnationID: IncarnationID{1}, Listeners: ok}, kerr.InvalidRequest},
		{"zero incarnation", BrokerRegistration{BrokerID: 1, Listeners: ok}, kerr.InvalidRequest},
		{"no listeners", BrokerRegistration{BrokerID: 1, IncarnationID: IncarnationID{1}}, kerr.InvalidRequest},
		{"listener twice", BrokerRegistration{BrokerID: 1, IncarnationID: IncarnationID{1}, Listeners: append(ok, ok...)}, kerr.InvalidRequest},
		{"port out of range", BrokerRegistration{BrokerID: 1, IncarnationID: IncarnationID{1}, Listeners: []Listener{{Name: "P", Host: "h", Port: 1 << 16}}}, kerr.InvalidRequest},
		{"another cluster", BrokerRegistration{BrokerID: 1, IncarnationID: IncarnationID{1}, Listeners: ok, ClusterID: "other"}, kerr.InconsistentClusterID},
	} {
		reply, records := h.c.RegisterBroker(h.now, tc.req)
		require.Equal(t, tc.want, reply.Err, tc.name)
		require.NotEmpty(t, reply.Message, tc.name)
		require.Empty(t, records, tc.name)
	}
	reply, records := h.c.RegisterBroker(h.now, BrokerRegistration{BrokerID: 1, IncarnationID: IncarnationID{1}, Listeners: ok, ClusterID: "cluster"})
	require.Nil(t, reply.Err)
	require.Len(t, records, 1)
}

func TestRegistrationEpochIsTheRecordOffsetAndGrows(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	var last int64
	for i := 0; i < 5; i++ {
		h.incarnations[1]++
		h.now = h.now.Add(10 * time.Second) // the old session runs out
		reply := h.register(1, "")
		require.Nil(t, reply.Err)
		require.Greater(t, reply.Epoch, last)
		require.Equal(t, uint64(reply.Epoch), h.committed.Applied, "the epoch is the registration record's offset")
		last = reply.Epoch
		require.False(t, h.heartbeat(1, false, false).IsFenced)
	}
}

func TestSameIncarnationAmendsListeners(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	first := h.register(1, "a")
	reply, records := h.c.RegisterBroker(h.now, BrokerRegistration{BrokerID: 1, IncarnationID: h.incarnation(1),
		Listeners: []Listener{{Name: "PLAINTEXT", Host: "moved", Port: 9093}}, Rack: "a"})
	require.Nil(t, reply.Err)
	require.Equal(t, first.Epoch, reply.Epoch)
	require.Len(t, records, 1)
	h.propose(records)
	require.Equal(t, "moved", h.committed.Brokers[1].Host)
	require.True(t, h.committed.Brokers[1].Fenced, "an amendment keeps the state")
}

func TestHeartbeatUnfencesOnlyOnceCaughtUp(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	reply := h.register(1, "")
	epoch := reply.Epoch
	for _, tc := range []struct {
		offset uint64
		fence  bool
		fenced bool
	}{{uint64(epoch) - 1, false, true}, {uint64(epoch), true, true}, {uint64(epoch), false, false}} {
		hb, records := h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: tc.offset, WantFence: tc.fence})
		h.propose(records)
		require.Nil(t, hb.Err)
		require.Equal(t, tc.fenced, hb.IsFenced, "offset %d want fence %t", tc.offset, tc.fence)
		require.Equal(t, tc.offset >= uint64(epoch), hb.IsCaughtUp)
		require.Equal(t, !tc.fenced, len(records) == 1)
	}
}

// A broker's heartbeat says caught up only while its image holds what was
// committed more than ImageLagMax ago: a lag of a moment is fine, an image
// that stopped moving is not, whatever its registration.
func TestHeartbeatCaughtUpMeansARecentImage(t *testing.T) {
	h := newHarness(t, ControllerConfig{SessionTimeout: 8 * time.Second}, 1) // ImageLagMax 2s
	h.startBrokers(3)
	epoch := h.c.View().Brokers[1].Epoch
	heartbeat := func(offset uint64) HeartbeatReply {
		reply, records := h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: offset})
		h.propose(records)
		require.Nil(t, reply.Err)
		require.False(t, reply.IsFenced)
		return reply
	}
	stuck := h.committed.Applied
	h.createTopic("t", 4, 3)
	moved := h.committed.Applied
	require.Greater(t, moved, stuck)
	require.True(t, heartbeat(stuck).IsCaughtUp, "a lag just committed is within ImageLagMax")
	h.now = h.now.Add(1500 * time.Millisecond)
	require.True(t, heartbeat(stuck).IsCaughtUp, "a lag of 1.5s is within ImageLagMax")
	h.now = h.now.Add(time.Second)
	require.False(t, heartbeat(stuck).IsCaughtUp, "an image 2.5s behind is not caught up")
	require.True(t, heartbeat(moved).IsCaughtUp, "once it has applied the records, it is")
	// A controller that starts (a failover) with no record of when its log
	// was committed counts it as committed at its start: an image behind
	// it is caught up for ImageLagMax.
	h.c = NewController(h.committed, h.cfg, h.now, h.rand)
	require.True(t, heartbeat(stuck).IsCaughtUp)
	h.now = h.now.Add(2100 * time.Millisecond)
	require.False(t, heartbeat(stuck).IsCaughtUp)
	// One given its node's record knows at once.
	commits := NewCommitTimes(8 * time.Second)
	commits.Note(stuck, h.now.Add(-4*time.Second))
	commits.Note(moved, h.now.Add(-3*time.Second))
	cfg := h.cfg
	cfg.CommitTimes = commits
	h.c = NewController(h.committed, cfg, h.now, h.rand)
	require.False(t, heartbeat(stuck).IsCaughtUp, "a controller that knows its log's age")
	require.True(t, heartbeat(moved).IsCaughtUp)
}

// A broker's heartbeat is not caught up while its image lacks the last
// record that took a leadership from it, however recent: in its own view it
// still leads a partition that has moved on.
func TestHeartbeatCaughtUpMeansTheLastDemotionApplied(t *testing.T) {
	h := newHarness(t, ControllerConfig{SessionTimeout: 8 * time.Second}, 1)
	h.startBrokers(3)
	h.createTopic("t", 6, 3)
	require.Positive(t, h.c.View().LeaderCount(1))
	epoch := h.c.View().Brokers[1].Epoch
	heartbeat := func(offset uint64, shutdown bool) HeartbeatReply {
		reply, records := h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: offset, WantShutDown: shutdown})
		h.propose(records)
		require.Nil(t, reply.Err)
		return reply
	}
	before := h.committed.Applied
	// A controlled shutdown moves broker 1's leaderships away.
	require.True(t, heartbeat(before, true).IsCaughtUp, "the heartbeat that begins it is measured before its own moves")
	require.Zero(t, h.c.View().LeaderCount(1))
	require.Greater(t, h.c.View().DemotedAt(1), before)
	require.False(t, heartbeat(before, true).IsCaughtUp, "an image without its demotion")
	require.True(t, heartbeat(h.committed.Applied, true).IsCaughtUp)
}

func TestTickFencesInTheOrderSessionsRanOut(t *testing.T) {
	h := newHarness(t, ControllerConfig{SessionTimeout: 10 * time.Second}, 1)
	h.startBrokers(4)
	h.createTopic("t", 8, 2)
	// Brokers heartbeat at 1s, 2s, 3s, 4s: 4 first, then 3, then 2, then 1.
	for id := int32(4); id >= 1; id-- {
		h.now = h.now.Add(time.Second)
		h.heartbeat(id, false, false)
	}
	deadline := h.c.Deadline()
	require.Equal(t, harnessEpoch.Add(11*time.Second), deadline, "broker 4's session ends first")
	h.now = harnessEpoch.Add(12 * time.Second)
	records := h.tick()
	var fenced []int32
	for _, r := range records {
		if bc, ok := r.(BrokerChangeRecord); ok {
			require.Equal(t, BrokerFence, bc.Change)
			fenced = append(fenced, bc.BrokerID)
		}
	}
	require.Equal(t, []int32{4, 3}, fenced)
	for _, p := range h.committed.TopicByName("t").Partitions {
		require.NotContains(t, []int32{3, 4}, p.Leader)
	}
	require.Equal(t, harnessEpoch.Add(13*time.Second), h.c.Deadline())
	// Once every broker is fenced there is no deadline.
	h.now = h.now.Add(time.Minute)
	h.tick()
	require.True(t, h.c.Deadline().IsZero())
}

func TestNewIncarnationWaitsForTheOldSession(t *testing.T) {
	h := newHarness(t, ControllerConfig{SessionTimeout: 9 * time.Second}, 1)
	h.startBrokers(2)
	h.incarnations[1]++
	h.now = h.now.Add(8 * time.Second)
	require.Equal(t, kerr.DuplicateBrokerRegistration, h.register(1, "").Err)
	h.now = h.now.Add(time.Second)
	reply := h.register(1, "")
	require.Nil(t, reply.Err)
	require.True(t, h.committed.Brokers[1].Fenced)
	// A heartbeat of the old incarnation is now stale.
	old, _ := h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: 1, BrokerEpoch: 2, MetadataOffset: h.committed.Applied})
	require.Equal(t, kerr.StaleBrokerEpoch, old.Err)
}

func TestControlledShutdownWaitsForActiveBrokers(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(3)
	h.createTopic("t", 6, 3)
	reply := h.heartbeat(1, false, true)
	require.True(t, reply.InControlledShutdown)
	require.False(t, reply.ShouldShutDown)
	require.Zero(t, h.committed.LeaderCount(1))
	for _, p := range h.committed.TopicByName("t").Partitions {
		require.NotContains(t, p.ISR, int32(1), "a broker shutting down leaves every ISR it is not the last of")
	}
	// Placement passes over it.
	res, _ := h.c.CreateTopics([]TopicSpec{{Name: "u", Partitions: 1, ReplicationFactor: 3}})
	require.Equal(t, kerr.InvalidReplicationFactor, res[0].Err)
	require.False(t, h.heartbeat(1, false, true).ShouldShutDown, "brokers 2 and 3 have not reported the moves")
	h.heartbeat(2, false, false)
	require.False(t, h.heartbeat(1, false, true).ShouldShutDown, "broker 3 has not")
	h.heartbeat(3, false, false)
	final := h.heartbeat(1, false, true)
	require.True(t, final.ShouldShutDown)
	require.True(t, h.committed.Brokers[1].Fenced)
}

func TestFailoverGivesFullSessions(t *testing.T) {
	h := newHarness(t, ControllerConfig{SessionTimeout: 9 * time.Second}, 1)
	h.startBrokers(2)
	h.now = h.now.Add(8 * time.Second)
	h.c = NewController(h.committed, h.cfg, h.now, h.rand)
	h.now = h.now.Add(8 * time.Second)
	require.Empty(t, h.tick(), "every broker's session runs from the failover")
	h.now = h.now.Add(time.Second)
	require.Len(t, h.tick(), 2)
}

func TestCommittedRebuildsTheViewAfterForeignRecords(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(1)
	// A record the controller did not write: a broker registered by hand.
	require.NoError(t, h.committed.Apply(RegisterBrokerRecord{Broker: Broker{ID: 9, Epoch: 100, IncarnationID: IncarnationID{9},
		Listeners: []Listener{{Name: "P", Host: "h", Port: 1}}}}))
	h.c.Committed(h.now, h.committed)
	require.True(t, h.c.View().Equal(h.committed))
	reply := h.heartbeat(9, false, false)
	require.Nil(t, reply.Err, "the foreign broker has a session")
	// Proposals in flight keep the view ahead until they commit.
	h.holding = true
	h.createTopic("t", 1, 1)
	require.Equal(t, 1, h.c.Pending())
	require.NotNil(t, h.c.View().TopicByName("t"))
	require.Nil(t, h.committed.TopicByName("t"))
	h.holding = false
	h.commit()
	require.Zero(t, h.c.Pending())
}

func TestElectPreferredOnEverything(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(3)
	h.createTopic("t", 6, 3)
	results, records := h.c.ElectPreferredLeaders(nil)
	require.Empty(t, results, "partitions led by their preferred replica are left out")
	require.Empty(t, records)
	// Broker 1 fences itself and comes back; the leaders take it back
	// into their ISRs, but its leaderships stay moved.
	h.heartbeat(1, true, false)
	h.heartbeat(1, false, false)
	h.growISRs("t", 1)
	results, records = h.c.ElectPreferredLeaders(nil)
	require.NotEmpty(t, results)
	for _, r := range results {
		require.Nil(t, r.Err)
	}
	h.propose(records)
	for _, p := range h.committed.TopicByName("t").Partitions {
		require.Equal(t, p.Replicas[0], p.Leader)
	}
}

func TestRebalanceRespectsThePercentage(t *testing.T) {
	for _, tc := range []struct {
		percent int
		moves   int
	}{{10, 1}, {49, 1}, {50, 0}, {60, 0}} {
		h := newHarness(t, ControllerConfig{AutoLeaderRebalance: true, RebalanceInterval: time.Minute, ImbalancePercent: tc.percent}, 1)
		h.startBrokers(2)
		res, records := h.c.CreateTopics([]TopicSpec{{Name: "t", Assignment: [][]int32{{1, 2}, {1, 2}, {2, 1}}}})
		require.Nil(t, res[0].Err)
		h.propose(records)
		// Broker 1 fences itself and comes back: broker 2 leads everything,
		// and takes broker 1 back into the ISRs.
		h.heartbeat(1, true, false)
		h.heartbeat(1, false, false)
		h.growISRs("t", 1)
		// t-0 goes back to broker 1, t-1 does not: broker 1 leads one of
		// its two preferred partitions, an imbalance of 50%.
		_, records = h.c.ElectPreferredLeaders([]TopicPartitions{{Topic: "t", Partitions: []int32{0}}})
		h.propose(records)
		h.now = h.now.Add(time.Minute)
		h.heartbeat(1, false, false)
		h.heartbeat(2, false, false)
		require.Len(t, h.tick(), tc.moves, "imbalance 50%%, threshold %d%%", tc.percent)
	}
}

// growISRs has each partition's leader take broker id back into its ISR.
func (h *harness) growISRs(topic string, id int32) {
	t := h.committed.TopicByName(topic)
	for i, p := range t.Partitions {
		if indexOf(p.ISR, id) >= 0 || p.Leader == NoLeader {
			continue
		}
		reply, records := h.c.AlterPartition(AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.committed.Brokers[p.Leader].Epoch,
			Topic: t.ID, Partition: int32(i), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
			ISR: append(append([]int32(nil), p.ISR...), id)})
		require.Nil(h.t, reply.Err, reply.Message)
		h.propose(records)
	}
}

func TestRebalanceStopsAtItsBoundAndGoesOn(t *testing.T) {
	h := newHarness(t, ControllerConfig{AutoLeaderRebalance: true, RebalanceInterval: time.Hour, SessionTimeout: 24 * time.Hour}, 1)
	h.startBrokers(2)
	assignment := make([][]int32, 1500)
	for i := range assignment {
		assignment[i] = []int32{1, 2}
	}
	res, records := h.c.CreateTopics([]TopicSpec{{Name: "t", Assignment: assignment}})
	require.Nil(t, res[0].Err)
	h.propose(records)
	h.heartbeat(1, true, false)
	h.heartbeat(1, false, false)
	h.growISRs("t", 1)
	h.now = h.now.Add(time.Hour)
	require.Len(t, h.tick(), maxElectionsPerRebalance)
	require.Equal(t, h.now, h.c.Deadline(), "the next round is due at once")
	require.Len(t, h.tick(), 500)
	require.Equal(t, h.now.Add(time.Hour), h.c.Deadline())
}

func TestAlterPartitionRefusals(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(3)
	topic := h.createTopic("t", 1, 3)
	p := topic.Partitions[0]
	base := AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.committed.Brokers[p.Leader].Epoch, Topic: topic.ID,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader}}
	other := p.Replicas[1]
	for _, tc := range []struct {
		name   string
		change func(*AlterPartition)
		want   *kerr.Error
	}{
		{"unknown broker", func(r *AlterPartition) { r.BrokerID = 9 }, kerr.BrokerIDNotRegistered},
		{"stale broker epoch", func(r *AlterPartition) { r.BrokerEpoch++ }, kerr.StaleBrokerEpoch},
		{"unknown topic", func(r *AlterPartition) { r.Topic = TopicID{9} }, kerr.UnknownTopicID},
		{"unknown partition", func(r *AlterPartition) { r.Partition = 1 }, kerr.UnknownTopicOrPartition},
		{"epoch ahead", func(r *AlterPartition) { r.LeaderEpoch++ }, kerr.NotController},
		{"not the leader", func(r *AlterPartition) {
			r.BrokerID, r.BrokerEpoch = other, h.committed.Brokers[other].Epoch
		}, kerr.InvalidRequest},
		{"leader not in the ISR", func(r *AlterPartition) { r.ISR = []int32{other} }, kerr.InvalidRequest},
		{"not a replica", func(r *AlterPartition) { r.ISR = []int32{p.Leader, 9} }, kerr.InvalidRequest},
		{"empty", func(r *AlterPartition) { r.ISR = []int32{} }, kerr.InvalidRequest},
	} {
		req := base
		tc.change(&req)
		reply, records := h.c.AlterPartition(req)
		require.Equal(t, tc.want, reply.Err, tc.name)
		require.Empty(t, records, tc.name)
	}
	reply, records := h.c.AlterPartition(base)
	require.Nil(t, reply.Err)
	h.propose(records)
	require.Equal(t, []int32{p.Leader}, reply.Partition.ISR)
	reply, _ = h.c.AlterPartition(base)
	require.Equal(t, kerr.InvalidUpdateVersion, reply.Err, "the partition epoch moved on")
	// A fenced broker may not come back into the ISR.
	h.heartbeat(other, true, false)
	p = h.committed.TopicByName("t").Partitions[0]
	reply, _ = h.c.AlterPartition(AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.committed.Brokers[p.Leader].Epoch, Topic: topic.ID,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader, other}})
	require.Equal(t, kerr.IneligibleReplica, reply.Err)
}

func TestProducerIDBlocksNeverOverlap(t *testing.T) {
	h := newHarness(t, ControllerConfig{ProducerIDBlock: 10}, 1)
	h.startBrokers(2)
	var next int64
	for i := 0; i < 6; i++ {
		id := int32(1 + i%2)
		reply, records := h.c.AllocateProducerIDs(id, h.committed.Brokers[id].Epoch)
		require.Nil(t, reply.Err)
		require.Equal(t, next, reply.First)
		require.Equal(t, int64(10), reply.Count)
		next += 10
		h.propose(records)
		if i == 2 {
			h.c = NewController(h.committed, h.cfg, h.now, h.rand)
		}
	}
	reply, _ := h.c.AllocateProducerIDs(7, 1)
	require.Equal(t, kerr.BrokerIDNotRegistered, reply.Err)
}

func TestAlterConfigsIsAllOrNothingPerResource(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(1)
	h.createTopic("t", 1, 1)
	v := "1"
	errs, records := h.c.AlterConfigs([]ConfigAlteration{
		{Resource: ConfigTopic, Name: "t", Changes: []ConfigEntry{{Key: "a", Value: &v}, {Key: "", Value: &v}}},
		{Resource: ConfigTopic, Name: "t", Changes: []ConfigEntry{{Key: "b", Value: &v}}},
	})
	require.Equal(t, []*kerr.Error{kerr.InvalidRequest, nil}, errs)
	require.Len(t, records, 1)
	h.propose(records)
	require.Equal(t, map[string]string{"b": "1"}, h.committed.TopicByName("t").Configs)
}

func TestTopicIDsAreDrawnAndFree(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(1)
	seen := map[TopicID]bool{}
	for i := 0; i < 20; i++ {
		res, records := h.c.CreateTopics([]TopicSpec{{Name: fmt.Sprint("t", i), Partitions: 1, ReplicationFactor: 1}})
		require.Nil(t, res[0].Err)
		require.False(t, res[0].ID.IsZero())
		require.False(t, seen[res[0].ID])
		require.Equal(t, byte(0x40), res[0].ID[6]&0xf0, "a version 4 UUID")
		seen[res[0].ID] = true
		h.propose(records)
	}
	taken := h.committed.TopicByName("t0").ID
	res, _ := h.c.CreateTopics([]TopicSpec{{Name: "x", ID: taken, Partitions: 1, ReplicationFactor: 1}})
	require.Equal(t, kerr.InvalidRequest, res[0].Err)
}

// TestPlacementSpreadsEvenly places topics over many rack layouts and
// checks the striped placer's promises: distinct brokers per partition,
// distinct racks while the factor allows, leaders exactly even over a
// number of partitions that is a multiple of the brokers, and replicas
// nearly even.
func TestPlacementSpreadsEvenly(t *testing.T) {
	r := rng.New(5)
	for trial := 0; trial < 200; trial++ {
		racks := 1 + r.Intn(4)
		perRack := 1 + r.Intn(4)
		var brokers []Broker
		rackOf := map[int32]string{}
		for i := 0; i < racks*perRack; i++ {
			id := int32(10 + i)
			rack := fmt.Sprint("r", i%racks)
			brokers = append(brokers, Broker{ID: id, Rack: rack})
			rackOf[id] = rack
		}
		rf := 1 + r.Intn(len(brokers))
		cycles := 1 + r.Intn(4)
		p := newPlacer(brokers, r)
		leaders, replicas := map[int32]int{}, map[int32]int{}
		for i := 0; i < cycles*len(brokers); i++ {
			got, err := p.place(rf)
			require.NoError(t, err)
			require.Len(t, got, rf)
			used := map[string]bool{}
			for j, id := range got {
				require.Equal(t, j, indexOf(got, id), "broker %d twice in %v", id, got)
				used[rackOf[id]] = true
				replicas[id]++
			}
			require.Equal(t, min(rf, racks), len(used), "racks %d x %d, rf %d: %v", racks, perRack, rf, got)
			leaders[got[0]]++
		}
		lo, hi := len(brokers)*cycles, 0
		for _, b := range brokers {
			require.Equal(t, cycles, leaders[b.ID], "racks %d x %d, rf %d: leaders %v", racks, perRack, rf, leaders)
			lo, hi = min(lo, replicas[b.ID]), max(hi, replicas[b.ID])
		}
		require.LessOrEqual(t, hi-lo, 2+cycles*rf/6, "racks %d x %d, rf %d: replicas %v", racks, perRack, rf, replicas)
	}
	_, err := newPlacer([]Broker{{ID: 1}}, r).place(2)
	require.Error(t, err)
}

func TestBootstrapNamesTheClusterOnce(t *testing.T) {
	c := NewController(NewImage(), ControllerConfig{}, harnessEpoch, rng.New(1))
	err, records := c.Bootstrap("c1")
	require.Nil(t, err)
	require.Equal(t, []Record{ClusterIDRecord{ClusterID: "c1"}}, records)
	err, records = c.Bootstrap("c1")
	require.Nil(t, err)
	require.Empty(t, records)
	err, _ = c.Bootstrap("c2")
	require.Equal(t, kerr.InconsistentClusterID, err)
	err, _ = c.Bootstrap("")
	require.Equal(t, kerr.InvalidRequest, err)
}

// A record the controller decides that its own view refuses is a bug: an
// invariants build panics; otherwise the controller answers
// UNKNOWN_SERVER_ERROR with no records until the committed image rebuilds
// its view.
func TestAControllerThatFailsSaysSoAndRecovers(t *testing.T) {
	h := newHarness(t, ControllerConfig{}, 1)
	h.startBrokers(2)
	h.c.view.leaders[2] = 1 // the view believes broker 2 leads: fencing it cannot apply
	fence := func() (HeartbeatReply, []Record) {
		return h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: 2, BrokerEpoch: h.committed.Brokers[2].Epoch,
			MetadataOffset: h.committed.Applied, WantFence: true})
	}
	if invariants.Enabled {
		require.Panics(t, func() { fence() })
		return
	}
	reply, records := fence()
	require.Equal(t, kerr.UnknownServerError, reply.Err)
	require.Empty(t, records)
	require.Error(t, h.c.Err())
	res, records := h.c.CreateTopics([]TopicSpec{{Name: "t", Partitions: 1, ReplicationFactor: 1}})
	require.Equal(t, kerr.UnknownServerError, res[0].Err)
	require.Empty(t, records)
	h.c.Committed(h.now, h.committed)
	require.NoError(t, h.c.Err())
	require.True(t, h.c.View().Equal(h.committed))
	reply, records = fence()
	require.Nil(t, reply.Err)
	require.Len(t, records, 1)
}
