package simrun

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

// clusterNemesis injects a cluster run's faults, each undone after a
// seeded while. A fault that takes a voter out (a crash, a kill, a clean
// restart, a pause, a disk failing, a partition isolating it from some of
// the others) is injected only on a node no other such fault holds, and
// only while fewer than a majority would then be held: the rest of the
// quorum stays up and connected, so the cluster must go on working. A
// power loss, in a run of that kind, takes every node at once.
type clusterNemesis struct {
	r     *clusterRun
	rand  *rng.Rand
	next  *sched.Event
	undos []*undo
	// faulted counts, by node index, the faults holding each node.
	faulted map[int]int
	// sabotaged is set once a sabotage that lies once has lied.
	sabotaged bool
	// followerSyncArmed says a power loss of every node waits for the
	// moment a follower's sync of the data topic is in flight.
	followerSyncArmed bool
}

func (n *clusterNemesis) start() {
	if len(n.r.opts.Faults) > 0 {
		n.schedule()
	}
	if slices.Contains(n.r.opts.Faults, FaultPowerLoss) && !n.r.cfg.MetaOnly && n.r.opts.ReplicationFactor > 1 {
		// Syncs of tens to hundreds of milliseconds (a slow disk), so that
		// an acknowledgement has time to reach its client inside one.
		hi := n.uniform(20*time.Millisecond, 300*time.Millisecond)
		for i, cn := range n.r.nodes {
			id := cn.id
			mustSet(cn.node.Disk().SetSyncLatency(simfs.DefaultSyncLatencyMin, hi))
			cn.node.Disk().SetObserver(func(ev simfs.Event) { n.observeFollowerSync(i, id, ev) })
		}
		n.armFollowerSync()
	}
}

// A power loss of every node at the moment a follower's sync of the data
// topic is in flight: the follower has appended what it fetched, and
// counting it before the sync completes (reporting it as its position)
// would let the leader acknowledge what no disk but the leader's holds.
// A power loss at a random time almost never lands in that window.

func (n *clusterNemesis) armFollowerSync() {
	n.followerSyncArmed = true
	n.r.probes.add("moment.follower_sync_inflight.armed")
}

func (n *clusterNemesis) observeFollowerSync(i int, id int32, ev simfs.Event) {
	if !n.followerSyncArmed || n.r.stopping || ev.Op != simfs.OpSync || ev.Done || !strings.HasSuffix(ev.Name, ".log") ||
		!strings.HasPrefix(ev.Name, clusterTopic+"-") {
		return
	}
	b := n.r.nodes[i].broker()
	if b == nil {
		return
	}
	var p int
	if _, err := fmt.Sscanf(ev.Name, clusterTopic+"-%d/", &p); err != nil {
		return
	}
	t := b.MetadataImage().TopicByName(clusterTopic)
	if t == nil || p >= len(t.Partitions) || t.Partitions[p].Leader == id {
		return // the leader's own sync: what it counts is durable already
	}
	n.followerSyncArmed = false
	delay := ev.Latency/2 + time.Duration(n.rand.Uint64n(uint64(max(ev.Latency/2, time.Nanosecond))))
	n.r.w.After(delay, "nemesis.moment", func() {
		if n.r.stopping {
			return
		}
		n.r.probes.add("moment.follower_sync_inflight.fired")
		n.r.logf("moment follower_sync_inflight (%s on n%d): power loss", ev.Name, id)
		n.inject(FaultPowerLoss)
		n.r.w.After(n.uniform(3*time.Second, 10*time.Second), "nemesis.rearm", func() {
			if !n.r.stopping {
				n.armFollowerSync()
			}
		})
	})
}

func (n *clusterNemesis) schedule() {
	mean := float64(n.r.opts.FaultEvery)
	d := time.Duration(-math.Log(1-n.rand.Float64()) * mean)
	n.next = n.r.w.After(d, "nemesis.fault", func() {
		n.inject(n.r.opts.Faults[n.rand.Intn(len(n.r.opts.Faults))])
		n.schedule()
	})
}

func (n *clusterNemesis) later(d time.Duration, f func()) {
	u := &undo{f: f}
	u.ev = n.r.w.After(d, "nemesis.heal", func() {
		u.f = nil
		f()
	})
	n.undos = append(n.undos, u)
}

func (n *clusterNemesis) heal() {
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

func (n *clusterNemesis) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rand.Uint64n(uint64(hi-lo)))
}

// victim picks a node to take out, or -1 when none may be: a voter only
// while taking one more out leaves the voters a majority, a broker-only
// node always (the quorum does not need it).
func (n *clusterNemesis) victim() int {
	voters, held := 0, 0
	for i, cn := range n.r.nodes {
		if cn.voter {
			voters++
			if n.faulted[i] > 0 {
				held++
			}
		}
	}
	votersMay := held+1 <= (voters-1)/2
	var free []int
	for i, cn := range n.r.nodes {
		if n.faulted[i] == 0 && (votersMay || !cn.voter) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return -1
	}
	return free[n.rand.Intn(len(free))]
}

// hold marks node i held by a fault until release runs.
// faultedNow says a fault holds some node now.
func (n *clusterNemesis) faultedNow() bool {
	for _, i := range slices.Sorted(maps.Keys(n.faulted)) {
		if n.faulted[i] > 0 {
			return true
		}
	}
	return false
}

func (n *clusterNemesis) hold(i int) (release func()) {
	n.faulted[i]++
	done := false
	return func() {
		if !done {
			done = true
			n.faulted[i]--
		}
	}
}

func (n *clusterNemesis) inject(f Fault) {
	r := n.r
	w := r.w
	if f == FaultClock {
		d := time.Duration(math.Exp(n.rand.Float64()*math.Log(float64(time.Hour/time.Millisecond)))) * time.Millisecond
		if n.rand.Chance(0.5) {
			d = -d
		}
		r.nodes[n.rand.Intn(len(r.nodes))].node.Clock().Jump(d)
		n.injected(f)
		return
	}
	if f == FaultPowerLoss {
		w.PowerLoss()
		n.later(n.uniform(0, 3*time.Second), func() {
			for _, node := range w.Nodes() {
				if !node.Up() {
					node.Restart()
				}
			}
		})
		n.injected(f)
		return
	}
	i := n.victim()
	if i < 0 {
		return
	}
	cn := r.nodes[i]
	node := cn.node
	switch f {
	case FaultCrash, FaultKill:
		if !node.Up() {
			return
		}
		release := n.hold(i)
		if f == FaultCrash {
			node.Crash()
		} else {
			node.Kill()
		}
		down := n.uniform(0, 3*time.Second)
		if n.rand.Chance(0.25) {
			// Down past broker.session.timeout.ms: the controller fences
			// the broker and its partitions lose their leader, so they
			// reopen only once it is back and unfenced, while it runs.
			down = n.uniform(10*time.Second, 16*time.Second)
			n.r.probes.add("fault.long_outage")
		}
		n.later(down, func() {
			if !node.Up() {
				node.Restart()
			}
			n.untilRunning(cn, release)
		})
	case FaultRestart:
		b := cn.broker()
		if b == nil || !b.MetadataView().Running || node.Paused() {
			return
		}
		release := n.hold(i)
		inc := node.Incarnation()
		delay := n.uniform(0, 2*time.Second)
		node.Post(func() {
			b.Shutdown(func(err error) {
				if err != nil {
					r.probes.add("node.shutdown_error")
				}
				r.w.After(delay, "nemesis.restart", func() {
					if node.Incarnation() == inc && node.Up() {
						r.restartProcess(node)
					}
					n.untilRunning(cn, release)
				})
			})
		})
		// Whatever happens to the shutdown, the hold ends with the heal.
		n.later(time.Hour, release)
	case FaultPause:
		if !node.Up() || node.Paused() {
			return
		}
		release := n.hold(i)
		node.Pause()
		n.later(n.uniform(10*time.Millisecond, 5*time.Second), func() {
			node.Resume()
			release()
		})
	case FaultDisk:
		release := n.hold(i)
		rate := 0.002 + 0.02*n.rand.Float64()
		mustSet(node.Disk().SetFaults(simfs.Faults{EIORate: rate, NoSpaceRate: rate / 2}))
		n.later(n.uniform(50*time.Millisecond, 2*time.Second), func() {
			mustSet(node.Disk().SetFaults(simfs.Faults{}))
			// A node whose disk failed under it may have stopped: the
			// supervisor restarts it; the hold lasts until it runs.
			n.untilRunning(cn, release)
		})
	case FaultPartition:
		n.partition(i)
	default:
		panic("simrun: unknown cluster fault " + string(f))
	}
	n.injected(f)
}

func (n *clusterNemesis) injected(f Fault) {
	n.r.probes.add("fault." + string(f))
	n.r.logf("fault %s", f)
}

// untilRunning releases a hold once the node runs again (or at the heal).
func (n *clusterNemesis) untilRunning(cn *clusterNode, release func()) {
	if cn.running() || n.r.stopping {
		release()
		return
	}
	n.later(100*time.Millisecond, func() { n.untilRunning(cn, release) })
}

// partition cuts node i off from some of the other nodes (or from a
// client), both ways or one way, for up to twenty seconds.
func (n *clusterNemesis) partition(i int) {
	r := n.r
	net := r.w.Net()
	self := r.nodes[i].name
	if n.rand.Chance(0.25) {
		n.partitionController(i)
		return
	}
	var peers []string
	if n.rand.Chance(0.3) {
		peers = []string{r.clients[n.rand.Intn(len(r.clients))].name}
		r.probes.add("fault.partition_client")
	} else {
		for j, other := range r.nodes {
			if j != i && (len(peers) == 0 || n.rand.Chance(0.5)) {
				peers = append(peers, other.name)
			}
		}
	}
	var links [][2]string
	way := n.rand.Intn(3)
	for _, p := range peers {
		if way != 2 {
			links = append(links, [2]string{self, p})
		}
		if way != 1 {
			links = append(links, [2]string{p, self})
		}
	}
	if way != 0 {
		r.probes.add("fault.partition_one_way")
	}
	for _, l := range links {
		net.Partition(l[0], l[1])
	}
	release := n.hold(i)
	n.later(n.uniform(100*time.Millisecond, 20*time.Second), func() {
		for _, l := range links {
			net.Heal(l[0], l[1])
		}
		release()
	})
}

// partitionController cuts node i off from the controller quorum alone, both
// ways, for up to twenty seconds: its links to every peer's controller port
// and theirs to its own are cut, while its data links work. So a follower
// keeps fetching from its leader while it learns no metadata: it misses
// leader changes (and is fenced after broker.session.timeout.ms), which is
// what a leader's leader-epoch fencing exists for.
func (n *clusterNemesis) partitionController(i int) {
	r := n.r
	net := r.w.Net()
	self := r.nodes[i].name
	r.probes.add("fault.partition_controller")
	for j, other := range r.nodes {
		if j != i {
			net.PartitionPort(self, other.name, controllerPort)
			net.PartitionPort(other.name, self, controllerPort)
		}
	}
	release := n.hold(i)
	n.later(n.uniform(100*time.Millisecond, 20*time.Second), func() {
		for j, other := range r.nodes {
			if j != i {
				net.HealPort(self, other.name, controllerPort)
				net.HealPort(other.name, self, controllerPort)
			}
		}
		release()
	})
}
