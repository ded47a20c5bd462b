package groups

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// workload drives a shard with clients that join, sync, heartbeat, leave,
// commit and delete at random, following the answers as real clients do
// (and sometimes not: stale generations, forgotten member ids, odd
// versions).
type workload struct {
	h       *harness
	rng     *rand.Rand
	clients []*wclient
	pending map[RequestID]*wclient
	// snapshots are the log indexes where snapshot Writes start.
	snapshots []int
	// consumers are KIP-848 members (consumer_workload_test.go).
	consumers   []*wconsumer
	cgPending   map[RequestID]cgSent
	conversions int
}

type wclient struct {
	name     string
	group    string
	instance *string
	memberID string
	gen      int32
	leader   bool
	members  []string
}

func newWorkload(t *testing.T, seed int64, cfg Config) *workload {
	w := &workload{h: newHarness(t, cfg), rng: rand.New(rand.NewSource(seed)), pending: map[RequestID]*wclient{}}
	for i := range 6 {
		c := &wclient{name: fmt.Sprintf("c%d", i), group: fmt.Sprintf("g%d", i%2)}
		if i%3 == 0 {
			c.instance = kmsg.StringPtr(c.name)
		}
		w.clients = append(w.clients, c)
	}
	w.addConsumers()
	return w
}

func (w *workload) send(c *wclient, req kmsg.Request) {
	id := w.h.send(fmt.Sprintf("%s %T", c.name, req), req, Client{ID: c.name, Host: "/10.0.0.1"})
	w.pending[id] = c
}

// step sends one random request (or moves the clock) and takes Ready.
func (w *workload) step() {
	if w.rng.Intn(4) == 0 {
		w.consumerStep()
		w.ready()
		return
	}
	c := w.clients[w.rng.Intn(len(w.clients))]
	switch op := w.rng.Intn(20); {
	case op < 4:
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version, r.Group, r.MemberID = int16(w.rng.Intn(10)), c.group, c.memberID
		if r.Version >= 5 {
			r.InstanceID = c.instance
		}
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, int32(5000+w.rng.Intn(20000))
		r.ProtocolType = "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t")}}
		if w.rng.Intn(3) == 0 {
			r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: "sticky", Metadata: []byte(c.name)})
		}
		w.send(c, r)
	case op < 7:
		r := kmsg.NewPtrSyncGroupRequest()
		r.Version, r.Group, r.Generation, r.MemberID = int16(w.rng.Intn(6)), c.group, c.gen, c.memberID
		if r.Version >= 3 {
			r.InstanceID = c.instance
		}
		if c.leader {
			for i, m := range c.members {
				r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte{byte(i)}})
			}
		}
		w.send(c, r)
	case op < 11:
		r := kmsg.NewPtrHeartbeatRequest()
		r.Version, r.Group, r.Generation, r.MemberID = int16(w.rng.Intn(5)), c.group, c.gen, c.memberID
		if r.Version >= 3 {
			r.InstanceID = c.instance
		}
		w.send(c, r)
	case op < 12:
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Version, r.Group, r.MemberID = int16(w.rng.Intn(6)), c.group, c.memberID
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: c.memberID, InstanceID: c.instance}}
		w.send(c, r)
		c.memberID, c.gen = "", -1
	case op < 15:
		gen, member := c.gen, c.memberID
		if w.rng.Intn(3) == 0 {
			gen, member = -1, ""
		}
		r := commitReq(int16(w.rng.Intn(10)), c.group, gen, member, "t", int32(w.rng.Intn(3)), int64(w.rng.Intn(1000)))
		r.Topics[0].Partitions[0].LeaderEpoch = int32(w.rng.Intn(5))
		w.send(c, r)
	case op < 16:
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = c.group
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: int32(w.rng.Intn(3))}}}}
		w.send(c, r)
	case op < 17:
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{c.group}
		w.send(c, r)
	default:
		w.h.now = w.h.now.Add(time.Duration(w.rng.Intn(8000)) * time.Millisecond)
		w.h.s.Tick(w.h.now)
	}
	w.ready()
}

func (w *workload) ready() {
	before := len(w.h.log)
	rd := w.h.ready()
	at := before
	for _, e := range rd.Effects {
		if e.Write != nil {
			if e.SnapshotStart {
				w.snapshots = append(w.snapshots, at)
			}
			at += len(e.Write)
			continue
		}
		if w.learnConsumer(e.Respond) {
			continue
		}
		c := w.pending[e.Respond.ID]
		delete(w.pending, e.Respond.ID)
		if j, ok := e.Respond.Resp.(*kmsg.JoinGroupResponse); ok {
			switch j.ErrorCode {
			case 0:
				c.memberID, c.gen, c.leader = j.MemberID, j.Generation, j.LeaderID == j.MemberID
				c.members = c.members[:0]
				for _, m := range j.Members {
					c.members = append(c.members, m.MemberID)
				}
			case kerr.MemberIDRequired.Code:
				c.memberID = j.MemberID
			case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
				c.memberID = ""
			}
		}
	}
	require.Equal(w.h.t, len(w.h.log), at)
}

// quiet says whether every group is Stable or Empty, with no member ids
// handed out and not yet used: then the live state is all in the log.
func (w *workload) quiet() bool {
	for _, g := range w.h.s.groups {
		if g.state != stateStable && g.state != stateEmpty || len(g.pending) > 0 {
			return false
		}
	}
	return true
}

// settle lets every rebalance end and every session expire.
func (w *workload) settle() {
	for range 40 {
		w.h.now = w.h.now.Add(time.Minute)
		w.h.s.Tick(w.h.now)
		w.ready()
	}
}

// Any sequence of requests, then a fresh shard replaying the log (from its
// start, or from the latest snapshot) answers DescribeGroups and
// OffsetFetch as the live shard does, whenever no rebalance is under way;
// and every request is answered once the groups settle.
func TestReplayAnswersAsTheLiveShard(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newWorkload(t, seed, Config{InitialRebalanceDelay: time.Duration(seed%3) * time.Second, SnapshotMinRecords: 25})
			compared := 0
			for i := range 400 {
				w.step()
				if !w.quiet() || i%7 != 0 {
					continue
				}
				compared++
				live := w.h.view(w.h.s)
				require.Equal(t, live, w.h.view(w.h.replayed(0)), "step %d: replay of the whole log", i)
				if n := len(w.snapshots); n > 0 {
					require.Equal(t, live, w.h.view(w.h.replayed(w.snapshots[n-1])), "step %d: replay from the snapshot at %d", i, w.snapshots[n-1])
				}
			}
			w.settle()
			require.Empty(t, w.pending, "every request is answered once the groups settle")
			require.Empty(t, w.cgPending, "every heartbeat is answered at once")
			require.True(t, w.quiet())
			require.Equal(t, w.h.view(w.h.s), w.h.view(w.h.replayed(0)))
			require.Positive(t, compared)
		})
	}
}

// The workload reaches what the replay check is meant to cover: rebalances
// completed, snapshots written, offsets and groups deleted. A workload
// that never got there would pass vacuously.
func TestWorkloadReachesRebalancesAndSnapshots(t *testing.T) {
	var stable, snapshots, tombstones int
	for seed := int64(1); seed <= 40; seed++ {
		w := newWorkload(t, seed, Config{SnapshotMinRecords: 25})
		for range 400 {
			w.step()
		}
		snapshots += len(w.snapshots)
		for _, r := range w.h.log {
			k, err := decodeKey(r.Key)
			require.NoError(t, err)
			switch {
			case r.Value == nil:
				tombstones++
			case k.kind == keyGroup:
				v, err := decodeGroupValue(r.Value)
				require.NoError(t, err)
				if len(v.Members) > 1 {
					stable++
				}
			}
		}
	}
	require.Greater(t, stable, 40, "synced generations of two or more members")
	require.Greater(t, snapshots, 40)
	require.Greater(t, tombstones, 40)
}

// Sabotage: the replay comparison sees a lost record. Dropping the last
// offset commit from the log must make replay answer differently, or the
// comparison above proves nothing.
func TestReplayCheckSeesALostCommit(t *testing.T) {
	w := newWorkload(t, 7, Config{})
	for range 400 {
		w.step()
	}
	w.settle()
	last := -1
	for i, r := range w.h.log {
		if k, _ := decodeKey(r.Key); k.kind == keyOffset && r.Value != nil {
			last = i
		}
	}
	require.GreaterOrEqual(t, last, 0)
	// Only a commit that still stands (not overwritten or deleted later)
	// is visible; find the latest such one.
	live := w.h.view(w.h.s)
	require.Equal(t, live, w.h.view(w.h.replayed(0)))
	for i := len(w.h.log) - 1; i >= 0; i-- {
		r := w.h.log[i]
		if k, _ := decodeKey(r.Key); k.kind != keyOffset || r.Value == nil {
			continue
		}
		broken := append(append([]Record(nil), w.h.log[:i]...), w.h.log[i+1:]...)
		saved := w.h.log
		w.h.log = broken
		got := w.h.view(w.h.replayed(0))
		w.h.log = saved
		if got != live {
			return
		}
	}
	t.Fatal("no dropped commit changed what replay answers")
}

// The log stays bounded: between snapshots, at most max(floor, 2 x live)
// records (plus one request's worth, and the snapshot itself) are written.
func TestSnapshotsBoundTheLog(t *testing.T) {
	w := newWorkload(t, 3, Config{SnapshotMinRecords: 25})
	for range 2000 {
		before := len(w.h.log)
		w.step()
		// One request's records may pass the trigger before the snapshot
		// follows them: a KIP-848 heartbeat writes several.
		written := len(w.h.log) - before
		since := len(w.h.log)
		if n := len(w.snapshots); n > 0 {
			since -= w.snapshots[n-1]
		}
		live := w.h.s.liveGroups + w.h.s.liveOffsets + w.h.s.liveConsumer
		require.LessOrEqual(t, since, max(25, 2*live)+live+max(8, written))
	}
	require.NotEmpty(t, w.snapshots)
	// A snapshot restates exactly the live records.
	s := w.h.replayed(w.snapshots[len(w.snapshots)-1])
	require.Equal(t, w.h.view(w.h.replayed(0)), w.h.view(s))
}
