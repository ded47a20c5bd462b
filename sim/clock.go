package sim

import (
	"container/heap"
	"math"
	"math/bits"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// Clock is a node's hardware clock: it keeps running while the node is
// paused, crashed or powered off, and its skew, drift and jumps survive
// restarts, as a machine's clock does.
//
// Two readings are kept apart, as an operating system keeps them. Timers
// (AfterFunc) count elapsed time on the node's oscillator, which runs fast or
// slow by the drift but never jumps, like CLOCK_MONOTONIC. Now is the wall
// clock: the same oscillator plus the skew it started with and every Jump
// since, so it may move backwards.
type Clock struct {
	w    *World
	name string // the node's
	// skew is where the wall clock stood, relative to the world's epoch, at
	// virtual time zero.
	skew time.Duration
	// driftPPM is how fast the oscillator runs, in parts per million: +100
	// gains 100µs per virtual second. It stays within ±maxDriftPPM, far
	// from -1e6, so elapsed time always moves forwards.
	driftPPM int64
	// jumped is the sum of every Jump.
	jumped time.Duration
}

const (
	maxSkew     = time.Second
	maxDriftPPM = 200
	million     = 1_000_000
)

func newClock(w *World, name string, r *rng.Rand) *Clock {
	return &Clock{
		w:        w,
		name:     name,
		skew:     time.Duration(r.Uint64n(uint64(2*maxSkew+1))) - maxSkew,
		driftPPM: int64(r.Uint64n(2*maxDriftPPM+1)) - maxDriftPPM,
	}
}

// Now returns the node's wall-clock time.
func (c *Clock) Now() time.Time {
	return c.w.epoch.Add(c.skew + c.jumped + c.elapsed(c.w.sched.Now()))
}

// Jump moves the wall clock by d (backwards if d is negative), as an
// operator or NTP stepping the clock would. Timers are not affected: they
// count elapsed time, which does not jump.
func (c *Clock) Jump(d time.Duration) {
	c.w.sched.Fold("clock.jump/"+c.name, uint64(d))
	c.jumped += d
}

// Skew returns how far the wall clock is from the world's epoch at virtual
// time zero, jumps included.
func (c *Clock) Skew() time.Duration { return c.skew + c.jumped }

// DriftPPM returns how fast the clock runs against virtual time, in parts per
// million.
func (c *Clock) DriftPPM() int64 { return c.driftPPM }

// elapsed converts virtual time v into the node's oscillator time: v plus the
// drift, computed in integers so that every platform gets the same
// nanoseconds. It never decreases as v grows.
func (c *Clock) elapsed(v time.Duration) time.Duration {
	q, r := int64(v)/million, int64(v)%million
	return v + time.Duration(q*c.driftPPM+r*c.driftPPM/million)
}

// maxTimer bounds a timer's delay so that its virtual deadline cannot
// overflow; a timer that far out never fires in any run.
const maxTimer = time.Duration(math.MaxInt64 / 4)

// virtualDelay converts a delay on the node's oscillator, starting now, into
// a delay in virtual time: the smallest one after which the oscillator has
// advanced by at least d. Two timers due at the same oscillator instant get
// the same virtual deadline, so they fire in the order they were set.
func (c *Clock) virtualDelay(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	d = min(d, maxTimer)
	now := c.w.sched.Now()
	target := c.elapsed(now) + d
	// First guess: d scaled by 1e6/(1e6+drift), in 128 bits; then settle
	// the rounding by stepping, which takes a step or two at most.
	hi, lo := bits.Mul64(uint64(d), million)
	guess, _ := bits.Div64(hi, lo, uint64(million+c.driftPPM))
	v := now + time.Duration(guess)
	for c.elapsed(v) < target {
		v++
	}
	for v > now && c.elapsed(v-1) >= target {
		v--
	}
	return v - now
}

// nodeClock is the env.Clock of one incarnation: Now reads the node's
// Clock, and timers die with the incarnation that set them.
type nodeClock struct{ inc *incarnation }

func (c nodeClock) Now() time.Time { return c.inc.node.clock.Now() }

// Elapsed implements env.Clock: the node's oscillator time, which drifts
// but never jumps (Jump moves only the wall clock).
func (c nodeClock) Elapsed() time.Duration {
	clock := c.inc.node.clock
	return clock.elapsed(clock.w.sched.Now())
}

// AfterFunc implements env.Clock. The timer's deadline is on the node's
// oscillator; a scheduler event is set for the first virtual instant at
// which it has passed.
func (c nodeClock) AfterFunc(d time.Duration, f func()) env.Timer {
	if f == nil {
		panic("sim: AfterFunc of a nil func")
	}
	inc := c.inc
	clock := inc.node.clock
	d = max(min(d, maxTimer), -maxTimer)
	inc.timerSeq++
	t := &timer{f: f, inc: inc, deadline: clock.elapsed(clock.w.sched.Now()) + d, seq: inc.timerSeq, index: -1}
	t.event = inc.schedule(clock.virtualDelay(d), sched.Label{Kind: "timer"}, inc.fire)
	if t.event != nil {
		heap.Push(&inc.timers, t)
	}
	return t
}

// fireTimer runs the timer with the earliest deadline, if it is due. Every
// timer has its own event, but the events do not pick their own timer: with
// a fast oscillator two deadlines a nanosecond apart share a virtual
// instant, and the earliest deadline must still fire first. Whichever event
// runs first fires the earliest due timer, so every due timer has fired by
// the time the last of their events has run.
func (inc *incarnation) fireTimer() {
	if inc.timers.Len() == 0 {
		return // the timer was stopped after its event was held by a pause
	}
	t := inc.timers[0]
	clock := inc.node.clock
	if t.deadline > clock.elapsed(clock.w.sched.Now()) {
		return
	}
	heap.Pop(&inc.timers)
	t.f()
}

// timer is a pending AfterFunc of one incarnation.
type timer struct {
	f        func()
	inc      *incarnation
	deadline time.Duration // on the node's oscillator (Clock.elapsed)
	seq      uint64
	index    int          // in inc.timers; -1 once fired or stopped
	event    *sched.Event // nil if the incarnation was already dead
}

// Stop implements env.Timer.
func (t *timer) Stop() bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.inc.timers, t.index)
	t.event.Cancel() // false if a pause holds it; fireTimer then finds nothing due
	return true
}

// timerHeap orders an incarnation's timers by (deadline, seq).
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].seq < h[j].seq
}

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
