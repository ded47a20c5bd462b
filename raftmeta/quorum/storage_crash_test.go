package quorum

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/sim/rng"
)

// sweepSeeds returns how many seeds a sweep runs: n, or SLUICE_SEEDS when set.
func sweepSeeds(t testing.TB, n int) int {
	if v := os.Getenv("SLUICE_SEEDS"); v != "" {
		k, err := strconv.Atoi(v)
		require.NoError(t, err, "SLUICE_SEEDS")
		return k
	}
	if testing.Short() {
		return max(1, n/5)
	}
	return n
}

// logModel is what a sequence of writes leaves in the log: the entries
// (index -> "index/term/data"), the last index, and base, at or below which
// the entries are a snapshot's and no longer known.
type logModel struct {
	testEntries map[uint64]string
	last, base  uint64
	term, vote  uint64
	commit      uint64
	snapIdx     uint64 // the latest snapshot made durable
	baseTerm    uint64 // the term of entry base
}

// nextTerm is the term the next leader's writes take: the entries (or the
// snapshot) may have outlived the hard state of their term when both were
// in flight at a crash, so it is above both.
func (m *logModel) nextTerm() uint64 {
	t := m.baseTerm
	if m.last > m.base {
		t = parseEntry(m.testEntries[m.last]).GetTerm()
	}
	return max(m.term, t) + 1
}

func (m *logModel) clone() *logModel {
	c := *m
	c.testEntries = maps.Clone(m.testEntries)
	return &c
}

func (m *logModel) at(i uint64) string {
	if m == nil || i <= m.base || i > m.last {
		return ""
	}
	return m.testEntries[i]
}

// crashWrite is one Save in flight: the model it leads to, and what kind.
type crashWrite struct {
	kind   string // "append", "overwrite", "install", "hardstate"
	from   uint64 // an overwrite's or install's first changed index
	target *logModel
}

// crashRun drives one storage through seeded writes, crashes or kills it at
// seeded moments, and checks each recovery against the model.
type crashRun struct {
	t     *testing.T
	h     *diskHarness
	r     *rng.Rand
	cfg   StorageConfig
	s     *Storage
	acked *logModel
	// snaps holds the data of every snapshot ever started, by index.
	snaps   map[uint64]string
	ownSnap bool // an own CreateSnapshot is in flight
	// snapAcked is the latest snapshot index whose write completed.
	snapAcked uint64
	probes    map[string]int
}

func TestStorageCrashRecovery(t *testing.T) {
	probes := map[string]int{}
	defer func() {
		t.Logf("probes: %v", probes)
		if t.Failed() {
			return
		}
		// A sweep that never reaches these moments tests nothing there.
		for _, p := range []string{"torn tail", "torn header", "stale segment removed", "overwrite in flight", "install in flight", "own snapshot in flight", "kill"} {
			require.Positive(t, probes[p], "the sweep never reached %q", p)
		}
	}()
	for seed := range uint64(sweepSeeds(t, 150)) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newDiskHarness(t, seed)
			r := h.w.Rand("storage-ops")
			run := &crashRun{t: t, h: h, r: r, snaps: map[uint64]string{}, probes: probes,
				cfg:   StorageConfig{SegmentBytes: int64(100 + r.Intn(1500)), CompactionMargin: uint64(1 + r.Intn(30))},
				acked: &logModel{testEntries: map[uint64]string{}}}
			run.s = h.mustOpen(run.cfg)
			require.NoError(t, h.wait(run.s.Sync))
			for round := 0; round < 4; round++ {
				run.round(20 + r.Intn(40))
			}
		})
	}
}

// round makes writes until one is cut by a crash or kill, then recovers.
func (c *crashRun) round(ops int) {
	for op := 0; ; op++ {
		w := c.nextWrite()
		crashNow := op >= ops || c.r.Chance(0.05)
		if c.r.Chance(0.15) && !c.ownSnap && c.acked.commit > c.acked.snapIdx {
			c.startOwnSnapshot()
		}
		done := false
		c.issue(w, func(err error) {
			require.NoError(c.t, err)
			done = true
		})
		if !crashNow {
			require.True(c.t, c.h.w.RunUntil(func() bool { return done }, time.Minute))
			c.acked = w.target
			if w.kind == "install" {
				c.snapAcked = w.from
			}
			c.same(w)
			continue
		}
		for k := c.r.Intn(12); k > 0 && !done && c.h.w.Step(); k-- {
		}
		if done {
			c.acked = w.target
			if w.kind == "install" {
				c.snapAcked = w.from
			}
			w = nil
		}
		c.recover(w)
		return
	}
}

// nextWrite draws the next Save and the model it leads to.
func (c *crashRun) nextWrite() *crashWrite {
	a := c.acked
	b := a.clone()
	floor := max(a.commit, a.snapIdx, a.base)
	switch p := c.r.Float64(); {
	case p < 0.08:
		b.term = a.nextTerm()
		b.vote = uint64(1 + c.r.Intn(3))
		return &crashWrite{kind: "hardstate", target: b}
	case p < 0.14 && a.last > a.commit:
		b.commit = a.commit + 1 + c.r.Uint64n(a.last-a.commit)
		return &crashWrite{kind: "hardstate", target: b}
	case p < 0.26 && a.last > floor+1:
		i := floor + 1 + c.r.Uint64n(a.last-floor)
		b.term = a.nextTerm()
		for j := i; j <= a.last; j++ {
			delete(b.testEntries, j)
		}
		b.last = i - 1
		c.appendTo(b, 1+c.r.Intn(8))
		return &crashWrite{kind: "overwrite", from: i, target: b}
	case p < 0.30:
		s := a.last + 1 + c.r.Uint64n(40)
		b.term = a.nextTerm()
		b.baseTerm = b.term
		b.testEntries, b.base, b.last, b.snapIdx, b.commit = map[uint64]string{}, s, s, s, s
		c.snaps[s] = fmt.Sprintf("leader@%d", s)
		if c.r.Chance(0.5) {
			c.appendTo(b, 1+c.r.Intn(4))
		}
		return &crashWrite{kind: "install", from: s, target: b}
	}
	c.appendTo(b, 1+c.r.Intn(6))
	if c.r.Chance(0.5) {
		b.commit = b.commit + c.r.Uint64n(b.last-b.commit+1)
	}
	return &crashWrite{kind: "append", target: b}
}

func (c *crashRun) appendTo(m *logModel, n int) {
	if t := m.nextTerm() - 1; m.term < t || m.term == 0 {
		m.term = max(t, 1)
	}
	for range n {
		m.last++
		m.testEntries[m.last] = fmt.Sprintf("%d/%d/%s", m.last, m.term, strings.Repeat("x", c.r.Intn(120)))
	}
}

// issue starts the Save that leads from the acknowledged model to w's.
func (c *crashRun) issue(w *crashWrite, done func(error)) {
	a, b := c.acked, w.target
	var es []*pb.Entry
	from := a.last + 1
	switch w.kind {
	case "overwrite", "install":
		from = w.from
	}
	for i := from; i <= b.last; i++ {
		if w.kind == "install" && i == w.from {
			continue
		}
		es = append(es, parseEntry(b.testEntries[i]))
	}
	var snap *pb.Snapshot
	if w.kind == "install" {
		snap = snapshotAt(w.from, b.term, c.snaps[w.from], 1)
	}
	hs := hardState(b.term, b.vote, b.commit)
	c.s.Save(hs, es, snap, done)
}

func parseEntry(desc string) *pb.Entry {
	parts := strings.SplitN(desc, "/", 3)
	index, _ := strconv.ParseUint(parts[0], 10, 64)
	term, _ := strconv.ParseUint(parts[1], 10, 64)
	return testEntry(index, term, parts[2])
}

// startOwnSnapshot snapshots at a committed index, concurrently with the
// Saves that follow.
func (c *crashRun) startOwnSnapshot() {
	a := c.acked
	lo := max(a.snapIdx, a.base, c.snapAcked)
	if a.commit <= lo {
		return
	}
	idx := lo + 1 + c.r.Uint64n(a.commit-lo)
	c.snaps[idx] = fmt.Sprintf("own@%d", idx)
	c.ownSnap = true
	c.s.CreateSnapshot(idx, &pb.ConfState{Voters: []uint64{1}}, []byte(c.snaps[idx]), func(err error) {
		require.NoError(c.t, err)
		c.ownSnap = false
		c.snapAcked = max(c.snapAcked, idx)
	})
}

// recover crashes (or kills) the process with w in flight (nil if none),
// reopens, checks the recovered state, and adopts it as acknowledged.
func (c *crashRun) recover(w *crashWrite) {
	t := c.t
	crash := c.r.Chance(0.7)
	if c.ownSnap {
		c.probes["own snapshot in flight"]++
	}
	if w != nil {
		c.probes[w.kind+" in flight"]++
	}
	if !crash {
		c.probes["kill"]++
	}
	c.ownSnap = false
	c.h.restart(crash)
	s, err := c.h.open(c.cfg)
	require.NoError(t, err)
	rec := s.Recovered()
	switch {
	case rec.TornFile != "" && rec.TornOffset == 0:
		c.probes["torn header"]++
	case rec.TornFile != "":
		c.probes["torn tail"]++
	}
	for _, name := range rec.Removed {
		if strings.HasSuffix(name, segmentSuffix) {
			c.probes["stale segment removed"]++
		}
	}
	got := c.check(s, w)
	if !crash {
		// Killed: what was read may be in the page cache only. After
		// Sync, a power loss must not take any of it.
		require.NoError(t, c.h.wait(s.Sync))
		c.h.restart(true)
		s, err = c.h.open(c.cfg)
		require.NoError(t, err)
		require.Equal(t, got, c.state(s), "a power loss after Sync changed what recovery had read")
	} else {
		require.NoError(t, c.h.wait(s.Sync))
	}
	c.s = s
}

// same checks that the storage holds the acknowledged model's entries.
func (c *crashRun) same(w *crashWrite) {
	for _, e := range logOf(c.t, c.s) {
		if i := parseEntry(e).GetIndex(); i > c.acked.base {
			require.Equal(c.t, c.acked.testEntries[i], e, "after write %+v, at %d", w, i)
		}
	}
	last, _ := c.s.LastIndex()
	require.Equal(c.t, c.acked.last, last, "after write %+v", w)
}

// state describes what a storage holds, for comparison.
func (c *crashRun) state(s *Storage) string {
	snap, _ := s.Snapshot()
	hs, _, _ := s.InitialState()
	return fmt.Sprintf("snap=%d/%s hs=%d/%d/%d log=%v", snap.GetMetadata().GetIndex(), snap.GetData(), hs.GetTerm(), hs.GetVote(), hs.GetCommit(), logOf(c.t, s))
}

// check holds the recovered storage against the model: a snapshot at least
// as new as the last acknowledged, every acknowledged entry present, the
// crashWrite in flight either absent, complete, or cut short (never mixed with
// the log it replaced), and the hard state one of the two.
func (c *crashRun) check(s *Storage, w *crashWrite) string {
	t := c.t
	a := c.acked
	var b *logModel
	if w != nil {
		b = w.target
	}
	snap, _ := s.Snapshot()
	rs := snap.GetMetadata().GetIndex()
	require.GreaterOrEqual(t, rs, max(a.snapIdx, c.snapAcked), "an acknowledged snapshot was lost")
	if rs > 0 {
		require.Equal(t, c.snaps[rs], string(snap.GetData()), "snapshot %d holds the wrong data", rs)
	}
	fromB := b != nil && w.kind == "install" && rs == w.from
	minLast := a.last
	switch {
	case fromB:
		minLast = w.from
	case b != nil && w.kind == "overwrite":
		minLast = w.from - 1
	}
	maxLast := a.last
	if b != nil {
		maxLast = max(a.last, b.last)
	}
	last, _ := s.LastIndex()
	require.GreaterOrEqual(t, last, minLast, "acknowledged entries were lost (write in flight: %v)", w)
	require.LessOrEqual(t, last, maxLast)
	side := ""
	if fromB {
		side = "b"
	}
	for _, e := range logOf(t, s) {
		i := parseEntry(e).GetIndex()
		ea, eb := a.at(i), b.at(i)
		if i <= a.base && !fromB || fromB && i <= b.base {
			continue
		}
		switch {
		case e == ea && e == eb:
		case e == ea && side != "b":
			side = "a"
		case e == eb && side != "a":
			side = "b"
		default:
			t.Fatalf("entry %q is neither the acknowledged %q nor the one in flight %q (side %q)", e, ea, eb, side)
		}
	}
	hs, _, _ := s.InitialState()
	okA := hs.GetTerm() == a.term && hs.GetVote() == a.vote
	okB := b != nil && hs.GetTerm() == b.term && hs.GetVote() == b.vote
	require.True(t, okA || okB, "hard state %v is neither the acknowledged nor the one in flight", hs)
	require.LessOrEqual(t, hs.GetCommit(), last)
	require.GreaterOrEqual(t, hs.GetCommit(), rs)
	require.GreaterOrEqual(t, hs.GetCommit(), min(a.commit, last), "an acknowledged commit index went back")

	// Adopt what survived as acknowledged: the log from the side its
	// entries came from, the hard state and snapshot as recovered.
	src := a
	if side == "b" || fromB || side == "" && b != nil && last > a.last {
		src = b
	}
	next := src.clone()
	for j := last + 1; j <= next.last; j++ {
		delete(next.testEntries, j)
	}
	next.last = last
	next.term, next.vote, next.commit = hs.GetTerm(), hs.GetVote(), hs.GetCommit()
	next.snapIdx = rs
	if fromB {
		next.baseTerm = snap.GetMetadata().GetTerm()
	}
	for _, e := range logOf(t, s) {
		if i := parseEntry(e).GetIndex(); i > next.base {
			require.Equal(t, next.testEntries[i], e, "the model adopted (side %q, write %+v) differs from the storage at %d", side, w, i)
		}
	}
	c.acked = next
	return c.state(s)
}
