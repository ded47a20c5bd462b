package log

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/twmb/franz-go/pkg/kerr"
)

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
	r := newHeaderReader(s.log.f, s.size)
	pos, h, err := l.locate(s, r, offset)
	if err != nil {
		return err
	}
	end := s.next
	if pos < s.size {
		end = h.BaseOffset
	}
	for _, later := range l.segs[i+1:] {
		l.deleteSegmentFiles(later)
	}
	clear(l.segs[i+1:])
	l.segs = l.segs[:i+1]
	if err := l.cutSegment(s, pos, end); err != nil {
		l.fail(err)
		return l.failed
	}
	l.afterTruncation(end)
	return nil
}

// cutSegment truncates s to its first pos bytes, which end at offset end,
// and makes it the active segment.
func (l *Log) cutSegment(s *segment, pos, end int64) error {
	if err := s.log.f.Truncate(pos); err != nil {
		return fmt.Errorf("truncate %s.log to %d: %w", s.path, pos, err)
	}
	s.log.changes++
	s.size, s.next = pos, end
	s.bytesSinceIndex = 0
	if pos == 0 {
		s.created, s.firstTs = l.clock.Now(), noTimestamp
	}
	if err := s.truncateIndexes(pos, end, l.cfg.IndexBytesMax); err != nil {
		l.cfg.Logger.Warn("index truncation failed", "segment", s.path, "err", err)
	}
	if err := s.preallocate(l.cfg.IndexBytesMax); err != nil {
		l.cfg.Logger.Warn("index preallocation failed", "segment", s.path, "err", err)
	}
	return l.recomputeMaxTimestamp(s)
}

// recomputeMaxTimestamp finds a segment's max timestamp after a truncation:
// from its time index's last entry, then the batches after it.
func (l *Log) recomputeMaxTimestamp(s *segment) error {
	s.maxTs, s.maxTsOffset = noTimestamp, -1
	from := s.base
	if ts, off, ok := s.tix.last(); ok {
		s.maxTs, s.maxTsOffset, from = ts, off, off
	}
	r := newHeaderReader(s.log.f, s.size)
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
	if l.epochs.truncateFromEnd(end) {
		l.dur.epochsDirty = true
	}
	l.onTruncate(end)
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
		l.deleteSegmentFiles(s)
	}
	l.removeSnapshots(func(int64) bool { return true })
	s, err := createSegment(l.fs, l.dir, offset, l.clock.Now(), l.cfg.IndexBytesMax)
	if err != nil {
		l.fail(fmt.Errorf("create segment at %d: %w", offset, err))
		return l.failed
	}
	l.segs = []*segment{s}
	l.logStart = offset
	l.epochs = epochCache{}
	l.dur.epochsDirty = true
	l.producers = newProducerState()
	l.onTruncate(offset)
	l.startBarrier()
	return nil
}

// deleteSegmentFiles closes a segment's files and removes them, the log
// first so that a crash in between leaves orphan indexes (which open
// removes) rather than a log without its index. A failed removal leaves a
// stray file that the next open finds below the log start or past the end
// and removes.
func (l *Log) deleteSegmentFiles(s *segment) {
	s.closeFiles()
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := l.fs.Remove(s.path + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.cfg.Logger.Warn("remove segment file failed", "file", s.path+ext, "err", err)
		}
	}
	l.dur.dirDirty = true
}
