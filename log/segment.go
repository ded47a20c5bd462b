package log

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sluicemq/sluice/env"
)

// trackedFile is an open file with a count of its changes, so that a flush
// knows which files it must sync and can tell, when the sync completes, up to
// which change the file is durable.
type trackedFile struct {
	f       env.File
	changes uint64 // bumped by every write or truncate
	synced  uint64 // changes made durable by a completed sync
}

func (t *trackedFile) dirty() bool { return t.changes > t.synced }

// segment is one <base>.log file with its two indexes.
type segment struct {
	base int64
	path string // dir/<20-digit base>, without extension

	log  *trackedFile
	idxF *trackedFile
	tsF  *trackedFile

	size int64 // bytes of whole, valid batches; the file may be longer until recovery cuts it
	next int64 // the offset after the last batch; base when empty

	idx offsetIndex
	tix timeIndex
	// idxWritten and tixWritten are how many bytes of the indexes their
	// files hold; the rest is written in bulk (see flushIndexes).
	idxWritten int
	tixWritten int
	// preallocated says the index files are extended to the maximum size,
	// as the active segment's are.
	preallocated bool

	bytesSinceIndex int64
	// maxTs is the largest batch max timestamp, and maxTsOffset the last
	// offset of the first batch that reached it (noTimestamp, -1 if none).
	maxTs       int64
	maxTsOffset int64
	// maxTsUnconfirmed says maxTs came from the time index file's last
	// entry, which a bit flipped on the way in may have changed (parsing
	// sees only entries out of order): it is checked against its batch
	// before anything relies on it (confirmMaxTs).
	maxTsUnconfirmed bool
	// firstTs is the first batch's max timestamp, from which segment.ms is
	// counted (noTimestamp: count from created instead).
	firstTs int64
	created time.Time
	// recent are where the last batches appended to it start, so that a
	// read at the log end (a follower's fetch, a consumer caught up) goes
	// to its batch without an index lookup and a walk over the headers
	// before it. Appends make it; a truncation forgets it; nil until the
	// first append, so that a log's many idle segments pay a pointer.
	recent *recentBatches
}

// recentBatches is a ring of the last len(at) batches appended.
type recentBatches struct {
	at   [8]batchAt
	n    int // entries filled
	next int // where the next goes
}

type batchAt struct{ base, last, pos int64 }

// noteAppended remembers that the batch h was appended at pos.
func (s *segment) noteAppended(h *header, pos int64) {
	if s.recent == nil {
		s.recent = &recentBatches{}
	}
	r := s.recent
	r.at[r.next] = batchAt{base: h.BaseOffset, last: h.lastOffset(), pos: pos}
	r.next = (r.next + 1) % len(r.at)
	r.n = min(r.n+1, len(r.at))
}

// recentBatch returns the position and base offset of a recently appended
// batch holding offset.
func (s *segment) recentBatch(offset int64) (pos, base int64, ok bool) {
	if s.recent == nil {
		return 0, 0, false
	}
	for _, b := range s.recent.at[:s.recent.n] {
		if b.base <= offset && offset <= b.last {
			return b.pos, b.base, true
		}
	}
	return 0, 0, false
}

func segmentPath(dir string, base int64) string { return fmt.Sprintf("%s/%020d", dir, base) }

func newSegmentState(dir string, base int64, now time.Time) *segment {
	return &segment{
		base:        base,
		path:        segmentPath(dir, base),
		next:        base,
		idx:         offsetIndex{base: base},
		tix:         timeIndex{base: base},
		maxTs:       noTimestamp,
		maxTsOffset: -1,
		firstTs:     noTimestamp,
		created:     now,
	}
}

// createSegment creates the files of a new, empty, active segment. On error
// it removes what it created; a file it cannot remove stays behind, empty,
// and recovery discards it (an empty segment is only ever the last one).
func createSegment(fsys env.FS, dir string, base int64, now time.Time, indexBytesMax int64) (*segment, error) {
	s := newSegmentState(dir, base, now)
	err := func() error {
		var err error
		if s.log, err = createTracked(fsys, s.path+".log"); err != nil {
			return err
		}
		if s.idxF, err = createTracked(fsys, s.path+".index"); err != nil {
			return err
		}
		if s.tsF, err = createTracked(fsys, s.path+".timeindex"); err != nil {
			return err
		}
		return s.preallocate(indexBytesMax)
	}()
	if err != nil {
		s.closeFiles()
		for _, ext := range []string{".log", ".index", ".timeindex"} {
			fsys.Remove(s.path + ext)
		}
		return nil, err
	}
	return s, nil
}

func createTracked(fsys env.FS, name string) (*trackedFile, error) {
	f, err := fsys.Create(name)
	if err != nil {
		return nil, err
	}
	return &trackedFile{f: f, changes: 1}, nil
}

// preallocate extends the index files to their maximum size, zero-filled,
// as the active segment's are.
func (s *segment) preallocate(indexBytesMax int64) error {
	if s.preallocated {
		return nil
	}
	if err := s.idxF.f.Truncate(roundDown(indexBytesMax, offsetEntrySize)); err != nil {
		return err
	}
	s.idxF.changes++
	if err := s.tsF.f.Truncate(roundDown(indexBytesMax, timeEntrySize)); err != nil {
		return err
	}
	s.tsF.changes++
	s.preallocated = true
	return nil
}

func roundDown(n, m int64) int64 { return n / m * m }

func (s *segment) closeFiles() {
	for _, t := range []*trackedFile{s.log, s.idxF, s.tsF} {
		if t != nil {
			t.f.Close()
		}
	}
}

// indexFull reports whether either index has reached its maximum size.
func (s *segment) indexFull(indexBytesMax int64) bool {
	return int64(len(s.idx.buf)+offsetEntrySize) > roundDown(indexBytesMax, offsetEntrySize) ||
		int64(len(s.tix.buf)+timeEntrySize) > roundDown(indexBytesMax, timeEntrySize)
}

// canHold reports whether offsets up to last fit the indexes' 32-bit
// relative offsets.
func (s *segment) canHold(last int64) bool { return last-s.base <= math.MaxInt32 }

// noteBatch updates the in-memory metadata for a batch appended (or found by
// recovery) at pos: the max timestamp, then an index entry if more than
// interval bytes were appended since the last one, as Kafka's LogSegment
// does. Appends and recovery call it alike, so a rebuilt index is the same
// as the one built by appends.
func (s *segment) noteBatch(h *header, pos, interval int64) {
	if pos == 0 {
		s.firstTs = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.lastOffset()
	}
	if s.bytesSinceIndex > interval {
		s.idx.append(h.lastOffset(), pos)
		s.tix.maybeAppend(s.maxTs, s.maxTsOffset)
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.size()
	s.size = pos + h.size()
	s.next = h.nextOffset()
}

// indexesUnwritten reports whether some index entries are not in their
// files yet.
func (s *segment) indexesUnwritten() bool {
	return s.idxWritten < len(s.idx.buf) || s.tixWritten < len(s.tix.buf)
}

// indexesDurable reports whether both index files hold every entry and are
// synced.
func (s *segment) indexesDurable() bool {
	return !s.indexesUnwritten() && s.idxF != nil && s.tsF != nil && !s.idxF.dirty() && !s.tsF.dirty()
}

// flushIndexes writes the index entries not yet in their files. A failure
// is not fatal: the indexes are rebuilt from the log when their files are
// found wanting, and the next call tries again.
func (s *segment) flushIndexes() error {
	if s.idxWritten < len(s.idx.buf) {
		if _, err := s.idxF.f.WriteAt(s.idx.buf[s.idxWritten:], int64(s.idxWritten)); err != nil {
			return fmt.Errorf("write %s.index: %w", s.path, err)
		}
		s.idxWritten = len(s.idx.buf)
		s.idxF.changes++
	}
	if s.tixWritten < len(s.tix.buf) {
		if _, err := s.tsF.f.WriteAt(s.tix.buf[s.tixWritten:], int64(s.tixWritten)); err != nil {
			return fmt.Errorf("write %s.timeindex: %w", s.path, err)
		}
		s.tixWritten = len(s.tix.buf)
		s.tsF.changes++
	}
	return nil
}

// trimIndexes cuts the index files to their entries, as a segment that stops
// being active (or is closed) has them. The time index gets a last entry for
// the segment's max timestamp first, as Kafka's does.
func (s *segment) trimIndexes() error {
	if s.maxTs != noTimestamp {
		s.tix.maybeAppend(s.maxTs, s.maxTsOffset)
	}
	if err := s.flushIndexes(); err != nil {
		return err
	}
	if err := s.idxF.f.Truncate(int64(len(s.idx.buf))); err != nil {
		return fmt.Errorf("trim %s.index: %w", s.path, err)
	}
	s.idxF.changes++
	if err := s.tsF.f.Truncate(int64(len(s.tix.buf))); err != nil {
		return fmt.Errorf("trim %s.timeindex: %w", s.path, err)
	}
	s.tsF.changes++
	s.preallocated = false
	return nil
}

// truncateIndexes drops index entries at or after byte position pos (whose
// first batch begins at offset next) and rewrites the files' tails as
// zeros, keeping them preallocated if they were.
func (s *segment) truncateIndexes(pos, next int64, indexBytesMax int64) error {
	s.idx.truncateAt(pos, next)
	s.tix.truncateFrom(next)
	return s.truncateIndexFiles(indexBytesMax)
}

// truncateIndexFiles cuts the index files to what they should hold of the
// indexes and zero-fills them again if they are preallocated.
func (s *segment) truncateIndexFiles(indexBytesMax int64) error {
	s.idxWritten = min(s.idxWritten, len(s.idx.buf))
	s.tixWritten = min(s.tixWritten, len(s.tix.buf))
	if err := s.idxF.f.Truncate(int64(s.idxWritten)); err != nil {
		return err
	}
	if err := s.tsF.f.Truncate(int64(s.tixWritten)); err != nil {
		return err
	}
	s.idxF.changes++
	s.tsF.changes++
	if s.preallocated {
		s.preallocated = false
		return s.preallocate(indexBytesMax)
	}
	return nil
}

// reader returns a header reader over the segment's valid bytes. A segment
// whose files are not created yet (see pendingOp) is empty and never read.
func (s *segment) reader() *headerReader { return s.readerWith(nil) }

// readerWith is reader with buf as its window (nil: a new one).
func (s *segment) readerWith(buf []byte) *headerReader {
	var f env.File
	if s.log != nil {
		f = s.log.f
	}
	if buf == nil {
		buf = make([]byte, headerWindow)
	}
	return &headerReader{f: f, limit: s.size, buf: buf}
}

// reader is s.reader with the log's spare window buffer, if it has one:
// a read of the log (a fetch) would otherwise allocate a fresh 4 KiB
// window each time, a fifth of what a busy simulated cluster allocated.
// The caller releases the reader when done with it.
func (l *Log) reader(s *segment) *headerReader {
	var buf []byte
	if n := len(l.spareWindows); n > 0 {
		buf, l.spareWindows = l.spareWindows[n-1], l.spareWindows[:n-1]
	}
	r := s.readerWith(buf)
	r.owner = l
	return r
}

// release gives the reader's window buffer back to its log; the reader
// must not be used after.
func (r *headerReader) release() {
	if l := r.owner; l != nil && len(l.spareWindows) < maxSpareWindows {
		l.spareWindows = append(l.spareWindows, r.buf)
	}
	r.owner, r.buf, r.win = nil, nil, nil
}

// maxSpareWindows bounds the window buffers a log keeps: readers nest (a
// read that rebuilds an index) but only a few deep.
const maxSpareWindows = 4

// headerReader reads batch headers of a segment through a small window, so
// that walking a segment of small batches costs one read per window rather
// than one per batch.
type headerReader struct {
	// owner, if set, takes buf back on release (Log.reader).
	owner  *Log
	f      env.File
	limit  int64 // bytes that may be read: the valid size, or the file size in recovery
	buf    []byte
	win    []byte
	winPos int64
}

const headerWindow = 4096

func newHeaderReader(f env.File, limit int64) *headerReader {
	return &headerReader{f: f, limit: limit, buf: make([]byte, headerWindow)}
}

// read returns the header at pos. It reports io.ErrUnexpectedEOF when fewer
// than a header's bytes lie before the limit.
func (r *headerReader) read(pos int64) (header, error) {
	if pos < 0 || pos+batchHeaderSize > r.limit {
		return header{}, io.ErrUnexpectedEOF
	}
	if pos < r.winPos || pos+batchHeaderSize > r.winPos+int64(len(r.win)) {
		n := min(int64(len(r.buf)), r.limit-pos)
		m, err := r.f.ReadAt(r.buf[:n], pos)
		if int64(m) < batchHeaderSize {
			r.win = nil
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return header{}, err
		}
		r.win, r.winPos = r.buf[:m], pos
	}
	return parseHeader(r.win[pos-r.winPos:]), nil
}

// drop forgets the window, so that the next read goes to the file again
// (after a check failed: the bytes may have been flipped on the way).
func (r *headerReader) drop() { r.win = nil }

// readAttempts is how many times a read whose bytes fail a check is tried
// before they are declared corrupt: a bit flipped on the read path is gone
// on the next read, one on the medium is not.
const readAttempts = 3

// walk visits the batch headers of s from byte position pos up to its valid
// size, checking each: its shape, that it lies within the segment, and that
// it continues the previous one (the first must begin at wantBase, or when
// wantBase is -1 end at wantLast). visit returns false to stop early. It
// returns the position and offset where it stopped. visit must not keep h:
// one header serves the whole walk (passed by pointer to a func value, a
// header per batch would each be a heap allocation).
func (s *segment) walk(r *headerReader, pos, wantBase, wantLast int64, visit func(pos int64, h *header) bool) (int64, int64, error) {
	var h header
	for pos < s.size {
		var err error
		h, err = s.readConfirmed(r, pos, wantBase, wantLast)
		if err != nil {
			return pos, wantBase, err
		}
		if !visit(pos, &h) {
			return pos, h.BaseOffset, nil
		}
		pos += h.size()
		wantBase, wantLast = h.nextOffset(), -1
	}
	if wantBase != -1 && wantBase != s.next {
		return pos, wantBase, corruptError("%s.log: batches end at offset %d, expected %d", s.path, wantBase, s.next)
	}
	return pos, wantBase, nil
}

// readConfirmed reads and checks the header at pos, and confirms the fields
// that decide what a walk does with it (its length and last offset, which
// only the CRC covers) by what follows it: the next header must begin at
// its next offset, or the segment must end there. A check that fails is
// retried.
func (s *segment) readConfirmed(r *headerReader, pos, wantBase, wantLast int64) (header, error) {
	var err error
	for attempt := 0; attempt < readAttempts; attempt++ {
		var h header
		if h, err = readChecked(r, pos, wantBase, wantLast, s.size); err != nil {
			return h, err
		}
		next := pos + h.size()
		if next == s.size {
			if h.nextOffset() == s.next {
				return h, nil
			}
			err = corruptError("%s.log: batches end at offset %d, expected %d", s.path, h.nextOffset(), s.next)
		} else {
			n, rerr := r.read(next)
			if rerr == nil {
				if rerr = checkHeaderShape(&n, h.nextOffset()); rerr == nil {
					return h, nil
				}
			}
			err = corruptError("%s.log: the batch at position %d is not followed by offset %d: %v", s.path, pos, h.nextOffset(), rerr)
		}
		r.drop()
	}
	return header{}, err
}

// readChecked reads and checks the header at pos, retrying a failed check.
func readChecked(r *headerReader, pos, wantBase, wantLast, limit int64) (header, error) {
	var err error
	for attempt := 0; attempt < readAttempts; attempt++ {
		var h header
		h, err = r.read(pos)
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				return h, corruptError("batch header at position %d runs past the end (%d)", pos, limit)
			}
			return h, storageError(err, "read batch header at position %d", pos)
		}
		want := wantBase
		if want == -1 {
			want = h.BaseOffset
		}
		err = checkHeaderShape(&h, want)
		if err == nil && wantBase == -1 && h.lastOffset() != wantLast {
			err = corruptError("batch at position %d ends at offset %d, its index entry says %d", pos, h.lastOffset(), wantLast)
		}
		if err == nil && pos+h.size() > limit {
			err = corruptError("batch at position %d of %d bytes runs past the end (%d)", pos, h.size(), limit)
		}
		if err == nil {
			return h, nil
		}
		r.drop()
	}
	return header{}, err
}
