package sim

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/sluicemq/sluice/sim/simnet"
)

// World is one simulated run: a scheduler, the streams of randomness derived
// from one seed, a network, and the nodes on it. A World is used from one
// goroutine; see the package doc for why only one World runs at a time.
type World struct {
	seed   uint64
	sched  *sched.Scheduler
	rand   *rng.Rand     // the root stream; everything forks from it by label
	crypto *cryptoReader // crypto/rand.Reader during Run and Step
	net    *simnet.Network
	// epoch is the virtual wall-clock instant at virtual time zero, before
	// each node's skew.
	epoch time.Time

	nodes  []*Node // in the order added, for iteration that reaches output
	byName map[string]*Node

	logOut   io.Writer // nil: logs are discarded without being formatted
	logLevel slog.Level
}

// baseEpoch is the calendar the simulator starts from; each seed adds up to
// a year to it, so that date arithmetic meets month ends, leap days and year
// ends in some seeds.
var baseEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// New returns a world for seed, at virtual time zero with no nodes.
func New(seed uint64) *World { return NewTraced(seed, nil) }

// NewTraced is New with observe called for every entry of the trace, the
// seed's own first (see sched.Scheduler.Observe); nil observes nothing.
func NewTraced(seed uint64, observe func(sched.TraceEntry)) *World {
	root := rng.New(seed)
	w := &World{
		seed:   seed,
		sched:  sched.New(),
		rand:   root,
		byName: make(map[string]*Node),
	}
	if observe != nil {
		w.sched.Observe(observe)
	}
	offset := root.Fork("epoch").Uint64n(uint64(365 * 24 * time.Hour / time.Millisecond))
	w.crypto = newCryptoReader(w, root.Fork("crypto"))
	w.epoch = baseEpoch.Add(time.Duration(offset) * time.Millisecond)
	w.net = simnet.New(w.sched, root.Fork("net"))
	w.sched.Fold("seed", seed)
	return w
}

// Seed returns the seed the world was made from.
func (w *World) Seed() uint64 { return w.seed }

// Rand returns the stream named label, for a workload or a fault schedule.
// Labels beginning "node/", "net", "crypto" and "epoch" are the world's own.
func (w *World) Rand(label string) *rng.Rand { return w.rand.Fork(label) }

// Net returns the network, for partitions, stalls, resets and latencies.
func (w *World) Net() *simnet.Network { return w.net }

// Scheduler returns the world's scheduler.
func (w *World) Scheduler() *sched.Scheduler { return w.sched }

// Epoch returns the wall-clock instant virtual time zero stands for (each
// node's clock adds its own skew and drift to it).
func (w *World) Epoch() time.Time { return w.epoch }

// Now returns the virtual time elapsed since the run began.
func (w *World) Now() time.Duration { return w.sched.Now() }

// Events returns how many events have been delivered.
func (w *World) Events() uint64 { return w.sched.Delivered() }

// Trace returns the hash of every event delivered so far, in hex: two runs
// with the same trace delivered the same events at the same virtual times.
func (w *World) Trace() string { return w.sched.Trace() }

// SetLog sends every node's logs, at level and above, to out; a nil out
// discards them (the default). Records carry the node's clock, never real
// time, so a log is as reproducible as the trace.
func (w *World) SetLog(out io.Writer, level slog.Level) {
	w.logOut = out
	w.logLevel = level
}

// AddNode adds a machine named name (its host name on the network) with an
// empty disk, and boots it: boot runs on the node's loop with its Env, as
// the first event of the node, and again after every Restart. boot may be
// nil for a node driven from outside through its Env. Adding a name twice
// panics: it is a mistake in the test, not a fault.
func (w *World) AddNode(name string, boot func(env.Env)) *Node {
	if name == "" {
		panic("sim: AddNode with an empty name")
	}
	if _, ok := w.byName[name]; ok {
		panic(fmt.Sprintf("sim: node %q added twice", name))
	}
	r := w.rand.Fork("node/" + name)
	n := &Node{w: w, name: name, boot: boot, rand: r}
	n.clock = newClock(w, name, r.Fork("clock"))
	n.disk = simfs.New(r.Fork("disk"), n)
	n.net = w.net.Host(name, n)
	w.nodes = append(w.nodes, n)
	w.byName[name] = n
	n.start()
	return n
}

// Node returns the node named name, or nil.
func (w *World) Node(name string) *Node { return w.byName[name] }

// Nodes returns every node, in the order added.
func (w *World) Nodes() []*Node { return append([]*Node(nil), w.nodes...) }

// PowerLoss crashes every node at once, as a power cut to the whole cluster
// would: every disk loses its unsynced state, that of a node whose process
// was killed included. Restart each node to bring it back.
func (w *World) PowerLoss() {
	w.sched.Fold("power.loss", uint64(len(w.nodes)))
	for _, n := range w.nodes {
		n.Crash()
	}
}

// After schedules f to run d from now outside any node, for a fault schedule
// or a workload step; kind names it in the trace.
func (w *World) After(d time.Duration, kind string, f func()) *sched.Event {
	return w.sched.After(d, sched.Label{Kind: kind}, f)
}

// Step runs the next event and reports whether there was one.
func (w *World) Step() bool {
	defer w.exitCrypto(w.enterCrypto())
	return w.sched.Step()
}

// Run runs every event due in the next d of virtual time, then advances the
// virtual clock to the end of it.
func (w *World) Run(d time.Duration) {
	defer w.exitCrypto(w.enterCrypto())
	w.sched.RunUntil(w.sched.Now() + d)
}

// RunUntil runs events until cond holds, evaluating it before each event. It
// gives up, reporting false, once no event is left or the next one is due
// more than limit of virtual time from when it was called.
func (w *World) RunUntil(cond func() bool, limit time.Duration) bool {
	defer w.exitCrypto(w.enterCrypto())
	deadline := w.sched.Now() + limit
	for !cond() {
		at, ok := w.sched.NextAt()
		if !ok || at > deadline {
			return false
		}
		w.sched.Step()
	}
	return true
}
