package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestEpochCache follows Kafka's LeaderEpochFileCache.
func TestEpochCache(t *testing.T) {
	var c epochCache
	c.assign(2, 10)
	c.assign(2, 15) // same epoch, later start: unchanged
	c.assign(3, 20)
	c.assign(5, 30)
	if fmt.Sprint(c.entries) != "[{2 10} {3 20} {5 30}]" {
		t.Fatalf("assign: %v", c.entries)
	}
	c.assign(5, 25) // same epoch, earlier start: replaces
	if fmt.Sprint(c.entries) != "[{2 10} {3 20} {5 25}]" {
		t.Fatalf("earlier start: %v", c.entries)
	}
	c.assign(4, 40) // an older epoch drops the newer ones
	if fmt.Sprint(c.entries) != "[{2 10} {3 20} {4 40}]" {
		t.Fatalf("older epoch: %v", c.entries)
	}
	c.assign(6, 15) // a start at or before others drops them
	if fmt.Sprint(c.entries) != "[{2 10} {6 15}]" {
		t.Fatalf("earlier start, newer epoch: %v", c.entries)
	}
	c = epochCache{entries: []EpochEntry{{1, 0}, {3, 10}, {4, 20}, {7, 30}}}
	if !c.truncateFromEnd(20) || fmt.Sprint(c.entries) != "[{1 0} {3 10}]" {
		t.Fatalf("truncate from end: %v", c.entries)
	}
	c = epochCache{entries: []EpochEntry{{1, 0}, {3, 10}, {4, 20}, {7, 30}}}
	if !c.truncateFromStart(15) || fmt.Sprint(c.entries) != "[{3 15} {4 20} {7 30}]" {
		t.Fatalf("truncate from start: %v", c.entries)
	}
	if !c.truncateFromStart(20) || fmt.Sprint(c.entries) != "[{4 20} {7 30}]" {
		t.Fatalf("truncate from start at an entry: %v", c.entries)
	}
	if c.truncateFromStart(5) {
		t.Fatal("truncating below the first entry changed the cache")
	}
	if e, ok := c.epochForOffset(25); !ok || e != 4 {
		t.Fatalf("epoch for 25: %d %v", e, ok)
	}
	if _, ok := c.epochForOffset(19); ok {
		t.Fatal("epoch for an offset before the first entry")
	}
}

func TestCheckpointFiles(t *testing.T) {
	ck := partitionCheckpoint{RecoveryPoint: 1234, LogStartOffset: 17, Clean: true, EpochsCRC: 0xdeadbeef}
	got, err := decodePartitionCheckpoint(ck.encode())
	if err != nil || got != ck {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	ec := epochCache{entries: []EpochEntry{{0, 0}, {4, 100}}}
	gotE, err := decodeEpochCheckpoint(ec.encode())
	if err != nil || fmt.Sprint(gotE.entries) != fmt.Sprint(ec.entries) {
		t.Fatalf("epochs round trip: %v %v", gotE.entries, err)
	}
	for _, p := range [][]byte{ck.encode(), ec.encode()} {
		for i := range p {
			q := bytes.Clone(p)
			q[i] ^= 0x04
			if _, err1 := decodePartitionCheckpoint(q); err1 == nil {
				if _, err2 := decodeEpochCheckpoint(q); err2 == nil {
					t.Fatalf("a flipped bit at %d went unnoticed: %q", i, q)
				}
			}
		}
	}
}

func TestProducerSnapshotEncoding(t *testing.T) {
	s := newProducerState()
	for i := int32(0); i < 7; i++ {
		h := header{BaseOffset: int64(i * 3), LastOffsetDelta: 2, MaxTimestamp: 1000 + int64(i), ProducerID: 9, ProducerEpoch: 1, BaseSequence: i * 3}
		s.apply(&h)
		h.ProducerID = int64(20 + i)
		s.apply(&h)
	}
	p := s.encode()
	got, err := decodeProducerSnapshot(p)
	if err != nil || fmt.Sprint(got.byID[9]) != fmt.Sprint(s.byID[9]) || len(got.byID) != len(s.byID) {
		t.Fatalf("round trip: %v", err)
	}
	if n := len(got.byID[9].Batches); n != producerBatchesRetained {
		t.Fatalf("%d batches kept", n)
	}
	for _, i := range []int{0, 3, 7, len(p) / 2, len(p) - 1} {
		q := bytes.Clone(p)
		q[i] ^= 0x10
		if _, err := decodeProducerSnapshot(q); err == nil {
			t.Fatalf("a flipped bit at %d went unnoticed", i)
		}
	}
	if _, err := decodeProducerSnapshot(p[:len(p)-4]); err == nil {
		t.Fatal("a cut snapshot went unnoticed")
	}
}

func TestIndexFileParsing(t *testing.T) {
	entry := func(rel, pos uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, rel), pos)
	}
	var p []byte
	p = append(p, entry(3, 100)...)
	p = append(p, entry(9, 300)...)
	p = append(p, make([]byte, 64)...) // preallocated zeros
	x, err := parseOffsetIndex(p, 1000, 400, 1100)
	if err != nil || x.len() != 2 {
		t.Fatalf("%d entries, %v", x.len(), err)
	}
	if o, pos, ok := x.lookup(1005); !ok || o != 1003 || pos != 100 {
		t.Fatalf("lookup 1005: %d %d %v", o, pos, ok)
	}
	if _, _, ok := x.lookup(1002); ok {
		t.Fatal("lookup below the first entry")
	}
	for name, bad := range map[string][]byte{
		"offsets going back":    append(entry(9, 100), entry(3, 300)...),
		"positions going back":  append(entry(3, 300), entry(9, 100)...),
		"position past the end": entry(3, 390),
		"offset past the end":   entry(300, 100),
	} {
		if _, err := parseOffsetIndex(bad, 1000, 400, 1100); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	tentry := func(ts int64, rel uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
	}
	tix, err := parseTimeIndex(append(tentry(50, 1), tentry(70, 4)...), 1000, 1010)
	if err != nil || tix.len() != 2 {
		t.Fatalf("time index: %d %v", tix.len(), err)
	}
	if _, err := parseTimeIndex(append(tentry(70, 1), tentry(50, 4)...), 1000, 1010); err == nil {
		t.Error("time index going back accepted")
	}
	if _, err := parseTimeIndex(tentry(70, 20), 1000, 1010); err == nil {
		t.Error("time index past the end accepted")
	}
}

func TestFlushBytesPolicy(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.FlushBytes = 1000
	l := h.open(cfg)
	fill(t, h, l, 3, 100)
	h.settle()
	if l.DurableOffset() != 0 {
		t.Fatalf("flushed %d below the byte threshold", l.DurableOffset())
	}
	fill(t, h, l, 5, 100) // batches of 172 bytes: the sixth crosses 1000
	h.settle()
	if l.DurableOffset() != 6 {
		t.Fatalf("durable %d after crossing the threshold", l.DurableOffset())
	}
}

func TestFlushIntervalPolicy(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.FlushInterval = time.Second
	l := h.open(cfg)
	fill(t, h, l, 3, 100)
	h.advance(900 * time.Millisecond)
	if l.DurableOffset() != 0 {
		t.Fatalf("flushed %d before the interval", l.DurableOffset())
	}
	h.advance(200 * time.Millisecond)
	h.settle()
	if l.DurableOffset() != 3 {
		t.Fatalf("durable %d after the interval", l.DurableOffset())
	}
}

func TestFlushWaiters(t *testing.T) {
	h := newHarness(t, 1)
	l := h.open(h.config("t-0"))
	fill(t, h, l, 10, 100)
	var got []string
	for _, upTo := range []int64{3, 10, 99} {
		l.Flush(upTo, func(err error) { got = append(got, fmt.Sprintf("%d:%v", upTo, err)) })
	}
	// A waiter for an offset truncated away hears of it.
	fill(t, h, l, 5, 100)
	l.Flush(15, func(err error) { got = append(got, fmt.Sprintf("15:%v", errors.Is(err, ErrTruncated))) })
	must(t, l.TruncateTo(12))
	h.settle()
	if fmt.Sprint(got) != "[15:true 3:<nil> 10:<nil> 99:<nil>]" {
		t.Fatalf("waiters: %v", got)
	}
	if l.DurableOffset() != 12 {
		t.Fatalf("durable %d", l.DurableOffset())
	}
	// Already durable: called on a later turn, not inside Flush.
	called := false
	l.Flush(5, func(error) { called = true })
	if called {
		t.Fatal("callback ran inside Flush")
	}
	h.settle()
	if !called {
		t.Fatal("callback never ran")
	}
}

// TestSyncDirFailureFailsLog: a directory sync that fails leaves the
// durability of new segments unknown.
func TestSyncDirFailureFailsLog(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	cfg.SegmentBytes = 500
	l := h.open(cfg)
	h.flush(l)
	must(t, h.disk.FailNext(opSyncDir, envErrIO))
	fill(t, h, l, 5, 100) // rolls: a new directory entry to sync
	err := h.wait(func(done func(error)) { l.Flush(l.LogEndOffset(), done) })
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("flush after a failed directory sync: %v", err)
	}
}
