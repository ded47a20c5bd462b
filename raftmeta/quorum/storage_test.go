package quorum

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/simfs"
	"google.golang.org/protobuf/proto"
)

const testDir = "__cluster_metadata-0"

// diskHarness runs a Storage on one simulated machine with no process of
// its own: the test body calls the storage, and wait runs the world until a
// callback has run.
type diskHarness struct {
	t *testing.T
	w *sim.World
	n *sim.Node
}

func newDiskHarness(t *testing.T, seed uint64) *diskHarness {
	w := sim.New(seed)
	return &diskHarness{t: t, w: w, n: w.AddNode("a", nil)}
}

func (h *diskHarness) open(cfg StorageConfig) (*Storage, error) {
	if cfg.Dir == "" {
		cfg.Dir = testDir
	}
	return OpenStorage(h.n.Env(), cfg)
}

func (h *diskHarness) mustOpen(cfg StorageConfig) *Storage {
	h.t.Helper()
	s, err := h.open(cfg)
	require.NoError(h.t, err)
	return s
}

// wait starts op and runs the world until op's callback ran, returning its
// error.
func (h *diskHarness) wait(op func(done func(error))) error {
	h.t.Helper()
	var got error
	called := false
	op(func(err error) { got, called = err, true })
	require.True(h.t, h.w.RunUntil(func() bool { return called }, time.Minute), "callback never ran")
	return got
}

func (h *diskHarness) save(s *Storage, hs *pb.HardState, testEntries []*pb.Entry, snap *pb.Snapshot) error {
	h.t.Helper()
	return h.wait(func(done func(error)) { s.Save(hs, testEntries, snap, done) })
}

// restart ends the process (a power loss when crash, else kill -9) and
// boots a new one on the same disk.
func (h *diskHarness) restart(crash bool) {
	if crash {
		h.n.Crash()
	} else {
		h.n.Kill()
	}
	h.n.Restart()
}

func testEntry(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func testEntries(from, to, term uint64, tag string) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, testEntry(i, term, fmt.Sprintf("%s-%d", tag, i)))
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func snapshotAt(index, term uint64, data string, voters ...uint64) *pb.Snapshot {
	return &pb.Snapshot{Data: []byte(data), Metadata: &pb.SnapshotMetadata{
		Index: new(index), Term: new(term), ConfState: pb.EnsureConfState(&pb.ConfState{Voters: voters}),
	}}
}

// logOf returns the entries raft can read, as "index/term/data".
func logOf(t *testing.T, s *Storage) []string {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last < first {
		return nil
	}
	es, err := s.Entries(first, last+1, ^uint64(0))
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%d/%d/%s", e.GetIndex(), e.GetTerm(), e.GetData()))
	}
	return out
}

func describeEntries(es []*pb.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%d/%d/%s", e.GetIndex(), e.GetTerm(), e.GetData()))
	}
	return out
}

func (h *diskHarness) list() []string {
	names, err := h.n.Disk().List(testDir)
	require.NoError(h.t, err)
	return names
}

func TestStorageFreshDirectoryIsEmpty(t *testing.T) {
	h := newDiskHarness(t, 1)
	s := h.mustOpen(StorageConfig{})
	require.True(t, s.Recovered().Fresh)
	hs, cs, err := s.InitialState()
	require.NoError(t, err)
	require.True(t, raft.IsEmptyHardState(hs))
	require.Empty(t, cs.GetVoters())
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	require.Equal(t, uint64(1), first)
	require.Equal(t, uint64(0), last)
	term, err := s.Term(0)
	require.NoError(t, err)
	require.Zero(t, term)
	_, err = s.Entries(1, 1, 100)
	require.NoError(t, err)
	_, err = s.Term(1)
	require.ErrorIs(t, err, raft.ErrUnavailable)
}

func TestStorageAppendsSurviveCrashOnceAcknowledged(t *testing.T) {
	h := newDiskHarness(t, 2)
	s := h.mustOpen(StorageConfig{SegmentBytes: 100})
	require.NoError(t, h.wait(s.Sync))
	for i := uint64(1); i <= 25; i += 5 {
		require.NoError(t, h.save(s, hardState(1, 1, i-1), testEntries(i, i+4, 1, "a"), nil))
	}
	require.NoError(t, h.save(s, hardState(1, 1, 10), nil, nil))
	want := logOf(t, s)
	require.Len(t, want, 25)
	require.Greater(t, len(s.segs), 2, "small segments roll")

	h.restart(true)
	s2 := h.mustOpen(StorageConfig{SegmentBytes: 100})
	require.Equal(t, want, logOf(t, s2))
	hs, _, _ := s2.InitialState()
	require.Equal(t, uint64(1), hs.GetTerm())
	require.Equal(t, uint64(1), hs.GetVote())
	require.Equal(t, uint64(10), hs.GetCommit())
	require.Empty(t, s2.Recovered().TornFile)

	es, err := s2.Entries(3, 20, 1) // a size limit still returns one entry
	require.NoError(t, err)
	require.Len(t, es, 1)
	es, err = s2.Entries(3, 20, uint64(3*proto.Size(es[0])))
	require.NoError(t, err)
	require.Len(t, es, 3)
}

func TestStorageOverwriteCutsTheLogDurablyFirst(t *testing.T) {
	h := newDiskHarness(t, 3)
	cfg := StorageConfig{SegmentBytes: 200}
	s := h.mustOpen(cfg)
	require.NoError(t, h.wait(s.Sync))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(1, 30, 1, "old"), nil))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(31, 40, 1, "old"), nil))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(41, 60, 1, "old"), nil))
	require.Greater(t, len(s.segs), 2)

	// A new leader of term 2 overwrites from index 8, inside the first
	// segment: every later segment goes.
	require.NoError(t, h.save(s, hardState(2, 3, 7), testEntries(8, 12, 2, "new"), nil))
	want := append(describeEntries(testEntries(1, 7, 1, "old")), describeEntries(testEntries(8, 12, 2, "new"))...)
	require.Equal(t, want, logOf(t, s))
	require.Len(t, s.segs, 1)
	require.Equal(t, []string{segmentName(1), hardStateName}, h.list())

	h.restart(true)
	s2 := h.mustOpen(cfg)
	require.Equal(t, want, logOf(t, s2))
	require.NoError(t, h.wait(s2.Sync))
	require.NoError(t, h.save(s2, nil, testEntries(13, 13, 2, "next"), nil))
	require.Equal(t, append(want, "13/2/next-13"), logOf(t, s2))
}

func TestStorageSnapshotCompactsBehindAMargin(t *testing.T) {
	h := newDiskHarness(t, 4)
	cfg := StorageConfig{SegmentBytes: 150, CompactionMargin: 10}
	s := h.mustOpen(cfg)
	require.NoError(t, h.wait(s.Sync))
	for i := uint64(1); i <= 100; i += 10 {
		require.NoError(t, h.save(s, hardState(1, 1, i+9), testEntries(i, i+9, 1, "e"), nil))
	}
	nsegs := len(s.segs)
	require.NoError(t, h.wait(func(done func(error)) {
		s.CreateSnapshot(50, &pb.ConfState{Voters: []uint64{1}}, []byte("state@50"), done)
	}))
	first, _ := s.FirstIndex()
	require.Equal(t, uint64(41), first, "entries down to the margin stay readable")
	require.Less(t, len(s.segs), nsegs, "segments wholly below the margin are removed")
	require.LessOrEqual(t, s.segs[0].header.first, uint64(41))
	snap, _ := s.Snapshot()
	require.Equal(t, uint64(50), snap.GetMetadata().GetIndex())
	require.Equal(t, uint64(1), snap.GetMetadata().GetTerm())
	_, err := s.Entries(40, 45, 1<<20)
	require.ErrorIs(t, err, raft.ErrCompacted)

	for _, idx := range []uint64{70, 90} {
		require.NoError(t, h.wait(func(done func(error)) {
			s.CreateSnapshot(idx, &pb.ConfState{Voters: []uint64{1}}, []byte(fmt.Sprintf("state@%d", idx)), done)
		}))
	}
	var checkpoints []string
	for _, name := range h.list() {
		if strings.HasSuffix(name, checkpointSuffix) {
			checkpoints = append(checkpoints, name)
		}
	}
	require.Equal(t, []string{checkpointName(70, 1), checkpointName(90, 1)}, checkpoints, "the latest two are kept")
	err = h.wait(func(done func(error)) { s.CreateSnapshot(80, &pb.ConfState{}, nil, done) })
	require.ErrorIs(t, err, raft.ErrSnapOutOfDate)

	h.restart(true)
	s2 := h.mustOpen(cfg)
	snap, _ = s2.Snapshot()
	require.Equal(t, uint64(90), snap.GetMetadata().GetIndex())
	require.Equal(t, "state@90", string(snap.GetData()))
	last, _ := s2.LastIndex()
	require.Equal(t, uint64(100), last)
	first, _ = s2.FirstIndex()
	require.LessOrEqual(t, first, uint64(81))
	_, cs, _ := s2.InitialState()
	require.Equal(t, []uint64{1}, cs.GetVoters())
}

func TestStorageInstallsALeadersSnapshotAsANewLog(t *testing.T) {
	h := newDiskHarness(t, 5)
	cfg := StorageConfig{SegmentBytes: 150}
	s := h.mustOpen(cfg)
	require.NoError(t, h.wait(s.Sync))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(1, 20, 1, "old"), nil))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(21, 40, 1, "old"), nil))
	// The leader of term 3 sends a snapshot at 500, and entries after it.
	require.NoError(t, h.save(s, hardState(3, 0, 500), testEntries(501, 503, 3, "new"), snapshotAt(500, 3, "leader-state", 1, 2, 3)))
	require.Equal(t, describeEntries(testEntries(501, 503, 3, "new")), logOf(t, s))
	term, err := s.Term(500)
	require.NoError(t, err)
	require.Equal(t, uint64(3), term)
	require.Equal(t, uint64(1), s.gen)
	require.Equal(t, []string{checkpointName(500, 3), segmentName(501), hardStateName}, h.list())

	h.restart(true)
	s2 := h.mustOpen(cfg)
	require.Equal(t, describeEntries(testEntries(501, 503, 3, "new")), logOf(t, s2))
	hs, cs, _ := s2.InitialState()
	require.Equal(t, uint64(500), hs.GetCommit())
	require.Equal(t, []uint64{1, 2, 3}, cs.GetVoters())
}

func TestStorageRecoveryRemovesSegmentsAnInstalledSnapshotReplaced(t *testing.T) {
	h := newDiskHarness(t, 6)
	cfg := StorageConfig{SegmentBytes: 150}
	s := h.mustOpen(cfg)
	require.NoError(t, h.wait(s.Sync))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(1, 20, 1, "old"), nil))
	require.NoError(t, h.save(s, hardState(1, 1, 5), testEntries(21, 900, 1, "old"), nil))
	// Keep the old segments on the medium: their removals never reach it.
	stale := slices.DeleteFunc(h.list(), func(n string) bool { return !strings.HasSuffix(n, segmentSuffix) })
	require.NoError(t, h.save(s, hardState(2, 0, 500), nil, snapshotAt(500, 2, "leader", 1)))
	for _, name := range stale {
		f, err := h.n.Disk().Create(testDir + "/" + name)
		require.NoError(t, err)
		_, err = f.Write(segmentBytes(t, segmentHeader{gen: 0, first: mustFirst(name)}, nil))
		require.NoError(t, err)
		f.Close()
	}
	h.restart(false)
	s2 := h.mustOpen(cfg)
	require.ElementsMatch(t, stale, s2.Recovered().Removed)
	require.Empty(t, logOf(t, s2))
	last, _ := s2.LastIndex()
	require.Equal(t, uint64(500), last)
}

func mustFirst(name string) uint64 {
	first, ok := parseSegmentName(name)
	if !ok {
		panic(name)
	}
	return first
}

// segmentBytes encodes a whole segment, as the storage writes one.
func segmentBytes(t *testing.T, h segmentHeader, es []*pb.Entry) []byte {
	buf := appendStorageFrame(nil, h.encode())
	for _, e := range es {
		body, err := encodeEntry(e)
		require.NoError(t, err)
		buf = appendStorageFrame(buf, body)
	}
	return buf
}

func TestStorageCutsAndReportsATornTail(t *testing.T) {
	h := newDiskHarness(t, 7)
	s := h.mustOpen(StorageConfig{})
	require.NoError(t, h.wait(s.Sync))
	require.NoError(t, h.save(s, hardState(1, 1, 3), testEntries(1, 3, 1, "a"), nil))
	s.Close()
	name := testDir + "/" + segmentName(1)
	f, err := h.n.Disk().Open(name)
	require.NoError(t, err)
	size, _ := f.Size()
	frame := segmentBytes(t, segmentHeader{}, testEntries(4, 4, 1, "torn"))[frameHeaderBytes+segmentHeaderBody:]
	_, err = f.WriteAt(frame[:len(frame)-3], size) // the last append, cut short
	require.NoError(t, err)
	f.Close()

	s2 := h.mustOpen(StorageConfig{})
	rec := s2.Recovered()
	require.Equal(t, segmentName(1), rec.TornFile)
	require.Equal(t, size, rec.TornOffset)
	require.Equal(t, int64(len(frame)-3), rec.TornBytes)
	require.Equal(t, describeEntries(testEntries(1, 3, 1, "a")), logOf(t, s2))
	require.NoError(t, h.wait(s2.Sync))
	require.NoError(t, h.save(s2, nil, testEntries(4, 4, 1, "b"), nil))
	h.restart(true)
	s3 := h.mustOpen(StorageConfig{})
	require.Empty(t, s3.Recovered().TornFile)
	require.Equal(t, append(describeEntries(testEntries(1, 3, 1, "a")), "4/1/b-4"), logOf(t, s3))
}

func TestStorageRefusesWritesAfterAFailedSync(t *testing.T) {
	h := newDiskHarness(t, 8)
	s := h.mustOpen(StorageConfig{})
	require.NoError(t, h.wait(s.Sync))
	require.NoError(t, h.n.Disk().FailNext(simfs.OpSync, errors.New("injected EIO")))
	err := h.save(s, hardState(1, 1, 0), testEntries(1, 2, 1, "a"), nil)
	require.ErrorContains(t, err, "injected EIO")
	err = h.save(s, nil, testEntries(1, 1, 1, "b"), nil)
	require.ErrorContains(t, err, "reopen to recover")
	require.NoError(t, s.Close())
	require.ErrorIs(t, h.save(s, nil, nil, nil), ErrStorageClosed)
}
