package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batches (magic 2) are what Produce carries and Fetch returns. The
// broker stores them verbatim (package log validates them); this file is the
// client side, for the simulator's clients and for tests: build an
// uncompressed batch, and read the records back out of fetched bytes.
//
//	baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
//	magic int8 (2) | crc uint32 (Castagnoli, over attributes..end) |
//	attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
//	maxTimestamp int64 | producerId int64 | producerEpoch int16 |
//	baseSequence int32 | recordCount int32 | records...
//
// Each record: length varint, attributes int8, timestampDelta varlong,
// offsetDelta varint, key (varint length, -1 null), value (likewise),
// header count varint, headers (key, value as above).

// Record is one record of a batch.
type Record struct {
	Key, Value []byte // nil is null
	Headers    []RecordHeader
	// Timestamp is the record's timestamp in milliseconds.
	Timestamp int64
	// Offset is set by DecodeBatches; ignored when building.
	Offset int64
}

// RecordHeader is a record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// BatchProducer identifies an idempotent producer's batch; the zero value
// (with ID -1 via NoProducer) marks a batch without one.
type BatchProducer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// NoProducer is a batch from a producer that is not idempotent.
var NoProducer = BatchProducer{ID: -1, Epoch: -1, BaseSequence: -1}

const batchHeaderLen = 61

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AppendBatch appends one uncompressed magic-2 batch holding records to dst.
// It panics on an empty batch: a caller bug, not an input.
func AppendBatch(dst []byte, producer BatchProducer, records []Record) []byte {
	if len(records) == 0 {
		panic("wire: AppendBatch with no records")
	}
	start := len(dst)
	base, maxTs := records[0].Timestamp, records[0].Timestamp
	for _, r := range records {
		base, maxTs = min(base, r.Timestamp), max(maxTs, r.Timestamp)
	}
	dst = append(dst, make([]byte, batchHeaderLen)...)
	h := dst[start:]
	binary.BigEndian.PutUint64(h[0:], 0)           // base offset: the broker assigns it
	binary.BigEndian.PutUint32(h[12:], 0xffffffff) // partition leader epoch: -1
	h[16] = 2                                      // magic
	binary.BigEndian.PutUint16(h[21:], 0)          // attributes
	binary.BigEndian.PutUint32(h[23:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(h[27:], uint64(base))
	binary.BigEndian.PutUint64(h[35:], uint64(maxTs))
	binary.BigEndian.PutUint64(h[43:], uint64(producer.ID))
	binary.BigEndian.PutUint16(h[51:], uint16(producer.Epoch))
	binary.BigEndian.PutUint32(h[53:], uint32(producer.BaseSequence))
	binary.BigEndian.PutUint32(h[57:], uint32(len(records)))
	for i, r := range records {
		dst = appendRecord(dst, r, r.Timestamp-base, int64(i))
	}
	h = dst[start:]
	binary.BigEndian.PutUint32(h[8:], uint32(len(h)-12))
	binary.BigEndian.PutUint32(h[17:], crc32.Checksum(h[21:], crcTable))
	return dst
}

func appendRecord(dst []byte, r Record, tsDelta, offsetDelta int64) []byte {
	var body []byte
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, offsetDelta)
	body = appendVarBytes(body, r.Key)
	body = appendVarBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = appendVarBytes(body, []byte(h.Key))
		body = appendVarBytes(body, h.Value)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

func appendVarBytes(dst, p []byte) []byte {
	if p == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(p)))
	return append(dst, p...)
}

// DecodeBatches reads the records of the uncompressed magic-2 batches in p,
// as a Fetch returns them, checking each batch's CRC. A trailing partial
// batch (a fetch may end with one) is ignored. Compressed batches are an
// error: the simulator's clients never produce them.
func DecodeBatches(p []byte) ([]Record, error) {
	var out []Record
	for len(p) >= batchHeaderLen {
		size := int(binary.BigEndian.Uint32(p[8:])) + 12
		if size < batchHeaderLen {
			return out, fmt.Errorf("wire: batch length %d is too short", size)
		}
		if size > len(p) {
			break
		}
		batch := p[:size]
		p = p[size:]
		if batch[16] != 2 {
			return out, fmt.Errorf("wire: batch magic %d, want 2", batch[16])
		}
		if crc32.Checksum(batch[21:], crcTable) != binary.BigEndian.Uint32(batch[17:]) {
			return out, errors.New("wire: batch CRC mismatch")
		}
		attrs := binary.BigEndian.Uint16(batch[21:])
		if attrs&0x7 != 0 {
			return out, fmt.Errorf("wire: compressed batch (codec %d)", attrs&0x7)
		}
		if attrs&0x20 != 0 {
			continue // a control batch (transaction marker): no user records
		}
		recs, err := decodeRecords(batch)
		if err != nil {
			return out, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

func decodeRecords(batch []byte) ([]Record, error) {
	baseOffset := int64(binary.BigEndian.Uint64(batch[0:]))
	baseTs := int64(binary.BigEndian.Uint64(batch[27:]))
	count := int(binary.BigEndian.Uint32(batch[57:]))
	rd := varReader{p: batch[batchHeaderLen:]}
	out := make([]Record, 0, min(count, len(batch)))
	for i := 0; i < count; i++ {
		length := rd.varint()
		end := rd.pos + int(length)
		if rd.err != nil || length < 0 || end > len(rd.p) {
			return nil, fmt.Errorf("wire: record %d of batch at %d: bad length", i, baseOffset)
		}
		rd.pos++ // attributes
		r := Record{Timestamp: baseTs + rd.varint()}
		r.Offset = baseOffset + rd.varint()
		r.Key, r.Value = rd.bytes(), rd.bytes()
		for n := rd.varint(); n > 0 && rd.err == nil; n-- {
			r.Headers = append(r.Headers, RecordHeader{Key: string(rd.bytes()), Value: rd.bytes()})
		}
		if rd.err != nil || rd.pos != end {
			return nil, fmt.Errorf("wire: record %d of batch at %d is malformed", i, baseOffset)
		}
		out = append(out, r)
	}
	return out, nil
}

type varReader struct {
	p   []byte
	pos int
	err error
}

func (r *varReader) varint() int64 {
	if r.err != nil || r.pos >= len(r.p) {
		r.err = errors.New("truncated")
		return 0
	}
	v, n := binary.Varint(r.p[r.pos:])
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.pos += n
	return v
}

func (r *varReader) bytes() []byte {
	n := r.varint()
	if n < 0 || r.err != nil {
		return nil
	}
	if r.pos+int(n) > len(r.p) {
		r.err = errors.New("truncated")
		return nil
	}
	b := append([]byte{}, r.p[r.pos:r.pos+int(n)]...)
	r.pos += int(n)
	return b
}
