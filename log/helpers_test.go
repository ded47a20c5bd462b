package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/faultfs"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// epoch0 is the wall-clock time at virtual time zero in tests.
var epoch0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// harness is one simulated node for log tests: a scheduler, a simulated
// disk, and a loop and clock over the scheduler. crash() loses the disk's
// unsynced state and makes everything the old incarnation scheduled inert.
type harness struct {
	t    testing.TB
	s    *sched.Scheduler
	disk *simfs.Disk
	fs   env.FS
	inc  int
	skew time.Duration
	// onStuck, if set, explains a callback that never came.
	onStuck func()
}

func newHarness(t testing.TB, seed uint64) *harness {
	s := sched.New()
	h := &harness{t: t, s: s}
	h.disk = simfs.New(rng.New(seed).Fork("disk"), sched.Direct(s, "n1"))
	h.fs = h.disk
	return h
}

type harnessLoop struct {
	h   *harness
	inc int
}

func (l harnessLoop) Post(f func()) {
	l.h.s.After(0, sched.Label{Kind: "post", Node: "n1"}, func() {
		if l.inc == l.h.inc {
			f()
		}
	})
}

type harnessClock struct {
	h   *harness
	inc int
}

func (c harnessClock) Now() time.Time { return epoch0.Add(c.h.s.Now() + c.h.skew) }

func (c harnessClock) Elapsed() time.Duration { return c.h.s.Now() }

func (c harnessClock) AfterFunc(d time.Duration, f func()) env.Timer {
	e := c.h.s.After(max(d, 0), sched.Label{Kind: "timer", Node: "n1"}, func() {
		if c.inc == c.h.inc {
			f()
		}
	})
	return harnessTimer{e}
}

type harnessTimer struct{ e *sched.Event }

func (t harnessTimer) Stop() bool { return t.e.Cancel() }

func (h *harness) config(dir string) Config {
	return Config{
		FS:            h.fs,
		Clock:         harnessClock{h, h.inc},
		Loop:          harnessLoop{h, h.inc},
		Dir:           dir,
		IndexBytesMax: 4096,
	}
}

// open opens a log with cfg, its loop and clock those of the current
// incarnation.
func (h *harness) open(cfg Config) *Log {
	h.t.Helper()
	cfg.Clock, cfg.Loop = harnessClock{h, h.inc}, harnessLoop{h, h.inc}
	l, err := Open(cfg)
	if err != nil {
		h.t.Fatalf("open %s: %v", cfg.Dir, err)
	}
	h.waitReady(l)
	return l
}

// wait calls start with a callback and runs the simulation until the
// callback has run, returning its error.
func (h *harness) wait(start func(done func(error))) error {
	h.t.Helper()
	called := false
	var got error
	start(func(err error) { called, got = true, err })
	h.s.RunWhile(func() bool { return !called })
	if !called {
		if h.onStuck != nil {
			h.onStuck()
		}
		h.t.Fatalf("callback never called")
	}
	return got
}

func (h *harness) waitReady(l *Log) {
	h.t.Helper()
	if err := h.wait(l.Ready); err != nil {
		h.t.Fatalf("ready: %v", err)
	}
}

func (h *harness) flush(l *Log) {
	h.t.Helper()
	if err := h.wait(func(done func(error)) { l.Flush(l.LogEndOffset(), done) }); err != nil {
		h.t.Fatalf("flush: %v", err)
	}
}

func (h *harness) close(l *Log) {
	h.t.Helper()
	if err := h.wait(l.Close); err != nil {
		h.t.Fatalf("close: %v", err)
	}
}

// settle runs every pending event.
func (h *harness) settle() { h.s.RunWhile(func() bool { return true }) }

// advance moves virtual time on by d, running what falls due.
func (h *harness) advance(d time.Duration) { h.s.RunUntil(h.s.Now() + d) }

// crash is a power loss: unsynced state is lost, callbacks and timers of
// the old incarnation never run.
func (h *harness) crash() {
	h.disk.Crash()
	h.inc++
}

func (h *harness) nowMs() int64 { return epoch0.Add(h.s.Now() + h.skew).UnixMilli() }

// batchSpec describes a batch to build.
type batchSpec struct {
	values      [][]byte
	baseTs      int64
	tsDeltas    []int64 // per record; nil: all 0
	producerID  int64   // -1 for none
	epoch       int16
	seq         int32
	attrs       int16
	leaderEpoch int32
	baseOffset  int64
	codec       kgo.CompressionCodec
	compress    bool
}

func spec(values ...string) batchSpec {
	s := batchSpec{producerID: -1, epoch: -1, seq: -1, leaderEpoch: -1}
	for _, v := range values {
		s.values = append(s.values, []byte(v))
	}
	return s
}

func (s batchSpec) at(ts int64) batchSpec { s.baseTs = ts; return s }

func (s batchSpec) idempotent(pid int64, epoch int16, seq int32) batchSpec {
	s.producerID, s.epoch, s.seq = pid, epoch, seq
	return s
}

func appendRecord(p []byte, offsetDelta int, tsDelta int64, value []byte) []byte {
	var body []byte
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(offsetDelta))
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	p = binary.AppendVarint(p, int64(len(body)))
	return append(p, body...)
}

// build encodes a valid v2 batch.
func (s batchSpec) build() []byte {
	var recs []byte
	maxTs := int64(math.MinInt64) // the records' max, as producers set it
	for i, v := range s.values {
		var d int64
		if s.tsDeltas != nil {
			d = s.tsDeltas[i]
		}
		maxTs = max(maxTs, s.baseTs+d)
		recs = appendRecord(recs, i, d, v)
	}
	attrs := s.attrs
	if s.compress {
		c, err := kgo.DefaultCompressor(s.codec)
		if err != nil {
			panic(err)
		}
		var buf bytes.Buffer
		out, codec := c.Compress(&buf, recs)
		recs = append([]byte(nil), out...)
		attrs |= int16(codec)
	}
	p := make([]byte, batchHeaderSize, batchHeaderSize+len(recs))
	binary.BigEndian.PutUint64(p[offBaseOffset:], uint64(s.baseOffset))
	binary.BigEndian.PutUint32(p[offLength:], uint32(batchHeaderSize-logOverhead+len(recs)))
	binary.BigEndian.PutUint32(p[offLeaderEpoch:], uint32(s.leaderEpoch))
	p[offMagic] = 2
	binary.BigEndian.PutUint16(p[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(p[offLastOffsetDelta:], uint32(len(s.values)-1))
	binary.BigEndian.PutUint64(p[offBaseTimestamp:], uint64(s.baseTs))
	binary.BigEndian.PutUint64(p[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(p[offProducerID:], uint64(s.producerID))
	binary.BigEndian.PutUint16(p[offProducerEpoch:], uint16(s.epoch))
	binary.BigEndian.PutUint32(p[offBaseSequence:], uint32(s.seq))
	binary.BigEndian.PutUint32(p[offRecordCount:], uint32(len(s.values)))
	p = append(p, recs...)
	fixCRC(p)
	return p
}

func fixCRC(p []byte) {
	binary.BigEndian.PutUint32(p[offCRC:], crc32.Checksum(p[offAttributes:], castagnoli))
}

// readAll reads every batch from offset to the log end.
func readAll(t testing.TB, l *Log, from int64) []byte {
	t.Helper()
	recs, err := l.Read(from, 1<<40, l.LogEndOffset(), true)
	if err != nil {
		t.Fatalf("read from %d: %v", from, err)
	}
	p, err := recs.AppendTo(nil)
	if err != nil {
		t.Fatalf("copy from %d: %v", from, err)
	}
	return p
}

// splitBatches splits bytes into batches and their base offsets.
func splitBatches(t testing.TB, p []byte) (bases []int64, batches [][]byte) {
	t.Helper()
	for len(p) > 0 {
		if len(p) < batchHeaderSize {
			t.Fatalf("%d stray bytes", len(p))
		}
		h := parseHeader(p)
		bases = append(bases, h.BaseOffset)
		batches = append(batches, p[:h.size()])
		p = p[h.size():]
	}
	return bases, batches
}

// countSegmentReads wraps inner to count the bytes that reads of segment
// files (.log) ask for: an upper bound of what they read.
func countSegmentReads(inner env.FS) (env.FS, func() int64) {
	fsys := faultfs.New(inner)
	var asked int64
	fsys.Count(func(op faultfs.Op) bool {
		if op.Kind != faultfs.Read || !strings.HasSuffix(op.Path, ".log") {
			return false
		}
		asked += int64(op.Len)
		return true
	})
	return fsys, func() int64 { return asked }
}

func mustCode(t testing.TB, err error, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func appendLeader(t testing.TB, l *Log, s batchSpec, epoch int32) AppendResult {
	t.Helper()
	res, err := l.AppendLeader(s.build(), epoch)
	if err != nil {
		t.Fatalf("append %v: %v", s.values, err)
	}
	return res
}

func values(n int, size int, tag string) []string {
	out := make([]string, n)
	for i := range out {
		v := fmt.Sprintf("%s-%d-", tag, i)
		out[i] = v + strings.Repeat("x", max(size-len(v), 0))
	}
	return out
}

var (
	envErrIO      = env.ErrIO
	envErrNoSpace = env.ErrNoSpace
	opWrite       = simfs.OpWrite
	opSync        = simfs.OpSync
)

var opSyncDir = simfs.OpSyncDir
