package node

import (
	"encoding/binary"

	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch response is mostly record batches that already sit in segment
// files. To send them without copying them through the broker (sendfile in
// production), the response is laid out as parts: encoded bytes, and
// between them the record batches as file ranges. encodeFetchFrame writes
// exactly the bytes kmsg's FetchResponse.AppendTo would (fetch_encode_test.go
// checks it, version by version), except that each partition's
// RecordBatches come from its log.Records.
//
// Fields Sluice never sets are encoded as their defaults: no aborted
// transactions, and none of the tagged fields (diverging epoch, current
// leader, snapshot id, node endpoints).

// framePart is one piece of a response frame: bytes, or one chunk of
// record batches in a segment file.
type framePart struct {
	bytes []byte
	chunk log.Chunk
}

func (p framePart) size() int64 {
	if p.bytes != nil {
		return int64(len(p.bytes))
	}
	return p.chunk.Size
}

// encodeFetchFrame lays out a whole response frame (size prefix and header
// included). records[t][p] holds the batches of resp.Topics[t].Partitions[p],
// whose RecordBatches field is ignored.
func encodeFetchFrame(correlationID int32, resp *kmsg.FetchResponse, records [][]log.Records, copyMax int64) []framePart {
	e := fetchEncoder{flexible: resp.Version >= 12, version: resp.Version, copyMax: copyMax}
	e.buf = append(e.buf, 0, 0, 0, 0) // the frame size, patched below
	hv, _ := wire.ResponseHeaderVersion(resp.Key(), resp.Version)
	e.buf = wire.AppendResponseHeader(e.buf, correlationID, hv)
	if e.version >= 1 {
		e.int32(resp.ThrottleMillis)
	}
	if e.version >= 7 {
		e.int16(resp.ErrorCode)
		e.int32(resp.SessionID)
	}
	e.arrayLen(len(resp.Topics))
	for t := range resp.Topics {
		rt := &resp.Topics[t]
		if e.version <= 12 {
			e.string(rt.Topic)
		} else {
			e.buf = append(e.buf, rt.TopicID[:]...)
		}
		e.arrayLen(len(rt.Partitions))
		for p := range rt.Partitions {
			e.partition(&rt.Partitions[p], records[t][p])
		}
		e.tags()
	}
	e.tags()
	e.flush()
	var total int64
	for _, part := range e.parts {
		total += part.size()
	}
	binary.BigEndian.PutUint32(e.parts[0].bytes, uint32(total-4))
	return e.parts
}

type fetchEncoder struct {
	version  int16
	flexible bool
	copyMax  int64 // chunks up to this size are read in (copyChunk)
	buf      []byte
	parts    []framePart
}

func (e *fetchEncoder) partition(rp *kmsg.FetchResponseTopicPartition, recs log.Records) {
	e.int32(rp.Partition)
	e.int16(rp.ErrorCode)
	e.int64(rp.HighWatermark)
	e.int64(rp.LastStableOffset) // v4+, the oldest version served
	if e.version >= 5 {
		e.int64(rp.LogStartOffset)
	}
	// Aborted transactions: none; null unless the client reads committed
	// data (READ_COMMITTED gets an empty list), as Kafka answers.
	if rp.AbortedTransactions == nil {
		e.nullArray()
	} else {
		e.arrayLen(0)
	}
	if e.version >= 11 {
		e.int32(rp.PreferredReadReplica)
	}
	e.bytesLen(recs.Size)
	for _, c := range recs.Chunks {
		if c.Size <= e.copyMax && e.copyChunk(c) {
			continue
		}
		e.flush()
		e.parts = append(e.parts, framePart{chunk: c})
	}
	e.tags()
}

// defaultFetchCopyMax is Config.FetchCopyMax's default: the largest chunk
// copied into the response's bytes instead of being sent from its file.
// A file range costs the writer a
// descriptor's dup and close, a sendfile and a write of its own for the
// bytes after it; a small one costs less as one read here, its bytes then
// going out with the rest in one writev. Offset commits replicated to
// followers are chunks of a few hundred bytes: there, four syscalls of
// about ten a commit.
const defaultFetchCopyMax = 16 << 10

// copyChunk reads c into the current bytes part and reports whether it
// could; on a failed read the chunk is sent from its file instead, where
// the failure shows as it does for any other.
func (e *fetchEncoder) copyChunk(c log.Chunk) bool {
	start := len(e.buf)
	e.buf = append(e.buf, make([]byte, c.Size)...)
	if n, _ := c.File.ReadAt(e.buf[start:], c.Position); int64(n) < c.Size {
		e.buf = e.buf[:start]
		return false
	}
	return true
}

// flush closes the current bytes part.
func (e *fetchEncoder) flush() {
	if len(e.buf) > 0 {
		e.parts = append(e.parts, framePart{bytes: e.buf})
		e.buf = nil
	}
}

func (e *fetchEncoder) int16(v int16) { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v)) }
func (e *fetchEncoder) int32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *fetchEncoder) int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

func (e *fetchEncoder) arrayLen(n int) {
	if e.flexible {
		e.buf = binary.AppendUvarint(e.buf, uint64(n)+1)
		return
	}
	e.int32(int32(n))
}

func (e *fetchEncoder) nullArray() {
	if e.flexible {
		e.buf = append(e.buf, 0)
		return
	}
	e.int32(-1)
}

func (e *fetchEncoder) bytesLen(n int64) {
	if e.flexible {
		e.buf = binary.AppendUvarint(e.buf, uint64(n)+1)
		return
	}
	e.int32(int32(n))
}

func (e *fetchEncoder) string(s string) {
	if e.flexible {
		e.buf = binary.AppendUvarint(e.buf, uint64(len(s))+1)
	} else {
		e.int16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

// tags writes an empty tagged-field section, in flexible versions.
func (e *fetchEncoder) tags() {
	if e.flexible {
		e.buf = append(e.buf, 0)
	}
}
