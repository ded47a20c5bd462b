package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The crash test runs random operations on a log over the simulated disk,
// with disk faults on, and crashes (power loss: unsynced state lost by the
// disk's seeded choices) or restarts the node at random moments, including
// while syncs are in flight. After each recovery it checks:
//
//   - the log is readable from its start, whole batches with contiguous
//     offsets, nothing corrupt returned;
//   - every batch present holds bytes that were once written at its offset
//     and could have survived (the tracker keeps, per base offset, every
//     value not yet superseded durably);
//   - everything a Flush confirmed (and not truncated since) is present;
//   - the log start did not move above any start the log had;
//   - the leader-epoch cache gives each batch its epoch, and each producer
//     its last sequence in the log.

// dbgLog, when set by a debugging test, receives the logs' messages.
var dbgLog *slog.Logger

// crashTracker knows what may be on disk.
type crashTracker struct {
	cur *model
	// cands are the batches that may be found at each base offset after a
	// crash.
	cands map[int64]map[string]bool
	// durableEnd: offsets below it (and at or above the log start) must
	// survive any crash.
	durableEnd int64
	// startHi is the highest log start the log may come back with.
	startHi int64
	// gen counts truncations, so that a Flush confirmation from before one
	// is not credited after it; none is credited while a truncation's
	// barrier is pending (what is on disk may still be the old log).
	gen     int
	pending bool
	// oldEnd is the log end before the latest full truncation.
	oldEnd int64
}

func newTracker() *crashTracker {
	return &crashTracker{cur: &model{}, cands: map[int64]map[string]bool{}}
}

func (c *crashTracker) appended(b []byte) {
	c.cur.append(b)
	c.maybeWritten(b)
}

// maybeWritten records a batch whose write failed: part of it, or all of it
// (a failed write is undone by a truncation that a crash may lose), may be
// on disk.
func (c *crashTracker) maybeWritten(b []byte) {
	base := parseHeader(b).BaseOffset
	if c.cands[base] == nil {
		c.cands[base] = map[string]bool{}
	}
	c.cands[base][string(b)] = true
}

// durable records that everything below upTo is on disk as it is now.
func (c *crashTracker) durable(upTo int64) {
	c.durableEnd = max(c.durableEnd, upTo)
	for _, b := range c.cur.batches {
		if b.base < upTo {
			c.cands[b.base] = map[string]bool{string(b.bytes): true}
		}
	}
}

// truncated records a truncation (or a restart at end when full).
func (c *crashTracker) truncated(end int64, full bool) {
	c.gen++
	c.pending = true
	if full {
		c.durableEnd = 0
		// Until the barrier is done, the old segments go one by one: the
		// log may come back without its head, starting anywhere up to
		// its old end.
		c.startHi = max(c.startHi, end, c.cur.end, c.oldEnd)
	} else {
		c.durableEnd = min(c.durableEnd, end)
	}
}

// barrierDone records that the truncation to end is durable: nothing at or
// after it can come back, and everything below it is synced.
func (c *crashTracker) barrierDone(end int64, full bool) {
	c.pending, c.oldEnd = false, 0
	for base := range c.cands {
		if base >= end || full {
			delete(c.cands, base)
		}
	}
	// Appends made between the barrier's end and this callback stay.
	for _, b := range c.cur.batches {
		if b.base >= end || full {
			c.cands[b.base] = map[string]bool{string(b.bytes): true}
		}
	}
	c.durable(end)
	c.durableEnd = max(c.durableEnd, end)
	c.startHi = c.cur.start
}

type crashRun struct {
	t      testing.TB
	seed   int
	r      *rng.Rand
	h      *harness
	l      *Log
	cfg    Config
	tr     *crashTracker
	epoch  int32
	faults simfs.Faults
	// seqs are the next sequence of each idempotent producer.
	seqs  map[int64]int32
	trail []string
}

func (x *crashRun) note(format string, args ...any) {
	x.trail = append(x.trail, fmt.Sprintf(format, args...))
	if len(x.trail) > 12 {
		x.trail = x.trail[1:]
	}
}

func (x *crashRun) fatalf(format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf("seed %d: %s\n\tafter %v\n\treplay: SLUICE_SEEDS=%d go test -run Crash ./log", x.seed, fmt.Sprintf(format, args...), x.trail, x.seed+1)
}

func (x *crashRun) batch(follower bool) []byte {
	n := 1 + x.r.Intn(4)
	s := spec()
	for i := 0; i < n; i++ {
		s.values = append(s.values, bytes.Repeat([]byte{byte('a' + x.r.Intn(26))}, x.r.Intn(200)))
	}
	s.baseTs = x.h.nowMs()
	if x.r.Chance(0.3) {
		// Another producer's clock, behind this one's: timestamps along
		// the log go down as well as up, so a segment's max timestamp is
		// not its last batch's.
		s.baseTs -= int64(x.r.Intn(5000))
	}
	if follower {
		s.baseOffset, s.leaderEpoch = x.tr.cur.end, x.epoch
	} else if x.r.Chance(0.5) {
		pid := int64(1 + x.r.Intn(2))
		s = s.idempotent(pid, 0, x.seqs[pid])
	}
	if x.r.Chance(0.1) {
		s.compress, s.codec = true, codecs[x.r.Intn(len(codecs))]
	}
	return s.build()
}

// failed reports whether err means the log gave up (then the node restarts).
func failed(err error) bool { return errors.Is(err, ErrFailed) }

// step runs one random operation. It returns false when the log failed.
func (x *crashRun) step() bool {
	r, l, tr := x.r, x.l, x.tr
	switch op := r.Intn(100); {
	case op < 45:
		if r.Chance(0.05) {
			x.epoch++
		}
		b := x.batch(false)
		h := parseHeader(b)
		res, err := l.AppendLeader(b, x.epoch)
		x.note("append leader: %+v %v", res, err)
		if err != nil {
			if ErrorCode(err) == kerr.KafkaStorageError {
				tr.maybeWritten(b)
			}
			return !failed(err)
		}
		if res.Duplicate {
			x.fatalf("unexpected duplicate %+v", res)
		}
		tr.appended(b)
		if h.hasProducerID() {
			x.seqs[h.ProducerID] = h.lastSequence() + 1
		}
	case op < 55:
		var p []byte
		var bs [][]byte
		end := tr.cur.end
		for k := 1 + r.Intn(3); k > 0; k-- {
			b := x.batch(true)
			bs = append(bs, b)
			hd := parseHeader(b)
			tr.cur.end = hd.nextOffset()
			p = append(p, b...)
		}
		tr.cur.end = end
		_, err := l.AppendFollower(p)
		x.note("append follower at %d: %v", end, err)
		// On an error, a prefix of the batches may be in: the log end says.
		// The others may have reached the disk all the same.
		for _, b := range bs {
			if hd := parseHeader(b); hd.nextOffset() <= l.LogEndOffset() {
				tr.appended(b)
			} else if ErrorCode(err) == kerr.KafkaStorageError {
				tr.maybeWritten(b)
			}
		}
		if err != nil {
			return !failed(err)
		}
	case op < 65:
		upTo := tr.cur.start + int64(r.Intn(int(tr.cur.end-tr.cur.start)+1))
		gen := tr.gen
		x.note("flush to %d", upTo)
		l.Flush(upTo, func(err error) {
			if err == nil && gen == tr.gen && !tr.pending {
				tr.durable(upTo)
			}
		})
	case op < 70:
		x.note("checkpoint")
		l.Checkpoint(func(error) {})
	case op < 78:
		off := tr.cur.start + int64(r.Intn(int(tr.cur.end-tr.cur.start)+1))
		full := off < tr.cur.end && off <= l.Segments()[0]
		if err := l.TruncateTo(off); err != nil {
			x.note("truncate to %d: %v", off, err)
			if failed(err) && off < tr.cur.end {
				// It may have truncated before failing.
				would := &model{batches: tr.cur.batches, end: tr.cur.end}
				would.truncate(off)
				tr.truncated(min(would.end, off), full)
			}
			return !failed(err)
		}
		x.note("truncate to %d", off)
		switch {
		case off >= tr.cur.end:
			return true
		case full:
			tr.oldEnd = max(tr.oldEnd, tr.cur.end)
			tr.cur.restart(off)
		default:
			tr.cur.truncate(off)
		}
		x.afterTruncate(full)
		x.syncSeqs()
	case op < 80:
		off := tr.cur.end + int64(r.Intn(5))
		if err := l.TruncateFullyAndStartAt(off); err != nil {
			x.note("restart at %d: %v", off, err)
			if failed(err) {
				tr.oldEnd = max(tr.oldEnd, tr.cur.end)
				tr.truncated(off, true) // it may have deleted everything before failing
			}
			return !failed(err)
		}
		x.note("restart at %d", off)
		tr.oldEnd = max(tr.oldEnd, tr.cur.end)
		tr.cur.restart(off)
		x.afterTruncate(true)
		x.syncSeqs()
	case op < 84:
		off := tr.cur.start + int64(r.Intn(int(tr.cur.end-tr.cur.start)+1))
		err := l.DeleteRecords(off)
		x.note("delete records below %d: %v", off, err)
		if err != nil {
			return !failed(err)
		}
		tr.cur.moveStart(off)
		tr.cur.dropBelow(l.Segments()[0])
		tr.startHi = max(tr.startHi, tr.cur.start)
	case op < 88:
		hw := tr.cur.start + int64(r.Intn(int(tr.cur.end-tr.cur.start)+1))
		_, err := l.EnforceRetention(hw)
		x.note("retention below %d: %v", hw, err)
		if err != nil {
			return !failed(err)
		}
		tr.cur.dropBelow(l.Segments()[0])
		tr.cur.moveStart(l.Segments()[0])
		tr.startHi = max(tr.startHi, tr.cur.start)
	case op < 95:
		x.checkRead()
	default:
		x.h.advance(time.Duration(r.Intn(30)) * time.Second)
		x.note("time passes")
	}
	return true
}

// afterTruncate credits the barrier when it completes.
func (x *crashRun) afterTruncate(full bool) {
	tr := x.tr
	end := tr.cur.end
	tr.truncated(end, full)
	gen := tr.gen
	x.l.Ready(func(err error) {
		if err == nil && gen == tr.gen {
			tr.barrierDone(end, full)
		}
	})
}

// checkRead reads a random range: the bytes must be the current ones, or
// the read must fail.
func (x *crashRun) checkRead() {
	m := x.tr.cur
	if m.end == m.start {
		return
	}
	off := m.start + int64(x.r.Intn(int(m.end-m.start)))
	maxBytes := int64(x.r.Intn(2000))
	recs, err := x.l.Read(off, maxBytes, m.end, true)
	var p []byte
	if err == nil {
		p, err = recs.AppendTo(nil)
	}
	x.note("read from %d: %v", off, err)
	if err != nil {
		return
	}
	first, n := m.expectRead(off, int64(len(p)), m.end, true)
	var want []byte
	for _, b := range m.batches[first : first+n] {
		want = append(want, b.bytes...)
	}
	if !bytes.Equal(p, want) {
		x.dumpDir()
		x.t.Logf("read %+v max %d upper %d log end %d", recs, maxBytes, m.end, x.l.LogEndOffset())
		diff := -1
		for i := range min(len(p), len(want)) {
			if p[i] != want[i] {
				diff = i
				break
			}
		}
		x.fatalf("read from %d returned %d bytes that are not the log's (%d), first difference at %d: %+v vs %+v", off, len(p), len(want), diff, parseHeader(padHeader(p)), parseHeader(padHeader(want)))
	}
}

// reopen opens the log after a crash or a restart, retrying while the disk
// fails it, and waits until it is ready.
func (x *crashRun) reopen() {
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			must(x.t, x.h.disk.SetFaults(simfs.Faults{}))
		}
		if attempt == 10 {
			x.fatalf("the log does not open on a disk without faults")
		}
		cfg := x.cfg
		cfg.Clock, cfg.Loop = harnessClock{x.h, x.h.inc}, harnessLoop{x.h, x.h.inc}
		l, err := Open(cfg)
		if err != nil {
			x.note("open: %v", err)
			continue
		}
		if err := x.h.wait(l.Ready); err != nil {
			x.note("ready: %v", err)
			x.h.wait(l.Close)
			continue
		}
		x.l = l
		break
	}
	must(x.t, x.h.disk.SetFaults(x.faults))
}

// verify checks the recovered log against the tracker, then makes the
// tracker describe it. After a power loss what the disk holds is durable;
// after a restart it may still be only in the page cache.
func (x *crashRun) verify(powerLoss bool) {
	l, tr := x.l, x.tr
	must(x.t, x.h.disk.SetFaults(simfs.Faults{}))
	defer func() { must(x.t, x.h.disk.SetFaults(x.faults)) }()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	if start > tr.startHi {
		x.fatalf("log start %d is above any it had (%d)", start, tr.startHi)
	}
	if start <= tr.durableEnd && end < tr.durableEnd {
		x.fatalf("log ends at %d, but everything below %d was flushed", end, tr.durableEnd)
	}
	recs, err := l.Read(start, 1<<40, end, true)
	if err != nil {
		x.dumpDir()
		x.fatalf("read from the log start %d: %v", start, err)
	}
	p, err := recs.AppendTo(nil)
	if err != nil {
		x.fatalf("copy from the log start %d: %v", start, err)
	}
	m := &model{start: start, end: end}
	want := start
	for len(p) > 0 {
		h := parseHeader(p)
		b := p[:h.size()]
		p = p[h.size():]
		if (want == start && (h.BaseOffset > start || h.lastOffset() < start)) || (want != start && h.BaseOffset != want) {
			x.fatalf("batch at %d where %d was expected (log [%d, %d))", h.BaseOffset, want, start, end)
		}
		if !tr.cands[h.BaseOffset][string(b)] {
			var cs []string
			for c := range tr.cands[h.BaseOffset] {
				ch := parseHeader([]byte(c))
				cs = append(cs, fmt.Sprintf("%+v", ch))
			}
			x.fatalf("batch at %d holds bytes never written there: %+v; candidates %v", h.BaseOffset, h, cs)
		}
		if e, ok := l.EpochForOffset(max(h.BaseOffset, start)); h.LeaderEpoch >= 0 && (!ok || e != h.LeaderEpoch) {
			x.fatalf("epoch cache says offset %d is epoch %d %v, its batch says %d (cache %v)", h.BaseOffset, e, ok, h.LeaderEpoch, l.Epochs())
		}
		m.append(b)
		want = h.nextOffset()
	}
	if want != end && !(want == start && end == start) {
		x.fatalf("batches end at %d, the log at %d", want, end)
	}
	x.verifyProducers(m)
	x.verifyTimestamps(m)
	m.ep.entries = l.Epochs()
	tr.cur = m
	if powerLoss {
		tr.pending, tr.oldEnd = false, 0
		tr.durableEnd, tr.startHi = end, start
		tr.cands = map[int64]map[string]bool{}
	}
	for _, b := range m.batches {
		if tr.cands[b.base] == nil {
			tr.cands[b.base] = map[string]bool{}
		}
		tr.cands[b.base][string(b.bytes)] = true
	}
	x.syncSeqs()
}

// verifyTimestamps asks the recovered log for the offsets of a few of its
// batches' timestamps, and for its max timestamp: the time indexes recovery
// trusted or rebuilt must say where each timestamp is.
func (x *crashRun) verifyTimestamps(m *model) {
	if len(m.batches) == 0 {
		return
	}
	for range 4 {
		target := m.batches[x.r.Intn(len(m.batches))].header().MaxTimestamp + int64(x.r.Intn(3)) - 1
		off, ts, ok := m.offsetForTimestamp(target)
		got, gotOK, err := x.l.OffsetForTimestamp(target)
		if err != nil {
			x.fatalf("offset for timestamp %d: %v", target, err)
		}
		if ok != gotOK || (ok && (got.Offset != off || got.Timestamp != ts)) {
			x.dumpDir()
			x.fatalf("offset for timestamp %d: %+v %v, the records say %d (timestamp %d) %v", target, got, gotOK, off, ts, ok)
		}
	}
	off, ts, ok := m.maxTimestamp()
	got, gotOK, err := x.l.MaxTimestamp()
	if err != nil {
		x.fatalf("max timestamp: %v", err)
	}
	if ok != gotOK || (ok && (got.Offset != off || got.Timestamp != ts)) {
		x.dumpDir()
		x.fatalf("max timestamp: %+v %v, the records say %d (timestamp %d) %v", got, gotOK, off, ts, ok)
	}
}

// syncSeqs continues each producer where the log's state says it is, as a
// real producer would after a retriable error.
func (x *crashRun) syncSeqs() {
	clear(x.seqs)
	for _, pi := range x.l.Producers() {
		x.seqs[pi.ProducerID] = pi.LastSequence + 1
	}
}

// verifyProducers: a producer with batches in the log has the last one's
// sequence.
func (x *crashRun) verifyProducers(m *model) {
	last := map[int64]int32{}
	for _, b := range m.batches {
		if h := b.header(); h.hasProducerID() {
			last[h.ProducerID] = h.lastSequence()
		}
	}
	for _, pi := range x.l.Producers() {
		if seq, ok := last[pi.ProducerID]; ok && seq != pi.LastSequence {
			x.fatalf("producer %d: last sequence %d, its last batch in the log ends at %d", pi.ProducerID, pi.LastSequence, seq)
		}
		delete(last, pi.ProducerID)
	}
	for pid := range last {
		x.fatalf("producer %d has batches in the log but no state", pid)
	}
}

func crashConfig(r *rng.Rand, h *harness) Config {
	cfg := h.config("events-0")
	cfg.SegmentBytes = 700 + int64(r.Intn(4000))
	cfg.IndexIntervalBytes = int64(r.Intn(800))
	cfg.IndexBytesMax = 12 * int64(8+r.Intn(60))
	cfg.RetentionTime = time.Duration(1+r.Intn(10)) * time.Minute
	if r.Chance(0.3) {
		cfg.RetentionBytes = int64(3000 + r.Intn(6000))
	}
	if r.Chance(0.3) {
		cfg.FlushBytes = int64(r.Intn(4000))
	}
	if r.Chance(0.3) {
		cfg.FlushInterval = time.Duration(1+r.Intn(50)) * time.Millisecond
	}
	cfg.CheckpointInterval = time.Duration(1+r.Intn(1000)) * time.Millisecond
	if dbgLog != nil {
		cfg.Logger = dbgLog
	}
	return cfg
}

func runCrashSeed(t testing.TB, seed int) {
	r := rng.New(uint64(seed)).Fork("crash test")
	h := newHarness(t, uint64(seed))
	// Now and then the disk is full for a while (SetFull): allocations fail, syncs
	// succeed, and a truncation's barrier cannot complete. Space is back
	// at every restart.
	x := &crashRun{t: t, seed: seed, r: r, h: h, cfg: crashConfig(r, h), tr: newTracker(), seqs: map[int64]int32{}}
	h.onStuck = func() {
		d := &x.l.dur
		t.Logf("stuck: round %+v waiters %d ckpt inflight %v cur %d next %d barrier %v failed %v closing %v closed %v\n\tafter %v", d.round, len(d.waiters), d.ckpt.inFlight, len(d.ckpt.current), len(d.ckpt.next), d.barrier, x.l.failed, x.l.closing, x.l.closed, x.trail)
	}
	if r.Chance(0.8) {
		x.faults = simfs.Faults{
			EIORate:     []float64{0, 0.001, 0.01}[r.Intn(3)],
			NoSpaceRate: []float64{0, 0.001, 0.01}[r.Intn(3)],
			BitFlipRate: []float64{0, 0.001, 0.02}[r.Intn(3)],
		}
	}
	x.reopen()
	x.verify(true)
	for i := 0; i < 120; i++ {
		ok := x.step()
		// Let a random part of what is in flight complete.
		for n := r.Intn(8); n > 0 && h.s.Step(); n-- {
		}
		switch {
		case !ok || x.l.Err() != nil:
			x.note("restart after failure: %v", x.l.Err())
			x.h.closeWithin(x.l, time.Hour)
			x.h.inc++ // the old incarnation's timers and callbacks are dead
			h.disk.SetFull(false)
			x.reopen()
			x.verify(false)
		case r.Chance(0.03):
			// kill -9: the process dies, the page cache stays, and what it
			// holds unsynced a later power loss may still take.
			x.note("kill")
			h.disk.CrashProcess()
			x.h.inc++
			h.disk.SetFull(false)
			x.reopen()
			x.verify(false)
		case r.Chance(0.04):
			x.note("power loss")
			h.crash()
			h.disk.SetFull(false)
			x.reopen()
			x.verify(true)
		case r.Chance(0.01):
			x.note("clean restart")
			err := x.h.closeWithin(x.l, time.Hour)
			x.h.inc++
			h.disk.SetFull(false)
			x.reopen()
			if err == nil {
				must(t, h.disk.SetFaults(simfs.Faults{}))
				x.tr.cur.ep.truncateFromEnd(x.tr.cur.end) // as Kafka's load does
				x.tr.cur.dropBelow(x.l.Segments()[0])     // segments below the log start go
				checkModel(t, x.l, x.tr.cur, fmt.Sprintf("seed %d after a clean restart", seed))
				must(t, h.disk.SetFaults(x.faults))
			}
			x.verify(false)
		case r.Chance(0.02):
			h.disk.SetFull(!h.disk.Full())
			x.note("disk full: %v", h.disk.Full())
		}
	}
	x.note("final power loss")
	h.crash()
	h.disk.SetFull(false)
	x.reopen()
	x.verify(true)
}

// TestCrashRecovery sweeps seeds (SLUICE_SEEDS, default 200).
func TestCrashRecovery(t *testing.T) {
	for seed := 0; seed < seeds(200); seed++ {
		runCrashSeed(t, seed)
	}
}

func (x *crashRun) dumpDir() {
	names, _ := x.h.fs.List(x.l.dir)
	for _, n := range names {
		fi, _ := x.h.fs.Stat(x.l.dir + "/" + n)
		x.t.Logf("  %s %d", n, fi.Size)
	}
	for _, s := range x.l.segs {
		x.t.Logf("  segment %d size %d next %d idx %d tix %d", s.base, s.size, s.next, s.idx.len(), s.tix.len())
		f := s.log.f
		size, _ := f.Size()
		p := make([]byte, size)
		f.ReadAt(p, 0)
		for len(p) >= batchHeaderSize {
			h := parseHeader(p)
			x.t.Logf("    batch %d..%d size %d", h.BaseOffset, h.lastOffset(), h.size())
			if h.size() <= 0 || h.size() > int64(len(p)) {
				break
			}
			p = p[h.size():]
		}
	}
}

// TestCrashMediumFlips: bits flipped on the medium, in any of the log's
// files, after a crash. Open either fails with an error or recovers a log
// whose every batch, read back, is the one written at its offset (or the
// read fails): a flipped bit never comes back as data.
func TestCrashMediumFlips(t *testing.T) {
	for seed := 0; seed < seeds(200); seed++ {
		r := rng.New(uint64(seed)).Fork("medium flips")
		h := newHarness(t, uint64(seed))
		cfg := crashConfig(r, h)
		cfg.SegmentBytes = max(cfg.SegmentBytes, 2000)
		l := h.open(cfg)
		written := map[int64][]byte{}
		epoch, seq := int32(0), int32(0)
		for i := 0; i < 40+r.Intn(60); i++ {
			if r.Chance(0.1) {
				epoch++
			}
			s := spec(values(1+r.Intn(3), r.Intn(300), "m")...).at(h.nowMs())
			if r.Chance(0.3) {
				s = s.idempotent(7, 0, seq)
				seq += int32(len(s.values))
			}
			b := s.build()
			res, err := l.AppendLeader(b, epoch)
			must(t, err)
			written[res.BaseOffset] = b
			if r.Chance(0.1) {
				h.flush(l)
			}
		}
		if r.Chance(0.5) {
			h.close(l)
		} else {
			h.flush(l)
			h.settle()
		}
		h.crash()
		names, _ := h.disk.ListDurable(cfg.Dir)
		for n := 1 + r.Intn(4); n > 0 && len(names) > 0; n-- {
			name := cfg.Dir + "/" + names[r.Intn(len(names))]
			if p, err := h.disk.ReadDurable(name); err == nil && len(p) > 0 {
				must(t, h.disk.FlipBit(name, int64(r.Intn(len(p)))))
			}
		}
		cfg.Clock, cfg.Loop = harnessClock{h, h.inc}, harnessLoop{h, h.inc}
		l, err := Open(cfg)
		if err != nil {
			continue
		}
		if h.wait(l.Ready) != nil {
			continue
		}
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			recs, err := l.Read(off, 1, l.LogEndOffset(), true)
			var p []byte
			if err == nil {
				p, err = recs.AppendTo(nil)
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("seed %d: read at %d: %v", seed, off, err)
				}
				off++
				continue
			}
			hd := parseHeader(p)
			if want := written[hd.BaseOffset]; !bytes.Equal(p, want) && !epochFlipOfLastBatch(p, want, hd.nextOffset() == l.LogEndOffset()) {
				diff := -1
				for i := range min(len(p), len(want)) {
					if p[i] != want[i] {
						diff = i
						break
					}
				}
				t.Fatalf("seed %d: offset %d came back different from what was written (%d vs %d bytes, first difference at %d): %+v", seed, hd.BaseOffset, len(p), len(want), diff, hd)
			}
			off = hd.nextOffset()
		}
		for _, ts := range []int64{0, h.nowMs() - 500} {
			if _, _, err := l.OffsetForTimestamp(ts); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("seed %d: timestamp lookup: %v", seed, err)
			}
		}
	}
}

// epochFlipOfLastBatch says whether got differs from want only in the leader
// epoch of the log's last batch: the one flip the log cannot see (the field
// lies outside the CRC, and no later batch contradicts it).
func epochFlipOfLastBatch(got, want []byte, last bool) bool {
	if !last || len(got) != len(want) {
		return false
	}
	return bytes.Equal(got[:offLeaderEpoch], want[:offLeaderEpoch]) && bytes.Equal(got[offMagic:], want[offMagic:])
}
