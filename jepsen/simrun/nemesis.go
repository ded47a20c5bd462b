package simrun

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

// nemesis injects the seed's mix of faults during the safety phase, one
// every FaultEvery on average (exponentially distributed), each undone
// after a seeded while: a crashed or killed node restarts, a paused one
// resumes, a cut link heals, a disk's fault rates return to zero. heal
// undoes at once whatever is still in effect.
type nemesis struct {
	r     *run
	rand  *rng.Rand
	next  *sched.Event
	undos []*undo // in the order the faults were injected
	// flips counts the FlipNextRead calls made, to compare with the flips
	// the disk has done.
	flips int
	// draws counts the faults drawn so far (Config.SkipFaults).
	draws int
	// armed are the faults waiting for the moments of the broker's disk
	// (moments.go), by moment: nil where none waits.
	armed []*armed
	// firstBase is the least segment base created in each directory of
	// the broker's disk (rolled).
	firstBase map[string]int64
	// follow draws what follows a moment's fault (a crash soon after a
	// killed broker's restart), apart from rand, so that the rest of a
	// seed's schedule stays what it was.
	follow *rng.Rand
	// crashAfterKill says that the kill being injected is followed by a
	// crash soon after the broker's restart (moments.go).
	crashAfterKill bool
}

type undo struct {
	ev *sched.Event
	f  func()
}

func (n *nemesis) start() {
	if len(n.r.opts.Faults) > 0 {
		n.schedule()
	}
	if slices.Contains(n.r.opts.Faults, FaultMoment) {
		// Armed from the start, not only when the fault is drawn: a
		// moment waits for the broker to get there anyway.
		n.armMoments()
	}
}

func (n *nemesis) schedule() {
	mean := float64(n.r.opts.FaultEvery)
	d := time.Duration(-math.Log(1-n.rand.Float64()) * mean)
	n.next = n.r.w.After(d, "nemesis.fault", func() {
		f := n.r.opts.Faults[n.rand.Intn(len(n.r.opts.Faults))]
		if n.draw() {
			n.inject(f)
		}
		n.schedule()
	})
}

// later arranges for f to undo a fault after d.
// draw counts a fault about to strike (one the schedule drew, or a
// moment's) and says whether it may: Config.SkipFaults names the draws
// that inject nothing.
func (n *nemesis) draw() bool {
	n.draws++
	return !n.r.cfg.skipsDraw(n.draws-1, n.r.logf)
}

func (n *nemesis) later(d time.Duration, f func()) {
	u := &undo{f: f}
	u.ev = n.r.w.After(d, "nemesis.heal", func() {
		u.f = nil
		f()
	})
	n.undos = append(n.undos, u)
}

// heal stops injecting and undoes every fault still in effect, in order.
func (n *nemesis) heal() {
	clear(n.armed)
	if n.next != nil {
		n.next.Cancel()
		n.next = nil
	}
	for _, u := range n.undos {
		if u.f != nil {
			u.ev.Cancel()
			u.f()
		}
	}
	n.undos = nil
}

// uniform draws a duration in [lo, hi).
func (n *nemesis) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rand.Uint64n(uint64(hi-lo)))
}

func (n *nemesis) inject(f Fault) {
	r := n.r
	w := r.w
	broker := w.Node(brokerName)
	target, detail := brokerName, "" // for the timeline
	switch f {
	case FaultCrash:
		if !broker.Up() {
			return
		}
		n.crash(broker.Crash)
		n.later(n.uniform(0, 3*time.Second), func() { r.restartIfDown(broker) })
	case FaultKill:
		if !broker.Up() {
			return
		}
		broker.Kill()
		thenCrash := n.crashAfterKill
		n.later(n.uniform(0, 3*time.Second), func() {
			r.restartIfDown(broker)
			if thenCrash {
				n.crashAfterRestart(broker)
			}
		})
	case FaultRestart:
		if !r.broker.running || broker.Paused() {
			return
		}
		n.restart(broker)
	case FaultPowerLoss:
		n.crash(w.PowerLoss)
		r.clientsCrashed()
		n.later(n.uniform(0, 3*time.Second), func() {
			for _, node := range w.Nodes() {
				r.restartIfDown(node)
			}
		})
	case FaultPause:
		paused := n.pick(w.Nodes())
		if !paused.Up() || paused.Paused() {
			return
		}
		paused.Pause()
		n.later(n.uniform(10*time.Millisecond, 5*time.Second), paused.Resume)
		target = paused.Name()
	case FaultReset:
		target = n.pickClient()
		w.Net().Reset(brokerName, target)
	case FaultPartition:
		target = n.pickClient()
		n.partition(target)
	case FaultStall:
		a, b := brokerName, n.pickClient()
		target = b
		if n.rand.Chance(0.5) {
			a, b = b, a
		}
		d := n.uniform(10*time.Millisecond, 3*time.Second)
		w.Net().Stall(a, b, d)
		detail = fmt.Sprintf("%s to %s for %s", a, b, d)
	case FaultDisk:
		rate := 0.002 + 0.02*n.rand.Float64()
		mustSet(broker.Disk().SetFaults(simfs.Faults{EIORate: rate, NoSpaceRate: rate / 2}))
		drawn := r.rec.during(brokerName, "disk", fmt.Sprintf("disk errors %.1f%%", rate*100))
		n.later(n.uniform(50*time.Millisecond, 2*time.Second), func() {
			mustSet(broker.Disk().SetFaults(simfs.Faults{}))
			drawn()
		})
	case FaultBitFlip:
		// One flip pending at a time: flips queued up while nothing reads
		// would corrupt many reads in a row, a failing disk rather than a
		// transient error, which is more than a single node survives.
		if n.flips > broker.Disk().Stats().ReadFlips {
			return
		}
		broker.Disk().FlipNextRead()
		n.flips++
	case FaultClock:
		// Log-uniform between a millisecond and an hour, either way.
		d := time.Duration(math.Exp(n.rand.Float64()*math.Log(float64(time.Hour/time.Millisecond)))) * time.Millisecond
		if n.rand.Chance(0.5) {
			d = -d
		}
		jumped := n.pick(w.Nodes())
		jumped.Clock().Jump(d)
		target, detail = jumped.Name(), fmt.Sprintf("clock jumps %s", d)
	case FaultMoment:
		n.armMoment(n.rand.Intn(len(moments)))
	case FaultSlowSync:
		n.slowSync()
	default:
		panic("simrun: unknown fault " + string(f))
	}
	r.probes.add("fault." + string(f))
	r.logf("fault %s", f)
	r.rec.fault(target, f, detail)
}

// crash runs a crash or a power loss and counts, as the probe
// disk.lost_after_kill, the broker's unsynced changes it took that a killed
// process had made (and its successor may have read and served).
func (n *nemesis) crash(f func()) {
	d := n.r.w.Node(brokerName).Disk()
	before := d.Stats().LostAfterKill
	f()
	n.r.probes.addN("disk.lost_after_kill", d.Stats().LostAfterKill-before)
}

// restart asks the running broker to shut down cleanly, as SIGTERM does,
// and once it has, crashes the process (which a clean shutdown must leave
// nothing to lose to) and boots it again after a while.
func (n *nemesis) restart(node *sim.Node) {
	r := n.r
	b, inc := r.broker.b, node.Incarnation()
	delay := n.uniform(0, 2*time.Second)
	node.Post(func() {
		b.Shutdown(func(err error) {
			if err != nil {
				r.probes.add("broker.shutdown_error")
			}
			r.w.After(delay, "nemesis.restart", func() {
				if node.Incarnation() == inc && node.Up() {
					node.Restart()
				}
			})
		})
	})
}

// partition cuts the links between client and the broker, both ways or one
// way, for up to twenty seconds (past simnet's retransmission timeout, so
// that connections break on either side).
func (n *nemesis) partition(client string) {
	net := n.r.w.Net()
	var links [][2]string
	switch n.rand.Intn(3) {
	case 0:
		links = [][2]string{{brokerName, client}, {client, brokerName}}
	case 1:
		links = [][2]string{{brokerName, client}}
	default:
		links = [][2]string{{client, brokerName}}
	}
	for _, l := range links {
		net.Partition(l[0], l[1])
	}
	drawn := n.r.rec.during(client, "partition", fmt.Sprintf("cut off %v", links))
	n.later(n.uniform(100*time.Millisecond, 20*time.Second), func() {
		for _, l := range links {
			net.Heal(l[0], l[1])
		}
		drawn()
	})
}

func (n *nemesis) pick(nodes []*sim.Node) *sim.Node { return nodes[n.rand.Intn(len(nodes))] }

func (n *nemesis) pickClient() string {
	names := n.r.clientNames
	return names[n.rand.Intn(len(names))]
}

func mustSet(err error) {
	if err != nil {
		panic("simrun: " + err.Error()) // the rates are drawn in range
	}
}
