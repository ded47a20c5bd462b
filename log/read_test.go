package log

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fill appends n single-record batches of about size bytes each and returns
// their stored bytes by base offset.
func fill(t testing.TB, h *harness, l *Log, n, size int) map[int64][]byte {
	t.Helper()
	out := make(map[int64][]byte)
	for i := 0; i < n; i++ {
		b := spec(values(1, size, "r")...).at(h.nowMs()).build()
		res, err := l.AppendLeader(b, 0)
		must(t, err)
		out[res.BaseOffset] = b
	}
	return out
}

func TestReadLimits(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 1000
	l := h.open(cfg)
	stored := fill(t, h, l, 20, 100) // batches of 172 bytes, 5 per segment
	size := int64(len(stored[0]))
	read := func(offset, maxBytes, upper int64, minOne bool) (first int64, n int) {
		t.Helper()
		recs, err := l.Read(offset, maxBytes, upper, minOne)
		must(t, err)
		p, err := recs.AppendTo(nil)
		must(t, err)
		bases, batches := splitBatches(t, p)
		for i, b := range batches {
			if !bytes.Equal(b, stored[bases[i]]) {
				t.Fatalf("batch at %d differs", bases[i])
			}
		}
		if int64(len(p)) != recs.Size {
			t.Fatalf("size %d, copied %d", recs.Size, len(p))
		}
		if len(bases) == 0 {
			return -1, 0
		}
		return bases[0], len(bases)
	}
	cases := []struct {
		name                 string
		offset, max, upper   int64
		minOne               bool
		wantFirst, wantCount int64
	}{
		{"whole log across segments", 0, 1 << 20, 20, false, 0, 20},
		{"byte limit", 3, 3 * size, 20, false, 3, 3},
		{"byte limit not a multiple", 3, 3*size + 10, 20, false, 3, 3},
		{"upper bound", 2, 1 << 20, 7, false, 2, 5},
		{"KIP-74 first batch larger than limit", 4, 10, 20, true, 4, 1},
		{"no minimum one", 4, 10, 20, false, -1, 0},
		{"at the upper bound", 7, 1 << 20, 7, false, -1, 0},
		{"at the log end", 20, 1 << 20, 20, false, -1, 0},
		{"upper bound past the end", 18, 1 << 20, 99, false, 18, 2},
	}
	for _, c := range cases {
		first, n := read(c.offset, c.max, c.upper, c.minOne)
		if first != c.wantFirst || int64(n) != c.wantCount {
			t.Errorf("%s: got first %d count %d, want %d %d", c.name, first, n, c.wantFirst, c.wantCount)
		}
	}
	for _, off := range []int64{-1, 21} {
		_, err := l.Read(off, 100, 20, true)
		mustCode(t, err, kerr.OffsetOutOfRange)
	}
}

func TestReadFromInsideBatch(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	appendLeader(t, l, spec("a", "b", "c").at(0), 0)
	appendLeader(t, l, spec("d", "e").at(0), 0)
	recs, err := l.Read(4, 1<<20, 5, true)
	must(t, err)
	if len(recs.Chunks) != 1 || recs.Chunks[0].FirstOffset != 3 || recs.NextOffset() != 5 {
		t.Fatalf("chunks %+v", recs.Chunks)
	}
	// Upper bound inside a batch: the batch is not returned.
	recs, err = l.Read(0, 1<<20, 4, true)
	must(t, err)
	if recs.NextOffset() != 3 {
		t.Fatalf("upper bound 4 returned up to %d", recs.NextOffset())
	}
}

// TestReadReportsFlippedBits: a bit flipped on the medium is an error, a bit
// flipped on the read path is read again.
func TestReadReportsFlippedBits(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	fill(t, h, l, 3, 100)
	h.flush(l)
	recs, err := l.Read(0, 1<<20, 3, true)
	must(t, err)
	h.disk.FlipNextRead()
	if _, err := recs.AppendTo(nil); err != nil {
		t.Fatalf("a flip on the read path was not retried: %v", err)
	}
	must(t, h.disk.FlipBit("t-0/00000000000000000000.log", 200))
	_, err = recs.AppendTo(nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a flip on the medium gave %v", err)
	}
}

func TestRollBySize(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 100
	l := h.open(cfg)
	fill(t, h, l, 12, 100)
	if got := l.Segments(); len(got) != 3 || got[1] != 5 || got[2] != 10 {
		t.Fatalf("segments %v", got)
	}
	for _, s := range l.segs[:2] {
		size, err := s.idxF.f.Size()
		must(t, err)
		if size != int64(len(s.idx.buf)) || s.idx.len() == 0 {
			t.Fatalf("rolled index of %d not trimmed: %d bytes for %d entries", s.base, size, s.idx.len())
		}
		if ts, _, ok := s.tix.last(); !ok || ts != s.maxTs {
			t.Fatalf("rolled time index has no entry for max timestamp %d", s.maxTs)
		}
	}
	if size, _ := l.active().idxF.f.Size(); size != 4096 {
		t.Fatalf("active index not preallocated: %d", size)
	}
	// Rolling flushes the old segment and moves the recovery point.
	h.settle()
	if l.DurableOffset() < 10 || l.dur.ckpt.written.RecoveryPoint != l.DurableOffset() {
		t.Fatalf("durable %d, checkpointed %d", l.DurableOffset(), l.dur.ckpt.written.RecoveryPoint)
	}
	names, _ := h.fs.List("t-0")
	want := []string{"00000000000000000005.snapshot", "00000000000000000010.snapshot"}
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			t.Fatalf("no %s in %v", w, names)
		}
	}
}

func TestRollByTime(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentTime = time.Hour
	l := h.open(cfg)
	appendLeader(t, l, spec("a").at(h.nowMs()), 0)
	h.advance(30 * time.Minute)
	appendLeader(t, l, spec("b").at(h.nowMs()), 0)
	h.advance(31 * time.Minute)
	appendLeader(t, l, spec("c").at(h.nowMs()), 0)
	if got := l.Segments(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("segments %v", got)
	}
}

func TestRollWhenIndexFull(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.IndexBytesMax = 96 // 12 offset entries, 8 time entries
	cfg.IndexIntervalBytes = 1
	l := h.open(cfg)
	for i := 0; i < 30; i++ {
		appendLeader(t, l, spec("v").at(h.nowMs()+int64(i)), 0)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("segments %v", l.Segments())
	}
}

func TestRetention(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 1000
	cfg.RetentionTime = time.Hour
	l := h.open(cfg)
	fill(t, h, l, 10, 100) // segments [0,5) [5,10) and an empty active one
	h.advance(2 * time.Hour)
	fill(t, h, l, 5, 100) // [10,15), new
	if n, err := l.EnforceRetention(5); err != nil || n != 1 {
		t.Fatalf("retention below the high watermark 5: %d %v", n, err)
	}
	if n, err := l.EnforceRetention(15); err != nil || n != 1 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if l.LogStartOffset() != 10 || l.Segments()[0] != 10 {
		t.Fatalf("log start %d segments %v", l.LogStartOffset(), l.Segments())
	}
	// Never the active segment, however old.
	h.advance(2 * time.Hour)
	n, _ := l.EnforceRetention(15)
	if len(l.Segments()) == 0 || l.active().size == 0 && n == 0 {
		t.Fatalf("segments %v after %d deleted", l.Segments(), n)
	}
	if l.Segments()[len(l.Segments())-1] != l.active().base {
		t.Fatal("active segment deleted")
	}
	_, err := l.Read(3, 100, 15, true)
	mustCode(t, err, kerr.OffsetOutOfRange)
}

func TestRetentionBytes(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 1000
	cfg.RetentionBytes = 2000
	l := h.open(cfg)
	fill(t, h, l, 22, 100) // 4 full segments of 860 bytes and an active one
	n, err := l.EnforceRetention(22)
	must(t, err)
	if l.Size() > 2000+l.segs[0].size || l.Size()-l.segs[0].size > 2000 || n != 2 {
		t.Fatalf("deleted %d, size %d", n, l.Size())
	}
}

func TestDeleteRecords(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 1000
	l := h.open(cfg)
	fill(t, h, l, 12, 100)
	must(t, l.DeleteRecords(7))
	if l.LogStartOffset() != 7 || l.Segments()[0] != 5 {
		t.Fatalf("start %d segments %v", l.LogStartOffset(), l.Segments())
	}
	_, err := l.Read(6, 100, 12, true)
	mustCode(t, err, kerr.OffsetOutOfRange)
	must(t, l.DeleteRecords(3)) // below the start: nothing
	mustCode(t, l.DeleteRecords(13), kerr.OffsetOutOfRange)
	must(t, l.DeleteRecords(12)) // the whole log; the active segment stays
	if l.LogStartOffset() != 12 || len(l.Segments()) != 1 {
		t.Fatalf("start %d segments %v", l.LogStartOffset(), l.Segments())
	}
	must(t, h.wait(l.Checkpoint))
	h.crash()
	l = h.open(h.config("t-0"))
	if l.LogStartOffset() != 12 {
		t.Fatalf("log start after crash %d", l.LogStartOffset())
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 400
	cfg.IndexIntervalBytes = 1
	l := h.open(cfg)
	// Timestamps 1000, 1010, 1020 ... with a batch whose records are out of order.
	for i := int64(0); i < 10; i++ {
		appendLeader(t, l, spec("v", "w").at(1000+20*i), 0)
	}
	s := spec("x", "y", "z").at(2000)
	s.tsDeltas = []int64{50, 10, 30}
	appendLeader(t, l, s, 0) // offsets 20, 21, 22
	cases := []struct{ ts, off, found int64 }{
		{0, 0, 1000}, {1000, 0, 1000}, {1001, 2, 1020}, {1180, 18, 1180},
		// The first record in offset order at or after the timestamp, as Kafka answers.
		{2005, 20, 2050}, {2040, 20, 2050}, {2050, 20, 2050},
	}
	for _, c := range cases {
		res, ok, err := l.OffsetForTimestamp(c.ts)
		must(t, err)
		if !ok || res.Offset != c.off || res.Timestamp != c.found {
			t.Errorf("timestamp %d: %+v %v, want offset %d timestamp %d", c.ts, res, ok, c.off, c.found)
		}
	}
	if _, ok, _ := l.OffsetForTimestamp(2051); ok {
		t.Errorf("found a record after the newest timestamp")
	}
	max, ok, err := l.MaxTimestamp()
	must(t, err)
	if !ok || max.Offset != 20 || max.Timestamp != 2050 {
		t.Fatalf("max timestamp %+v", max)
	}
	// The log start hides what lies before it.
	must(t, l.DeleteRecords(5))
	if res, _, _ := l.OffsetForTimestamp(0); res.Offset != 5 {
		t.Fatalf("after DeleteRecords: %+v", res)
	}
}

func TestOffsetForTimestampCompressed(t *testing.T) {
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		h := newHarness(t, 1)
		l := h.open(h.config("t-0"))
		s := spec(values(20, 100, "c")...).at(5000)
		s.compress, s.codec = true, codec
		s.tsDeltas = make([]int64, 20)
		for i := range s.tsDeltas {
			s.tsDeltas[i] = int64(i * 10)
		}
		b := s.build()
		if hd := parseHeader(b); hd.compression() == 0 {
			t.Fatalf("%v: not compressed", codec)
		}
		appendLeader(t, l, s, 0)
		res, ok, err := l.OffsetForTimestamp(5055)
		must(t, err)
		if !ok || res.Offset != 6 || res.Timestamp != 5060 {
			t.Fatalf("%v: %+v %v", codec, res, ok)
		}
	}
}

func TestLogAppendTimeLookups(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.TimestampType = LogAppendTime
	l := h.open(cfg)
	appendLeader(t, l, spec("a", "b").at(1), 0)
	h.advance(time.Second)
	r := appendLeader(t, l, spec("c", "d").at(1), 0)
	res, ok, err := l.OffsetForTimestamp(r.AppendTime)
	must(t, err)
	if !ok || res.Offset != 2 {
		t.Fatalf("%+v", res)
	}
	max, _, _ := l.MaxTimestamp()
	if max.Offset != 2 || max.Timestamp != r.AppendTime {
		t.Fatalf("max %+v", max)
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	appendLeader(t, l, spec("a", "b").at(0), 1) // [0,2) epoch 1
	appendLeader(t, l, spec("c").at(0), 3)      // [2,3) epoch 3
	appendLeader(t, l, spec("d").at(0), 5)      // [3,4) epoch 5
	cases := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
		ok        bool
	}{
		{-1, -1, -1, false}, {0, 0, 0, true}, {1, 1, 2, true}, {2, 1, 2, true},
		{3, 3, 3, true}, {4, 3, 3, true}, {5, 5, 4, true}, {6, -1, -1, false},
	}
	for _, c := range cases {
		e, end, ok := l.EndOffsetForEpoch(c.epoch)
		if e != c.wantEpoch || end != c.wantEnd || ok != c.ok {
			t.Errorf("epoch %d: got %d %d %v, want %d %d %v", c.epoch, e, end, ok, c.wantEpoch, c.wantEnd, c.ok)
		}
	}
}

// TestReadAtTheTailFindsRecentBatchesWithoutTheIndex: a read of one of the
// last batches appended starts at the batch itself (segment.recent); what
// it returns is what the index's way returns, a wrong remembered position
// falls back to the index, and a truncation forgets the positions past it.
func TestReadAtTheTailFindsRecentBatchesWithoutTheIndex(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	stored := fill(t, h, l, 40, 100) // 172-byte batches, an index entry every 4 KiB
	readAll := func(offset int64) []byte {
		t.Helper()
		recs, err := l.Read(offset, 1<<20, l.LogEndOffset(), true)
		must(t, err)
		p, err := recs.AppendTo(nil)
		must(t, err)
		return p
	}
	want := func(from, to int64) []byte {
		var p []byte
		for o := from; o < to; o++ {
			p = append(p, stored[o]...)
		}
		return p
	}
	s := l.active()
	if _, _, ok := s.recentBatch(39); !ok {
		t.Fatal("the last batch appended is not remembered")
	}
	if _, _, ok := s.recentBatch(20); ok {
		t.Fatal("batch 20 of 40 is remembered: the ring holds more than its last batches")
	}
	for o := int64(0); o < 40; o++ {
		if got := readAll(o); !bytes.Equal(got, want(o, 40)) {
			t.Fatalf("read at %d: %d bytes, want %d", o, len(got), len(want(o, 40)))
		}
	}

	// A remembered position that is wrong is not trusted.
	for i := range s.recent.at[:s.recent.n] {
		s.recent.at[i].pos += 7
	}
	if got := readAll(36); !bytes.Equal(got, want(36, 40)) {
		t.Fatal("a wrong remembered position changed what the read returned")
	}

	// After a truncation, new batches take the old ones' offsets.
	must(t, l.TruncateTo(35))
	h.waitReady(l)
	if s.recent != nil {
		t.Fatal("the truncation kept the positions it cut")
	}
	for o := int64(35); o < 38; o++ {
		b := spec(values(1, 300, "n")...).at(h.nowMs()).build()
		res, err := l.AppendLeader(b, 0)
		must(t, err)
		stored[res.BaseOffset] = b
	}
	if got := readAll(35); !bytes.Equal(got, want(35, 38)) {
		t.Fatal("a read after the truncation returned other batches")
	}
}

// Reads share one window buffer: each gives it back for the next, across
// segments, and what they return is what fresh windows would read.
func TestReadsReuseTheirHeaderWindow(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	stored := fill(t, h, l, 40, 100)
	var want []byte
	for o := int64(10); o < 40; o++ {
		want = append(want, stored[o]...)
	}
	for range 3 {
		recs, err := l.Read(10, 1<<20, l.LogEndOffset(), true)
		must(t, err)
		p, err := recs.AppendTo(nil)
		must(t, err)
		if !bytes.Equal(p, want) {
			t.Fatalf("read %d bytes, want %d", len(p), len(want))
		}
		if len(l.spareWindows) != 1 {
			t.Fatalf("%d spare windows after a read, want the one it used", len(l.spareWindows))
		}
	}
}
