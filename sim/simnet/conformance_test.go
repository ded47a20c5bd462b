package simnet

import (
	"io"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/envtest"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// TestConformance runs envtest's network bodies against simnet alone; the
// sim package runs the whole suite with its nodes. Bodies that need a disk,
// a clock or Loop.Post skip here.
func TestConformance(t *testing.T) {
	envtest.Run(t, func(tb testing.TB) envtest.World {
		s := sched.New()
		return &netWorld{t: tb, s: s, n: New(s, rng.New(42))}
	})
}

type netWorld struct {
	t testing.TB
	s *sched.Scheduler
	n *Network
}

func (w *netWorld) Node(name string) env.Env {
	skip := skipper{w.t}
	return env.Env{Loop: skip, Clock: skip, FS: skip, Net: w.n.Host(name, sched.Direct(w.s, name))}
}

func (w *netWorld) ListenAddr(name string) string { return name + ":0" }

func (w *netWorld) Do(node string, f func()) {
	ran := false
	w.s.After(0, sched.Label{Kind: "test.do", Node: node}, func() { f(); ran = true })
	for !ran && w.s.Step() {
	}
}

func (w *netWorld) RunUntil(cond func() bool) {
	deadline := w.s.Now() + time.Hour
	for !cond() {
		if next, ok := w.s.NextAt(); !ok || next > deadline {
			w.t.Fatalf("at %v: condition never held", w.s.Now())
		}
		w.s.Step()
	}
}

// skipper stands in for the parts of env that simnet does not provide.
type skipper struct{ t testing.TB }

func (s skipper) skip() { s.t.Skip("simnet provides only the network") }

func (s skipper) Post(func())                               { s.skip() }
func (s skipper) Now() time.Time                            { s.skip(); return time.Time{} }
func (s skipper) Elapsed() time.Duration                    { s.skip(); return 0 }
func (s skipper) AfterFunc(time.Duration, func()) env.Timer { s.skip(); return nil }
func (s skipper) Create(string) (env.File, error)           { s.skip(); return nil, nil }
func (s skipper) Open(string) (env.File, error)             { s.skip(); return nil, nil }
func (s skipper) Rename(string, string) error               { s.skip(); return nil }
func (s skipper) Remove(string) error                       { s.skip(); return nil }
func (s skipper) List(string) ([]string, error)             { s.skip(); return nil, nil }
func (s skipper) MkdirAll(string) error                     { s.skip(); return nil }
func (s skipper) Stat(string) (env.FileInfo, error)         { s.skip(); return env.FileInfo{}, nil }
func (s skipper) SyncDir(string, func(error))               { s.skip() }
func (s skipper) Lock(string) (io.Closer, error)            { s.skip(); return nil, nil }
