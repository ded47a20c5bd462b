package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAppendLeaderAssignsOffsetsAndEpoch(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	r1 := appendLeader(t, l, spec("a", "b", "c").at(h.nowMs()), 3)
	r2 := appendLeader(t, l, spec("d").at(h.nowMs()), 3)
	if r1.BaseOffset != 0 || r1.LastOffset != 2 || r2.BaseOffset != 3 || r2.LastOffset != 3 {
		t.Fatalf("offsets %+v %+v", r1, r2)
	}
	if r1.AppendTime != -1 || l.LogEndOffset() != 4 {
		t.Fatalf("append time %d, log end %d", r1.AppendTime, l.LogEndOffset())
	}
	bases, batches := splitBatches(t, readAll(t, l, 0))
	if len(bases) != 2 || bases[0] != 0 || bases[1] != 3 {
		t.Fatalf("bases %v", bases)
	}
	for _, b := range batches {
		hd, err := checkStored(b, parseHeader(b).BaseOffset)
		must(t, err)
		if hd.LeaderEpoch != 3 {
			t.Fatalf("leader epoch %d", hd.LeaderEpoch)
		}
	}
	if got := l.Epochs(); len(got) != 1 || got[0] != (EpochEntry{3, 0}) {
		t.Fatalf("epochs %v", got)
	}
}

func TestAppendLeaderLogAppendTime(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.TimestampType = LogAppendTime
	l := h.open(cfg)
	h.advance(5 * time.Second)
	res := appendLeader(t, l, spec("a", "b").at(1000), 0)
	if res.AppendTime != h.nowMs() {
		t.Fatalf("append time %d, want %d", res.AppendTime, h.nowMs())
	}
	b := readAll(t, l, 0)
	hd, err := checkStored(b, 0)
	must(t, err)
	if !hd.logAppendTime() || hd.MaxTimestamp != res.AppendTime {
		t.Fatalf("stored attributes %x max timestamp %d", hd.Attributes, hd.MaxTimestamp)
	}
}

// TestAppendLeaderRejections checks every refusal of a producer's batch
// against the error Kafka answers with.
func TestAppendLeaderRejections(t *testing.T) {
	valid := func() []byte { return spec("a", "b").at(0).build() }
	set32 := func(off int, v uint32) func([]byte) []byte {
		return func(p []byte) []byte { binary.BigEndian.PutUint32(p[off:], v); fixCRC(p); return p }
	}
	cases := []struct {
		name   string
		batch  func() []byte
		want   *kerr.Error
		config func(*Config)
	}{
		{"empty", func() []byte { return nil }, kerr.InvalidRecord, nil},
		{"cut short", func() []byte { return valid()[:40] }, kerr.InvalidRecord, nil},
		{"trailing bytes", func() []byte { return append(valid(), 0, 0, 0) }, kerr.InvalidRecord, nil},
		{"two batches", func() []byte { return append(valid(), valid()...) }, kerr.InvalidRecord, nil},
		{"length below 14", func() []byte { return set32(offLength, 5)(valid()) }, kerr.CorruptMessage, nil},
		{"magic 7", func() []byte { p := valid(); p[offMagic] = 7; return p }, kerr.CorruptMessage, nil},
		{"magic 1", func() []byte { p := valid(); p[offMagic] = 1; return p }, kerr.InvalidRecord, nil},
		{"base offset set", func() []byte { p := valid(); binary.BigEndian.PutUint64(p, 9); return p }, kerr.InvalidRecord, nil},
		{"too large", valid, kerr.MessageTooLarge, func(c *Config) { c.MaxMessageBytes = 70 }},
		{"larger than a segment", valid, kerr.RecordListTooLarge, func(c *Config) { c.SegmentBytes = 70 }},
		{"crc", func() []byte { p := valid(); p[len(p)-1] ^= 1; return p }, kerr.CorruptMessage, nil},
		{"count disagrees", func() []byte { return set32(offRecordCount, 3)(valid()) }, kerr.InvalidRecord, nil},
		{"count zero", func() []byte { p := set32(offRecordCount, 0)(valid()); return p }, kerr.InvalidRecord, nil},
		{"negative delta", func() []byte { return set32(offLastOffsetDelta, math.MaxUint32)(valid()) }, kerr.InvalidRecord, nil},
		{"control batch", func() []byte {
			s := spec("a").at(0)
			s.attrs = attrControl
			return s.build()
		}, kerr.InvalidRecord, nil},
		{"idempotent without sequence", func() []byte { return spec("a").at(0).idempotent(7, 0, -1).build() }, kerr.InvalidRecord, nil},
		{"compression 6", func() []byte {
			p := valid()
			binary.BigEndian.PutUint16(p[offAttributes:], 6)
			fixCRC(p)
			return p
		}, kerr.UnsupportedCompressionType, nil},
		{"record framing", func() []byte {
			p := valid()
			p[batchHeaderSize] = 0x7e // first record's length varint
			fixCRC(p)
			return p
		}, kerr.InvalidRecord, nil},
		{"producer claims LogAppendTime", func() []byte {
			s := spec("a").at(0)
			s.attrs = attrLogAppendTime
			return s.build()
		}, kerr.InvalidTimestamp, func(c *Config) { c.TimestampType = LogAppendTime }},
		{"timestamp too old", valid, kerr.InvalidTimestamp, func(c *Config) { c.TimestampBeforeMax = time.Hour }},
		{"timestamp too new", func() []byte { return spec("a").at(epoch0.Add(2 * time.Hour).UnixMilli()).build() }, kerr.InvalidTimestamp, func(c *Config) { c.TimestampAfterMax = time.Hour }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 1)
			cfg := h.config("t-0")
			if c.config != nil {
				c.config(&cfg)
			}
			l := h.open(cfg)
			_, err := l.AppendLeader(c.batch(), 0)
			if ErrorCode(err) != c.want {
				t.Fatalf("error %v, want %s", err, c.want.Message)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("a refused batch changed the log: end %d size %d", l.LogEndOffset(), l.Size())
			}
		})
	}
}

func TestAppendLeaderFencesOlderEpoch(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	appendLeader(t, l, spec("a").at(0), 5)
	_, err := l.AppendLeader(spec("b").at(0).build(), 4)
	mustCode(t, err, kerr.FencedLeaderEpoch)
	appendLeader(t, l, spec("c").at(0), 6)
	if got := l.Epochs(); len(got) != 2 || got[1] != (EpochEntry{6, 1}) {
		t.Fatalf("epochs %v", got)
	}
}

func TestIdempotentProducer(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	first := appendLeader(t, l, spec("a", "b").at(0).idempotent(42, 1, 0), 0)
	appendLeader(t, l, spec("c").at(0).idempotent(42, 1, 2), 0)

	// A retry of the first batch gets its original offsets and writes nothing.
	dup, err := l.AppendLeader(spec("a", "b").at(0).idempotent(42, 1, 0).build(), 0)
	must(t, err)
	if !dup.Duplicate || dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset || l.LogEndOffset() != 3 {
		t.Fatalf("duplicate %+v, log end %d", dup, l.LogEndOffset())
	}
	// A gap is out of order; so is a repeat of only part of a batch.
	_, err = l.AppendLeader(spec("x").at(0).idempotent(42, 1, 5).build(), 0)
	mustCode(t, err, kerr.OutOfOrderSequenceNumber)
	_, err = l.AppendLeader(spec("x").at(0).idempotent(42, 1, 1).build(), 0)
	mustCode(t, err, kerr.OutOfOrderSequenceNumber)
	// An older epoch is fenced; a newer one must start at sequence 0.
	_, err = l.AppendLeader(spec("x").at(0).idempotent(42, 0, 3).build(), 0)
	mustCode(t, err, kerr.InvalidProducerEpoch)
	_, err = l.AppendLeader(spec("x").at(0).idempotent(42, 2, 3).build(), 0)
	mustCode(t, err, kerr.OutOfOrderSequenceNumber)
	appendLeader(t, l, spec("x").at(0).idempotent(42, 2, 0), 0)
	// A producer the log does not know may start anywhere.
	appendLeader(t, l, spec("y").at(0).idempotent(43, 0, 17), 0)
	if l.LogEndOffset() != 5 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
}

func TestIdempotentSequenceWraps(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	appendLeader(t, l, spec("a", "b").at(0).idempotent(1, 0, math.MaxInt32-1), 0)
	appendLeader(t, l, spec("c").at(0).idempotent(1, 0, 0), 0)
	if ps := l.Producers(); len(ps) != 1 || ps[0].LastSequence != 0 {
		t.Fatalf("producers %+v", ps)
	}
}

func TestIdempotentRemembersFiveBatches(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	for seq := int32(0); seq < 6; seq++ {
		appendLeader(t, l, spec("v").at(0).idempotent(9, 0, seq), 0)
	}
	// Batches 1..5 are remembered; batch 0 is not, and is out of order.
	res, err := l.AppendLeader(spec("v").at(0).idempotent(9, 0, 1).build(), 0)
	must(t, err)
	if !res.Duplicate || res.BaseOffset != 1 {
		t.Fatalf("retry of seq 1: %+v", res)
	}
	_, err = l.AppendLeader(spec("v").at(0).idempotent(9, 0, 0).build(), 0)
	mustCode(t, err, kerr.OutOfOrderSequenceNumber)
}

func TestProducerStateSurvivesRestartAndCrash(t *testing.T) {
	for _, crash := range []bool{false, true} {
		h := newHarness(t, 2)
		cfg := h.config("t-0")
		cfg.SegmentBytes = 300
		l := h.open(cfg)
		for seq := int32(0); seq < 8; seq++ {
			appendLeader(t, l, spec(values(2, 40, "p")...).at(h.nowMs()).idempotent(5, 3, seq*2), 0)
		}
		if crash {
			h.flush(l)
			h.crash()
		} else {
			h.close(l)
		}
		l = h.open(h.config("t-0"))
		res, err := l.AppendLeader(spec(values(2, 40, "p")...).at(h.nowMs()).idempotent(5, 3, 12).build(), 0)
		must(t, err)
		if !res.Duplicate || res.BaseOffset != 12 {
			t.Fatalf("crash %v: retry after reopen %+v", crash, res)
		}
		_, err = l.AppendLeader(spec("q").at(h.nowMs()).idempotent(5, 3, 17).build(), 0)
		mustCode(t, err, kerr.OutOfOrderSequenceNumber)
		appendLeader(t, l, spec("q").at(h.nowMs()).idempotent(5, 3, 16), 0)
	}
}

func TestAppendFollower(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	b1 := spec("a", "b").at(0)
	b1.leaderEpoch = 2
	b2 := spec("c").at(0)
	b2.leaderEpoch, b2.baseOffset = 4, 2
	p := append(b1.build(), b2.build()...)
	res, err := l.AppendFollower(append(p, b1.build()[:30]...)) // a partial batch at the end is ignored
	must(t, err)
	if res.BaseOffset != 0 || res.LastOffset != 2 || l.LogEndOffset() != 3 {
		t.Fatalf("result %+v end %d", res, l.LogEndOffset())
	}
	if !bytes.Equal(readAll(t, l, 0), p) {
		t.Fatalf("follower batches not stored verbatim")
	}
	if got := l.Epochs(); len(got) != 2 || got[0] != (EpochEntry{2, 0}) || got[1] != (EpochEntry{4, 2}) {
		t.Fatalf("epochs %v", got)
	}
	// Not continuing the log.
	gap := spec("d").at(0)
	gap.baseOffset = 5
	_, err = l.AppendFollower(gap.build())
	if !errors.Is(err, ErrUnexpectedOffset) {
		t.Fatalf("gap: %v", err)
	}
	again := spec("d").at(0)
	again.baseOffset = 2
	_, err = l.AppendFollower(again.build())
	if !errors.Is(err, ErrUnexpectedOffset) {
		t.Fatalf("overlap: %v", err)
	}
	// Corrupt.
	bad := spec("d").at(0)
	bad.baseOffset = 3
	q := bad.build()
	q[len(q)-1] ^= 0x10
	_, err = l.AppendFollower(q)
	mustCode(t, err, kerr.CorruptMessage)
	if l.LogEndOffset() != 3 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
}

func TestAppendFollowerRollsMidFetch(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 200
	l := h.open(cfg)
	var p []byte
	for i := int64(0); i < 10; i++ {
		s := spec(values(1, 50, "f")...).at(0)
		s.baseOffset, s.leaderEpoch = i, 0
		p = append(p, s.build()...)
	}
	_, err := l.AppendFollower(p)
	must(t, err)
	if len(l.Segments()) < 4 {
		t.Fatalf("segments %v", l.Segments())
	}
	if !bytes.Equal(readAll(t, l, 0), p) {
		t.Fatalf("batches changed")
	}
}

func TestFailedWriteLeavesLogConsistent(t *testing.T) {
	h := newHarness(t, 3)
	l := h.open(h.config("t-0"))
	appendLeader(t, l, spec("a").at(0), 0)
	for _, fault := range []error{envErrNoSpace, envErrIO} {
		must(t, h.disk.FailNext(opWrite, fault))
		_, err := l.AppendLeader(spec("b", "c").at(0).build(), 0)
		if !errors.Is(err, fault) || ErrorCode(err) != kerr.KafkaStorageError {
			t.Fatalf("error %v, want %v", err, fault)
		}
		if l.LogEndOffset() != 1 {
			t.Fatalf("log end %d", l.LogEndOffset())
		}
	}
	appendLeader(t, l, spec("d").at(0), 0)
	_, batches := splitBatches(t, readAll(t, l, 0))
	if len(batches) != 2 || parseHeader(batches[1]).BaseOffset != 1 {
		t.Fatalf("batches after failed writes: %d", len(batches))
	}
	h.close(l)
	l = h.open(h.config("t-0"))
	if l.LogEndOffset() != 2 {
		t.Fatalf("log end after reopen %d", l.LogEndOffset())
	}
}

func TestFailedSyncFailsLog(t *testing.T) {
	h := newHarness(t, 3)
	l := h.open(h.config("t-0"))
	appendLeader(t, l, spec("a").at(0), 0)
	must(t, h.disk.FailNext(opSync, envErrIO))
	err := h.wait(func(done func(error)) { l.Flush(1, done) })
	if !errors.Is(err, ErrFailed) || !errors.Is(err, envErrIO) {
		t.Fatalf("flush error %v", err)
	}
	if _, err := l.AppendLeader(spec("b").at(0).build(), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if err := h.wait(l.Close); !errors.Is(err, ErrFailed) {
		t.Fatalf("close: %v", err)
	}
	l = h.open(h.config("t-0"))
	if l.LogEndOffset() != 1 {
		t.Fatalf("reopened log end %d", l.LogEndOffset())
	}
}
