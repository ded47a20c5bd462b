package log

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Truncation changes the log in memory at once and on disk only behind a
// barrier (see flush.go), in this order: a checkpoint with the recovery point
// lowered to the new end is made durable, then the files are cut, removed
// and created (pendingOps), then everything is synced, and only then are
// appends accepted again. A crash before the checkpoint is durable finds the
// files untouched; after it, whatever state the files are in lies above the
// recovery point, where recovery checks every batch. Cutting a file first
// could leave a segment below a durable recovery point shorter than the
// recovery point promised, since a crash may keep any prefix of the
// unsynced changes of a file, truncations included.

// pendingOp is a file change a truncation has made in memory and the barrier
// makes on disk.
type pendingOp struct {
	kind opKind
	seg  *segment
	pos  int64  // opCut: the size to cut the log file to
	name string // opRemoveFile
}

type opKind int8

const (
	opCut        opKind = iota // cut seg's log to pos and its index files to its indexes
	opRemove                   // close and remove seg's files
	opRemoveFile               // remove name
	opCreate                   // create seg's files (empty, active)
)

// applyPending makes the pending file changes, in order.
func (l *Log) applyPending() error {
	for len(l.dur.pending) > 0 {
		op := l.dur.pending[0]
		l.dur.pending = l.dur.pending[1:]
		switch op.kind {
		case opCut:
			s := op.seg
			if err := s.log.f.Truncate(op.pos); err != nil {
				return fmt.Errorf("truncate %s.log to %d: %w", s.path, op.pos, err)
			}
			s.log.changes++
			if err := s.truncateIndexFiles(l.cfg.IndexBytesMax); err != nil {
				l.cfg.Logger.Warn("index truncation failed", "segment", s.path, "err", err)
			}
			if s == l.active() {
				if err := s.preallocate(l.cfg.IndexBytesMax); err != nil {
					l.cfg.Logger.Warn("index preallocation failed", "segment", s.path, "err", err)
				}
			}
		case opRemove:
			if err := l.deleteSegmentFiles(op.seg); err != nil {
				return err
			}
		case opRemoveFile:
			l.dur.dirDirty = true
			if err := l.fs.Remove(op.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", op.name, err)
			}
		case opCreate:
			created, err := createSegment(l.fs, l.dir, op.seg.base, l.clock.Now(), l.cfg.IndexBytesMax)
			if err != nil {
				return fmt.Errorf("create segment at %d: %w", op.seg.base, err)
			}
			op.seg.log, op.seg.idxF, op.seg.tsF = created.log, created.idxF, created.tsF
			op.seg.preallocated = true
			l.dur.dirDirty = true
		}
	}
	return nil
}

// TruncateTo removes every batch that ends at or after offset, as a follower
// does after OffsetForLeaderEpoch. Batches are removed whole, so the log end
// becomes the base offset of the batch holding offset (offset itself when it
// falls on a batch boundary). Nothing happens if offset is at or past the
// log end. A truncation to or below the first segment's base offset is
// TruncateFullyAndStartAt(offset), as in Kafka.
//
// The log refuses appends (ErrNotReady) until the truncation is durable;
// Ready says when.
func (l *Log) TruncateTo(offset int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if offset < 0 {
		return newError(kerr.OffsetOutOfRange, "cannot truncate to offset %d", offset)
	}
	if offset >= l.LogEndOffset() {
		return nil
	}
	if offset <= l.segs[0].base {
		return l.TruncateFullyAndStartAt(offset)
	}
	i := l.segmentFor(offset)
	s := l.segs[i]
	pos, h, err := l.locate(s, s.reader(), offset)
	if err != nil {
		return err
	}
	end := s.next
	if pos < s.size {
		end = h.BaseOffset
	}
	for _, later := range l.segs[i+1:] {
		l.dur.pending = append(l.dur.pending, pendingOp{kind: opRemove, seg: later})
	}
	clear(l.segs[i+1:])
	l.segs = l.segs[:i+1]
	l.dur.pending = append(l.dur.pending, pendingOp{kind: opCut, seg: s, pos: pos})
	s.size, s.next = pos, end
	s.recent = nil
	s.idx.truncateAt(pos, end)
	s.tix.truncateFrom(end)
	s.idxWritten = min(s.idxWritten, len(s.idx.buf))
	s.tixWritten = min(s.tixWritten, len(s.tix.buf))
	s.bytesSinceIndex = 0
	if pos == 0 {
		s.created, s.firstTs = l.clock.Now(), noTimestamp
	}
	if err := l.recomputeMaxTimestamp(s); err != nil {
		l.fail(fmt.Errorf("recompute the max timestamp after truncation: %w", err))
		return l.failed
	}
	l.afterTruncation(end)
	l.checkInvariants()
	return nil
}

// recomputeMaxTimestamp finds a segment's max timestamp after a truncation:
// from its time index's last entry, then the batches after it.
func (l *Log) recomputeMaxTimestamp(s *segment) error {
	s.maxTs, s.maxTsOffset = noTimestamp, -1
	from := s.base
	if ts, off, ok := s.tix.last(); ok {
		s.maxTs, s.maxTsOffset, from = ts, off, off
	}
	r := s.reader()
	pos, h, err := l.locate(s, r, from)
	if err != nil || pos >= s.size {
		return err
	}
	_, _, err = s.walk(r, pos, h.BaseOffset, -1, func(_ int64, h *header) bool {
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.lastOffset()
		}
		return true
	})
	return err
}

// afterTruncation brings everything derived from the log in line with a log
// that now ends at end, and starts the barrier.
func (l *Log) afterTruncation(end int64) {
	l.logStart = min(l.logStart, end)
	l.epochs.truncateFromEnd(end)
	l.onTruncate(end)
	l.removeSnapshotsLater(func(o int64) bool { return o > end })
	if err := l.rebuildProducers(); err != nil {
		l.fail(fmt.Errorf("rebuild producer state after truncation: %w", err))
		return
	}
	l.startBarrier()
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, as a
// follower does when its log lies wholly outside the leader's. Like
// TruncateTo, it is followed by a barrier.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if offset < 0 {
		return newError(kerr.OffsetOutOfRange, "cannot restart the log at offset %d", offset)
	}
	for _, s := range l.segs {
		l.dur.pending = append(l.dur.pending, pendingOp{kind: opRemove, seg: s})
	}
	l.removeSnapshotsLater(func(int64) bool { return true })
	s := newSegmentState(l.dir, offset, l.clock.Now())
	l.dur.pending = append(l.dur.pending, pendingOp{kind: opCreate, seg: s})
	l.segs = []*segment{s}
	l.logStart = offset
	l.epochs = epochCache{}
	l.producers = newProducerState()
	l.onTruncate(offset)
	l.startBarrier()
	l.checkInvariants()
	return nil
}

// deleteSegmentFiles closes a segment's files and removes them, the log
// first so that a crash in between leaves orphan indexes (which open
// removes) rather than a log without its index. It fails, removing nothing
// more, if the log file cannot be removed: a segment file left behind
// could rejoin the log after a restart.
func (l *Log) deleteSegmentFiles(s *segment) error {
	s.closeFiles()
	if s.log == nil {
		return nil // never created
	}
	l.dur.dirDirty = true
	if err := l.fs.Remove(s.path + ".log"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s.log: %w", s.path, err)
	}
	for _, ext := range []string{".index", ".timeindex"} {
		if err := l.fs.Remove(s.path + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.cfg.Logger.Warn("remove segment file failed", "file", s.path+ext, "err", err)
		}
	}
	return nil
}
