package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/sluicemq/sluice/env"
)

// maxSnapshotBytes bounds the size of a producer snapshot read back.
const maxSnapshotBytes = 1 << 30

// Producer snapshots are taken when a segment rolls (at the new base offset)
// and on Close (at the log end), like Kafka's. Rebuilding the producer state
// loads the newest readable snapshot at or below the log end and replays
// the batch headers after it; a snapshot above the log end (its data was
// lost or truncated) is deleted.

func snapshotName(dir string, offset int64) string {
	return fmt.Sprintf("%s/%020d.snapshot", dir, offset)
}

// takeSnapshot writes the producer state as of the log end, which must be
// offset, unless a snapshot there exists. The file is synced by the next
// flush round. A failure only costs a longer replay later.
func (l *Log) takeSnapshot(offset int64) bool {
	if _, found := slices.BinarySearch(l.snapshots, offset); found {
		return true
	}
	name := snapshotName(l.dir, offset)
	f, err := l.fs.Create(name)
	if err == nil {
		if _, err = f.WriteAt(l.producers.encode(), 0); err != nil {
			f.Close()
			l.fs.Remove(name)
		}
	}
	l.dur.dirDirty = true
	if err != nil {
		l.cfg.Logger.Warn("producer snapshot failed", "file", name, "err", err)
		return false
	}
	i, _ := slices.BinarySearch(l.snapshots, offset)
	l.snapshots = slices.Insert(l.snapshots, i, offset)
	l.dur.loose = append(l.dur.loose, &trackedFile{f: f, changes: 1})
	return true
}

// removeSnapshots deletes the snapshot files whose offsets satisfy drop. It
// returns the first failure; the snapshot stays listed then.
func (l *Log) removeSnapshots(drop func(offset int64) bool) error {
	var first error
	kept := l.snapshots[:0]
	for _, o := range l.snapshots {
		if !drop(o) {
			kept = append(kept, o)
			continue
		}
		l.dur.dirDirty = true
		if err := l.fs.Remove(snapshotName(l.dir, o)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			kept = append(kept, o)
			if first == nil {
				first = fmt.Errorf("remove producer snapshot %d: %w", o, err)
			}
		}
	}
	l.snapshots = kept
	return first
}

// removeSnapshotsLater forgets the snapshots whose offsets satisfy drop now
// and removes their files behind the barrier.
func (l *Log) removeSnapshotsLater(drop func(offset int64) bool) {
	kept := l.snapshots[:0]
	for _, o := range l.snapshots {
		if drop(o) {
			l.dur.pending = append(l.dur.pending, pendingOp{kind: opRemoveFile, name: snapshotName(l.dir, o)})
		} else {
			kept = append(kept, o)
		}
	}
	l.snapshots = kept
}

// rebuildProducers recomputes the producer state for the log as it stands:
// from the newest readable snapshot at or below the log end, replaying the
// batches after it.
func (l *Log) rebuildProducers() error {
	end, first := l.LogEndOffset(), l.segs[0].base
	// A snapshot past the end is of data since lost or truncated; one below
	// the first segment, of a log since deleted or restarted. Either would
	// be wrong if it were ever loaded, so it must go.
	if err := l.removeSnapshots(func(o int64) bool { return o > end || o < first }); err != nil {
		return err
	}
	l.producers = newProducerState()
	from := first
	for i := len(l.snapshots) - 1; i >= 0; i-- {
		o := l.snapshots[i]
		state, err := l.readSnapshot(o)
		if err != nil {
			l.cfg.Logger.Warn("producer snapshot unreadable", "offset", o, "err", err)
			continue
		}
		l.producers = state
		from = max(o, from)
		break
	}
	return l.replayProducers(from, end)
}

func (l *Log) readSnapshot(offset int64) (producerState, error) {
	name := snapshotName(l.dir, offset)
	var err error
	for attempt := 0; attempt < readAttempts; attempt++ {
		var p []byte
		p, err = readFile(l.fs, name, maxSnapshotBytes)
		if err != nil {
			return producerState{}, err
		}
		var s producerState
		if s, err = decodeProducerSnapshot(p); err == nil {
			return s, nil
		}
	}
	return producerState{}, err
}

// replayProducers applies the batches with offsets in [from, end) to the
// producer state, each read whole and checked.
func (l *Log) replayProducers(from, end int64) error {
	if from >= end {
		return nil
	}
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		s := l.segs[i]
		r := s.reader()
		pos, h, err := l.locate(s, r, max(from, s.base))
		if err != nil {
			return err
		}
		if pos >= s.size {
			continue
		}
		var rerr error
		_, _, err = s.walk(r, pos, h.BaseOffset, -1, func(pos int64, h *header) bool {
			if h.BaseOffset < from {
				return true
			}
			// Sequences and producer ids are only as good as the CRC that
			// covers them: the batch is read whole and checked.
			var p []byte
			if p, rerr = l.readBatch(s, pos, h); rerr != nil {
				return false
			}
			checked := parseHeader(p)
			l.producers.apply(&checked)
			return true
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readFile reads a whole file of at most limit bytes.
func readFile(fsys env.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("%s: %d bytes is more than the %d expected", name, size, limit)
	}
	p := make([]byte, size)
	n, err := f.ReadAt(p, 0)
	if n == len(p) {
		return p, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("read %s: %w", name, err)
}
