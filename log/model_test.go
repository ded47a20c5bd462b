package log

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seeds returns how many seeds a sweep runs: SLUICE_SEEDS, or def.
func seeds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_SEEDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// mbatch is a batch as the model knows it.
type mbatch struct {
	base  int64
	bytes []byte
	recTs []int64 // each record's timestamp
}

func (b *mbatch) last() int64 { return b.base + int64(len(b.recTs)) - 1 }

func (b *mbatch) header() header { return parseHeader(b.bytes) }

// model is the log as a list of batches.
type model struct {
	batches []mbatch
	start   int64
	end     int64
	// ep is the leader-epoch cache kept by Kafka's rules: assigned by each
	// batch appended, cut at the end by truncation and at the start by the
	// log start.
	ep epochCache
}

func (m *model) append(b []byte) {
	h := parseHeader(b)
	var ts []int64
	if _, err := checkStored(b, h.BaseOffset); err != nil {
		panic(err)
	}
	if err := visitRecords(b, &h, kgo.DefaultDecompressor(), func(_, t int64) bool { ts = append(ts, t); return true }); err != nil {
		panic(err)
	}
	m.batches = append(m.batches, mbatch{base: h.BaseOffset, bytes: append([]byte(nil), b...), recTs: ts})
	m.end = h.nextOffset()
	m.ep.assign(h.LeaderEpoch, h.BaseOffset)
}

// truncate keeps the batches that end below offset.
func (m *model) truncate(offset int64) {
	i := 0
	for i < len(m.batches) && m.batches[i].last() < offset {
		i++
	}
	if i < len(m.batches) {
		m.end = m.batches[i].base
	}
	m.batches = m.batches[:i]
	m.start = min(m.start, m.end)
	m.ep.truncateFromEnd(m.end)
}

func (m *model) restart(offset int64) {
	m.batches, m.start, m.end, m.ep = nil, offset, offset, epochCache{}
}

func (m *model) moveStart(start int64) {
	m.start = max(m.start, start)
	m.ep.truncateFromStart(m.start)
}

// dropBelow forgets the batches below a segment base that was deleted.
func (m *model) dropBelow(base int64) {
	i := 0
	for i < len(m.batches) && m.batches[i].base < base {
		i++
	}
	m.batches = m.batches[i:]
}

// expectRead is what Read should return: the batches (by index).
func (m *model) expectRead(offset, maxBytes, upper int64, minOne bool) (first, n int) {
	upper = min(upper, m.end)
	if offset >= upper || (maxBytes <= 0 && !minOne) {
		return 0, 0
	}
	i := 0
	for i < len(m.batches) && m.batches[i].last() < offset {
		i++
	}
	first = i
	var size int64
	for ; i < len(m.batches); i++ {
		b := &m.batches[i]
		if b.last() >= upper || (size+int64(len(b.bytes)) > maxBytes && !(size == 0 && minOne)) {
			break
		}
		size += int64(len(b.bytes))
		n++
	}
	return first, n
}

// offsetForTimestamp answers as Kafka does, from the records.
func (m *model) offsetForTimestamp(target int64) (int64, int64, bool) {
	for _, b := range m.batches {
		if b.last() < m.start || b.header().MaxTimestamp < target {
			continue
		}
		for i, ts := range b.recTs {
			if off := b.base + int64(i); ts >= target && off >= m.start {
				return off, ts, true
			}
		}
	}
	return 0, 0, false
}

// maxTimestamp is the first record at or after the log start with the
// largest timestamp (KIP-734).
func (m *model) maxTimestamp() (int64, int64, bool) {
	var off, ts int64
	found := false
	for _, b := range m.batches {
		for i, rts := range b.recTs {
			if o := b.base + int64(i); o >= m.start && (!found || rts > ts) {
				off, ts, found = o, rts, true
			}
		}
	}
	return off, ts, found
}

// checkModel compares the log with the model.
func checkModel(t testing.TB, l *Log, m *model, what string) {
	t.Helper()
	if l.LogEndOffset() != m.end || l.LogStartOffset() != m.start {
		t.Fatalf("%s: log [%d, %d), model [%d, %d)", what, l.LogStartOffset(), l.LogEndOffset(), m.start, m.end)
	}
	if len(m.batches) > 0 && m.batches[0].base < l.Segments()[0] {
		t.Fatalf("%s: first batch %d, first segment %d", what, m.batches[0].base, l.Segments()[0])
	}
	var want []byte
	for _, b := range m.batches {
		if b.last() >= m.start {
			want = append(want, b.bytes...)
		}
	}
	if got := readAll(t, l, m.start); !bytes.Equal(got, want) {
		t.Fatalf("%s: log holds %d bytes from %d, model %d", what, len(got), m.start, len(want))
	}
	if got, wantE := l.Epochs(), m.ep.entries; fmt.Sprint(got) != fmt.Sprint(wantE) {
		t.Fatalf("%s: epochs %v, model %v", what, got, wantE)
	}
}

// modelStep is one random operation.
type modelRun struct {
	t   testing.TB
	r   *rng.Rand
	h   *harness
	l   *Log
	m   *model
	cfg Config
	// epoch is the leader epoch appends use; it only grows.
	epoch int32
}

func (x *modelRun) batch(leader bool) []byte {
	n := 1 + x.r.Intn(5)
	s := spec()
	for i := 0; i < n; i++ {
		s.values = append(s.values, bytes.Repeat([]byte{byte('a' + x.r.Intn(26))}, x.r.Intn(120)))
	}
	s.baseTs = x.h.nowMs() - int64(x.r.Intn(1000))
	s.tsDeltas = make([]int64, n)
	for i := range s.tsDeltas {
		s.tsDeltas[i] = int64(x.r.Intn(2000)) - 500
	}
	if x.r.Chance(0.2) {
		s.compress, s.codec = true, codecs[x.r.Intn(len(codecs))]
	}
	if !leader {
		s.baseOffset, s.leaderEpoch = x.m.end, x.epoch
	}
	return s.build()
}

func (x *modelRun) step(i int) string {
	t, r, l, m := x.t, x.r, x.l, x.m
	switch op := r.Intn(100); {
	case op < 40:
		if r.Chance(0.1) {
			x.epoch += int32(r.Intn(3))
		}
		b := x.batch(true)
		res, err := l.AppendLeader(b, x.epoch)
		must(t, err)
		m.append(b)
		return fmt.Sprintf("append leader [%d, %d]", res.BaseOffset, res.LastOffset)
	case op < 50:
		if r.Chance(0.2) {
			x.epoch++
		}
		var p []byte
		for k := 1 + r.Intn(3); k > 0; k-- {
			b := x.batch(false)
			m.append(b)
			p = append(p, b...)
		}
		_, err := l.AppendFollower(p)
		must(t, err)
		return fmt.Sprintf("append follower to %d", m.end)
	case op < 65:
		off := m.start - 1 + int64(r.Intn(int(m.end-m.start)+3))
		maxBytes := int64(r.Intn(1500))
		upper := m.start + int64(r.Intn(int(m.end-m.start)+3))
		minOne := r.Chance(0.5)
		x.checkRead(off, maxBytes, upper, minOne)
		return fmt.Sprintf("read %d max %d upper %d", off, maxBytes, upper)
	case op < 70:
		ts := x.h.nowMs() - int64(r.Intn(5000))
		off, rts, ok := m.offsetForTimestamp(ts)
		got, gotOK, err := l.OffsetForTimestamp(ts)
		must(t, err)
		if ok != gotOK || (ok && (got.Offset != off || got.Timestamp != rts)) {
			t.Fatalf("offset for timestamp %d: %+v %v, model %d %d %v", ts, got, gotOK, off, rts, ok)
		}
		off, rts, ok = m.maxTimestamp()
		got, gotOK, err = l.MaxTimestamp()
		must(t, err)
		if ok != gotOK || (ok && (got.Offset != off || got.Timestamp != rts)) {
			t.Fatalf("max timestamp: %+v %v, model %d %d %v", got, gotOK, off, rts, ok)
		}
		return fmt.Sprintf("timestamps %d", ts)
	case op < 75:
		off := m.start + int64(r.Intn(int(m.end-m.start)+1))
		switch {
		case off >= m.end:
		case off <= l.Segments()[0]:
			m.restart(off)
		default:
			m.truncate(off)
		}
		must(t, l.TruncateTo(off))
		x.h.waitReady(l)
		return fmt.Sprintf("truncate to %d", off)
	case op < 77:
		off := m.end + int64(r.Intn(10))
		must(t, l.TruncateFullyAndStartAt(off))
		x.h.waitReady(l)
		m.restart(off)
		return fmt.Sprintf("restart at %d", off)
	case op < 82:
		off := m.start + int64(r.Intn(int(m.end-m.start)+1))
		must(t, l.DeleteRecords(off))
		m.moveStart(off)
		m.dropBelow(l.Segments()[0])
		return fmt.Sprintf("delete records below %d", off)
	case op < 87:
		hw := m.start + int64(r.Intn(int(m.end-m.start)+1))
		active, first := l.active().base, l.Segments()[0]
		_, err := l.EnforceRetention(hw)
		must(t, err)
		if l.active().base != active || (l.Segments()[0] != first && l.Segments()[0] > hw) {
			t.Fatalf("retention below %d deleted too much: segments %v", hw, l.Segments())
		}
		m.dropBelow(l.Segments()[0])
		m.moveStart(l.Segments()[0])
		return fmt.Sprintf("retention below %d", hw)
	case op < 92:
		x.h.advance(time.Duration(r.Intn(120)) * time.Second)
		return "time passes"
	case op < 95:
		x.h.flush(l)
		return "flush"
	default:
		x.h.close(l)
		x.l = x.h.open(x.cfg)
		m.ep.truncateFromEnd(m.end)    // as Kafka's load does
		m.dropBelow(x.l.Segments()[0]) // segments below the log start go
		return "close and reopen"
	}
}

var codecs = []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}

func (x *modelRun) checkRead(off, maxBytes, upper int64, minOne bool) {
	t, l, m := x.t, x.l, x.m
	recs, err := l.Read(off, maxBytes, upper, minOne)
	if off < m.start || off > m.end {
		mustCode(t, err, kerr.OffsetOutOfRange)
		return
	}
	must(t, err)
	p, err := recs.AppendTo(nil)
	must(t, err)
	first, n := m.expectRead(off, maxBytes, upper, minOne)
	var want []byte
	for _, b := range m.batches[first : first+n] {
		want = append(want, b.bytes...)
	}
	if !bytes.Equal(p, want) {
		t.Fatalf("read %d max %d upper %d minOne %v: %d bytes, model %d batches from %d (%d bytes)", off, maxBytes, upper, minOne, len(p), n, first, len(want))
	}
}

// TestModelRandomOperations checks the log against the model after every
// step of random appends, reads, rolls, truncations, deletions, retention,
// timestamp lookups, flushes and clean restarts.
func TestModelRandomOperations(t *testing.T) {
	for seed := 0; seed < seeds(30); seed++ {
		r := rng.New(uint64(seed)).Fork("model")
		h := newHarness(t, uint64(seed))
		cfg := h.config("topic-7")
		cfg.SegmentBytes = 1000 + int64(r.Intn(3000))
		cfg.IndexIntervalBytes = int64(r.Intn(600))
		cfg.IndexBytesMax = 12 * int64(8+r.Intn(40))
		cfg.SegmentTime = time.Duration(1+r.Intn(10)) * time.Minute
		cfg.RetentionTime = time.Duration(1+r.Intn(20)) * time.Minute
		if r.Chance(0.5) {
			cfg.RetentionBytes = int64(2000 + r.Intn(5000))
		}
		if r.Chance(0.3) {
			cfg.FlushBytes = int64(r.Intn(5000))
		}
		x := &modelRun{t: t, r: r, h: h, cfg: cfg, m: &model{}}
		x.l = h.open(cfg)
		var trail []string
		for i := 0; i < 150; i++ {
			what := x.step(i)
			trail = append(trail, what)
			if len(trail) > 8 {
				trail = trail[1:]
			}
			checkModel(t, x.l, x.m, fmt.Sprintf("seed %d step %d after %v", seed, i, trail))
		}
	}
}
