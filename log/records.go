package log

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Records inside a batch are decoded only where a record-level answer is
// needed (ListOffsets by timestamp and the max timestamp), never on the
// append or fetch paths. A record is
//
//	length varint, attributes int8, timestamp delta varlong,
//	offset delta varint, key, value, headers
//
// and only the first three fields are read here.

// visitRecords calls visit with the offset and timestamp of each record of
// a stored batch p (already checked by checkStored), in order, until visit
// returns false. A compressed batch is decompressed with dec.
func visitRecords(p []byte, h *header, dec kgo.Decompressor, visit func(offset, ts int64) bool) error {
	recs := p[batchHeaderSize:]
	if c := h.compression(); c != 0 {
		if c > 4 {
			return corruptError("batch at offset %d: unknown compression %d", h.BaseOffset, c)
		}
		out, err := dec.Decompress(recs, kgo.CompressionCodecType(c))
		if err != nil {
			return corruptError("batch at offset %d: decompress: %v", h.BaseOffset, err)
		}
		recs = out
	}
	for i := int32(0); i < h.Count; i++ {
		n, w := binary.Varint(recs)
		if w <= 0 || n <= 0 || n > int64(len(recs)-w) {
			return corruptError("batch at offset %d: record %d has a bad length", h.BaseOffset, i)
		}
		body := recs[w : w+int(n)]
		recs = recs[w+int(n):]
		if len(body) < 1 {
			return corruptError("batch at offset %d: record %d is empty", h.BaseOffset, i)
		}
		tsDelta, w1 := binary.Varint(body[1:])
		if w1 <= 0 {
			return corruptError("batch at offset %d: record %d has a bad timestamp delta", h.BaseOffset, i)
		}
		offDelta, w2 := binary.Varint(body[1+w1:])
		if w2 <= 0 {
			return corruptError("batch at offset %d: record %d has a bad offset delta", h.BaseOffset, i)
		}
		ts := h.BaseTimestamp + tsDelta
		if h.logAppendTime() {
			ts = h.MaxTimestamp
		}
		if !visit(h.BaseOffset+offDelta, ts) {
			return nil
		}
	}
	return nil
}
