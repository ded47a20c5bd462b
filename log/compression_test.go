package log

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// decodeValues returns the record values of the one batch p, decompressed.
func decodeValues(t *testing.T, p []byte) (header, [][]byte) {
	t.Helper()
	h := parseHeader(p)
	if crc := batchCRC(p); crc != h.CRC {
		t.Fatalf("stored batch has a wrong CRC")
	}
	recs := p[batchHeaderSize:h.size()]
	if c := h.compression(); c != 0 {
		out, err := kgo.DefaultDecompressor().Decompress(recs, kgo.CompressionCodecType(c))
		must(t, err)
		recs = out
	}
	var vals [][]byte
	for range h.Count {
		n, w := binary.Varint(recs)
		body := recs[w : w+int(n)]
		recs = recs[w+int(n):]
		// attributes, ts delta, offset delta, key (null), value
		_, a := binary.Varint(body[1:])
		_, b := binary.Varint(body[1+a:])
		_, c := binary.Varint(body[1+a+b:])
		vl, d := binary.Varint(body[1+a+b+c:])
		start := 1 + a + b + c + d
		vals = append(vals, body[start:start+int(vl)])
	}
	return h, vals
}

// A topic whose compression.type names a codec stores every batch in it,
// whatever the producer used, with the records and the producer's fields
// as they were sent; producer keeps the producer's codec.
func TestCompressionTypeRecompressesOnLeaderAppend(t *testing.T) {
	sources := []struct {
		compress bool
		codec    kgo.CompressionCodec
	}{{false, kgo.NoCompression()}, {true, kgo.GzipCompression()}, {true, kgo.SnappyCompression()}, {true, kgo.Lz4Compression()}, {true, kgo.ZstdCompression()}}
	for _, to := range []Compression{CompressionProducer, CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		for si, src := range sources {
			h := newHarness(t, 1)
			cfg := h.config("t-0")
			cfg.Compression = to
			l := h.open(cfg)
			s := spec(values(30, 200, "r")...).at(1000).idempotent(7, 2, 0)
			s.compress, s.codec = src.compress, src.codec
			res := appendLeader(t, l, s, 3)
			stored, vals := decodeValues(t, readAll(t, l, 0))
			want := si // the source's codec id
			if to != CompressionProducer {
				want = to.codec()
			}
			if stored.compression() != want {
				t.Fatalf("%s from codec %d: stored codec %d, want %d", to, si, stored.compression(), want)
			}
			if len(vals) != 30 || !bytes.Equal(vals[29], []byte(values(30, 200, "r")[29])) {
				t.Fatalf("%s from codec %d: records changed: %d", to, si, len(vals))
			}
			if stored.ProducerID != 7 || stored.ProducerEpoch != 2 || stored.BaseSequence != 0 || stored.LeaderEpoch != 3 ||
				stored.BaseOffset != 0 || res.LastOffset != 29 {
				t.Fatalf("%s from codec %d: header %+v", to, si, stored)
			}
			// The producer's retry is still known as one.
			again := appendLeader(t, l, s, 3)
			if !again.Duplicate || again.BaseOffset != 0 {
				t.Fatalf("%s from codec %d: retry %+v", to, si, again)
			}
			h.close(l)
		}
	}
}

// Compressed records that do not decompress, or whose framing does not
// add up to the batch's count, are CORRUPT_MESSAGE when the broker must
// recompress them; a recompressed batch over max.message.bytes is
// MESSAGE_TOO_LARGE.
func TestCompressionTypeRefusesWhatItCannotRecompress(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.Compression = CompressionZstd
	l := h.open(cfg)

	s := spec("a", "b", "c")
	s.compress, s.codec = true, kgo.GzipCompression()
	garbled := s.build()
	garbled[len(garbled)-3] ^= 0xff
	fixCRC(garbled)
	_, err := l.AppendLeader(garbled, 0)
	mustCode(t, err, kerr.CorruptMessage)

	short := spec("a", "b").build() // count 2 ...
	binary.BigEndian.PutUint32(short[offRecordCount:], 3)
	binary.BigEndian.PutUint32(short[offLastOffsetDelta:], 2)
	fixCRC(short)
	_, err = l.AppendLeader(short, 0) // ... claims 3: framing refused before any recompression
	mustCode(t, err, kerr.InvalidRecord)
	lz := spec("a", "b")
	lz.compress, lz.codec = true, kgo.Lz4Compression()
	p := lz.build()
	binary.BigEndian.PutUint32(p[offRecordCount:], 3)
	binary.BigEndian.PutUint32(p[offLastOffsetDelta:], 2)
	fixCRC(p)
	_, err = l.AppendLeader(p, 0)
	mustCode(t, err, kerr.CorruptMessage)

	cfg.Compression = CompressionNone
	cfg.MaxMessageBytes = 2000
	must(t, l.Reconfigure(cfg))
	big := spec(string(make([]byte, 5000)))
	big.compress, big.codec = true, kgo.ZstdCompression()
	_, err = l.AppendLeader(big.build(), 0)
	mustCode(t, err, kerr.MessageTooLarge)
	if l.LogEndOffset() != 0 {
		t.Fatalf("a refused batch was appended: end %d", l.LogEndOffset())
	}
	h.close(l)
}

func TestParseCompression(t *testing.T) {
	for _, c := range []Compression{CompressionProducer, CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		got, err := ParseCompression(c.String())
		must(t, err)
		if got != c {
			t.Fatalf("%s read as %s", c, got)
		}
	}
	if _, err := ParseCompression("brotli"); err == nil {
		t.Fatal("brotli accepted")
	}
}
