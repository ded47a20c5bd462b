package sim

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/sched"
)

// record is a test's log of what ran, in order.
type record []string

func (r *record) add(format string, args ...any) { *r = append(*r, fmt.Sprintf(format, args...)) }

func (r record) String() string { return strings.Join(r, " ") }

func TestBootRunsOnTheLoopAsTheNodesFirstEvent(t *testing.T) {
	w := New(1)
	var got record
	w.AddNode("a", func(e env.Env) {
		got.add("boot@%v", w.Now())
		e.Loop.Post(func() { got.add("post") })
	})
	if len(got) != 0 {
		t.Fatalf("boot ran inside AddNode: %v", got)
	}
	w.Run(time.Second)
	if got.String() != "boot@0s post" {
		t.Fatalf("ran %q, want %q", got, "boot@0s post")
	}
}

func TestTimersFireInDeadlineOrderTiesInOrderSet(t *testing.T) {
	w := New(2)
	n := w.AddNode("a", nil)
	var got record
	e := n.Env()
	w.Node("a").Post(func() {
		e.Clock.AfterFunc(3*time.Second, func() { got.add("3s") })
		e.Clock.AfterFunc(time.Second, func() { got.add("1s") })
		e.Clock.AfterFunc(3*time.Second, func() { got.add("3s-second") })
		e.Clock.AfterFunc(0, func() { got.add("0") })
		e.Clock.AfterFunc(-time.Second, func() { got.add("neg") })
		got.add("set")
	})
	w.Run(time.Minute)
	want := "set neg 0 1s 3s 3s-second" // a negative delay is an earlier deadline
	if got.String() != want {
		t.Fatalf("fired %q, want %q", got, want)
	}
}

func TestAFastClockFiresNanosecondApartDeadlinesInOrder(t *testing.T) {
	w := New(16)
	n := w.AddNode("a", nil)
	n.clock.driftPPM = maxDriftPPM // two oscillator nanoseconds share some virtual ones
	var got []int
	n.Post(func() {
		for i := 50; i > 0; i-- {
			n.Env().Clock.AfterFunc(time.Millisecond+time.Duration(i), func() { got = append(got, i) })
		}
	})
	w.Run(time.Second)
	if len(got) != 50 || !slices.IsSorted(got) {
		t.Fatalf("fired %v, want 1..50 in deadline order", got)
	}
}

func TestTimersCountElapsedTimeOnTheDriftingClockAndIgnoreJumps(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		w := New(seed)
		n := w.AddNode("a", nil)
		c := n.Clock()
		if c.DriftPPM() < -maxDriftPPM || c.DriftPPM() > maxDriftPPM {
			t.Fatalf("seed %d: drift %d ppm out of range", seed, c.DriftPPM())
		}
		start := c.Now()
		var firedAt time.Duration
		var wallAt time.Time
		n.Post(func() {
			c.Jump(-time.Hour) // the wall clock steps back; the timer must not care
			n.Env().Clock.AfterFunc(time.Hour, func() {
				firedAt = w.Now()
				wallAt = c.Now()
			})
		})
		w.Run(2 * time.Hour)
		elapsed := c.elapsed(firedAt)
		if elapsed < time.Hour || c.elapsed(firedAt-1) >= time.Hour {
			t.Fatalf("seed %d: fired at virtual %v, when the node's clock had run %v; want the first instant it reached 1h", seed, firedAt, elapsed)
		}
		if got := wallAt.Sub(start); got != elapsed-time.Hour {
			t.Fatalf("seed %d: wall clock moved %v by the timer, want %v (elapsed minus the jump)", seed, got, elapsed-time.Hour)
		}
		wantVirtual := time.Duration(float64(time.Hour) * million / float64(million+c.DriftPPM()))
		if d := firedAt - wantVirtual; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("seed %d: drift %d ppm: fired at %v, want about %v", seed, c.DriftPPM(), firedAt, wantVirtual)
		}
	}
}

func TestClocksDifferPerNodeAndEpochPerSeed(t *testing.T) {
	w := New(3)
	a, b := w.AddNode("a", nil), w.AddNode("b", nil)
	if a.Clock().Skew() == b.Clock().Skew() && a.Clock().DriftPPM() == b.Clock().DriftPPM() {
		t.Fatalf("nodes a and b share skew %v and drift %d", a.Clock().Skew(), a.Clock().DriftPPM())
	}
	if New(3).Epoch() != w.Epoch() || New(4).Epoch() == w.Epoch() {
		t.Fatalf("epoch must be a function of the seed alone: %v %v %v", w.Epoch(), New(3).Epoch(), New(4).Epoch())
	}
	if w.Epoch().Before(baseEpoch) || !w.Epoch().Before(baseEpoch.AddDate(1, 0, 1)) {
		t.Fatalf("epoch %v outside the year after %v", w.Epoch(), baseEpoch)
	}
}

func TestTimerStop(t *testing.T) {
	w := New(4)
	n := w.AddNode("a", nil)
	var got record
	var tm env.Timer
	n.Post(func() {
		tm = n.Env().Clock.AfterFunc(time.Second, func() { got.add("fired") })
	})
	w.Run(time.Millisecond)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	n.Post(func() {
		tm = n.Env().Clock.AfterFunc(time.Second, func() { got.add("fired") })
	})
	w.Run(time.Hour)
	if tm.Stop() {
		t.Fatal("Stop after the timer fired reported true")
	}
	if got.String() != "fired" {
		t.Fatalf("ran %q, want one firing", got)
	}
}

func TestCrashDropsEverythingTheIncarnationScheduled(t *testing.T) {
	w := New(5)
	var got record
	boots := 0
	n := w.AddNode("a", func(e env.Env) {
		boots++
		inc := boots
		e.Clock.AfterFunc(time.Second, func() { got.add("timer%d", inc) })
		e.Loop.Post(func() { got.add("post%d", inc) })
	})
	w.Run(time.Millisecond) // boot and post ran; the timer is pending
	old := n.Env()
	n.Schedule(time.Second, sched.Label{Kind: "disk.sync"}, func() { got.add("sync1") })
	n.Crash()
	if n.Up() {
		t.Fatal("node up after Crash")
	}
	n.Crash() // a no-op
	old.Loop.Post(func() { got.add("zombie-post") })
	old.Clock.AfterFunc(0, func() { got.add("zombie-timer") })
	n.Schedule(0, sched.Label{Kind: "net.data"}, func() { got.add("to-dead-node") })
	w.Run(time.Hour)
	if got.String() != "post1" {
		t.Fatalf("ran %q, want only what ran before the crash", got)
	}
	n.Restart()
	w.Run(time.Hour)
	if want := "post1 post2 timer2"; got.String() != want {
		t.Fatalf("after restart ran %q, want %q", got, want)
	}
	if n.Incarnation() != 2 {
		t.Fatalf("incarnation %d, want 2", n.Incarnation())
	}
}

func TestRestartGivesANewRandStreamNotAContinuation(t *testing.T) {
	draws := func() []uint64 {
		w := New(6)
		var out []uint64
		n := w.AddNode("a", func(e env.Env) {
			for range 3 {
				out = append(out, e.Rand.Uint64())
			}
		})
		w.Run(time.Second)
		n.Restart()
		w.Run(time.Second)
		return out
	}
	a, b := draws(), draws()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed drew %v then %v", a, b)
	}
	w := New(6)
	var cont []uint64
	w.AddNode("a", func(e env.Env) {
		for range 6 {
			cont = append(cont, e.Rand.Uint64())
		}
	})
	w.Run(time.Second)
	if fmt.Sprint(a[3:]) == fmt.Sprint(cont[3:]) {
		t.Fatalf("second incarnation continued the first one's stream: %v", a)
	}
	if a[0] == a[3] {
		t.Fatalf("second incarnation repeated the first one's stream: %v", a)
	}
}

func TestPauseHoldsEventsAndResumeRunsThemInOrder(t *testing.T) {
	w := New(7)
	n := w.AddNode("a", nil)
	var got record
	var stopped env.Timer
	n.Post(func() {
		n.Env().Clock.AfterFunc(time.Second, func() { got.add("timer") })
		stopped = n.Env().Clock.AfterFunc(2*time.Second, func() { got.add("stopped-timer") })
	})
	w.Run(time.Millisecond)
	n.Pause()
	n.Schedule(10*time.Millisecond, sched.Label{Kind: "net.data"}, func() { got.add("data") })
	n.Schedule(time.Minute, sched.Label{Kind: "disk.sync"}, func() { got.add("sync") })
	w.Run(10 * time.Second)
	if len(got) != 0 {
		t.Fatalf("a paused node ran %q", got)
	}
	if !stopped.Stop() {
		t.Fatal("Stop of a timer held by the pause reported false")
	}
	n.Post(func() { got.add("post") })
	n.Resume()
	// Due at the instant of resuming, but scheduled before it: it must still
	// wait for what was held.
	n.Post(func() { got.add("post-after-resume") })
	w.Run(2 * time.Minute)
	want := "data timer post post-after-resume sync"
	if got.String() != want {
		t.Fatalf("after resume ran %q, want %q", got, want)
	}
}

func TestCrashOfAPausedNodeDropsWhatWasHeld(t *testing.T) {
	w := New(8)
	n := w.AddNode("a", nil)
	var got record
	n.Pause()
	n.Post(func() { got.add("held") })
	w.Run(time.Second)
	n.Crash()
	n.Restart()
	n.Post(func() { got.add("new") })
	w.Run(time.Second)
	if got.String() != "new" || n.Paused() {
		t.Fatalf("ran %q (paused %v), want only the new incarnation's post", got, n.Paused())
	}
}

func TestPowerLossCrashesEveryNode(t *testing.T) {
	w := New(9)
	var got record
	for _, name := range []string{"a", "b", "c"} {
		w.AddNode(name, func(e env.Env) {
			e.Clock.AfterFunc(time.Second, func() { got.add("%s", name) })
		})
	}
	w.Run(time.Millisecond)
	w.PowerLoss()
	w.Run(time.Hour)
	for _, n := range w.Nodes() {
		if n.Up() {
			t.Fatalf("node %s up after power loss", n.Name())
		}
	}
	if len(got) != 0 {
		t.Fatalf("timers fired after power loss: %q", got)
	}
	for _, n := range w.Nodes() {
		n.Restart()
	}
	w.Run(time.Hour)
	slices.Sort(got)
	if got.String() != "a b c" {
		t.Fatalf("after restarts ran %q", got)
	}
}

func TestCryptoReaderIsSeededDuringRunAndRestoredAfter(t *testing.T) {
	draw := func(seed uint64) []byte {
		w := New(seed)
		var p []byte
		w.AddNode("a", func(env.Env) {
			p = make([]byte, 16)
			if _, err := rand.Read(p); err != nil {
				t.Fatal(err)
			}
		})
		before := rand.Reader
		w.Run(time.Second)
		if rand.Reader != before {
			t.Fatalf("crypto/rand.Reader left as %T after Run", rand.Reader)
		}
		return p
	}
	a, b, c := draw(10), draw(10), draw(11)
	if !bytes.Equal(a, b) {
		t.Fatalf("seed 10 read %x then %x from crypto/rand", a, b)
	}
	if bytes.Equal(a, c) {
		t.Fatalf("seeds 10 and 11 both read %x from crypto/rand", a)
	}
}

func TestASecondWorldInsideARunningOnePanics(t *testing.T) {
	outer, inner := New(12), New(13)
	var msg any
	outer.AddNode("a", func(env.Env) {
		defer func() { msg = recover() }()
		inner.Run(time.Second)
	})
	outer.Run(time.Second)
	if msg == nil || !strings.Contains(fmt.Sprint(msg), "one at a time") {
		t.Fatalf("nested Run of another world: recovered %v, want a panic saying worlds run one at a time", msg)
	}
}

func TestLogRecordsCarryTheNodesClock(t *testing.T) {
	w := New(14)
	var out bytes.Buffer
	n := w.AddNode("a", func(e env.Env) {
		e.Clock.AfterFunc(time.Minute, func() { e.Log.Info("tick", "k", 1) })
		e.Log.Debug("hidden")
	})
	w.SetLog(&out, slog.LevelInfo)
	w.Run(time.Hour)
	line := out.String()
	wall := w.Epoch().Add(n.Clock().Skew() + time.Minute) // the timer fires when the node's clock has run a minute
	want := fmt.Sprintf("time=%s level=INFO msg=tick node=a inc=1 k=1\n", wall.Format("2006-01-02T15:04:05.000Z07:00"))
	if line != want {
		t.Fatalf("log %q, want %q", line, want)
	}
}

func TestRunUntilGivesUpAtItsLimit(t *testing.T) {
	w := New(15)
	n := w.AddNode("a", nil)
	var tick func()
	ticks := 0
	tick = func() {
		ticks++
		n.Env().Clock.AfterFunc(time.Second, tick)
	}
	n.Post(tick)
	if w.RunUntil(func() bool { return false }, time.Minute) {
		t.Fatal("RunUntil of a false condition reported true")
	}
	if w.Now() > time.Minute || ticks < 55 {
		t.Fatalf("stopped at %v after %d ticks, want about a minute of ticks", w.Now(), ticks)
	}
	if !w.RunUntil(func() bool { return ticks >= 100 }, time.Hour) || ticks != 100 {
		t.Fatalf("RunUntil stopped at %d ticks, want exactly 100", ticks)
	}
}

func TestKillKeepsThePageCacheACrashThenMayTakeIt(t *testing.T) {
	write := func(e env.Env) {
		f, err := e.FS.Create("f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("unsynced")); err != nil {
			t.Fatal(err)
		}
	}
	kept, lost := 0, 0
	for seed := range uint64(40) {
		w := New(seed)
		var got record
		n := w.AddNode("a", func(e env.Env) {
			e.Clock.AfterFunc(time.Second, func() { got.add("timer") })
		})
		w.Run(time.Millisecond)
		n.Post(func() { write(n.Env()) })
		w.Run(time.Millisecond)
		trace := w.Trace()
		n.Kill()
		if n.Up() || w.Trace() == trace {
			t.Fatalf("seed %d: after Kill up=%v, trace moved %v", seed, n.Up(), w.Trace() != trace)
		}
		n.Kill() // a no-op
		w.Run(time.Hour)
		if len(got) != 0 {
			t.Fatalf("seed %d: the killed incarnation ran %q", seed, got)
		}
		n.Restart()
		var read string
		n.Post(func() {
			f, err := n.Env().FS.Open("f")
			if err != nil {
				t.Fatalf("seed %d: after Kill and Restart: %v", seed, err)
			}
			p := make([]byte, 8)
			k, _ := f.ReadAt(p, 0)
			read = string(p[:k])
		})
		w.Run(2 * time.Second)
		if read != "unsynced" || got.String() != "timer" {
			t.Fatalf("seed %d: after Kill and Restart read %q, ran %q", seed, read, got)
		}
		// Killed again, then a power cut while it is down: the cache may go.
		n.Kill()
		w.PowerLoss()
		if st := n.Disk().Stats(); st.ProcessCrashes != 2 || st.Crashes != 1 {
			t.Fatalf("seed %d: disk stats %+v, want 2 process crashes then 1 crash", seed, st)
		}
		n.Crash() // down and already crashed: a no-op
		if st := n.Disk().Stats(); st.Crashes != 1 {
			t.Fatalf("seed %d: a Crash of a crashed node crashed the disk again", seed)
		}
		if n.Disk().Stats().LostAfterKill > 0 {
			lost++
		} else {
			kept++
		}
	}
	if kept == 0 || lost == 0 {
		t.Fatalf("over 40 seeds a power loss after a kill kept the cache %d times, lost it %d times", kept, lost)
	}
}
