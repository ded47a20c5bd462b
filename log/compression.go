package log

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Compression is a topic's compression.type: the codec its batches are
// stored with. CompressionProducer (the zero value, Kafka's default) keeps
// each batch as the producer compressed it; any other value makes a leader
// append recompress a batch in another codec, as Kafka's LogValidator
// does, so a topic set to zstd holds zstd whatever its producers send.
type Compression int8

const (
	CompressionProducer Compression = iota
	CompressionNone
	CompressionGzip
	CompressionSnappy
	CompressionLZ4
	CompressionZstd
)

// ParseCompression reads a compression.type value: producer,
// uncompressed, gzip, snappy, lz4 or zstd.
func ParseCompression(s string) (Compression, error) {
	for c, name := range compressionNames {
		if s == name {
			return Compression(c), nil
		}
	}
	return 0, fmt.Errorf("unknown compression type %q", s)
}

var compressionNames = [...]string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}

func (c Compression) String() string {
	if c >= 0 && int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("Compression(%d)", c)
}

// codec is the batch attribute's codec id of c (none 0, gzip 1, snappy 2,
// lz4 3, zstd 4); c must not be CompressionProducer.
func (c Compression) codec() int { return int(c) - int(CompressionNone) }

// kgoCodec is franz-go's codec of c, at its default level.
func (c Compression) kgoCodec() kgo.CompressionCodec {
	switch c {
	case CompressionGzip:
		return kgo.GzipCompression()
	case CompressionSnappy:
		return kgo.SnappyCompression()
	case CompressionLZ4:
		return kgo.Lz4Compression()
	case CompressionZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// codecCache holds a log's compressor for its topic's compression.type and a
// decompressor, made when first needed.
type codecCache struct {
	decomp kgo.Decompressor
	comp   kgo.Compressor
	compOf Compression
	buf    bytes.Buffer
}

func (cs *codecCache) decompressor() kgo.Decompressor {
	if cs.decomp == nil {
		cs.decomp = kgo.DefaultDecompressor()
	}
	return cs.decomp
}

func (cs *codecCache) compressor(c Compression) (kgo.Compressor, error) {
	if cs.comp == nil || cs.compOf != c {
		comp, err := kgo.DefaultCompressor(c.kgoCodec())
		if err != nil {
			return nil, err
		}
		cs.comp, cs.compOf = comp, c
	}
	return cs.comp, nil
}

// recompress returns the validated client batch p (header h) with its
// records in codec to, and the new batch's header: the records
// decompressed if need be, checked to be exactly h.Count length-prefixed
// records (the framing check validateClient leaves to the decompressor for
// a compressed batch), compressed again, and the length, attributes and
// CRC made to match. The other fields (producer id, sequence, timestamps,
// transactional bit) are kept, so idempotence and transactions see the
// batch the producer sent.
//
// Kafka's answers: records that do not decompress, or do not add up to the
// batch's count, are CORRUPT_MESSAGE; a recompressed batch larger than
// max.message.bytes is MESSAGE_TOO_LARGE (Kafka checks the size it will
// store).
func (cs *codecCache) recompress(p []byte, h *header, to Compression, maxMessageBytes int) ([]byte, header, error) {
	recs := p[batchHeaderSize:]
	if c := h.compression(); c != 0 {
		out, err := cs.decompressor().Decompress(recs, kgo.CompressionCodecType(c))
		if err != nil {
			return nil, header{}, newError(kerr.CorruptMessage, "the records do not decompress: %v", err)
		}
		// validateClient walked an uncompressed batch's framing already.
		if err := walkRecordLengths(out, h.Count); err != nil {
			return nil, header{}, newError(kerr.CorruptMessage, "the decompressed records are corrupt: %v", err)
		}
		recs = out
	}
	if to != CompressionNone {
		comp, err := cs.compressor(to)
		if err != nil {
			return nil, header{}, newError(kerr.UnknownServerError, "compressor for %s: %v", to, err)
		}
		cs.buf.Reset()
		out, codec := comp.Compress(&cs.buf, recs)
		if out == nil || int(codec) != to.codec() {
			return nil, header{}, newError(kerr.UnknownServerError, "compressing %d bytes with %s failed", len(recs), to)
		}
		recs = out
	}
	q := make([]byte, batchHeaderSize+len(recs))
	copy(q, p[:batchHeaderSize])
	copy(q[batchHeaderSize:], recs)
	binary.BigEndian.PutUint32(q[offLength:], uint32(len(q)-logOverhead))
	attrs := uint16(h.Attributes)&^attrCompressionMask | uint16(to.codec())
	binary.BigEndian.PutUint16(q[offAttributes:], attrs)
	binary.BigEndian.PutUint32(q[offCRC:], batchCRC(q))
	nh := parseHeader(q)
	if maxMessageBytes > 0 && nh.size() > int64(maxMessageBytes) {
		return nil, header{}, newError(kerr.MessageTooLarge, "the record batch recompressed with %s is %d bytes, which exceeds the maximum configured value of %d",
			to, nh.size(), maxMessageBytes)
	}
	return q, nh, nil
}
