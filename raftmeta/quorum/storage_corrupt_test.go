package quorum

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// corruptSetup writes a log of several segments, snapshots as asked, and
// closes the storage; the files are all durable.
func corruptSetup(t *testing.T, margin uint64, snapshots ...uint64) (*diskHarness, StorageConfig) {
	h := newDiskHarness(t, 11)
	cfg := StorageConfig{SegmentBytes: 200, CompactionMargin: margin}
	s := h.mustOpen(cfg)
	require.NoError(t, h.wait(s.Sync))
	for i := uint64(1); i <= 60; i += 6 {
		require.NoError(t, h.save(s, hardState(1, 1, i+5), testEntries(i, i+5, 1, "e"), nil))
	}
	for _, idx := range snapshots {
		require.NoError(t, h.wait(func(done func(error)) {
			s.CreateSnapshot(idx, &pb.ConfState{Voters: []uint64{1}}, []byte("state"), done)
		}))
	}
	require.NoError(t, s.Close())
	return h, cfg
}

// image returns every file of the quorum's directory with its contents.
func (h *diskHarness) image() map[string]string {
	out := map[string]string{}
	for _, name := range h.list() {
		data, err := readFile(h.n.Disk(), testDir+"/"+name)
		require.NoError(h.t, err)
		out[name] = string(data)
	}
	return out
}

func (h *diskHarness) segments() []string {
	var out []string
	for _, name := range h.list() {
		if strings.HasSuffix(name, segmentSuffix) {
			out = append(out, name)
		}
	}
	return out
}

// requireCorrupt opens the storage, requires a *CorruptError naming file
// (and offset, unless negative), and requires the directory unchanged.
func requireCorrupt(t *testing.T, h *diskHarness, cfg StorageConfig, file string, offset int64, reason string) {
	t.Helper()
	before := h.image()
	_, err := h.open(cfg)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce), "want a CorruptError, got %v", err)
	require.Equal(t, file, ce.File, "%v", err)
	if offset >= 0 {
		require.Equal(t, offset, ce.Offset, "%v", err)
	}
	require.Contains(t, err.Error(), reason)
	require.Contains(t, err.Error(), testDir+"/"+file, "the error names the file")
	require.Equal(t, before, h.image(), "a failed open changed the directory")
}

func TestStorageCorruptMiddleSegmentIsAnError(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	segs := h.segments()
	require.Greater(t, len(segs), 3)
	victim := segs[1]
	s := h.mustOpen(cfg)
	off := s.segs[1].offsets[2] + 10 // inside the third entry's frame
	s.Close()
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+victim, off))
	requireCorrupt(t, h, cfg, victim, s.segs[1].offsets[2], "fails its checksum")
}

func TestStorageCorruptFrameWithWholeFramesAfterInTheLastSegment(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	segs := h.segments()
	victim := segs[len(segs)-1]
	s := h.mustOpen(cfg)
	last := s.segs[len(s.segs)-1]
	require.GreaterOrEqual(t, len(last.offsets), 2)
	s.Close()
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+victim, last.offsets[0]+9))
	requireCorrupt(t, h, cfg, victim, last.offsets[0], "a whole frame starts at offset")
}

func TestStorageMissingMiddleSegmentIsAnError(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	segs := h.segments()
	require.NoError(t, h.n.Disk().Remove(testDir+"/"+segs[2]))
	requireCorrupt(t, h, cfg, segs[3], 0, "is a segment missing after "+segs[1])
}

func TestStorageCorruptNewestCheckpointWithoutCoverIsAnError(t *testing.T) {
	h, cfg := corruptSetup(t, 5, 20, 50)
	newest := checkpointName(50, 1)
	require.Contains(t, h.list(), newest)
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+newest, 30))
	// The older snapshot at 20 is not continued by the log, compacted to 45.
	requireCorrupt(t, h, cfg, newest, 0, "fails its checksum")
}

func TestStorageCorruptNewestCheckpointFallsBackToACoveredOlderOne(t *testing.T) {
	h, cfg := corruptSetup(t, 1000, 20, 50)
	newest := checkpointName(50, 1)
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+newest, 30))
	s := h.mustOpen(cfg)
	rec := s.Recovered()
	require.Equal(t, newest, rec.SkippedCheckpoint)
	require.Contains(t, rec.SkippedReason, "checksum")
	snap, _ := s.Snapshot()
	require.Equal(t, uint64(20), snap.GetMetadata().GetIndex())
	last, _ := s.LastIndex()
	require.Equal(t, uint64(60), last)
	require.NotContains(t, h.list(), newest)
}

func TestStorageCorruptHardStateIsAnError(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+hardStateName, 12))
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+hardStateName, hardStateSlotBytes+12))
	requireCorrupt(t, h, cfg, hardStateName, 0, "neither slot holds a valid hard state")

	h2, cfg2 := corruptSetup(t, 1000)
	require.NoError(t, h2.n.Disk().Remove(testDir+"/"+hardStateName))
	requireCorrupt(t, h2, cfg2, hardStateName, 0, "missing")
}

func TestStorageOneDamagedHardStateSlotFallsBackToTheOther(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	s := h.mustOpen(cfg)
	latest := s.hsDurable
	hs := s.HardState()
	s.Close()
	require.NoError(t, h.n.Disk().FlipBit(testDir+"/"+hardStateName, int64(latest*hardStateSlotBytes+12)))
	s2 := h.mustOpen(cfg)
	got := s2.HardState()
	require.Equal(t, hs.GetTerm(), got.GetTerm())
	require.LessOrEqual(t, got.GetCommit(), hs.GetCommit(), "the older slot holds an older commit")
}

func TestStorageReadsAgainBeforeBelievingDamage(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	s := h.mustOpen(cfg)
	want := logOf(t, s)
	s.Close()
	for range 3 {
		h.n.Disk().FlipNextRead()
		s := h.mustOpen(cfg)
		require.Equal(t, want, logOf(t, s))
		require.Empty(t, s.Recovered().TornFile)
		s.Close()
	}
}

func TestStorageSegmentFromTheWrongPlaceIsAnError(t *testing.T) {
	h, cfg := corruptSetup(t, 1000)
	segs := h.segments()
	// A segment whose header names another first index: copied or renamed
	// by hand.
	data, err := readFile(h.n.Disk(), testDir+"/"+segs[1])
	require.NoError(t, err)
	f, err := h.n.Disk().Create(testDir + "/" + segs[2])
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	f.Close()
	requireCorrupt(t, h, cfg, segs[2], 0, "its header says it starts at")
}
