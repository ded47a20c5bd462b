package sched

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestEventsRunInTimeThenSequenceOrder(t *testing.T) {
	s := New()
	var got []int
	add := func(d time.Duration, id int) {
		s.After(d, Label{Kind: "t"}, func() { got = append(got, id) })
	}
	add(3*time.Second, 1)
	add(time.Second, 2)
	add(3*time.Second, 3) // same time as 1: after it, by sequence
	add(0, 4)
	add(2*time.Second, 5)
	for s.Step() {
	}
	want := []int{4, 2, 5, 1, 3}
	if len(got) != len(want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ran %v, want %v", got, want)
		}
	}
	if s.Now() != 3*time.Second {
		t.Fatalf("clock at %v after the last event, want 3s", s.Now())
	}
}

func TestTimeJumpsAndEventsScheduleEvents(t *testing.T) {
	s := New()
	var at []time.Duration
	var tick func()
	tick = func() {
		at = append(at, s.Now())
		if len(at) < 3 {
			s.After(time.Hour, Label{Kind: "tick"}, tick)
		}
	}
	s.After(time.Minute, Label{Kind: "tick"}, tick)
	for s.Step() {
	}
	want := []time.Duration{time.Minute, time.Minute + time.Hour, time.Minute + 2*time.Hour}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("ticks at %v, want %v", at, want)
		}
	}
}

func TestCanceledEventsNeitherRunNorTrace(t *testing.T) {
	a, b := New(), New()
	ran := false
	e := a.After(time.Second, Label{Kind: "x"}, func() { ran = true })
	if !e.Pending() || !e.Cancel() || e.Cancel() || e.Pending() {
		t.Fatal("Cancel should succeed once and leave the event not pending")
	}
	for a.Step() {
	}
	if ran {
		t.Fatal("a canceled event ran")
	}
	if a.Trace() != b.Trace() || a.Delivered() != 0 {
		t.Fatalf("a canceled event reached the trace: %s vs %s", a.Trace(), b.Trace())
	}
	if e.Cancel() {
		t.Fatal("Cancel of a removed event reported success")
	}
}

func TestRunUntilStopsAtDeadlineAndAdvancesClock(t *testing.T) {
	s := New()
	n := 0
	for i := 1; i <= 5; i++ {
		s.After(time.Duration(i)*time.Second, Label{Kind: "x"}, func() { n++ })
	}
	s.RunUntil(3 * time.Second)
	if n != 3 || s.Now() != 3*time.Second || s.Len() != 2 {
		t.Fatalf("after RunUntil(3s): ran %d, now %v, pending %d", n, s.Now(), s.Len())
	}
	s.RunUntil(10 * time.Second)
	if n != 5 || s.Now() != 10*time.Second {
		t.Fatalf("after RunUntil(10s): ran %d, now %v", n, s.Now())
	}
}

func TestTraceSeesKindNodeTimeAndDigest(t *testing.T) {
	run := func(l Label, d time.Duration) string {
		s := New()
		s.After(d, l, func() {})
		s.Step()
		return s.Trace()
	}
	base := run(Label{Kind: "k", Node: "n", Digest: 1}, time.Second)
	if base != run(Label{Kind: "k", Node: "n", Digest: 1}, time.Second) {
		t.Fatal("the same event gave two traces")
	}
	for name, other := range map[string]string{
		"kind":   run(Label{Kind: "j", Node: "n", Digest: 1}, time.Second),
		"node":   run(Label{Kind: "k", Node: "m", Digest: 1}, time.Second),
		"digest": run(Label{Kind: "k", Node: "n", Digest: 2}, time.Second),
		"time":   run(Label{Kind: "k", Node: "n", Digest: 1}, 2*time.Second),
	} {
		if other == base {
			t.Errorf("changing the event's %s left the trace unchanged", name)
		}
	}
}

func TestObserveSeesEveryEntryOfTheTrace(t *testing.T) {
	s := New()
	var got []TraceEntry
	s.Observe(func(e TraceEntry) { got = append(got, e) })
	s.Fold("seed", 7)
	s.After(time.Second, Label{Kind: "a", Node: "n1", Digest: 3}, func() {})
	canceled := s.After(2*time.Second, Label{Kind: "gone"}, func() {})
	s.After(3*time.Second, Label{Kind: "b", Node: "n2"}, func() {})
	canceled.Cancel()
	for s.Step() {
	}
	want := []TraceEntry{
		{At: 0, Kind: "seed", Digest: 7, Fold: true},
		{At: time.Second, Kind: "a", Node: "n1", Digest: 3},
		{At: 3 * time.Second, Kind: "b", Node: "n2"},
	}
	if len(got) != len(want) {
		t.Fatalf("observed %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		w := want[i]
		w.Hash = got[i].Hash
		if got[i] != w {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], w)
		}
	}
	if h := got[len(got)-1].Hash; fmt.Sprintf("%016x", h) != s.Trace() {
		t.Fatalf("last entry's hash %016x, trace %s", h, s.Trace())
	}
}

func TestSchedulingInThePastPanics(t *testing.T) {
	s := New()
	s.After(time.Second, Label{}, func() {})
	s.Step()
	defer func() {
		if recover() == nil {
			t.Fatal("At in the past did not panic")
		}
	}()
	s.At(0, Label{Kind: "late"}, func() {})
}

// BenchmarkTrivialEvents measures the kernel's rate for events that do
// nothing: each event schedules the next, with a queue a few thousand deep as
// in a busy cluster. The target is at least 2 million events per second.
func BenchmarkTrivialEvents(b *testing.B) {
	s := New()
	const depth = 4096
	label := Label{Kind: "bench", Node: "n1"}
	var fn func()
	n := 0
	fn = func() {
		n++
		s.After(time.Duration(n%977)*time.Microsecond, label, fn)
	}
	for i := 0; i < depth; i++ {
		s.After(time.Duration(i)*time.Microsecond, label, fn)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// Canceled events leave the queue at once, and the rest still run in
// (time, sequence) order, whatever was canceled: many events at few
// distinct times, a third of them canceled in a scrambled order, one from
// inside a running event.
func TestCancelRemovesAndKeepsTheOrder(t *testing.T) {
	s := New()
	var ran []int
	var events []*Event
	for i := range 3000 {
		at := time.Duration((i*7919)%97) * time.Millisecond
		events = append(events, s.At(at, Label{Kind: "e"}, func() { ran = append(ran, i) }))
	}
	canceled := map[int]bool{}
	for k := range 1000 {
		i := (k * 1543) % len(events)
		if got := events[i].Cancel(); got == canceled[i] {
			t.Fatalf("Cancel of event %d reported %v, canceled before: %v", i, got, canceled[i])
		}
		canceled[i] = true
		if events[i].Pending() {
			t.Fatalf("event %d pending after Cancel", i)
		}
	}
	if got, want := len(s.heap), len(events)-len(canceled); got != want {
		t.Fatalf("%d events in the queue, want %d: canceled ones stayed", got, want)
	}
	late := s.At(time.Second, Label{Kind: "late"}, func() { ran = append(ran, -1) })
	s.At(500*time.Millisecond, Label{Kind: "canceler"}, func() { late.Cancel() })
	var want []int
	for i := range events {
		if !canceled[i] {
			want = append(want, i)
		}
	}
	slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(events[a].At(), events[b].At()) })
	for s.Step() {
	}
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %d events out of order or canceled ones: first %v, want first %v", len(ran), ran[:10], want[:10])
	}
	if s.Len() != 0 {
		t.Fatalf("%d events left", s.Len())
	}
}
