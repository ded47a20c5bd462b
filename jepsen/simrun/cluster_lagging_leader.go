package simrun

import (
	"slices"
	"time"
)

// Kills aimed at the moment a careless election loses acknowledged records.
// Random faults seldom make it: a follower has to fall out of the ISR, stay
// behind while the leader acknowledges records without it, and then the
// leader has to die while that follower, alive and unfenced, is still the
// first replica an election would look at. The replication mutant
// "election picks an out-of-sync replica" was caught by 2 seeds in 200.
//
// For a partition led by L (running, not the active controller) whose
// first replica but L is F, and which acknowledges without F (more replicas
// than min.insync.replicas):
//
//  1. F's fetch connections to L are held (requests only) until L has
//     taken F out of the ISR (replica.lag.time.max.ms).
//  2. For a few hundred milliseconds more, L acknowledges records F lacks.
//  3. L is killed (or crashed), and stays down past
//     broker.session.timeout.ms: the controller fences it and elects a
//     leader of the partition from the ISR (or the ELR), never F; with rf 2
//     and min.insync.replicas 1, none until L is back.
//
// A step that does not happen in time ends the aim without a kill.

// laggerKillSeeds is the share of the seeds with kills or crashes, a
// replicated data topic and more replicas than min.insync.replicas that
// aim some of their kills this way.
const laggerKillSeeds = 0.7

// laggerKiller schedules the aimed kills.
type laggerKiller struct{ *aimSchedule }

func (n *clusterNemesis) startLaggerKills() {
	r := n.r
	if r.cfg.MetaOnly || r.opts.ReplicationFactor < 2 || r.opts.ReplicationFactor <= r.opts.MinInSync ||
		!(slices.Contains(r.opts.Faults, FaultKill) || slices.Contains(r.opts.Faults, FaultCrash)) {
		return
	}
	k := &laggerKiller{}
	if k.aimSchedule = n.startAims("nemesis/kill_lagging_leader", laggerKillSeeds, func() bool { return k.aim(k.gap) }); k.aimSchedule == nil {
		return
	}
	k.after(k.uniform(500*time.Millisecond, 3*time.Second))
}

// aim starts step 1 and reports whether it did; done runs when the aim
// ends.
func (k *laggerKiller) aim(done func()) bool {
	n := k.n
	a, ok := n.startISRAim(k.rand, true, done)
	if !ok {
		return false
	}
	n.r.probes.add("fault.kill_lagging_leader")
	n.r.logf("fault kill_lagging_leader: n%d's fetches to n%d held until it leaves the ISR, then n%d killed", a.follower, a.leader, a.leader)
	a.await(false, func() {
		n.r.w.After(k.uniform(200*time.Millisecond, 800*time.Millisecond), "nemesis.kill_lagging_leader", func() { k.strike(a) })
	})
	return true
}

// strike is step 3: F is out of the ISR and behind; L dies.
func (k *laggerKiller) strike(a *isrAim) {
	n := k.n
	if a.ended {
		return
	}
	if in, ok := a.inISR(); !ok || in || !n.draw() {
		a.end()
		return
	}
	cn := n.r.nodes[a.l]
	f := FaultKill // a page-cache seed crashes no machine (ClusterOptions.PageCache)
	if !n.r.opts.PageCache && !k.rand.Chance(0.5) {
		f = FaultCrash
	}
	if f == FaultKill {
		cn.node.Kill()
	} else {
		cn.node.Crash()
	}
	n.r.probes.add("fault.kill_lagging_leader_struck")
	n.r.logf("kill_lagging_leader: n%d %s with n%d out of its ISR", a.leader, f, a.follower)
	n.r.rec.fault(cn.name, f, "leader of a lagging follower")
	// L's hold lasts until it runs again, past the aim's end.
	release := a.release
	a.release = func() {}
	n.later(k.uniform(3*time.Second, 5*time.Second), func() {
		if !cn.node.Up() {
			cn.node.Restart()
		}
		n.untilRunning(cn, release)
	})
	a.end()
}
