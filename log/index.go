package log

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Indexes are sparse, as Kafka's are: an entry is added before a batch once
// more than index.interval.bytes have been appended since the last one. Both
// live in memory (their file is a copy for the next open) and use Kafka's
// file formats, big-endian, offsets relative to the segment's base offset:
//
//	.index      relative offset uint32 | position uint32          8 bytes
//	            the batch at position ends at base+relative offset
//	.timeindex  timestamp int64 | relative offset uint32          12 bytes
//	            batches up to the offset have timestamps <= timestamp; the
//	            batch ending there is the first to reach it
//
// The active segment's index files are preallocated (zero-filled to
// segment.index.bytes) and trimmed to their entries when the segment rolls.
// An all-zero entry ends the entries of a preallocated file.
//
// An index is a hint, never trusted blindly: every lookup lands on a batch
// header that is checked against the entry (its last offset must be the
// entry's offset), and a segment whose index disagrees with its data has
// the index rebuilt from the batch headers.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

type offsetIndex struct {
	base int64
	buf  []byte
}

func (x *offsetIndex) len() int { return len(x.buf) / offsetEntrySize }

func (x *offsetIndex) entry(i int) (offset, pos int64) {
	p := x.buf[i*offsetEntrySize:]
	return x.base + int64(binary.BigEndian.Uint32(p)), int64(binary.BigEndian.Uint32(p[4:]))
}

// lookup returns the last entry whose offset is at most target.
func (x *offsetIndex) lookup(target int64) (offset, pos int64, ok bool) {
	n := x.len()
	i := sort.Search(n, func(i int) bool {
		o, _ := x.entry(i)
		return o > target
	})
	if i == 0 {
		return 0, 0, false
	}
	offset, pos = x.entry(i - 1)
	return offset, pos, true
}

func (x *offsetIndex) append(offset, pos int64) {
	x.buf = binary.BigEndian.AppendUint32(x.buf, uint32(offset-x.base))
	x.buf = binary.BigEndian.AppendUint32(x.buf, uint32(pos))
}

// truncateAt drops the entries at or after byte position pos, and those
// for offsets at or after end (which only a damaged entry could have).
func (x *offsetIndex) truncateAt(pos, end int64) {
	n := x.len()
	for n > 0 {
		if o, p := x.entry(n - 1); p < pos && o < end {
			break
		}
		n--
	}
	x.buf = x.buf[:n*offsetEntrySize]
}

// parseOffsetIndex reads an index file's entries up to the first all-zero
// one and checks that they could describe a segment of size bytes ending
// before offset next: offsets and positions strictly increasing, inside it.
func parseOffsetIndex(p []byte, base, size, next int64) (offsetIndex, error) {
	x := offsetIndex{base: base}
	prevRel, prevPos := uint32(0), uint32(0)
	n := 0
	for i := 0; i+offsetEntrySize <= len(p); i += offsetEntrySize {
		rel := binary.BigEndian.Uint32(p[i:])
		pos := binary.BigEndian.Uint32(p[i+4:])
		if rel == 0 && pos == 0 {
			break
		}
		if rel <= prevRel || pos <= prevPos || int64(pos)+batchHeaderSize > size || base+int64(rel) >= next {
			return x, fmt.Errorf("entry %d (%d, %d) after (%d, %d) in a segment of %d bytes", n, rel, pos, prevRel, prevPos, size)
		}
		prevRel, prevPos = rel, pos
		n++
	}
	x.buf = append([]byte(nil), p[:n*offsetEntrySize]...)
	return x, nil
}

type timeIndex struct {
	base int64
	buf  []byte
}

func (x *timeIndex) len() int { return len(x.buf) / timeEntrySize }

func (x *timeIndex) entry(i int) (ts, offset int64) {
	p := x.buf[i*timeEntrySize:]
	return int64(binary.BigEndian.Uint64(p)), x.base + int64(binary.BigEndian.Uint32(p[8:]))
}

func (x *timeIndex) last() (ts, offset int64, ok bool) {
	if x.len() == 0 {
		return 0, 0, false
	}
	ts, offset = x.entry(x.len() - 1)
	return ts, offset, true
}

// lookup returns the last entry whose timestamp is at most ts.
func (x *timeIndex) lookup(ts int64) (entryTs, offset int64, ok bool) {
	n := x.len()
	i := sort.Search(n, func(i int) bool {
		t, _ := x.entry(i)
		return t > ts
	})
	if i == 0 {
		return 0, 0, false
	}
	entryTs, offset = x.entry(i - 1)
	return entryTs, offset, true
}

// maybeAppend adds an entry when ts is newer than the last one.
func (x *timeIndex) maybeAppend(ts, offset int64) bool {
	if last, _, ok := x.last(); ok && ts <= last {
		return false
	}
	x.buf = binary.BigEndian.AppendUint64(x.buf, uint64(ts))
	x.buf = binary.BigEndian.AppendUint32(x.buf, uint32(offset-x.base))
	return true
}

// truncateFrom drops the entries at or after offset.
func (x *timeIndex) truncateFrom(offset int64) {
	n := x.len()
	for n > 0 {
		if _, o := x.entry(n - 1); o < offset {
			break
		}
		n--
	}
	x.buf = x.buf[:n*timeEntrySize]
}

// parseTimeIndex reads a time index file's entries up to the first all-zero
// one and checks them: timestamps strictly increasing, offsets not
// decreasing and below next (the segment's end offset).
func parseTimeIndex(p []byte, base, next int64) (timeIndex, error) {
	x := timeIndex{base: base}
	n := 0
	for i := 0; i+timeEntrySize <= len(p); i += timeEntrySize {
		ts := int64(binary.BigEndian.Uint64(p[i:]))
		rel := binary.BigEndian.Uint32(p[i+8:])
		if ts == 0 && rel == 0 {
			break
		}
		if n > 0 {
			prevTs := int64(binary.BigEndian.Uint64(p[i-timeEntrySize:]))
			prevRel := binary.BigEndian.Uint32(p[i-timeEntrySize+8:])
			if ts <= prevTs || rel < prevRel {
				return timeIndex{base: base}, fmt.Errorf("entry %d (%d, %d) after (%d, %d)", n, ts, rel, prevTs, prevRel)
			}
		}
		if base+int64(rel) >= next {
			return timeIndex{base: base}, fmt.Errorf("entry %d points at offset %d, past the segment's end %d", n, base+int64(rel), next)
		}
		n++
	}
	x.buf = append([]byte(nil), p[:n*timeEntrySize]...)
	return x, nil
}
