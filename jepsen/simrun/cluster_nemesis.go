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
	"github.com/sluicemq/sluice/sim/simnet"
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
	// connRand draws the connection stalls (stallConnection), from a stream
	// of their own so that a seed's other draws stay what they were;
	// connNext is the next one's event.
	connRand *rng.Rand
	connNext *sched.Event
}

func (n *clusterNemesis) start() {
	if len(n.r.opts.Faults) > 0 {
		n.schedule()
		n.startConnStalls()
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
	if n.connNext != nil {
		n.connNext.Cancel()
		n.connNext = nil
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
	var free []int
	for i := range n.r.nodes {
		if n.mayTakeOut(i) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return -1
	}
	return free[n.rand.Intn(len(free))]
}

// mayTakeOut says a fault may take node i out now: no other fault holds
// it, and it is a broker-only node or one voter more held still leaves
// the voters a majority.
func (n *clusterNemesis) mayTakeOut(i int) bool {
	if n.faulted[i] > 0 {
		return false
	}
	if !n.r.nodes[i].voter {
		return true
	}
	voters, held := 0, 0
	for j, cn := range n.r.nodes {
		if cn.voter {
			voters++
			if n.faulted[j] > 0 {
				held++
			}
		}
	}
	return held+1 <= (voters-1)/2
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

// Connection stalls (probe fault.stall_connection): one node's connections
// to a peer's port held for seconds, one way or both, while its newer
// connections flow (simnet.StallConn). The client gives up on the held
// connection at its request timeout (a broker's controller requests: the
// heartbeat's 400 ms, AlterPartition's 5 s; a follower's fetch:
// replica.socket.timeout.ms) and retries on a new one, and what it wrote to
// the old one still reaches the server when the stall ends, after those
// retries: a stale request from the past, as TCP delivers one whose
// retransmission got through after a long backoff.
//
// They run beside the other faults, drawn from a stream of their own, in
// most seeds that inject faults, one at a time.

// connStallSeeds is the share of the seeds with faults that stall
// connections.
const connStallSeeds = 0.6

// dataPort is every node's PLAINTEXT listener (cluster.go): clients' and
// followers' fetches.
const dataPort = 9092

func (n *clusterNemesis) startConnStalls() {
	n.connRand = n.r.w.Rand("nemesis/stall_connection")
	if !n.connRand.Chance(connStallSeeds) {
		return
	}
	n.nextConnStall(n.connUniform(0, 3*time.Second))
}

func (n *clusterNemesis) nextConnStall(d time.Duration) {
	n.connNext = n.r.w.After(d, "nemesis.stall_connection", func() {
		n.connNext = nil
		if n.r.stopping {
			return
		}
		busy := n.stallConnection()
		n.nextConnStall(busy + n.connUniform(500*time.Millisecond, 4*time.Second))
	})
}

func (n *clusterNemesis) connUniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.connRand.Uint64n(uint64(hi-lo)))
}

// stallConnection injects one connection stall and returns how long it
// lasts: most often the stale ISR change below where the seed has a
// replicated data topic, else a node's connections to one peer's
// controller port or data port.
func (n *clusterNemesis) stallConnection() time.Duration {
	if !n.r.cfg.MetaOnly && n.r.opts.ReplicationFactor > 1 && n.connRand.Chance(0.7) {
		if d, ok := n.stallISRChange(); ok {
			return d
		}
	}
	r := n.r
	i, j := n.connRand.Intn(len(r.nodes)), n.connRand.Intn(len(r.nodes)-1)
	if j >= i {
		j++
	}
	port := controllerPort
	if !r.cfg.MetaOnly && n.connRand.Chance(0.5) {
		port = dataPort
	}
	way := simnet.Way(1 + n.connRand.Intn(3))
	d := n.connUniform(time.Second, 15*time.Second)
	if port == controllerPort && !n.mayTakeOut(i) {
		// Its raft connections held, a voter is out of the quorum.
		return 0
	}
	if !n.stallConns(i, j, port, way, d) {
		return 0
	}
	if port == controllerPort {
		n.later(d, n.hold(i))
	}
	return d
}

// stallConns stalls node i's connections dialed to node j's port, the given
// way, for d, and ends them at the heal if they last that long. It reports
// whether there were any.
func (n *clusterNemesis) stallConns(i, j, port int, way simnet.Way, d time.Duration) bool {
	r := n.r
	net := r.w.Net()
	ids := net.Conns(r.nodes[i].name, r.nodes[j].name, port)
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		net.StallConn(id, way, d)
	}
	r.probes.add("fault.stall_connection")
	r.logf("fault stall_connection: %s->%s:%d %d connection(s) way %d for %s", r.nodes[i].name, r.nodes[j].name, port, len(ids), way, d)
	n.later(d, func() {
		for _, id := range ids {
			net.UnstallConn(id)
		}
	})
	return true
}

// stallISRChange aims connection stalls at the moment a stale ISR change
// would do harm. For a partition led by L (not the active controller) with
// a follower F:
//
//  1. F's fetch connections to L are held (requests only) past
//     replica.lag.time.max.ms: L takes F out of the ISR.
//  2. Just before they are released, L's connections to the controller are
//     held (requests only): F's held fetch arrives, F catches up, and L's
//     AlterPartition adding F back is written to a held connection. L's
//     next heartbeat times out, L gives that connection up and sends the
//     change again on a new one, where it commits.
//  3. Soon after, F's fetches are held again, past the lag time: L takes F
//     out again, over the new connection.
//  4. The first AlterPartition, made against the partition epoch before
//     both changes, reaches the controller when step 2's stall ends, while
//     F is still behind: the controller must refuse it
//     (INVALID_UPDATE_VERSION); applied, it puts F back in the ISR short
//     of the high watermark.
//
// It reports false, having done nothing, when no partition fits.
func (n *clusterNemesis) stallISRChange() (time.Duration, bool) {
	r := n.r
	leader, follower, ok := n.isrTarget()
	if !ok {
		return 0, false
	}
	l, f := int(leader-1), int(follower-1)
	ctl := int(r.nodes[l].broker().MetadataView().Leader - 1)
	lag := r.opts.ReplicaLagTime
	first := lag + n.connUniform(300*time.Millisecond, 2*time.Second)
	early := n.connUniform(0, 100*time.Millisecond)
	stale := n.connUniform(2*time.Second, 3*time.Second) + lag + n.connUniform(1500*time.Millisecond, 4*time.Second)
	again := n.connUniform(800*time.Millisecond, 1600*time.Millisecond)
	second := stale - early - again + n.connUniform(time.Second, 3*time.Second)
	if !n.stallConns(f, l, dataPort, simnet.DialerToAcceptor, first) {
		return 0, false
	}
	r.probes.add("fault.stall_connection_isr")
	r.logf("fault stall_connection_isr: n%d's fetches to n%d, then n%d's controller requests to n%d", follower, leader, leader, ctl+1)
	release := n.hold(l)
	n.later(first-early, func() {
		if r.stopping || !n.stallConns(l, ctl, controllerPort, simnet.DialerToAcceptor, stale) {
			release()
			return
		}
		n.later(stale, release)
		n.later(early+again, func() {
			if !r.stopping {
				n.stallConns(f, l, dataPort, simnet.DialerToAcceptor, second)
			}
		})
	})
	return first + stale + 3*time.Second, true
}

// isrTarget picks a partition of the data topic whose leader is running,
// is not the active controller and may be taken out, and one of its
// followers.
func (n *clusterNemesis) isrTarget() (leader, follower int32, ok bool) {
	type pair struct{ leader, follower int32 }
	var pairs []pair
	for _, cn := range n.r.nodes {
		b := cn.broker()
		if b == nil || !cn.running() {
			continue
		}
		view := b.MetadataView()
		t := b.MetadataImage().TopicByName(clusterTopic)
		if view.Controller || view.Leader == cn.id || view.Leader < 1 || int(view.Leader) > len(n.r.nodes) || t == nil {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader != cn.id || !n.mayTakeOut(int(cn.id-1)) {
				continue
			}
			for _, id := range p.Replicas {
				if id != cn.id && id >= 1 && int(id) <= len(n.r.nodes) {
					pairs = append(pairs, pair{cn.id, id})
				}
			}
		}
	}
	if len(pairs) == 0 {
		return 0, 0, false
	}
	p := pairs[n.connRand.Intn(len(pairs))]
	return p.leader, p.follower, true
}
