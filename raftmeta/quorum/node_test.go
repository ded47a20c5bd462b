package quorum

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

type nopSM struct{}

func (nopSM) Apply(Applied) error          { return nil }
func (nopSM) Snapshot() ([]byte, error)    { return nil, nil }
func (nopSM) Restore(uint64, []byte) error { return nil }
func (nopSM) LeaderChanged(uint64, uint64) {}
func (nopSM) Activated(uint64)             {}
func (nopSM) Send([]*pb.Message)           {}

func TestNodeRefusesBadConfig(t *testing.T) {
	h := newDiskHarness(t, 1)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dir: testDir}, "ID must not be 0"},
		{Config{ID: 1}, "Dir is required"},
		{Config{ID: 1, Dir: testDir, ElectionTicks: 2, HeartbeatTicks: 2}, "must exceed HeartbeatTicks"},
		{Config{ID: 1, Dir: testDir, Voters: []uint64{0, 1}}, "voter id 0"},
		{Config{ID: 1, Dir: testDir, TickInterval: -time.Second}, "negative"},
	} {
		_, err := Open(h.n.Env(), tc.cfg, nopSM{}, nopSM{})
		require.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}
	_, err := Open(h.n.Env(), Config{ID: 1, Dir: testDir}, nil, nopSM{})
	require.ErrorContains(t, err, "state machine")
}

// call runs f on m's loop with a done that records its error, and runs the
// world until done ran.
func (c *simCluster) call(t *testing.T, m *simMember, f func(qn *Node, done func(error))) error {
	t.Helper()
	var got error
	called := false
	m.sn.Post(func() { f(m.qn, func(err error) { got, called = err, true }) })
	require.True(t, c.w.RunUntil(func() bool { return called }, 30*time.Second), "done never ran")
	return got
}

func TestNodeSingleVoterAppliesSnapshotsAndRestarts(t *testing.T) {
	c := newSimCluster(t, 3, quietSimConfig(1, 1))
	m := c.waitLeader(t)
	require.Equal(t, m.qn.Status().Term, m.sm.activate, "Activated for the leader's term")
	for i := range 120 {
		v := fmt.Sprintf("v%d", i)
		require.NoError(t, c.call(t, m, func(qn *Node, done func(error)) { qn.Propose([]byte(v), done) }))
		require.True(t, m.sm.values[v], "applied before done")
		c.o.acked[v] = true
	}
	st := m.qn.Status()
	require.Equal(t, "leader", st.Role)
	require.Positive(t, st.Snapshot)
	require.Equal(t, st.Commit, st.Applied)
	require.Equal(t, []uint64{1}, st.Config.GetVoters())
	require.Len(t, st.Progress, 1)
	require.Equal(t, st.LastIndex, st.Progress[0].Match)

	m.sn.Crash()
	m.qn = nil
	m.sn.Restart()
	m = c.waitLeader(t)
	require.Positive(t, c.o.probes["snapshot restored on open"])
	require.True(t, c.w.RunUntil(c.converged, 10*time.Second), c.missing())
	require.Len(t, m.sm.values, 120)
	c.requireNoViolations(t, 3)
}

func TestNodeProposalErrors(t *testing.T) {
	c := newSimCluster(t, 4, quietSimConfig(3, 3))
	for _, id := range []uint64{2, 3} {
		c.simMember(id).sn.Crash()
		c.simMember(id).down = true
	}
	c.w.Run(3 * time.Second)
	one := c.simMember(1)
	err := c.call(t, one, func(qn *Node, done func(error)) { qn.Propose([]byte("x"), done) })
	require.ErrorIs(t, err, ErrNotLeader, "one of three voters cannot lead")

	c.restart(c.simMember(2))
	c.restart(c.simMember(3))
	l := c.waitLeader(t)
	err = c.call(t, l, func(qn *Node, done func(error)) { qn.Propose(make([]byte, MaxEntryBytes+1), done) })
	require.ErrorIs(t, err, ErrEntryTooLarge)
	err = c.call(t, l, func(qn *Node, done func(error)) {
		cc := confChangeOf(pb.ConfChangeRemoveNode, 1)
		cc.Changes = append(cc.Changes, confChangeOf(pb.ConfChangeRemoveNode, 2).Changes...)
		cc.Changes = append(cc.Changes, confChangeOf(pb.ConfChangeRemoveNode, 3).Changes...)
		cc.Transition = pb.ConfChangeTransitionJointImplicit.Enum()
		qn.ChangeMembership(cc, done)
	})
	require.ErrorContains(t, err, "removed all voters")
	var second error
	err = c.call(t, l, func(qn *Node, done func(error)) {
		qn.ChangeMembership(confChangeOf(pb.ConfChangeAddLearnerNode, 7), done)
		qn.ChangeMembership(confChangeOf(pb.ConfChangeAddLearnerNode, 8), func(err error) { second = err })
	})
	require.NoError(t, err)
	require.ErrorIs(t, second, ErrMembershipChangePending)
	require.Contains(t, l.qn.Status().Config.GetLearners(), uint64(7))

	// A leader cut off from the others keeps its proposals pending until
	// it steps down (CheckQuorum), then fails them: their outcome unknown.
	for _, m := range c.members {
		if m != l {
			c.cut[[2]uint64{l.id, m.id}], c.cut[[2]uint64{m.id, l.id}] = true, true
		}
	}
	err = c.call(t, l, func(qn *Node, done func(error)) { qn.Propose([]byte("cut off"), done) })
	require.ErrorIs(t, err, ErrLeadershipLost)
	clear(c.cut)
	c.waitLeader(t)

	// Close fails what is pending and refuses what comes after.
	l = c.waitLeader(t)
	var pending, closed error
	err = c.call(t, l, func(qn *Node, done func(error)) {
		qn.Propose([]byte("pending at close"), func(err error) { pending = err })
		qn.Close(done)
		qn.Propose([]byte("after close"), func(err error) { closed = err })
	})
	require.NoError(t, err)
	c.w.Run(time.Millisecond)
	require.ErrorIs(t, pending, ErrClosed)
	require.ErrorIs(t, closed, ErrClosed)
	err = c.call(t, l, func(qn *Node, done func(error)) { qn.Close(done) })
	require.ErrorIs(t, err, ErrClosed)
	c.requireNoViolations(t, 4)
}

func TestNodeStateMachineErrorStopsTheNode(t *testing.T) {
	c := newSimCluster(t, 5, quietSimConfig(1, 1))
	var failed []error
	c.cfg.node.OnFailure = func(err error) { failed = append(failed, err) }
	c.failOn = "poison"
	m := c.waitLeader(t)
	qn := m.qn
	err := c.call(t, m, func(qn *Node, done func(error)) { qn.Propose([]byte("poison"), done) })
	require.ErrorContains(t, err, "cannot apply poison")
	c.w.Run(time.Second)
	require.Len(t, failed, 1, "OnFailure runs once")
	require.ErrorContains(t, qn.Err(), "cannot apply poison")
	err = c.call(t, m, func(qn *Node, done func(error)) { qn.Propose([]byte("after"), done) })
	require.ErrorContains(t, err, "cannot apply poison")
}

func TestRaftLoggerPanicsLoudly(t *testing.T) {
	h := newDiskHarness(t, 6)
	l := raftLogger{h.n.Env().Log}
	require.PanicsWithValue(t, "raft: broken 7", func() { l.Panicf("broken %d", 7) })
	require.PanicsWithValue(t, "raft: fatal", func() { l.Fatal("fatal") })
}

func TestProposalHeaderRoundTrips(t *testing.T) {
	h := header{proposer: 3, nonce: 0xdeadbeef, seq: 42}
	got, data, err := parseHeader(h.prepend([]byte("payload")))
	require.NoError(t, err)
	require.Equal(t, h, got)
	require.Equal(t, "payload", string(data))
	_, _, err = parseHeader([]byte("short"))
	require.Error(t, err)
	_, _, err = parseHeader(make([]byte, headerBytes))
	require.True(t, err != nil && !errors.Is(err, ErrClosed))
}

// TestNodeSnapshotsByTime: with entries and bytes thresholds far away, a
// snapshot still comes once SnapshotInterval has passed since the last one
// with entries applied since, and none comes while nothing is applied.
func TestNodeSnapshotsByTime(t *testing.T) {
	cfg := quietSimConfig(1, 1)
	cfg.node = Config{SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40, SnapshotInterval: 2 * time.Second}
	c := newSimCluster(t, 5, cfg)
	m := c.waitLeader(t)
	snapshot := func() uint64 { return m.qn.Status().Snapshot }
	propose := func(v string) uint64 {
		require.NoError(t, c.call(t, m, func(qn *Node, done func(error)) { qn.Propose([]byte(v), done) }))
		return m.qn.Status().Applied
	}
	// The configuration and the leader's empty entry are applied: they
	// are snapshotted once the interval from the start has passed.
	require.True(t, c.w.RunUntil(func() bool { return snapshot() > 0 }, 3*time.Second), "no snapshot by time")
	first := snapshot()
	c.w.Run(5 * time.Second)
	require.Equal(t, first, snapshot(), "a snapshot with nothing new applied")

	// The interval has long passed: the next tick after an entry takes one.
	applied := propose("a")
	require.True(t, c.w.RunUntil(func() bool { return snapshot() == applied }, 200*time.Millisecond), "no snapshot of a new entry")
	applied = propose("b")
	c.w.Run(time.Second)
	require.NotEqual(t, applied, snapshot(), "a snapshot before the interval ran out")
	c.w.Run(1500 * time.Millisecond)
	require.Equal(t, applied, snapshot(), "no snapshot once the interval ran out")
}

func TestNodeConfirmLeadership(t *testing.T) {
	sole := newSimCluster(t, 6, quietSimConfig(1, 1))
	m := sole.waitLeader(t)
	require.NoError(t, sole.call(t, m, func(qn *Node, done func(error)) { qn.ConfirmLeadership(done) }), "a sole voter confirms itself")

	c := newSimCluster(t, 7, quietSimConfig(3, 3))
	l := c.waitLeader(t)
	require.NoError(t, c.call(t, l, func(qn *Node, done func(error)) { qn.ConfirmLeadership(done) }))
	var committedAtCall, appliedAtAnswer uint64
	err := c.call(t, l, func(qn *Node, done func(error)) {
		committedAtCall = qn.Status().Commit
		qn.ConfirmLeadership(func(err error) { appliedAtAnswer = qn.Status().Applied; done(err) })
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, appliedAtAnswer, committedAtCall, "a confirmed read has applied what was committed when it was made")
	for _, f := range c.members {
		if f != l {
			err := c.call(t, f, func(qn *Node, done func(error)) { qn.ConfirmLeadership(done) })
			require.ErrorIs(t, err, ErrNotLeader, "node %d follows", f.id)
			break
		}
	}

	// A leader cut off from the others never confirms: the read fails
	// once it steps down (CheckQuorum), and a new leader confirms.
	for _, o := range c.members {
		if o != l {
			c.cut[[2]uint64{l.id, o.id}], c.cut[[2]uint64{o.id, l.id}] = true, true
		}
	}
	err = c.call(t, l, func(qn *Node, done func(error)) { qn.ConfirmLeadership(done) })
	require.ErrorIs(t, err, ErrLeadershipUnconfirmed)
	clear(c.cut)

	// A leader paused until another is elected resumes believing it
	// leads; what it is asked at once must not be confirmed.
	l = c.waitLeader(t)
	l.sn.Pause()
	require.True(t, c.w.RunUntil(func() bool { n := c.leader(); return n != nil && n != l }, 10*time.Second), "no new leader")
	var stale error
	called := false
	l.sn.Resume()
	l.sn.Post(func() {
		require.Equal(t, "leader", l.qn.Status().Role, "resumed before it heard of the new term")
		l.qn.ConfirmLeadership(func(err error) { stale, called = err, true })
	})
	require.True(t, c.w.RunUntil(func() bool { return called }, 10*time.Second))
	require.ErrorIs(t, stale, ErrLeadershipUnconfirmed)

	// Close fails a read in flight.
	l = c.waitLeader(t)
	var pending error
	err = c.call(t, l, func(qn *Node, done func(error)) {
		qn.ConfirmLeadership(func(err error) { pending = err })
		qn.Close(done)
	})
	require.NoError(t, err)
	c.w.Run(time.Millisecond)
	require.ErrorIs(t, pending, ErrClosed)
	c.requireNoViolations(t, 7)
}
