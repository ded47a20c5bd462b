package log

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
)

// closeWithin closes l and runs the simulation for at most limit of virtual
// time; it fails the test if Close has not called back by then.
func (h *harness) closeWithin(l *Log, limit time.Duration) error {
	h.t.Helper()
	called := false
	var got error
	l.Close(func(err error) {
		if called {
			h.t.Fatalf("close called back twice (%v, then %v)", got, err)
		}
		called, got = true, err
	})
	deadline := h.s.Now() + limit
	h.s.RunWhile(func() bool { return !called && h.s.Now() <= deadline })
	if !called {
		d := &l.dur
		h.t.Fatalf("close did not call back within %v: barrier %v, round %v, checkpoint in flight %v, failed %v",
			limit, d.barrier, d.round != nil, d.ckpt.inFlight, l.failed)
	}
	return got
}

// TestCloseCompletesWhileFullDiskHoldsTheBarrier: a truncation's barrier
// needs a checkpoint written before the files are cut, and a full disk
// refuses the checkpoint's new file on every retry. Close must not wait for
// space: it gives up on the barrier, reports ENOSPC, and leaves the disk as
// it was, so that the next Open recovers every flushed batch.
func TestCloseCompletesWhileFullDiskHoldsTheBarrier(t *testing.T) {
	for _, wait := range []time.Duration{0, 10 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(fmt.Sprintf("close after %v", wait), func(t *testing.T) {
			h := newHarness(t, 3)
			cfg := h.config("full-0")
			l, kept := openWithFlushed(t, h, cfg)
			cut := l.LogEndOffset()
			for i := range 2 {
				appendLeader(t, l, spec(values(2, 50, fmt.Sprint("cut", i))...).at(h.nowMs()), 0)
			}
			h.flush(l)

			h.disk.SetFull(true)
			must(t, l.TruncateTo(cut))
			h.advance(wait)
			err := h.closeWithin(l, time.Minute)
			if !errors.Is(err, env.ErrNoSpace) {
				t.Fatalf("close: %v, want ENOSPC", err)
			}
			if got := h.disk.Pending(); got != 0 {
				h.settle()
			}

			h.disk.SetFull(false)
			h.inc++
			l = h.open(cfg)
			if l.LogEndOffset() < cut {
				t.Fatalf("reopened log ends at %d, below %d, which was flushed", l.LogEndOffset(), cut)
			}
			if got := readAll(t, l, 0); !bytes.HasPrefix(got, kept) {
				t.Fatalf("reopened log does not begin with the %d flushed bytes below %d", len(kept), cut)
			}
			must(t, l.TruncateTo(cut))
			h.waitReady(l)
			appendLeader(t, l, spec("after").at(h.nowMs()), 1)
			h.close(l)
		})
	}
}

// TestCloseAfterFailedSyncClaimsNothing: when Close's flush fails (ENOSPC
// at writeback), Close reports it, the durable offset stays where the last
// good sync left it, and no checkpoint claims the unflushed tail; a power
// loss then keeps every flushed batch.
func TestCloseAfterFailedSyncClaimsNothing(t *testing.T) {
	for _, op := range []struct {
		name string
		fail func(h *harness) error
	}{
		{"sync", func(h *harness) error { return h.disk.FailNext(opSync, envErrNoSpace) }},
		{"syncdir", func(h *harness) error { return h.disk.FailNext(opSyncDir, envErrIO) }},
	} {
		t.Run(op.name, func(t *testing.T) {
			h := newHarness(t, 4)
			cfg := h.config("tail-0")
			cfg.SegmentBytes = 600
			l := h.open(cfg)
			for i := range 4 {
				appendLeader(t, l, spec(values(2, 60, fmt.Sprint("kept", i))...).at(h.nowMs()), 0)
			}
			h.flush(l)
			for i := range 4 {
				appendLeader(t, l, spec(values(2, 60, fmt.Sprint("tail", i))...).at(h.nowMs()), 0)
			}
			all := readAll(t, l, 0)
			must(t, op.fail(h))
			if err := h.closeWithin(l, time.Minute); err == nil {
				t.Fatal("close succeeded although a sync failed")
			}
			// Rolls flushed segments in the background before the failure
			// struck; nothing after the failed round may count.
			durable := l.DurableOffset()
			if durable >= l.LogEndOffset() {
				t.Fatalf("durable offset %d claims the unflushed tail (log end %d)", durable, l.LogEndOffset())
			}
			var kept []byte
			bases, batches := splitBatches(t, all)
			for i, b := range batches {
				if bases[i] < durable {
					kept = append(kept, b...)
				}
			}
			h.crash()
			l = h.open(cfg)
			if got := readAll(t, l, 0); !bytes.HasPrefix(got, kept) {
				t.Fatalf("after a power loss the log does not begin with the %d bytes below the durable offset %d", len(kept), durable)
			}
			h.close(l)
		})
	}
}

// TestCloseCompletesWhenRecoveryCannotBeMadeDurable: after a power loss,
// Open puts the log behind a barrier that a full disk keeps from
// completing. Close still completes, and once space is back the log opens
// with every flushed batch.
func TestCloseCompletesWhenRecoveryCannotBeMadeDurable(t *testing.T) {
	h := newHarness(t, 5)
	cfg := h.config("recovered-0")
	l, kept := openWithFlushed(t, h, cfg)
	appendLeader(t, l, spec("unflushed").at(h.nowMs()), 0)
	h.crash()

	h.disk.SetFull(true)
	cfg.Clock, cfg.Loop = harnessClock{h, h.inc}, harnessLoop{h, h.inc}
	l, err := Open(cfg)
	must(t, err)
	if !l.dur.barrier {
		t.Fatal("a log recovered after a power loss is not behind a barrier")
	}
	h.advance(3 * time.Second)
	if err := h.closeWithin(l, time.Minute); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("close: %v, want ENOSPC", err)
	}

	h.disk.SetFull(false)
	h.inc++
	l = h.open(cfg)
	if got := readAll(t, l, 0); !bytes.HasPrefix(got, kept) {
		t.Fatalf("reopened log does not begin with the %d flushed bytes", len(kept))
	}
	h.close(l)
}

// TestCloseAfterTruncationsWhileRetryWaits: a second truncation comes while
// the first one's barrier waits to retry on a full disk; its attempt fails
// too and arms a retry of its own. The first retry is superseded: it must
// never run, and Close, arriving once that retry would have fired but before
// the second would, still finds the barrier waiting to retry and gives it
// up, reporting ENOSPC. (Crash seed 1431: the stale first retry fired and
// forgot the second's timer, so Close waited for an attempt that never
// came.)
func TestCloseAfterTruncationsWhileRetryWaits(t *testing.T) {
	h := newHarness(t, 6)
	cfg := h.config("retry-0")
	l, kept := openWithFlushed(t, h, cfg)
	first := l.LogEndOffset()
	for i := range 2 {
		appendLeader(t, l, spec(values(2, 50, fmt.Sprint("cut", i))...).at(h.nowMs()), 0)
	}
	second := l.LogEndOffset()
	for i := range 2 {
		appendLeader(t, l, spec(values(2, 50, fmt.Sprint("cut more", i))...).at(h.nowMs()), 0)
	}
	h.flush(l)

	h.disk.SetFull(true)
	must(t, l.TruncateTo(second))
	h.advance(barrierRetry / 2) // the attempt fails; its retry waits
	if l.dur.barrierTimer == nil {
		t.Fatal("no retry armed after the barrier's checkpoint failed on a full disk")
	}
	must(t, l.TruncateTo(first))
	h.advance(barrierRetry * 3 / 4) // past the first retry, short of the second
	if err := h.closeWithin(l, time.Minute); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("close: %v, want ENOSPC", err)
	}

	h.disk.SetFull(false)
	h.inc++
	l = h.open(cfg)
	if got := readAll(t, l, 0); !bytes.HasPrefix(got, kept) {
		t.Fatalf("reopened log does not begin with the %d flushed bytes below %d", len(kept), first)
	}
	h.close(l)
}

// openWithFlushed opens the log of cfg and appends and flushes three
// batches, returning the log and their bytes.
func openWithFlushed(t *testing.T, h *harness, cfg Config) (*Log, []byte) {
	t.Helper()
	l := h.open(cfg)
	for i := range 3 {
		appendLeader(t, l, spec(values(2, 50, fmt.Sprint("kept", i))...).at(h.nowMs()), 0)
	}
	h.flush(l)
	return l, readAll(t, l, 0)
}
