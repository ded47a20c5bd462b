package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/envtest"
)

// TestConformance runs the environment's conformance suite, the same bodies
// osenv passes, against simulated nodes: simfs disks, the simnet network and
// drifting clocks. A few seeds, since each gives other skews, drifts and
// latencies, and the suite must pass under all of them.
func TestConformance(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			envtest.Run(t, func(t testing.TB) envtest.World {
				return &conformanceWorld{t: t, w: New(seed)}
			})
		})
	}
}

// conformanceLimit bounds every wait in virtual time; the suite's waits take
// milliseconds of it.
const conformanceLimit = 10 * time.Minute

type conformanceWorld struct {
	t testing.TB
	w *World
}

func (cw *conformanceWorld) node(name string) *Node {
	if n := cw.w.Node(name); n != nil {
		return n
	}
	return cw.w.AddNode(name, nil)
}

func (cw *conformanceWorld) Node(name string) env.Env { return cw.node(name).Env() }

// Kill implements envtest.Killer: the node's process is killed with its
// page cache kept (Node.Kill) and a new one boots over the same disk.
func (cw *conformanceWorld) Kill(name string) {
	n := cw.node(name)
	n.Kill()
	n.Restart()
}

func (cw *conformanceWorld) ListenAddr(name string) string { return name + ":0" }

func (cw *conformanceWorld) Do(name string, f func()) {
	cw.t.Helper()
	done := false
	cw.node(name).Post(func() {
		f()
		done = true
	})
	if !cw.w.RunUntil(func() bool { return done }, conformanceLimit) {
		cw.t.Fatalf("Do on %s: not run within %v of virtual time (seed %d)", name, conformanceLimit, cw.w.Seed())
	}
}

func (cw *conformanceWorld) RunUntil(cond func() bool) {
	cw.t.Helper()
	if !cw.w.RunUntil(cond, conformanceLimit) {
		cw.t.Fatalf("condition not met within %v of virtual time (seed %d, at %v)", conformanceLimit, cw.w.Seed(), cw.w.Now())
	}
}
