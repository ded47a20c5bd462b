package osenv

import (
	"container/heap"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicemq/sluice/env"
)

// clock is the production env.Clock: wall time from time.Now, and timers kept
// in a heap ordered by (deadline, sequence) so that they fire in deadline
// order, ties in the order they were set, exactly as in the simulator. One
// time.Timer, armed for the earliest deadline, wakes the loop; everything
// else about the timers is owned by the loop goroutine.
type clock struct {
	loop *Loop
	node *Node

	// Loop-owned.
	timers  timerHeap
	seq     uint64
	armedAt time.Time // deadline the wake timer is set for; zero if none

	mu   sync.Mutex // guards wake against Node.Close
	wake *time.Timer
}

func newClock(loop *Loop, node *Node) *clock {
	return &clock{loop: loop, node: node}
}

func (c *clock) Now() time.Time { return time.Now() }

// processStart carries time.Now's monotonic reading, so that Elapsed is
// monotonic whatever the wall clock does.
var processStart = time.Now()

func (c *clock) Elapsed() time.Duration { return time.Since(processStart) }

// AfterFunc implements env.Clock. f runs on the loop once d has elapsed; a
// non-positive d runs f on a later loop turn.
func (c *clock) AfterFunc(d time.Duration, f func()) env.Timer {
	if f == nil {
		panic("osenv: AfterFunc of a nil func")
	}
	c.seq++
	t := &timer{clock: c, f: f, deadline: time.Now().Add(d), seq: c.seq, index: -1}
	heap.Push(&c.timers, t)
	c.arm()
	return t
}

// fireDue runs, in deadline order, every timer whose deadline has passed,
// including timers that those timers set with a deadline already passed.
func (c *clock) fireDue() {
	if c.node.closed.Load() {
		return
	}
	c.armedAt = time.Time{}
	for c.timers.Len() > 0 {
		t := c.timers[0]
		if t.deadline.After(time.Now()) {
			break
		}
		heap.Pop(&c.timers)
		t.f()
	}
	c.arm()
}

// arm makes sure the wake timer fires no later than the earliest deadline.
func (c *clock) arm() {
	if c.timers.Len() == 0 {
		return
	}
	next := c.timers[0].deadline
	if !c.armedAt.IsZero() && !c.armedAt.After(next) {
		return // already set to wake us in time
	}
	c.armedAt = next
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node.closed.Load() {
		return
	}
	d := time.Until(next)
	if c.wake == nil {
		c.wake = time.AfterFunc(d, func() { c.loop.Post(c.fireDue) })
		return
	}
	c.wake.Reset(d)
}

// close stops the wake timer; called by Node.Close from any goroutine.
func (c *clock) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wake != nil {
		c.wake.Stop()
	}
}

// timer is one pending AfterFunc. All its fields are loop-owned.
type timer struct {
	clock    *clock
	f        func()
	deadline time.Time
	seq      uint64
	index    int // position in the heap, -1 once fired or stopped
}

// Stop implements env.Timer.
func (t *timer) Stop() bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.clock.timers, t.index)
	// The wake timer may now fire early; fireDue then finds nothing due and
	// re-arms, which is cheaper than tracking it here.
	return true
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if !h[i].deadline.Equal(h[j].deadline) {
		return h[i].deadline.Before(h[j].deadline)
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

// newRand returns a ChaCha8 generator seeded from the operating system's
// entropy: in production, IDs and nonces must not be predictable.
func newRand() (env.Rand, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("osenv: seed random source: %w", err)
	}
	// Used from the loop only, so ChaCha8's lack of locking is fine.
	return rand.NewChaCha8(seed), nil
}
