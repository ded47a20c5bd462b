package log

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A record batch, magic v2, as it travels and as it is stored (big-endian):
//
//	off  size  field
//	  0     8  base offset              rewritten on a leader append
//	  8     4  batch length             bytes after this field
//	 12     4  partition leader epoch   rewritten on a leader append
//	 16     1  magic                    2
//	 17     4  crc                      CRC32C of bytes [21, end)
//	 21     2  attributes               compression (bits 0-2), timestamp type (3),
//	                                    transactional (4), control (5)
//	 23     4  last offset delta
//	 27     8  base timestamp
//	 35     8  max timestamp            set to the append time for LogAppendTime
//	 43     8  producer id
//	 51     2  producer epoch
//	 53     4  base sequence
//	 57     4  record count
//	 61        records (compressed as the attributes say)
//
// The CRC does not cover the base offset, the length or the leader epoch, so
// assigning offsets costs two stores; setting LogAppendTime changes covered
// bytes and recomputes the CRC.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// batchHeaderSize is the fixed part of a v2 batch.
	batchHeaderSize = 61
	// logOverhead is the base offset and length, which precede what the
	// length counts.
	logOverhead = 12
	// legacyRecordOverhead is the smallest length Kafka accepts before it
	// looks at the magic (a v0 message).
	legacyRecordOverhead = 14

	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20

	// noTimestamp, noProducerID, noSequence are Kafka's "absent" values.
	noTimestamp  = -1
	noProducerID = -1
	noSequence   = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the fixed part of a batch, decoded.
type header struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Count           int32
}

// parseHeader decodes the fixed part of a batch; p must hold at least
// batchHeaderSize bytes.
func parseHeader(p []byte) header {
	_ = p[batchHeaderSize-1]
	return header{
		BaseOffset:      int64(binary.BigEndian.Uint64(p[offBaseOffset:])),
		Length:          int32(binary.BigEndian.Uint32(p[offLength:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(p[offLeaderEpoch:])),
		Magic:           int8(p[offMagic]),
		CRC:             binary.BigEndian.Uint32(p[offCRC:]),
		Attributes:      int16(binary.BigEndian.Uint16(p[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(p[offLastOffsetDelta:])),
		BaseTimestamp:   int64(binary.BigEndian.Uint64(p[offBaseTimestamp:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(p[offMaxTimestamp:])),
		ProducerID:      int64(binary.BigEndian.Uint64(p[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(p[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(p[offBaseSequence:])),
		Count:           int32(binary.BigEndian.Uint32(p[offRecordCount:])),
	}
}

// size is the whole batch's length in bytes.
func (h *header) size() int64 { return int64(h.Length) + logOverhead }

func (h *header) lastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

func (h *header) nextOffset() int64 { return h.lastOffset() + 1 }

func (h *header) compression() int { return int(h.Attributes & attrCompressionMask) }

func (h *header) logAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

func (h *header) control() bool { return h.Attributes&attrControl != 0 }

func (h *header) hasProducerID() bool { return h.ProducerID > noProducerID }

// lastSequence is the sequence number of the batch's last record; sequences
// wrap from MaxInt32 to 0.
func (h *header) lastSequence() int32 {
	return incrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

func incrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// batchCRC computes the checksum a batch should carry.
func batchCRC(p []byte) uint32 {
	return crc32.Checksum(p[offAttributes:], castagnoli)
}

// checkStored verifies a batch read back from disk (or received from a
// leader): its framing, magic, checksum, and that it starts at want. It
// returns the decoded header. It never trusts p beyond what it checked.
func checkStored(p []byte, want int64) (header, error) {
	if len(p) < batchHeaderSize {
		return header{}, corruptError("batch at offset %d: %d bytes is shorter than a batch header", want, len(p))
	}
	h := parseHeader(p)
	switch {
	case h.Magic != 2:
		return h, corruptError("batch at offset %d: magic %d", want, h.Magic)
	case h.size() != int64(len(p)):
		return h, corruptError("batch at offset %d: length %d does not match its %d bytes", want, h.size(), len(p))
	case h.BaseOffset != want:
		return h, corruptError("batch expected at offset %d has base offset %d", want, h.BaseOffset)
	case h.LastOffsetDelta < 0:
		return h, corruptError("batch at offset %d: negative last offset delta %d", want, h.LastOffsetDelta)
	case batchCRC(p) != h.CRC:
		return h, corruptError("batch at offset %d: crc %08x, computed %08x", want, h.CRC, batchCRC(p))
	}
	return h, nil
}

// checkHeaderShape checks the parts of a header that can be checked without
// the rest of the batch, for walking a segment by headers alone.
func checkHeaderShape(h *header, want int64) error {
	switch {
	case h.Magic != 2:
		return corruptError("batch header at offset %d: magic %d", want, h.Magic)
	case h.Length < batchHeaderSize-logOverhead:
		return corruptError("batch header at offset %d: length %d is too short", want, h.Length)
	case h.BaseOffset != want:
		return corruptError("batch header expected at offset %d has base offset %d", want, h.BaseOffset)
	case h.LastOffsetDelta < 0:
		return corruptError("batch header at offset %d: negative last offset delta %d", want, h.LastOffsetDelta)
	}
	return nil
}

// TimestampType is a topic's message.timestamp.type.
type TimestampType int8

const (
	// CreateTime keeps the producer's timestamps (Kafka's default).
	CreateTime TimestampType = iota
	// LogAppendTime stamps each batch with the broker's clock on append.
	LogAppendTime
)

// clientRules are the checks a producer's batch must pass.
type clientRules struct {
	maxMessageBytes int
	timestampType   TimestampType
	// beforeMax and afterMax bound how far a CreateTime timestamp may lie
	// before and after now; negative means unbounded.
	beforeMax time.Duration
	afterMax  time.Duration
}

// validateClient checks a producer's records for a leader append, in the
// order Kafka checks them, and returns the one batch's header. It does not
// decompress anything; for an uncompressed batch it walks the record length
// prefixes (not the records) so that a batch whose framing lies is refused.
//
// Kafka's answers, which this follows:
//   - no complete batch, more than one batch or trailing bytes, magic other
//     than 2 (Produce v3+ carries only magic 2), a base offset other than 0,
//     an offset range that disagrees with the record count, a control batch,
//     an idempotent batch without a sequence, record framing that does not
//     add up: INVALID_RECORD;
//   - a length below 14 or a magic outside 0..2 (Kafka's batch iterator
//     refuses these before anything else), a batch shorter than its
//     header, a wrong CRC: CORRUPT_MESSAGE;
//   - larger than max.message.bytes: MESSAGE_TOO_LARGE;
//   - a timestamp out of range, or a producer claiming LogAppendTime:
//     INVALID_TIMESTAMP;
//   - compression codec 5..7: UNSUPPORTED_COMPRESSION_TYPE (Kafka fails on
//     an unmapped exception there, UNKNOWN_SERVER_ERROR).
func validateClient(p []byte, rules *clientRules, nowMs int64) (header, error) {
	if len(p) < logOverhead {
		return header{}, newError(kerr.InvalidRecord, "produce records hold no complete batch (%d bytes)", len(p))
	}
	length := int32(binary.BigEndian.Uint32(p[offLength:]))
	if length < legacyRecordOverhead {
		return header{}, newError(kerr.CorruptMessage, "record size %d is less than the minimum record overhead (%d)", length, legacyRecordOverhead)
	}
	if len(p) <= offMagic {
		return header{}, newError(kerr.InvalidRecord, "produce records hold no complete batch (%d bytes)", len(p))
	}
	if magic := int8(p[offMagic]); magic < 0 || magic > 2 {
		return header{}, newError(kerr.CorruptMessage, "invalid magic found in record: %d", magic)
	}
	size := int64(length) + logOverhead
	switch {
	case int64(len(p)) < size:
		return header{}, newError(kerr.InvalidRecord, "produce records hold no complete batch (%d bytes, batch claims %d)", len(p), size)
	case int64(len(p)) > size:
		return header{}, newError(kerr.InvalidRecord, "produce records hold more than one batch (%d bytes after the first)", int64(len(p))-size)
	case p[offMagic] != 2:
		return header{}, newError(kerr.InvalidRecord, "produce requests may only contain record batches with magic version 2, got %d", p[offMagic])
	}
	if base := int64(binary.BigEndian.Uint64(p)); base != 0 {
		return header{}, newError(kerr.InvalidRecord, "the base offset of the record batch should be 0, but it is %d", base)
	}
	if rules.maxMessageBytes > 0 && size > int64(rules.maxMessageBytes) {
		return header{}, newError(kerr.MessageTooLarge, "the record batch size is %d bytes which exceeds the maximum configured value of %d", size, rules.maxMessageBytes)
	}
	if size < batchHeaderSize {
		return header{}, newError(kerr.CorruptMessage, "record batch is corrupt (the size %d is smaller than the minimum allowed overhead %d)", size, batchHeaderSize)
	}
	h := parseHeader(p)
	if crc := batchCRC(p); crc != h.CRC {
		return h, newError(kerr.CorruptMessage, "record is corrupt (stored crc = %d, computed %d)", h.CRC, crc)
	}
	if err := validateClientHeader(&h); err != nil {
		return h, err
	}
	if h.compression() == 0 {
		if err := walkRecordLengths(p[batchHeaderSize:], h.Count); err != nil {
			return h, err
		}
	}
	return h, validateTimestamps(&h, rules, nowMs)
}

func validateClientHeader(h *header) error {
	countFromOffsets := int64(h.LastOffsetDelta) + 1
	switch {
	case countFromOffsets <= 0:
		return newError(kerr.InvalidRecord, "batch has an invalid offset range: [0, %d]", h.LastOffsetDelta)
	case h.Count <= 0:
		return newError(kerr.InvalidRecord, "invalid reported count for record batch: %d", h.Count)
	case countFromOffsets != int64(h.Count):
		return newError(kerr.InvalidRecord, "inconsistent batch offset range [0, %d] and count of records %d", h.LastOffsetDelta, h.Count)
	case h.control():
		return newError(kerr.InvalidRecord, "clients are not allowed to write control records")
	case h.hasProducerID() && h.BaseSequence < 0:
		return newError(kerr.InvalidRecord, "invalid sequence number %d in record batch with producerId %d", h.BaseSequence, h.ProducerID)
	case h.compression() > 4:
		return newError(kerr.UnsupportedCompressionType, "unknown compression type id %d", h.compression())
	}
	return nil
}

// walkRecordLengths checks that recs is exactly count length-prefixed
// records. It reads one varint per record and skips the rest.
func walkRecordLengths(recs []byte, count int32) error {
	for i := int32(0); i < count; i++ {
		n, w := binary.Varint(recs)
		if w <= 0 || n <= 0 || n > int64(len(recs)-w) {
			return newError(kerr.InvalidRecord, "invalid record size at record %d of %d", i, count)
		}
		recs = recs[w+int(n):]
	}
	if len(recs) != 0 {
		return newError(kerr.InvalidRecord, "incorrect declared batch size, %d bytes remain after %d records", len(recs), count)
	}
	return nil
}

// validateTimestamps applies message.timestamp.type and the before/after
// bounds at the batch level: Kafka checks every record, this checks the
// base and max timestamps, which bound the records of a well-formed batch.
func validateTimestamps(h *header, rules *clientRules, nowMs int64) error {
	if rules.timestampType == LogAppendTime {
		if h.logAppendTime() {
			return newError(kerr.InvalidTimestamp, "producer should not set timestamp type to LogAppendTime")
		}
		return nil
	}
	if h.logAppendTime() && h.MaxTimestamp == noTimestamp {
		return newError(kerr.InvalidTimestamp, "producer should not set timestamp type to LogAppendTime")
	}
	for _, ts := range []int64{h.BaseTimestamp, h.MaxTimestamp} {
		if ts == noTimestamp {
			continue
		}
		diff := nowMs - ts
		if (rules.beforeMax >= 0 && diff > rules.beforeMax.Milliseconds()) ||
			(rules.afterMax >= 0 && -diff > rules.afterMax.Milliseconds()) {
			return newError(kerr.InvalidTimestamp, "timestamp %d of the batch is out of range of %d (-%v, +%v)", ts, nowMs, rules.beforeMax, rules.afterMax)
		}
	}
	return nil
}

// assignLeader rewrites a validated client batch in place for the log: its
// base offset and leader epoch, and for LogAppendTime its timestamp type and
// max timestamp (then its CRC). A CreateTime topic clears a LogAppendTime
// flag the producer set, as Kafka does.
func assignLeader(p []byte, h *header, base int64, epoch int32, tsType TimestampType, nowMs int64) {
	binary.BigEndian.PutUint64(p[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(p[offLeaderEpoch:], uint32(epoch))
	h.BaseOffset, h.LeaderEpoch = base, epoch
	attrs := h.Attributes
	maxTs := h.MaxTimestamp
	if tsType == LogAppendTime {
		attrs |= attrLogAppendTime
		maxTs = nowMs
	} else {
		attrs &^= attrLogAppendTime
	}
	if attrs == h.Attributes && maxTs == h.MaxTimestamp {
		return
	}
	binary.BigEndian.PutUint16(p[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint64(p[offMaxTimestamp:], uint64(maxTs))
	h.Attributes, h.MaxTimestamp = attrs, maxTs
	h.CRC = batchCRC(p)
	binary.BigEndian.PutUint32(p[offCRC:], h.CRC)
}
