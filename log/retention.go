package log

import (
	"errors"
	"io/fs"

	"github.com/twmb/franz-go/pkg/kerr"
)

// EnforceRetention deletes whole segments from the front of the log, in
// Kafka's three passes: those wholly below the log start offset, those whose
// newest timestamp is older than retention.ms, and those that take the log
// over retention.bytes. Only segments wholly below highWatermark go, and
// never the active one. It returns how many segments it deleted.
func (l *Log) EnforceRetention(highWatermark int64) (int, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	n := l.deletePrefix(highWatermark, func(_ *segment, nextBase int64) bool {
		return nextBase <= l.logStart
	})
	if l.cfg.RetentionTime >= 0 {
		nowMs, limit := l.clock.Now().UnixMilli(), l.cfg.RetentionTime.Milliseconds()
		n += l.deletePrefix(highWatermark, func(s *segment, _ int64) bool {
			if err := l.confirmMaxTs(s); err != nil {
				l.cfg.Logger.Warn("segment kept: its max timestamp is unreadable", "segment", s.path, "err", err)
				return false
			}
			return nowMs-s.largestTimestamp() > limit
		})
	}
	if l.cfg.RetentionBytes > 0 {
		excess := l.Size() - l.cfg.RetentionBytes
		n += l.deletePrefix(highWatermark, func(s *segment, _ int64) bool {
			if excess-s.size < 0 {
				return false
			}
			excess -= s.size
			return true
		})
	}
	l.checkInvariants()
	return n, nil
}

// largestTimestamp is what retention.ms is measured from: the newest batch
// timestamp, or when the segment has none, when it was created (Kafka uses
// the file's modification time).
func (s *segment) largestTimestamp() int64 {
	if s.maxTs != noTimestamp {
		return s.maxTs
	}
	return s.created.UnixMilli()
}

// deletePrefix deletes the longest run of oldest segments that satisfy
// deletable, stopping at the active segment and at the first segment not
// wholly below highWatermark.
func (l *Log) deletePrefix(highWatermark int64, deletable func(s *segment, nextBase int64) bool) int {
	k := 0
	for k < len(l.segs)-1 {
		next := l.segs[k+1].base
		if next > highWatermark || !deletable(l.segs[k], next) {
			break
		}
		// Oldest first, and no further than a removal that fails: the log
		// on disk must never have a hole after its first segment.
		if err := l.removeHeadSegment(l.segs[k]); err != nil {
			l.cfg.Logger.Warn("remove segment failed", "segment", l.segs[k].path, "err", err)
			break
		}
		k++
	}
	if k == 0 {
		return 0
	}
	clear(l.segs[:k])
	l.segs = append(l.segs[:0], l.segs[k:]...)
	l.afterHeadRemoved(max(l.logStart, l.segs[0].base))
	return k
}

// removeHeadSegment removes the oldest segment's files. It changes nothing
// in memory if the log file cannot be removed.
func (l *Log) removeHeadSegment(s *segment) error {
	if err := l.fs.Remove(s.path + ".log"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return l.deleteSegmentFiles(s)
}

// afterHeadRemoved moves the log start to start and drops what lay before
// it: epoch entries, producer snapshots of deleted segments. The checkpoint
// follows within CheckpointInterval.
func (l *Log) afterHeadRemoved(start int64) {
	l.logStart = start
	l.epochs.truncateFromStart(start)
	first := l.segs[0].base
	if err := l.removeSnapshots(func(o int64) bool { return o < first }); err != nil {
		l.cfg.Logger.Warn("producer snapshot removal failed", "err", err) // ignored when loading
	}
	l.checkpointLater()
}

// DeleteRecords moves the log start offset up to offset (DeleteRecords, and
// a follower following its leader's log start), deleting the segments wholly
// below it. offset may be at most the log end offset (the broker bounds it
// by the high watermark); one at or below the log start changes nothing.
// The new start is durable after the next checkpoint (see Checkpoint).
func (l *Log) DeleteRecords(offset int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if offset < 0 || offset > l.LogEndOffset() {
		return newError(kerr.OffsetOutOfRange, "cannot delete records below offset %d: the log is [%d, %d]", offset, l.logStart, l.LogEndOffset())
	}
	if offset <= l.logStart {
		return nil
	}
	l.logStart = offset
	if l.deletePrefix(offset, func(_ *segment, nextBase int64) bool { return nextBase <= offset }) == 0 {
		l.afterHeadRemoved(offset)
	}
	l.checkInvariants()
	return nil
}
