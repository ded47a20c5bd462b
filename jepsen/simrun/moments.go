package simrun

import (
	"strings"
	"time"

	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/simfs"
)

// Moments: faults armed for a named moment instead of a random time
// (FoundationDB's BUGGIFY, kept in the simulator). A crash drawn at a
// random time almost never lands between a write and its sync completing
// (0.1 to 3 ms), between a checkpoint's rename and the sync of its
// directory, or just after a segment rolled; bugs that only show there
// passed every seed. FaultMoment arms one fault (a crash, a kill or a power
// loss) for the next time the broker's disk reaches one of these moments,
// heard through simfs's observer, and strikes inside the window it opens.
// Each moment is a probe when armed and when it fires: a sweep whose
// moment never fires has not tested it.

// moment is a named moment of the broker's disk.
type moment struct {
	name string
	// matches says whether ev opens the moment's window; roll is whether
	// ev rolled a segment, which the nemesis works out as it hears the
	// disk (rolled).
	matches func(ev simfs.Event, roll bool) bool
	// window is when after ev the fault strikes, drawn in [lo, hi): hi is
	// as long as the window ev opened lasts.
	window func(ev simfs.Event) (lo, hi time.Duration)
}

// within is a window from ev's moment on.
func within(d time.Duration) func(simfs.Event) (time.Duration, time.Duration) {
	return func(simfs.Event) (time.Duration, time.Duration) { return 0, d }
}

// The moments, in the order a seed's arms draw from.
var moments = []moment{
	{
		// A sync of a segment issued and not yet completed: a node that
		// counts it done early loses what it acknowledged.
		name: "sync_inflight",
		matches: func(ev simfs.Event, _ bool) bool {
			return ev.Op == simfs.OpSync && !ev.Done && strings.HasSuffix(ev.Name, ".log")
		},
		// The second half of the sync: by then what a broker that counted
		// it done early has answered has reached its client (a crash
		// loses what the host had not yet delivered).
		window: func(ev simfs.Event) (time.Duration, time.Duration) { return ev.Latency / 2, ev.Latency },
	},
	{
		// A checkpoint renamed over its old version, its directory not
		// yet synced: a crash may bring back the old one.
		name: "checkpoint_unsynced",
		matches: func(ev simfs.Event, _ bool) bool {
			return ev.Op == simfs.OpRename && strings.HasSuffix(ev.Name, "checkpoint")
		},
		// The directory's sync is issued at the earliest on the same
		// turn; nothing completes sooner than the disk's least latency.
		window: within(simfs.DefaultSyncLatencyMin),
	},
	{
		// A segment rolled: the new segment's entry, the old segment's
		// last bytes and its index trims are all in flight.
		name:    "segment_rolled",
		matches: func(_ simfs.Event, roll bool) bool { return roll },
		window:  within(3 * time.Millisecond),
	},
	{
		// A sync completed while others are still in flight: some of what
		// the broker wrote together is durable and some is not (a
		// checkpoint but not the data it vouches for, a segment but not
		// its directory). A broker that lets the one vouch for the other
		// is caught here.
		name: "partly_durable",
		matches: func(ev simfs.Event, _ bool) bool {
			return ev.Done && ev.Pending > 0
		},
		window: within(simfs.DefaultSyncLatencyMin),
	},
	{
		// A segment cut shorter (recovery cutting a torn tail, a
		// truncation): until its barrier is durable, a crash may undo the
		// cut. (Index files shrink at every roll; that is the roll's
		// moment.)
		name: "truncation_pending",
		matches: func(ev simfs.Event, _ bool) bool {
			return ev.Op == simfs.OpTruncate && ev.Shrunk && strings.HasSuffix(ev.Name, ".log")
		},
		window: within(3 * time.Millisecond),
	},
}

// rolled reports whether ev creates a segment after the first of its
// partition's log, and remembers the least segment base created in each
// directory. A segment's base alone does not say: the metadata log's
// first segment has base 1 (raft's first index), and a log recreated
// empty (a metadata quorum formatted again after a crash took it) starts
// at its first base again, neither of them a roll.
func (n *nemesis) rolled(ev simfs.Event) bool {
	if ev.Op != simfs.OpCreate || !ev.Created {
		return false
	}
	dir, name, _ := strings.Cut(ev.Name, "/")
	base, ok := segmentBase(name)
	if !ok {
		return false
	}
	if n.firstBase == nil {
		n.firstBase = make(map[string]int64)
	}
	first, seen := n.firstBase[dir]
	if !seen || base < first {
		n.firstBase[dir] = base
	}
	return seen && base > first
}

// momentProbes are the probes of the moments, armed and fired, and of how
// often their occasions came.
func momentProbes() []string {
	names := []string{"disk.segment_rolled", "disk.checkpoint_written", "disk.segment_truncated"}
	for _, m := range moments {
		names = append(names, "moment."+m.name+".armed", "moment."+m.name+".fired")
	}
	names = append(names, "moment.kill_then_crash.fired")
	return names
}

// armed is a fault waiting for its moment.
type armed struct {
	index  int // in moments
	moment *moment
	fault  Fault // FaultCrash, FaultKill or FaultPowerLoss
}

// armMoments arms a fault for every moment not armed already; a seed with
// FaultMoment does so when its run starts.
func (n *nemesis) armMoments() {
	for i := range moments {
		n.armMoment(i)
	}
}

// armMoment arms a fault for moment i unless one waits for it already,
// drawn on its own: a crash (what loses unsynced writes), a kill (the page
// cache stays, so a restarted broker reads what never reached the disk and
// must not take it for durable) or a power loss. Each moment waits on its
// own, so that one that rarely comes (a truncation) does not keep the
// others from being armed.
func (n *nemesis) armMoment(i int) {
	if n.armed == nil {
		n.armed = make([]*armed, len(moments))
	}
	if n.armed[i] != nil {
		return
	}
	m := &moments[i]
	fault := FaultCrash
	switch x := n.rand.Float64(); {
	case x < 0.4:
		fault = FaultKill
	case x < 0.6:
		fault = FaultPowerLoss
	}
	n.armed[i] = &armed{index: i, moment: m, fault: fault}
	n.r.probes.add("moment." + m.name + ".armed")
	n.r.logf("armed %s for moment %s", fault, m.name)
}

// observe hears the broker's disk: it counts how often the run reaches
// what the moments are about, and an armed fault whose moment this is
// strikes at a seeded point inside the window.
func (n *nemesis) observe(ev simfs.Event) {
	roll := n.rolled(ev)
	switch {
	case roll:
		n.r.probes.add("disk.segment_rolled")
	case ev.Op == simfs.OpRename && strings.HasSuffix(ev.Name, "recovery-point-checkpoint"):
		n.r.probes.add("disk.checkpoint_written")
	case ev.Op == simfs.OpTruncate && ev.Shrunk && strings.HasSuffix(ev.Name, ".log"):
		n.r.probes.add("disk.segment_truncated")
	}
	if n.r.stopping {
		return
	}
	for i, a := range n.armed {
		if a != nil && a.moment.matches(ev, roll) {
			n.armed[i] = nil
			n.strikeWithin(a, ev)
			return // one fault per operation
		}
	}
}

// strikeWithin strikes a's fault at a seeded point inside the window ev
// opened.
func (n *nemesis) strikeWithin(a *armed, ev simfs.Event) {
	lo, hi := a.moment.window(ev)
	delay := lo + time.Duration(n.rand.Uint64n(uint64(max(hi-lo, time.Nanosecond))))
	n.r.w.After(delay, "nemesis.moment", func() {
		if n.r.stopping {
			return
		}
		if n.draw() {
			n.r.probes.add("moment." + a.moment.name + ".fired")
			n.r.logf("moment %s (%s %s): %s", a.moment.name, ev.Op, ev.Name, a.fault)
			n.crashAfterKill = a.fault == FaultKill && n.follow.Chance(0.5)
			n.inject(a.fault)
			n.crashAfterKill = false
		}
		// Armed again a while after: often enough that a run strikes a
		// moment more than once, not so often that the broker spends the
		// run recovering.
		n.r.w.After(n.uniform(2*time.Second, 8*time.Second), "nemesis.rearm", func() {
			if !n.r.stopping {
				n.armMoment(a.index)
			}
		})
	})
}

// crashAfterRestart crashes the broker a moment after it restarted from a
// kill that struck at a moment: the page cache the killed process left is
// what the new process recovered from, and a broker that took some of it
// for durable (and so never synced it) loses it now. A kill at a roll left
// a rolled segment's index entries unsynced; a recovery that trusted them
// as they were, then this crash, leaves the segment a stale max timestamp.
// The crash comes soon, before the clients have moved on from what the
// kill cut short (a lookup aims at the newest timestamps).
func (n *nemesis) crashAfterRestart(broker *sim.Node) {
	if !broker.Up() {
		return
	}
	inc := broker.Incarnation()
	d := time.Millisecond + time.Duration(n.follow.Uint64n(uint64(400*time.Millisecond)))
	n.r.w.After(d, "nemesis.moment", func() {
		if n.r.stopping || !broker.Up() || broker.Incarnation() != inc {
			return
		}
		n.r.probes.add("moment.kill_then_crash.fired")
		n.r.logf("moment kill_then_crash: crash %s after the kill's restart", d)
		n.crash(broker.Crash)
		n.r.rec.fault(brokerName, FaultCrash, "after the restart from a kill")
		n.later(time.Duration(n.follow.Uint64n(uint64(3*time.Second))), func() { n.r.restartIfDown(broker) })
	})
}

// slowSync stretches the broker disk's sync latencies, up to seconds, for
// a while.
func (n *nemesis) slowSync() {
	disk := n.r.w.Node(brokerName).Disk()
	hi := n.uniform(200*time.Millisecond, 5*time.Second)
	mustSet(disk.SetSyncLatency(simfs.DefaultSyncLatencyMin, hi))
	n.later(n.uniform(time.Second, 10*time.Second), func() {
		mustSet(disk.SetSyncLatency(simfs.DefaultSyncLatencyMin, simfs.DefaultSyncLatencyMax))
	})
}
