package sim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/simfs"
)

// These tests run counterd (service_test.go) through every fault the world
// offers and check two things: a seed replays byte for byte, and the service
// keeps its promises (a counter whose sync completed never goes backwards;
// gossip carries only synced values; once faults stop, every node hears
// every other node's synced counter).

const (
	safetyPhase   = 20 * time.Second // faults at will
	livenessPhase = 40 * time.Second // healed, no faults: must converge
)

// counterRun is one seeded run of counterd.
type counterRun struct {
	seed   uint64
	w      *World
	names  []string
	oracle *counterOracle
	nodes  map[string]*counterNode // the running incarnation of each node
	faults map[string]int          // how many of each fault were injected
	// mix is the set of fault kinds this seed injects (swarm testing: each
	// seed picks its own, so rare combinations get runs of their own).
	mix []string
}

var faultKinds = []string{"crash", "pause", "powerloss", "partition", "oneway", "stall", "reset", "clockjump", "syncfail", "diskrates"}

func newCounterRun(seed uint64) *counterRun {
	w := New(seed)
	r := w.Rand("test/options")
	run := &counterRun{
		seed:   seed,
		w:      w,
		oracle: &counterOracle{synced: make(map[string]uint64)},
		nodes:  make(map[string]*counterNode),
		faults: make(map[string]int),
	}
	for _, kind := range faultKinds {
		if r.Chance(0.6) {
			run.mix = append(run.mix, kind)
		}
	}
	w.Net().SetTimeouts(5*time.Second, 5*time.Second)
	count := 3 + r.Intn(3)
	if r.Chance(0.6) { // drawn last, so the draws above stay as they were
		run.mix = append(run.mix, "kill")
	}
	for i := range count {
		run.names = append(run.names, fmt.Sprintf("n%d", i))
	}
	for i, name := range run.names {
		w.AddNode(name, bootCounter(name, i, run.names, run.oracle, run.nodes))
	}
	return run
}

// safety runs the fault phase: a fault every 50ms to 1.5s, each undone (a
// restart, a resume, a heal) after a seeded while, or by the liveness phase.
func (run *counterRun) safety() {
	w := run.w
	r := w.Rand("test/faults")
	if len(run.mix) > 0 {
		var next func()
		next = func() {
			if w.Now() >= safetyPhase {
				return
			}
			run.inject(r, run.mix[r.Intn(len(run.mix))])
			w.After(50*time.Millisecond+time.Duration(r.Uint64n(uint64(1450*time.Millisecond))), "test.fault", next)
		}
		w.After(100*time.Millisecond, "test.fault", next)
	}
	w.Run(safetyPhase)
}

func (run *counterRun) inject(r *rng.Rand, kind string) {
	w := run.w
	n := w.Node(run.names[r.Intn(len(run.names))])
	peer := run.names[r.Intn(len(run.names))]
	within := func(d time.Duration) time.Duration { return time.Duration(r.Uint64n(uint64(d))) }
	run.faults[kind]++
	switch kind {
	case "crash":
		n.Crash()
		w.After(within(2*time.Second), "test.restart", func() {
			if !n.Up() {
				n.Restart()
			}
		})
	case "kill":
		n.Kill()
		w.After(within(2*time.Second), "test.restart", func() {
			if !n.Up() {
				n.Restart()
			}
		})
	case "pause":
		n.Pause()
		w.After(within(3*time.Second), "test.resume", n.Resume)
	case "powerloss":
		w.PowerLoss()
		w.After(within(2*time.Second), "test.restart", func() {
			for _, n := range w.Nodes() {
				if !n.Up() {
					n.Restart()
				}
			}
		})
	case "partition":
		w.Net().Partition(n.Name(), peer)
		w.Net().Partition(peer, n.Name())
		w.After(within(8*time.Second), "test.heal", func() {
			w.Net().Heal(n.Name(), peer)
			w.Net().Heal(peer, n.Name())
		})
	case "oneway":
		w.Net().Partition(n.Name(), peer)
		w.After(within(8*time.Second), "test.heal", func() { w.Net().Heal(n.Name(), peer) })
	case "stall":
		w.Net().Stall(n.Name(), peer, within(3*time.Second))
	case "reset":
		w.Net().Reset(n.Name(), peer)
	case "clockjump":
		n.Clock().Jump(within(20*time.Second) - 10*time.Second)
	case "syncfail":
		_ = n.Disk().FailNext(simfs.OpSync, env.ErrIO)
	case "diskrates":
		_ = n.Disk().SetFaults(simfs.Faults{
			EIORate:     0.02 * r.Float64(),
			NoSpaceRate: 0.01 * r.Float64(),
			BitFlipRate: 0.02 * r.Float64(),
		})
	default:
		panic("unknown fault " + kind)
	}
}

// liveness heals everything, stops the faults, and runs the service long
// enough to converge. It returns what each node had synced when it began.
func (run *counterRun) liveness() map[string]uint64 {
	w := run.w
	w.Net().HealAll()
	for _, n := range w.Nodes() {
		_ = n.Disk().SetFaults(simfs.Faults{})
		n.Resume()
		if !n.Up() {
			n.Restart()
		}
	}
	start := make(map[string]uint64)
	for _, name := range run.names {
		start[name] = run.oracle.synced[name]
	}
	w.Run(livenessPhase)
	return start
}

// check returns every broken property, the oracle's and convergence's.
func (run *counterRun) check(start map[string]uint64) []string {
	problems := append([]string(nil), run.oracle.violations...)
	for _, name := range run.names {
		c := run.nodes[name]
		if c == nil || c.durable <= start[name] {
			problems = append(problems, fmt.Sprintf("%s made no progress after the faults stopped (synced %d at the start, %d at the end)", name, start[name], run.oracle.synced[name]))
			continue
		}
		for i, peer := range run.names {
			if peer != name && c.seen[i] < start[peer] {
				problems = append(problems, fmt.Sprintf("%s heard %d from %s, which had synced %d before the faults stopped", name, c.seen[i], peer, start[peer]))
			}
		}
	}
	return problems
}

// runCounters runs one seed from start to end and returns the run and its
// broken properties.
func runCounters(seed uint64) (*counterRun, []string) {
	run := newCounterRun(seed)
	run.safety()
	start := run.liveness()
	return run, run.check(start)
}

func (run *counterRun) failf(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("seed %d: %s", run.seed, p)
	}
	t.Errorf("seed %d: faults %v of mix %v; replay: SLUICE_SEED=%d go test ./sim -run 'TestDeterminismSweep' -count=1 -v",
		run.seed, run.faults, run.mix, run.seed)
}

func TestDeterminismSameSeedSameTrace(t *testing.T) {
	traces := make(map[string]uint64)
	for _, seed := range []uint64{1, 2, 3} {
		a, problems := runCounters(seed)
		if len(problems) > 0 {
			a.failf(t, problems)
		}
		b, _ := runCounters(seed)
		if a.w.Trace() != b.w.Trace() || a.w.Events() != b.w.Events() {
			t.Fatalf("seed %d ran twice: trace %s after %d events, then %s after %d", seed, a.w.Trace(), a.w.Events(), b.w.Trace(), b.w.Events())
		}
		if fmt.Sprint(a.oracle.synced) != fmt.Sprint(b.oracle.synced) {
			t.Fatalf("seed %d ran twice: synced %v, then %v", seed, a.oracle.synced, b.oracle.synced)
		}
		if other, ok := traces[a.w.Trace()]; ok {
			t.Fatalf("seeds %d and %d both traced %s", other, seed, a.w.Trace())
		}
		traces[a.w.Trace()] = seed
		t.Logf("seed %d: trace %s, %d events, %d nodes, faults %v", seed, a.w.Trace(), a.w.Events(), len(a.names), a.faults)
	}
}

// TestDeterminismSweep runs SLUICE_SEEDS seeds (default 8), or only
// SLUICE_SEED, checking the service's properties under each seed's faults.
func TestDeterminismSweep(t *testing.T) {
	seeds := sweepSeeds(t)
	total := make(map[string]int)
	var events uint64
	recoveries, syncErrors := 0, 0
	for _, seed := range seeds {
		run, problems := runCounters(seed)
		if len(problems) > 0 {
			run.failf(t, problems)
			continue
		}
		for kind, n := range run.faults {
			total[kind] += n
		}
		events += run.w.Events()
		recoveries += run.oracle.recoveries
		syncErrors += run.oracle.syncErrors
	}
	t.Logf("%d seeds, %d events; faults %v; %d recoveries, %d failed syncs", len(seeds), events, total, recoveries, syncErrors)
	if len(seeds) >= 8 && (recoveries == 0 || total["crash"] == 0) {
		t.Errorf("%d seeds never crashed a node and recovered a counter: the sweep tests nothing", len(seeds))
	}
}

func sweepSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("SLUICE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	count := 8
	if s := os.Getenv("SLUICE_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_SEEDS=%q: want a positive count", s)
		}
		count = n
	}
	seeds := make([]uint64, count)
	for i := range seeds {
		seeds[i] = uint64(i) + 1
	}
	return seeds
}
