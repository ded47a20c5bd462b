// Package sched is the simulator's discrete-event kernel: a queue of events
// ordered by (virtual time, sequence), a virtual clock that jumps to the next
// event, and a trace that folds every delivered event into a running hash.
//
// Everything in a simulated run (every node's loop, every disk and link) is an
// event here, executed one at a time on the caller's goroutine. Two events at
// the same virtual time run in the order they were scheduled, so a run is a
// pure function of its seed.
//
// The trace is how runs are compared: each delivered event contributes its
// kind, its node, its virtual time and a digest of its payload, so two runs
// that print the same trace hash delivered the same events at the same times.
package sched

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"time"
)

// Label says what an event is, for the trace: its kind ("net.data",
// "disk.sync", "timer"...), the node it belongs to, and a digest of its
// payload (0 when it has none; see Digest).
type Label struct {
	Kind   string
	Node   string
	Digest uint64
}

// Event is a scheduled function.
type Event struct {
	at    time.Duration
	seq   uint64
	label Label
	fn    func()
	// owner, if set, runs fn (AfterFor): one allocation per event where a
	// wrapping closure would make two.
	owner Owner
	s     *Scheduler
	index int // position in the heap, -1 once run or canceled
}

// At returns the virtual time the event is due.
func (e *Event) At() time.Duration { return e.at }

// Cancel prevents the event from running. It reports whether the event was
// still pending.
//
// The event leaves the queue at once: most timers (a request's timeout)
// are canceled long before they are due, and a busy run left behind in
// the heap grew it to 150,000 entries, 30 times the live ones, each push
// and pop paying for its depth.
func (e *Event) Cancel() bool {
	if e.index < 0 {
		return false
	}
	e.s.remove(e.index)
	return true
}

// Pending reports whether the event has neither run nor been canceled.
func (e *Event) Pending() bool { return e.index >= 0 }

// Scheduler runs events in (time, sequence) order.
type Scheduler struct {
	now       time.Duration
	seq       uint64
	heap      []*Event
	trace     uint64
	delivered uint64
	observe   func(TraceEntry) // nil: nobody watches the trace
}

// TraceEntry is one thing folded into the trace: a delivered event (its
// kind, node, time and payload digest) or a Fold (kind and value; Node
// empty, At the time it was folded).
type TraceEntry struct {
	At     time.Duration
	Kind   string
	Node   string
	Digest uint64 // a Fold's value
	Fold   bool
	// Hash is the trace's hash once the entry is folded in.
	Hash uint64
}

// String is the entry as one line: virtual time, node ("-" for a fold),
// kind, digest or value in hex, and the running hash.
func (e TraceEntry) String() string {
	node := e.Node
	if e.Fold {
		node = "-"
	} else if node == "" {
		node = "world"
	}
	return fmt.Sprintf("%14.6fs %-10s %-28s %016x %016x", e.At.Seconds(), node, e.Kind, e.Digest, e.Hash)
}

// Observe has f called with every entry as it is folded into the trace,
// in order: what the trace hash covers, for a reader to step through.
func (s *Scheduler) Observe(f func(TraceEntry)) { s.observe = f }

// New returns an empty scheduler at virtual time zero.
func New() *Scheduler {
	return &Scheduler{trace: 0x51a1ce}
}

// Now is the virtual time elapsed since the run began.
func (s *Scheduler) Now() time.Duration { return s.now }

// After schedules fn to run d from now (d < 0 counts as 0). Events due at the
// same time run in the order they were scheduled.
func (s *Scheduler) After(d time.Duration, label Label, fn func()) *Event {
	if d < 0 {
		d = 0
	}
	return s.At(s.now+d, label, fn)
}

// At schedules fn at virtual time at, which must not be in the past.
func (s *Scheduler) At(at time.Duration, label Label, fn func()) *Event {
	return s.at(at, label, nil, fn)
}

// Owner runs the events scheduled for it (AfterFor): a simulated node's
// incarnation, which drops them once it has died and holds them while it
// is paused.
type Owner interface {
	Run(label Label, fn func())
}

// AfterFor is After with fn run by owner.Run when it comes due: as After
// of a closure calling owner.Run(label, fn), traced the same, without the
// closure.
func (s *Scheduler) AfterFor(d time.Duration, label Label, owner Owner, fn func()) *Event {
	return s.at(s.now+max(d, 0), label, owner, fn)
}

func (s *Scheduler) at(at time.Duration, label Label, owner Owner, fn func()) *Event {
	if at < s.now {
		panic(fmt.Sprintf("sched: event %q at %v is before now %v", label.Kind, at, s.now))
	}
	s.seq++
	e := &Event{at: at, seq: s.seq, label: label, fn: fn, owner: owner, s: s}
	s.push(e)
	return e
}

// Step runs the next event, advancing virtual time to it. It reports false
// when no event is left.
func (s *Scheduler) Step() bool {
	if len(s.heap) == 0 {
		return false
	}
	e := s.heap[0]
	s.remove(0)
	s.now = e.at
	s.fold(e)
	if e.owner != nil {
		e.owner.Run(e.label, e.fn)
	} else {
		e.fn()
	}
	return true
}

// RunUntil runs every event due at or before t, then sets the clock to t.
func (s *Scheduler) RunUntil(t time.Duration) {
	for {
		e := s.peek()
		if e == nil || e.at > t {
			break
		}
		s.Step()
	}
	if t > s.now {
		s.now = t
	}
}

// RunWhile runs events while cond holds and events remain; it reports whether
// cond still held when it stopped (true means the queue ran dry).
func (s *Scheduler) RunWhile(cond func() bool) bool {
	for cond() {
		if !s.Step() {
			return true
		}
	}
	return false
}

// NextAt reports when the next pending event is due.
func (s *Scheduler) NextAt() (time.Duration, bool) {
	e := s.peek()
	if e == nil {
		return 0, false
	}
	return e.at, true
}

// Len returns the number of pending events.
func (s *Scheduler) Len() int { return len(s.heap) }

// Delivered returns how many events have run.
func (s *Scheduler) Delivered() uint64 { return s.delivered }

// Trace returns the running hash of every delivered event, in hex.
func (s *Scheduler) Trace() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(s.trace >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

// Fold mixes an extra value into the trace, for facts that are not events
// (the options a seed chose, a checker's verdict).
func (s *Scheduler) Fold(kind string, v uint64) {
	s.mix(hashString(kind))
	s.mix(v)
	if s.observe != nil {
		s.observe(TraceEntry{At: s.now, Kind: kind, Digest: v, Fold: true, Hash: s.trace})
	}
}

func (s *Scheduler) fold(e *Event) {
	s.delivered++
	s.mix(hashString(e.label.Kind))
	s.mix(hashString(e.label.Node))
	s.mix(uint64(e.at))
	s.mix(e.label.Digest)
	if s.observe != nil {
		s.observe(TraceEntry{At: e.at, Kind: e.label.Kind, Node: e.label.Node, Digest: e.label.Digest, Hash: s.trace})
	}
}

// mix folds v into the trace with a multiply-xorshift step; collisions only
// matter as far as telling runs apart.
func (s *Scheduler) mix(v uint64) {
	h := (s.trace ^ v) * 0x9e3779b97f4a7c15
	s.trace = h ^ h>>29
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Digest summarizes a payload for a Label. CRC32C runs at memory speed on
// the hardware that has it.
func Digest(p []byte) uint64 {
	return uint64(crc32.Checksum(p, castagnoli)) | uint64(len(p))<<32
}

func hashString(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}

// The queue is a 4-ary min-heap on (at, seq): shallower than a binary heap,
// so fewer cache misses per operation at the depths a busy run reaches.

func (e *Event) less(o *Event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

func (s *Scheduler) peek() *Event {
	if len(s.heap) == 0 {
		return nil
	}
	return s.heap[0]
}

func (s *Scheduler) push(e *Event) {
	e.index = len(s.heap)
	s.heap = append(s.heap, e)
	s.up(e.index)
}

// remove takes the event at heap index i out of the queue.
func (s *Scheduler) remove(i int) {
	h := s.heap
	e := h[i]
	last := len(h) - 1
	if i != last {
		h[i] = h[last]
		h[i].index = i
	}
	h[last] = nil
	s.heap = h[:last]
	if i != last {
		moved := s.heap[i]
		if s.down(i); moved.index == i {
			s.up(i)
		}
	}
	e.index = -1
}

func (s *Scheduler) up(i int) {
	h := s.heap
	e := h[i]
	for i > 0 {
		parent := (i - 1) / 4
		if !e.less(h[parent]) {
			break
		}
		h[i] = h[parent]
		h[i].index = i
		i = parent
	}
	h[i] = e
	e.index = i
}

func (s *Scheduler) down(i int) {
	h := s.heap
	n := len(h)
	e := h[i]
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		best := first
		for c := first + 1; c < first+4 && c < n; c++ {
			if h[c].less(h[best]) {
				best = c
			}
		}
		if !h[best].less(e) {
			break
		}
		h[i] = h[best]
		h[i].index = i
		i = best
	}
	h[i] = e
	e.index = i
}
