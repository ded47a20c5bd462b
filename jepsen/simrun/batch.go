package simrun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/jepsen"
)

// The clients build and read record batches themselves (magic v2, see
// package log for the layout) rather than through a client library, so
// that every byte on the wire is one the simulation decided:
//
//	batch   base offset (8) | length (4) | leader epoch (4) | magic (1) | crc (4)
//	        attributes (2) | last offset delta (4) | base timestamp (8)
//	        max timestamp (8) | producer id (8) | producer epoch (2)
//	        base sequence (4) | record count (4) | records...
//	record  length (varint) | attributes (1) | timestamp delta (varint)
//	        offset delta (varint) | key length (varint, -1: null) | key
//	        value length (varint) | value | header count (varint)
//
// The CRC is CRC32C of everything from the attributes to the end.

const (
	batchHeaderSize = 61
	offCRC          = 17
	offAttributes   = 21
	attrCompression = 0x07
	attrControl     = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// producerBatch is what an idempotent producer stamps on a batch.
type producerBatch struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	TimestampMs   int64
}

// buildBatch encodes values as one uncompressed magic-2 batch, one record
// per value, with null keys and no headers.
func buildBatch(p producerBatch, values []string) []byte {
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(values)*24)
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                      // base offset: the broker assigns it
	be.PutUint32(b[12:], 0xffffffff)            // partition leader epoch: -1
	b[16] = 2                                   // magic
	be.PutUint16(b[21:], 0)                     // attributes
	be.PutUint32(b[23:], uint32(len(values)-1)) // last offset delta
	be.PutUint64(b[27:], uint64(p.TimestampMs))
	be.PutUint64(b[35:], uint64(p.TimestampMs))
	be.PutUint64(b[43:], uint64(p.ProducerID))
	be.PutUint16(b[51:], uint16(p.ProducerEpoch))
	be.PutUint32(b[53:], uint32(p.BaseSequence))
	be.PutUint32(b[57:], uint32(len(values)))
	for i, v := range values {
		b = appendRecord(b, int64(i), v)
	}
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func appendRecord(b []byte, offsetDelta int64, value string) []byte {
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	b = binary.AppendVarint(b, int64(len(body)))
	return append(b, body...)
}

// errCorruptBatch marks a batch that fails its CRC or does not parse: a
// consumer refuses it, as Kafka's clients do with check.crcs.
var errCorruptBatch = errors.New("corrupt record batch")

// readBatches decodes the batches of a fetch response from offset from,
// verifying each CRC, and that the batches follow one another from the one
// holding from: the base offset is not covered by the CRC, and on the
// sendfile path nothing but the client sees the bytes a fetch sends, so a
// base offset flipped on the way would otherwise pass for records far
// ahead. (Sluice's logs are dense: no compaction leaves gaps.) A partial
// batch at the end (cut by the fetch's size limits) is ignored, as Kafka's
// clients ignore it. Control batches carry no values and are skipped. It
// returns the records, and each whole batch as a reference for the
// durability oracle.
func readBatches(p []byte, from int64) ([]jepsen.Record, []batchRef, error) {
	var out []jepsen.Record
	var refs []batchRef
	be := binary.BigEndian
	next := int64(-1) // the base offset the next batch must have; -1 before the first
	for len(p) >= 12 {
		base := int64(be.Uint64(p))
		size := int64(int32(be.Uint32(p[8:])))
		if size < batchHeaderSize-12 {
			return nil, nil, fmt.Errorf("%w: batch at %d has length %d", errCorruptBatch, base, size)
		}
		if int64(len(p)) < 12+size {
			break // partial
		}
		batch := p[:12+size]
		p = p[12+size:]
		if batch[16] != 2 {
			return nil, nil, fmt.Errorf("%w: batch at %d has magic %d", errCorruptBatch, base, batch[16])
		}
		if want, got := be.Uint32(batch[offCRC:]), crc32.Checksum(batch[offAttributes:], castagnoli); want != got {
			return nil, nil, fmt.Errorf("%w: batch at %d has crc %08x, computed %08x", errCorruptBatch, base, want, got)
		}
		last := base + int64(int32(be.Uint32(batch[23:])))
		switch {
		case next < 0 && (base > from || last < from):
			return nil, nil, fmt.Errorf("%w: the first batch, at %d to %d, does not hold the fetch offset %d", errCorruptBatch, base, last, from)
		case next >= 0 && base != next:
			return nil, nil, fmt.Errorf("%w: a batch at %d follows one that ended before %d", errCorruptBatch, base, next)
		}
		next = last + 1
		refs = append(refs, batchRef{base: base, last: last, crc: be.Uint32(batch[offCRC:])})
		attrs := be.Uint16(batch[offAttributes:])
		if attrs&attrControl != 0 {
			continue
		}
		if attrs&attrCompression != 0 {
			return nil, nil, fmt.Errorf("%w: batch at %d is compressed (attributes %#x), which no simulated producer sends", errCorruptBatch, base, attrs)
		}
		count := int(int32(be.Uint32(batch[57:])))
		baseTimestamp := int64(be.Uint64(batch[27:]))
		recs, err := readRecords(batch[batchHeaderSize:], base, baseTimestamp, count)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: batch at %d: %v", errCorruptBatch, base, err)
		}
		out = append(out, recs...)
	}
	return out, refs, nil
}

func readRecords(p []byte, base, baseTimestamp int64, count int) ([]jepsen.Record, error) {
	if count < 0 || count > len(p) {
		return nil, fmt.Errorf("record count %d with %d bytes of records", count, len(p))
	}
	out := make([]jepsen.Record, 0, count)
	for i := 0; i < count; i++ {
		size, n := binary.Varint(p)
		if n <= 0 || size < 0 || size > int64(len(p)-n) {
			return nil, fmt.Errorf("record %d: bad length", i)
		}
		rec := recordReader{p: p[n : n+int(size)]}
		p = p[n+int(size):]
		rec.skip(1) // attributes
		timestampDelta := rec.varint()
		delta := rec.varint()
		if k := rec.varint(); k > 0 {
			rec.skip(int(k))
		}
		value := rec.bytes(rec.varint())
		if rec.err != nil {
			return nil, fmt.Errorf("record %d: %w", i, rec.err)
		}
		out = append(out, jepsen.Record{Offset: base + delta, Value: string(value), Timestamp: baseTimestamp + timestampDelta})
	}
	return out, nil
}

// recordReader reads the fields of one record, remembering the first error.
type recordReader struct {
	p   []byte
	err error
}

var errShortRecord = errors.New("record ends early")

func (r *recordReader) skip(n int) {
	if r.err == nil && (n < 0 || n > len(r.p)) {
		r.err = errShortRecord
	}
	if r.err == nil {
		r.p = r.p[n:]
	}
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.p)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.p = r.p[n:]
	return v
}

func (r *recordReader) bytes(n int64) []byte {
	if r.err != nil || n < 0 {
		return nil
	}
	if n > int64(len(r.p)) {
		r.err = errShortRecord
		return nil
	}
	v := r.p[:n]
	r.p = r.p[n:]
	return v
}

// DecodeFetch finds tp in a fetch answer (by topic id from version 13)
// and decodes its records from offset from and its watermarks, as the
// simulator's consumers do: version 2 batches, uncompressed, CRC-checked,
// offsets dense, a partial batch at the end ignored. It is for clients
// outside the simulator that record into a jepsen.History (sluice
// jepsen's consumers).
func DecodeFetch(resp *kmsg.FetchResponse, topicID [16]byte, tp jepsen.TopicPartition, from int64) ([]jepsen.Record, jepsen.Watermarks, error) {
	fp, err := fetchPartition(resp, &topicInfo{id: topicID}, tp, from)
	return fp.records, fp.marks, err
}
