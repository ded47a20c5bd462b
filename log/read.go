package log

import (
	"errors"
	"io"

	"github.com/sluicemq/sluice/env"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Chunk is a run of whole batches lying contiguously in one segment file:
// the bytes [Position, Position+Size) of File hold the batches with offsets
// [FirstOffset, NextOffset). Production sends it with sendfile; the
// simulator copies it (Records.AppendTo).
type Chunk struct {
	File        env.File
	Position    int64
	Size        int64
	FirstOffset int64 // the base offset of its first batch
	NextOffset  int64 // the offset after its last batch
}

// Records is what Read returns: whole batches, as chunks of segment files,
// in offset order. The chunks stay valid until the log is next changed
// (an append may only add to them, a truncation, retention or close may cut
// or close them), so a caller copies or sends them before giving the loop
// back.
type Records struct {
	Chunks []Chunk
	Size   int64
	// epochs is the part of the leader-epoch cache covering the chunks,
	// and logStart the log start then: the leader epoch of a batch lies
	// outside its CRC, so it is checked against the cache instead.
	epochs   epochCache
	logStart int64
}

// NextOffset is the offset after the last batch, or -1 when empty.
func (r *Records) NextOffset() int64 {
	if len(r.Chunks) == 0 {
		return -1
	}
	return r.Chunks[len(r.Chunks)-1].NextOffset
}

// AppendTo appends the batches' bytes to dst, checking each batch as it
// comes off the disk (framing, offsets in sequence, CRC): a bit flipped on
// the way is retried, one on the medium is reported as an error wrapping
// ErrCorrupt, never returned as data.
func (r *Records) AppendTo(dst []byte) ([]byte, error) {
	for _, c := range r.Chunks {
		start := len(dst)
		dst = append(dst, make([]byte, c.Size)...)
		var err error
		for attempt := 0; attempt < readAttempts; attempt++ {
			if err = readFull(c.File, dst[start:], c.Position); err != nil {
				return dst[:start], storageError(err, "read %s at %d", c.File.Name(), c.Position)
			}
			if err = r.checkRun(dst[start:], c.FirstOffset, c.NextOffset); err == nil {
				break
			}
		}
		if err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

func readFull(f env.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// checkRun checks that p is whole batches with offsets [first, next), each
// with the leader epoch the cache gives its offsets.
func (r *Records) checkRun(p []byte, first, next int64) error {
	want := first
	for len(p) > 0 {
		if len(p) < logOverhead {
			return corruptError("%d stray bytes after offset %d", len(p), want)
		}
		h := parseHeader(padHeader(p))
		if h.size() < batchHeaderSize || h.size() > int64(len(p)) {
			return corruptError("batch at offset %d: length %d does not fit the %d bytes left", want, h.size(), len(p))
		}
		if _, err := checkStored(p[:h.size()], want); err != nil {
			return err
		}
		if err := r.epochs.check(&h, r.logStart); err != nil {
			return err
		}
		want = h.nextOffset()
		p = p[h.size():]
	}
	if want != next {
		return corruptError("batches end at offset %d, expected %d", want, next)
	}
	return nil
}

// padHeader returns p's first batchHeaderSize bytes, zero-padded if p is
// shorter, so that a short tail can be parsed for its length.
func padHeader(p []byte) []byte {
	if len(p) >= batchHeaderSize {
		return p[:batchHeaderSize]
	}
	q := make([]byte, batchHeaderSize)
	copy(q, p)
	return q
}

// Read returns whole batches starting with the one that holds offset, up to
// maxBytes in total, and only batches that end below upperBound (the high
// watermark, or the log end offset for a follower; it is capped at the log
// end). If the first batch alone is larger than maxBytes it is returned when
// minOneBatch is set, as KIP-74 asks of the first partition of a fetch.
// An offset below the log start or above the log end is OFFSET_OUT_OF_RANGE.
func (l *Log) Read(offset int64, maxBytes int64, upperBound int64, minOneBatch bool) (Records, error) {
	var out Records
	if err := l.usable(); err != nil {
		return out, err
	}
	end := l.LogEndOffset()
	if offset < l.logStart || offset > end {
		return out, newError(kerr.OffsetOutOfRange, "offset %d is outside the log [%d, %d]", offset, l.logStart, end)
	}
	upperBound = min(upperBound, end)
	if offset >= upperBound || (maxBytes <= 0 && !minOneBatch) {
		return out, nil
	}
	out.epochs, out.logStart = l.epochs.from(max(offset, l.logStart)), l.logStart
	for i := l.segmentFor(offset); i < len(l.segs); i++ {
		full, err := l.readSegment(l.segs[i], offset, maxBytes, upperBound, minOneBatch, &out)
		if err != nil {
			return Records{}, err
		}
		if full {
			break
		}
	}
	return out, nil
}

// readSegment adds to out the chunk of s that Read takes, and says whether
// out is full.
func (l *Log) readSegment(s *segment, offset, maxBytes, upperBound int64, minOneBatch bool, out *Records) (full bool, err error) {
	r := l.reader(s)
	defer r.release()
	pos, h, err := l.locate(s, r, max(offset, s.base))
	if err != nil || pos >= s.size {
		return false, err
	}
	c := Chunk{File: s.log.f, Position: pos, FirstOffset: h.BaseOffset, NextOffset: h.BaseOffset}
	_, _, err = s.walk(r, pos, h.BaseOffset, -1, func(_ int64, h *header) bool {
		if h.lastOffset() >= upperBound || (out.Size+h.size() > maxBytes && !(out.Size == 0 && minOneBatch)) {
			full = true
			return false
		}
		c.Size += h.size()
		c.NextOffset = h.nextOffset()
		out.Size += h.size()
		return true
	})
	if err != nil {
		return false, err
	}
	if c.Size > 0 {
		out.Chunks = append(out.Chunks, c)
	}
	return full, nil
}

// locate returns the position and header of the first batch of s that ends
// at or after offset, or s.size when there is none. It starts from the
// batch itself if it is one of the last appended, else from the index
// entry at or before offset; if the data there disagrees with the
// entry, the segment's indexes are rebuilt from its batch headers and the
// search starts again from the segment's beginning.
func (l *Log) locate(s *segment, r *headerReader, offset int64) (int64, header, error) {
	if p, base, ok := s.recentBatch(offset); ok {
		at, found := s.size, header{}
		_, _, err := s.walk(r, p, base, -1, func(p int64, h *header) bool {
			at, found = p, *h
			return false
		})
		if err == nil {
			return at, found, nil
		}
		// Not what the append left there: a corrupt medium, which the
		// index's way below finds and reports too.
		r.drop()
	}
	for attempt := 0; ; attempt++ {
		pos, wantBase, wantLast := int64(0), s.base, int64(-1)
		if o, p, ok := s.idx.lookup(offset); ok && attempt == 0 {
			pos, wantBase, wantLast = p, -1, o
		}
		at, found := s.size, header{}
		_, _, err := s.walk(r, pos, wantBase, wantLast, func(p int64, h *header) bool {
			if h.lastOffset() >= offset {
				at, found = p, *h
				return false
			}
			return true
		})
		if err == nil {
			return at, found, nil
		}
		if attempt > 0 || wantBase != -1 || !errors.Is(err, ErrCorrupt) {
			return 0, header{}, err
		}
		l.cfg.Logger.Warn("index disagrees with its segment, rebuilding it", "segment", s.path, "err", err)
		if err := l.rebuildIndexes(s); err != nil {
			return 0, header{}, err
		}
	}
}

// rebuildIndexes recomputes a segment's indexes and timestamps from its batch
// headers and rewrites its index files.
func (l *Log) rebuildIndexes(s *segment) error {
	fresh := newSegmentState(l.dir, s.base, s.created)
	r := s.reader()
	_, _, err := s.walk(r, 0, s.base, -1, func(pos int64, h *header) bool {
		fresh.noteBatch(h, pos, l.cfg.IndexIntervalBytes)
		return true
	})
	if err != nil {
		return err
	}
	s.idx, s.tix = fresh.idx, fresh.tix
	s.maxTs, s.maxTsOffset, s.firstTs = fresh.maxTs, fresh.maxTsOffset, fresh.firstTs
	s.maxTsUnconfirmed = false
	s.bytesSinceIndex = fresh.bytesSinceIndex
	s.idxWritten, s.tixWritten = 0, 0
	if s != l.active() {
		s.tix.maybeAppend(s.maxTs, s.maxTsOffset)
	}
	if err := s.truncateIndexes(s.size, s.next, l.cfg.IndexBytesMax); err != nil {
		l.cfg.Logger.Warn("index file rewrite failed", "segment", s.path, "err", err)
		return nil
	}
	if err := s.flushIndexes(); err != nil {
		l.cfg.Logger.Warn("index file rewrite failed", "segment", s.path, "err", err)
	}
	return nil
}
