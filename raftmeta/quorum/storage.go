package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/internal/invariants"
)

// StorageConfig configures a Storage. Zero fields take their defaults.
type StorageConfig struct {
	// Dir is the directory of the log, the snapshots and the hard state in
	// the node's env.FS, such as "__cluster_metadata-0".
	Dir string
	// SegmentBytes is the size past which the next append starts a new
	// segment (default 4 MiB). Compaction removes whole segments, so a
	// segment much larger than the entries between two snapshots would
	// never be removed.
	SegmentBytes int64
	// CompactionMargin is how many entries below a snapshot's index the
	// log keeps (default 5000), so that a follower lagging a little behind
	// catches up from the log instead of by a snapshot.
	CompactionMargin uint64
	// KeepSnapshots is how many of the latest snapshots stay on disk
	// (default 2).
	KeepSnapshots int
	// Logger receives what recovery and compaction did; nil discards.
	Logger *slog.Logger
}

// Defaults of StorageConfig.
const (
	DefaultSegmentBytes     = 4 << 20
	DefaultCompactionMargin = 5000
	DefaultKeepSnapshots    = 2
)

func (c *StorageConfig) withDefaults() (StorageConfig, error) {
	out := *c
	if out.Dir == "" {
		return out, errors.New("metadata quorum storage: Dir is required")
	}
	if out.SegmentBytes < 0 || out.KeepSnapshots < 0 {
		return out, fmt.Errorf("metadata quorum storage: negative SegmentBytes %d or KeepSnapshots %d", out.SegmentBytes, out.KeepSnapshots)
	}
	if out.SegmentBytes == 0 {
		out.SegmentBytes = DefaultSegmentBytes
	}
	if out.CompactionMargin == 0 {
		out.CompactionMargin = DefaultCompactionMargin
	}
	if out.KeepSnapshots == 0 {
		out.KeepSnapshots = DefaultKeepSnapshots
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

// Storage is raft's durable storage on an env.FS: a log of entries in
// segments, snapshots in checkpoint files, and the hard state in a file of
// two slots (the package documentation describes the files and why each
// write is ordered as it is). It implements raft.Storage from memory: raft
// sees an entry, a snapshot or a hard state only once it is durable.
//
// Save and CreateSnapshot write; each calls back on the loop once what it
// wrote is durable. One Save runs at a time (raft hands out one Ready at a
// time); a CreateSnapshot may run beside it. After any write fails the
// storage refuses every later one: the disk's state is then unknown, and
// only recovery (OpenStorage) can say what it holds.
type Storage struct {
	loop env.Loop
	fs   env.FS
	cfg  StorageConfig
	log  *slog.Logger

	// What raft sees, all durable. ents[0] is a dummy holding the index and
	// term of the entry before the first one raft may read (the last one
	// compacted, or the snapshot's); the rest are the entries after it.
	hs   *pb.HardState
	snap *pb.Snapshot
	ents []*pb.Entry

	// gen is the generation of the live log (see segmentHeader): the
	// latest snapshot's, bumped by each snapshot received from a leader.
	gen uint64
	// segs are the live log's segments in index order; the last is active,
	// open in active, and takes the appends.
	segs   []*segment
	active env.File
	// checkpoints are the snapshot files on disk, by index.
	checkpoints []checkpointFile

	// The hard state file: hsDurable is the slot holding the latest
	// durable hard state, so writes go to the other one and a torn write
	// leaves it intact; hsLatest is the slot written last (the same one
	// once a sync covers that write); hsSeq numbers the writes.
	hsFile    env.File
	hsDurable int
	hsLatest  int
	hsSeq     uint64

	saving       bool // a Save is in flight
	snapshotting int  // CreateSnapshots in flight
	failed       error
	closed       bool
	recovery     Recovery
}

// segment is one segment file of the live log.
type segment struct {
	name   string
	header segmentHeader
	// size is the length of its whole frames: appends go there.
	size int64
	// offsets[k] is where the frame of entry header.first+k starts, so an
	// overwrite can cut the file there.
	offsets []int64
}

// last returns the index of the segment's last entry (first-1 if empty).
func (s *segment) last() uint64 { return s.header.first + uint64(len(s.offsets)) - 1 }

type checkpointFile struct {
	index, term uint64
	name        string
}

var _ raft.Storage = (*Storage)(nil)

// ErrStorageClosed is returned by writes to a closed Storage.
var ErrStorageClosed = errors.New("metadata quorum storage is closed")

func (s *Storage) path(name string) string { return path.Join(s.cfg.Dir, name) }

// usable returns why the storage refuses writes, or nil.
func (s *Storage) usable() error {
	if s.closed {
		return ErrStorageClosed
	}
	return s.failed
}

// fail records the first write failure; every later write is refused.
func (s *Storage) fail(err error) error {
	if s.failed == nil {
		s.failed = fmt.Errorf("metadata quorum storage %s failed, reopen to recover: %w", s.cfg.Dir, err)
		s.log.Error("metadata quorum storage failed", "dir", s.cfg.Dir, "err", err)
	}
	return s.failed
}

// post calls done with err on a later loop turn, never inside the caller.
func (s *Storage) post(done func(error), err error) { s.loop.Post(func() { done(err) }) }

// Recovered returns what OpenStorage found and did.
func (s *Storage) Recovered() Recovery { return s.recovery }

// ---- raft.Storage, served from memory ----

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return proto.Clone(s.hs).(*pb.HardState), pb.EnsureConfState(proto.Clone(s.snap.GetMetadata().GetConfState()).(*pb.ConfState)), nil
}

// Entries implements raft.Storage.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	offset := s.ents[0].GetIndex()
	if lo <= offset {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 || lo > hi {
		return nil, fmt.Errorf("entries [%d, %d) out of range [%d, %d]: %w", lo, hi, offset+1, s.lastIndex(), raft.ErrUnavailable)
	}
	ents := s.ents[lo-offset : hi-offset]
	var size uint64
	for i, e := range ents {
		size += uint64(proto.Size(e))
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	// The full slice expression makes an append by raft copy, rather than
	// write over the entries that follow.
	return ents[:len(ents):len(ents)], nil
}

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) {
	offset := s.ents[0].GetIndex()
	if i < offset {
		return 0, raft.ErrCompacted
	}
	if i-offset >= uint64(len(s.ents)) {
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-offset].GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) { return s.lastIndex(), nil }

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) { return s.firstIndex(), nil }

// Snapshot implements raft.Storage: the latest durable snapshot. Callers
// must not modify it.
func (s *Storage) Snapshot() (*pb.Snapshot, error) { return s.snap, nil }

func (s *Storage) lastIndex() uint64  { return s.ents[0].GetIndex() + uint64(len(s.ents)) - 1 }
func (s *Storage) firstIndex() uint64 { return s.ents[0].GetIndex() + 1 }

// term returns the term of entry i, which must be in memory.
func (s *Storage) term(i uint64) uint64 {
	t, err := s.Term(i)
	if err != nil {
		invariants.Panicf("quorum storage: term of %d asked outside [%d, %d]: %v", i, s.ents[0].GetIndex(), s.lastIndex(), err)
	}
	return t
}

// HardState returns the latest durable hard state.
func (s *Storage) HardState() *pb.HardState { return proto.Clone(s.hs).(*pb.HardState) }

// ---- writes ----

// Save makes a Ready's snapshot, entries and hard state durable, in that
// order, and then calls done on the loop. Entries at an index the log
// already holds overwrite it: the log is cut there durably before the new
// entries are written.
//
// The hard state is synced whenever it changes, its commit index included,
// although raft's Ready.MustSync asks only for term and vote: etcd raft
// switches configurations when their entries are applied, and refuses to
// campaign with a committed configuration change unapplied; a node whose
// commit index went back at a restart replays an older configuration and
// may win an election in it while another node wins the same term in the
// newer one. (The simulated sweep found exactly that: a leader that had
// applied a joint change lost its commit index to a power loss, came back
// with the old voters, and led a term beside a leader of the new ones.)
// Since entries are applied only once their Ready is durable, the durable
// commit index is never below what was applied.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, done func(error)) {
	if err := s.usable(); err != nil {
		s.post(done, err)
		return
	}
	if invariants.Enabled && s.saving {
		invariants.Panicf("quorum storage: Save while a Save is in flight")
	}
	s.saving = true
	finish := func(err error) {
		s.saving = false
		if err != nil {
			err = s.fail(err)
		}
		done(err)
	}
	var steps []func(next func(error))
	if !raft.IsEmptySnap(snap) {
		steps = append(steps, func(next func(error)) { s.installSnapshot(snap, next) })
	}
	if len(ents) > 0 {
		steps = append(steps, func(next func(error)) { s.truncateFor(ents[0].GetIndex(), next) })
	}
	steps = append(steps, func(next func(error)) { s.appendEntries(hs, ents, next) })
	s.runSteps(steps, finish)
}

// runSteps runs asynchronous steps one after another, stopping at the first
// error.
func (s *Storage) runSteps(steps []func(func(error)), done func(error)) {
	if len(steps) == 0 {
		done(nil)
		return
	}
	steps[0](func(err error) {
		if err != nil {
			done(err)
			return
		}
		s.runSteps(steps[1:], done)
	})
}

// truncateFor cuts the log before index i if it holds i: an overwrite by a
// new leader. The cut is durable before next runs, so no new entry can be
// acknowledged while an old one after it could still come back. Later
// segments go first, one at a time from the last, each removal synced, so
// that a crash anywhere leaves a log with no hole: a prefix of the old one.
func (s *Storage) truncateFor(i uint64, next func(error)) {
	if i > s.lastIndex() {
		next(nil)
		return
	}
	if i <= s.ents[0].GetIndex() {
		next(fmt.Errorf("an append at index %d would overwrite compacted or snapshotted entries (first index %d)", i, s.firstIndex()))
		return
	}
	k := len(s.segs) - 1
	for k > 0 && s.segs[k].header.first > i {
		k--
	}
	if k < 0 || s.segs[k].header.first > i || s.segs[k].last() < i {
		next(fmt.Errorf("no segment holds entry %d of the log [%d, %d]", i, s.firstIndex(), s.lastIndex()))
		return
	}
	// A compaction may remove segments before it meanwhile: hold the
	// segment, not its position.
	seg := s.segs[k]
	s.removeAfter(seg, func(err error) {
		if err != nil {
			next(err)
			return
		}
		if s.active == nil {
			f, err := s.fs.Open(s.path(seg.name))
			if err != nil {
				next(fmt.Errorf("open segment %s to truncate it: %w", seg.name, err))
				return
			}
			s.active = f
		}
		keep := i - seg.header.first
		cut := seg.offsets[keep]
		if err := s.active.Truncate(cut); err != nil {
			next(fmt.Errorf("truncate segment %s at %d: %w", seg.name, cut, err))
			return
		}
		s.log.Info("metadata log truncated for an overwrite", "segment", seg.name, "index", i, "offset", cut)
		seg.size, seg.offsets = cut, seg.offsets[:keep]
		s.active.Sync(func(err error) {
			if err != nil {
				next(fmt.Errorf("sync segment %s after truncating it: %w", seg.name, err))
				return
			}
			s.ents = s.ents[:i-s.ents[0].GetIndex()]
			next(nil)
		})
	})
}

// removeAfter removes the segments after seg, last first, syncing the
// directory after each.
func (s *Storage) removeAfter(seg *segment, done func(error)) {
	if s.segs[len(s.segs)-1] == seg {
		done(nil)
		return
	}
	last := s.segs[len(s.segs)-1]
	s.closeActive()
	if err := s.fs.Remove(s.path(last.name)); err != nil {
		done(fmt.Errorf("remove segment %s for an overwrite: %w", last.name, err))
		return
	}
	s.segs = s.segs[:len(s.segs)-1]
	s.fs.SyncDir(s.cfg.Dir, func(err error) {
		if err != nil {
			done(fmt.Errorf("sync directory %s after removing %s: %w", s.cfg.Dir, last.name, err))
			return
		}
		s.removeAfter(seg, done)
	})
}

func (s *Storage) closeActive() {
	if s.active != nil {
		s.active.Close()
		s.active = nil
	}
}

// appendEntries writes ents after the log's last entry and hs to its slot,
// and syncs them: the segment (and the directory, when the segment is new)
// and the hard state file.
func (s *Storage) appendEntries(hs *pb.HardState, ents []*pb.Entry, next func(error)) {
	b := newJoin(s.loop, func(err error) {
		if err == nil {
			s.ents = append(s.ents, ents...)
			if !raft.IsEmptyHardState(hs) {
				s.hs = proto.Clone(hs).(*pb.HardState)
			}
		}
		next(err)
	})
	if len(ents) > 0 {
		if err := s.writeEntries(ents, b); err != nil {
			b.fail(err)
		}
	}
	if !raft.IsEmptyHardState(hs) {
		if err := s.writeHardState(hs, b); err != nil {
			b.fail(err)
		}
	}
	b.arm()
}

func (s *Storage) writeEntries(ents []*pb.Entry, b *join) error {
	first := ents[0].GetIndex()
	if first != s.lastIndex()+1 {
		return fmt.Errorf("append at index %d to a log ending at %d", first, s.lastIndex())
	}
	var buf []byte
	var rel []int64 // each frame's offset within buf
	for k, e := range ents {
		if invariants.Enabled && (e.GetIndex() != first+uint64(k) || e.GetTerm() < s.term(first-1)) {
			invariants.Panicf("quorum storage: entry %d (term %d) at position %d of an append from %d after term %d", e.GetIndex(), e.GetTerm(), k, first, s.term(first-1))
		}
		body, err := encodeEntry(e)
		if err != nil {
			return fmt.Errorf("encode entry %d: %w", e.GetIndex(), err)
		}
		if len(body) > frameMax {
			return fmt.Errorf("entry %d of %d bytes exceeds the frame limit of %d", e.GetIndex(), len(body), frameMax)
		}
		rel = append(rel, int64(len(buf)))
		buf = appendStorageFrame(buf, body)
	}
	rolled := false
	if len(s.segs) == 0 || s.segs[len(s.segs)-1].size >= s.cfg.SegmentBytes {
		if err := s.roll(first); err != nil {
			return err
		}
		rolled = true
	}
	seg := s.segs[len(s.segs)-1]
	if _, err := s.active.WriteAt(buf, seg.size); err != nil {
		return fmt.Errorf("append to segment %s: %w", seg.name, err)
	}
	for _, r := range rel {
		seg.offsets = append(seg.offsets, seg.size+r)
	}
	seg.size += int64(len(buf))
	name := seg.name
	s.active.Sync(b.add(func(err error) error {
		if err != nil {
			return fmt.Errorf("sync segment %s: %w", name, err)
		}
		return nil
	}))
	if rolled {
		s.fs.SyncDir(s.cfg.Dir, b.add(func(err error) error {
			if err != nil {
				return fmt.Errorf("sync directory %s for new segment %s: %w", s.cfg.Dir, name, err)
			}
			return nil
		}))
	}
	return nil
}

// roll starts a new segment whose first entry will be first. The previous
// segment's writes were all synced by earlier Saves (a batch never spans
// two segments), so a crash can tear only the last segment.
func (s *Storage) roll(first uint64) error {
	s.closeActive()
	name := segmentName(first)
	f, err := s.fs.Create(s.path(name))
	if err != nil {
		return fmt.Errorf("create segment %s: %w", name, err)
	}
	h := segmentHeader{gen: s.gen, first: first, prevTerm: s.term(first - 1)}
	frame := appendStorageFrame(nil, h.encode())
	if _, err := f.WriteAt(frame, 0); err != nil {
		f.Close()
		return fmt.Errorf("write header of segment %s: %w", name, err)
	}
	s.active = f
	s.segs = append(s.segs, &segment{name: name, header: h, size: int64(len(frame))})
	return nil
}

// writeHardState writes hs to the slot not holding the latest durable one,
// and syncs it.
func (s *Storage) writeHardState(hs *pb.HardState, b *join) error {
	s.hsSeq++
	slotBytes, err := encodeHardStateSlot(s.hsSeq, hs)
	if err != nil {
		return err
	}
	slot := 1 - s.hsDurable
	if _, err := s.hsFile.WriteAt(slotBytes, int64(slot*hardStateSlotBytes)); err != nil {
		return fmt.Errorf("write hard state: %w", err)
	}
	s.hsLatest = slot
	s.syncHardState(b)
	return nil
}

// syncHardState syncs the hard state file; once done, the slot last
// written holds the latest durable hard state.
func (s *Storage) syncHardState(b *join) {
	written := s.hsLatest
	s.hsFile.Sync(b.add(func(err error) error {
		if err != nil {
			return fmt.Errorf("sync hard state: %w", err)
		}
		s.hsDurable = written
		return nil
	}))
}

// installSnapshot makes a snapshot received from the leader durable and
// starts a new log after it, of a new generation: raft hands over a
// snapshot only when the log does not hold its last entry, so nothing of
// the old log survives it.
func (s *Storage) installSnapshot(snap *pb.Snapshot, next func(error)) {
	gen := s.gen + 1
	s.writeCheckpoint(gen, snap, func(err error) {
		if err != nil {
			next(err)
			return
		}
		// The checkpoint is durable, and its generation makes every
		// segment of the old log stale, in whatever order their removals
		// reach the disk.
		s.closeActive()
		for _, seg := range s.segs {
			if err := s.fs.Remove(s.path(seg.name)); err != nil {
				s.log.Warn("stale metadata segment not removed; recovery removes it", "segment", seg.name, "err", err)
			}
		}
		s.segs = nil
		s.gen = gen
		s.setSnapshot(snap)
		md := snap.GetMetadata()
		s.ents = []*pb.Entry{{Index: new(md.GetIndex()), Term: new(md.GetTerm())}}
		s.log.Info("metadata snapshot installed", "index", md.GetIndex(), "term", md.GetTerm(), "generation", gen)
		next(nil)
	})
}

// writeCheckpoint writes snap to <name>.part, syncs it, renames it to its
// name and syncs the directory, then calls done.
func (s *Storage) writeCheckpoint(gen uint64, snap *pb.Snapshot, done func(error)) {
	md := snap.GetMetadata()
	name := checkpointName(md.GetIndex(), md.GetTerm())
	part := name + partSuffix
	body, err := encodeCheckpoint(gen, snap)
	if err == nil && len(body) > checkpointFrameMax {
		err = fmt.Errorf("snapshot of %d bytes exceeds the limit of %d", len(body), checkpointFrameMax)
	}
	if err != nil {
		s.post(done, fmt.Errorf("encode checkpoint %s: %w", name, err))
		return
	}
	f, err := s.fs.Create(s.path(part))
	if err != nil {
		s.post(done, fmt.Errorf("create checkpoint %s: %w", part, err))
		return
	}
	if _, err := f.WriteAt(appendStorageFrame(nil, body), 0); err != nil {
		f.Close()
		s.post(done, fmt.Errorf("write checkpoint %s: %w", part, err))
		return
	}
	f.Sync(func(err error) {
		f.Close()
		if err != nil {
			done(fmt.Errorf("sync checkpoint %s: %w", part, err))
			return
		}
		if err := s.fs.Rename(s.path(part), s.path(name)); err != nil {
			done(fmt.Errorf("rename checkpoint %s: %w", part, err))
			return
		}
		s.fs.SyncDir(s.cfg.Dir, func(err error) {
			if err != nil {
				done(fmt.Errorf("sync directory %s for checkpoint %s: %w", s.cfg.Dir, name, err))
				return
			}
			s.checkpoints = append(s.checkpoints, checkpointFile{index: md.GetIndex(), term: md.GetTerm(), name: name})
			slices.SortFunc(s.checkpoints, func(a, b checkpointFile) int {
				if a.index != b.index {
					return cmpUint(a.index, b.index)
				}
				return cmpUint(a.term, b.term)
			})
			s.pruneCheckpoints()
			done(nil)
		})
	})
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// setSnapshot makes snap the one raft sees, and the hard state's commit
// index at least its index.
func (s *Storage) setSnapshot(snap *pb.Snapshot) {
	s.snap = snap
	if idx := snap.GetMetadata().GetIndex(); s.hs.GetCommit() < idx {
		hs := proto.Clone(s.hs).(*pb.HardState)
		hs.Commit = new(idx)
		s.hs = hs
	}
}

// pruneCheckpoints removes all but the latest KeepSnapshots checkpoints.
// The removals need no sync: a crash that brings one back brings back an
// older snapshot, which recovery passes over.
func (s *Storage) pruneCheckpoints() {
	for len(s.checkpoints) > s.cfg.KeepSnapshots {
		old := s.checkpoints[0]
		if err := s.fs.Remove(s.path(old.name)); err != nil {
			s.log.Warn("old metadata checkpoint not removed", "checkpoint", old.name, "err", err)
			return
		}
		s.checkpoints = s.checkpoints[1:]
	}
}

// CreateSnapshot makes a snapshot of the state machine at index (an applied
// entry, so one the log holds durably) with the configuration cs and the
// state machine's data, then compacts the log: segments wholly below index
// minus the compaction margin go, and checkpoints beyond the latest
// KeepSnapshots. done runs on the loop once the snapshot is durable.
func (s *Storage) CreateSnapshot(index uint64, cs *pb.ConfState, data []byte, done func(error)) {
	if err := s.usable(); err != nil {
		s.post(done, err)
		return
	}
	if index <= s.snap.GetMetadata().GetIndex() {
		s.post(done, raft.ErrSnapOutOfDate)
		return
	}
	if index > s.lastIndex() {
		s.post(done, fmt.Errorf("snapshot at %d is past the log's last index %d", index, s.lastIndex()))
		return
	}
	snap := &pb.Snapshot{
		Data: data,
		Metadata: &pb.SnapshotMetadata{
			ConfState: pb.EnsureConfState(proto.Clone(cs).(*pb.ConfState)),
			Index:     new(index),
			Term:      new(s.term(index)),
		},
	}
	gen := s.gen
	s.snapshotting++
	s.writeCheckpoint(gen, snap, func(err error) {
		s.snapshotting--
		if err != nil {
			done(s.fail(err))
			return
		}
		if s.gen != gen || index <= s.snap.GetMetadata().GetIndex() {
			// A snapshot from the leader was installed meanwhile: this one
			// is older, and stays on disk only until pruned.
			done(nil)
			return
		}
		s.setSnapshot(snap)
		s.compact(index)
		done(nil)
	})
}

// compact drops the entries up to index minus the margin from memory, and
// removes the segments wholly below that point (never the active one). A
// removal that a crash undoes leaves a segment below the snapshot, which
// recovery removes again.
func (s *Storage) compact(index uint64) {
	if index <= s.cfg.CompactionMargin {
		return
	}
	c := index - s.cfg.CompactionMargin
	offset := s.ents[0].GetIndex()
	if c > offset {
		s.ents = append([]*pb.Entry(nil), s.ents[c-offset:]...)
	}
	for len(s.segs) > 1 && s.segs[1].header.first-1 <= c {
		old := s.segs[0]
		if err := s.fs.Remove(s.path(old.name)); err != nil {
			s.log.Warn("compacted metadata segment not removed", "segment", old.name, "err", err)
			return
		}
		s.segs = s.segs[1:]
	}
}

// Sync makes everything recovery read durable, then calls done: after a
// process is killed, what it wrote and never synced stays in the page cache,
// where the next process reads it, and a power loss may still take it. A
// node calls it before it acts on anything it recovered.
func (s *Storage) Sync(done func(error)) {
	if err := s.usable(); err != nil {
		s.post(done, err)
		return
	}
	b := newJoin(s.loop, func(err error) {
		if err != nil {
			err = s.fail(err)
		}
		done(err)
	})
	s.syncHardState(b)
	for i, seg := range s.segs {
		if i == len(s.segs)-1 && s.active != nil {
			s.active.Sync(b.add(nil))
			continue
		}
		s.syncFile(seg.name, b)
	}
	for _, c := range s.checkpoints {
		s.syncFile(c.name, b)
	}
	// The directory's entries, and its own entry in each ancestor (Open
	// may have just made them).
	for dir := s.cfg.Dir; ; dir = path.Dir(dir) {
		s.fs.SyncDir(dir, b.add(nil))
		if dir == "." || dir == "/" {
			break
		}
	}
	b.arm()
}

func (s *Storage) syncFile(name string, b *join) {
	f, err := s.fs.Open(s.path(name))
	if err != nil {
		b.fail(fmt.Errorf("open %s to sync it: %w", name, err))
		return
	}
	done := b.add(nil)
	f.Sync(func(err error) {
		f.Close()
		if err != nil {
			err = fmt.Errorf("sync %s: %w", name, err)
		}
		done(err)
	})
}

// Close closes the storage's files. A write in flight still completes, but
// its result no longer matters to anyone.
func (s *Storage) Close() error {
	if s.closed {
		return ErrStorageClosed
	}
	s.closed = true
	s.closeActive()
	if s.hsFile != nil {
		return s.hsFile.Close()
	}
	return nil
}

// join calls done once every callback it handed out has been called and it
// has been armed, with the first error; done always runs on a later loop
// turn than arm.
type join struct {
	loop    env.Loop
	pending int
	armed   bool
	err     error
	done    func(error)
}

func newJoin(loop env.Loop, done func(error)) *join { return &join{loop: loop, done: done} }

// add returns a completion; wrap (if not nil) turns its error into the one
// reported, and may act on success.
func (j *join) add(wrap func(error) error) func(error) {
	j.pending++
	return func(err error) {
		if wrap != nil {
			err = wrap(err)
		}
		j.fail(err)
		j.pending--
		j.check()
	}
}

// fail records err if it is the first.
func (j *join) fail(err error) {
	if err != nil && j.err == nil {
		j.err = err
	}
}

func (j *join) arm() {
	j.armed = true
	if j.pending == 0 {
		j.pending = 1 // hold check off until the posted turn
		j.loop.Post(func() {
			j.pending--
			j.check()
		})
	}
}

func (j *join) check() {
	if j.armed && j.pending == 0 && j.done != nil {
		done := j.done
		j.done = nil
		done(j.err)
	}
}
