package simrun

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
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
	// aims are the schedules of the aimed faults this seed makes
	// (cluster_aims.go): kills at leaders of lagging followers, epoch
	// bumps at followers cut off from the metadata, pauses of the active
	// controller. pauser is the last of them, which the metadata clients
	// ask where to send what while a pause lasts (nil in the seeds that
	// do not pause controllers).
	aims   []*aimSchedule
	pauser *controllerPauser
	// draws counts the faults drawn so far (Config.SkipFaults).
	draws int
	// safetyEnd is when the safety phase ends, and the heal with it.
	safetyEnd time.Duration
}

func (n *clusterNemesis) start() {
	if len(n.r.opts.Faults) > 0 {
		n.schedule()
		n.startConnStalls()
		n.startLaggerKills()
		n.startStaleFollowers()
		n.startControllerPauses()
		n.startLaggingImages()
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
		if n.draw() {
			n.r.probes.add("moment.follower_sync_inflight.fired")
			n.r.logf("moment follower_sync_inflight (%s on n%d): power loss", ev.Name, id)
			n.inject(FaultPowerLoss)
		}
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
		f := n.r.opts.Faults[n.rand.Intn(len(n.r.opts.Faults))]
		if n.draw() {
			n.inject(f)
		}
		n.schedule()
	})
}

// draw counts a fault about to strike (one the schedule drew, or a
// moment's) and says whether it may: Config.SkipFaults names the draws
// that inject nothing.
func (n *clusterNemesis) draw() bool {
	n.draws++
	return !n.r.cfg.skipsDraw(n.draws-1, n.r.logf)
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
	for _, a := range n.aims {
		a.stop()
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

// faultedNow says a fault holds some node now.
func (n *clusterNemesis) faultedNow() bool {
	for _, i := range slices.Sorted(maps.Keys(n.faulted)) {
		if n.faulted[i] > 0 {
			return true
		}
	}
	return false
}

// hold marks node i held by a fault until release runs.
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
		jumped := r.nodes[n.rand.Intn(len(r.nodes))]
		jumped.node.Clock().Jump(d)
		n.injected(f, jumped.name, fmt.Sprintf("clock jumps %s", d))
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
		n.injected(f, r.nodes[0].name, "every node")
		for _, cn := range r.nodes[1:] {
			r.rec.fault(cn.name, f, "every node")
		}
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
		drawn := r.rec.during(cn.name, "disk", fmt.Sprintf("disk errors %.1f%%", rate*100))
		n.later(n.uniform(50*time.Millisecond, 2*time.Second), func() {
			mustSet(node.Disk().SetFaults(simfs.Faults{}))
			drawn()
			// A node whose disk failed under it may have stopped: the
			// supervisor restarts it; the hold lasts until it runs.
			n.untilRunning(cn, release)
		})
	case FaultPartition:
		n.partition(i)
	default:
		panic("simrun: unknown cluster fault " + string(f))
	}
	n.injected(f, cn.name, "")
}

// injected counts the fault and draws it on the node it struck.
func (n *clusterNemesis) injected(f Fault, node, detail string) {
	n.r.probes.add("fault." + string(f))
	n.r.logf("fault %s", f)
	n.r.rec.fault(node, f, detail)
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
	drawn := r.rec.during(self, "partition", fmt.Sprintf("cut off %v", links))
	n.later(n.uniform(100*time.Millisecond, 20*time.Second), func() {
		for _, l := range links {
			net.Heal(l[0], l[1])
		}
		release()
		drawn()
	})
}

// partitionController cuts node i off from the controller quorum alone, both
// ways, for up to twenty seconds: its links to every peer's controller port
// and theirs to its own are cut, while its data links work. So a follower
// keeps fetching from its leader while it learns no metadata: it misses
// leader changes (and is fenced after broker.session.timeout.ms), which is
// what a leader's leader-epoch fencing exists for.
func (n *clusterNemesis) partitionController(i int) {
	n.r.probes.add("fault.partition_controller")
	heal := n.cutFromController(i)
	n.later(n.uniform(100*time.Millisecond, 20*time.Second), heal)
}

// cutFromController cuts node i off from the controller quorum, both ways,
// and holds it, until heal runs (once).
func (n *clusterNemesis) cutFromController(i int) (heal func()) {
	r := n.r
	net := r.w.Net()
	self := r.nodes[i].name
	for j, other := range r.nodes {
		if j != i {
			net.PartitionPort(self, other.name, controllerPort)
			net.PartitionPort(other.name, self, controllerPort)
		}
	}
	return n.holdDuring(i, "cut off from the controller quorum", func() {
		for j, other := range r.nodes {
			if j != i {
				net.HealPort(self, other.name, controllerPort)
				net.HealPort(other.name, self, controllerPort)
			}
		}
	})
}

// holdDuring holds node i and draws the fault on the timeline as what,
// until the heal it returns runs, once: it undoes the fault, then releases
// i.
func (n *clusterNemesis) holdDuring(i int, what string, undo func()) (heal func()) {
	release := n.hold(i)
	drawn := n.r.rec.during(n.r.nodes[i].name, "partition", what)
	healed := false
	return func() {
		if healed {
			return
		}
		healed = true
		drawn()
		undo()
		release()
	}
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
	n.safetyEnd = n.r.w.Now() + n.r.cfg.Duration
	if !n.connRand.Chance(connStallSeeds) {
		return
	}
	n.nextConnStall(n.connUniform(0, 1500*time.Millisecond))
}

func (n *clusterNemesis) nextConnStall(d time.Duration) {
	n.connNext = n.r.w.After(d, "nemesis.stall_connection", func() {
		n.connNext = nil
		if !n.r.stopping {
			n.stallConnection()
		}
	})
}

// connStallGap is the pause after one connection stall, before the next.
func (n *clusterNemesis) connStallGap() time.Duration {
	return n.connUniform(500*time.Millisecond, 4*time.Second)
}

func (n *clusterNemesis) connUniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.connRand.Uint64n(uint64(hi-lo)))
}

// stallConnection injects one connection stall and schedules the next
// after it: most often the stale ISR change below where the seed has a
// replicated data topic, else a node's connections to one peer's
// controller port or data port.
func (n *clusterNemesis) stallConnection() {
	if !n.r.cfg.MetaOnly && n.r.opts.ReplicationFactor > 1 && n.connRand.Chance(0.8) {
		if n.stallISRChange(func() { n.nextConnStall(n.connStallGap()) }) {
			return
		}
	}
	n.nextConnStall(n.stallRandomConn() + n.connStallGap())
}

// stallRandomConn stalls a random node's connections to a random peer's
// controller or data port, one way or both, for 1 to 15 s, and returns how
// long (0 for none).
func (n *clusterNemesis) stallRandomConn() time.Duration {
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
// would do harm, watching the partition's ISR in its leader's image. For a
// partition led by L (not the active controller) with a follower F:
//
//  1. F's fetch connections to L are held (requests only) until L has
//     taken F out of the ISR (replica.lag.time.max.ms).
//  2. L's connections to the controller are held (requests only), and
//     then F's fetches released: F catches up, and L's AlterPartition
//     adding F back is written to a held connection. L's next heartbeat
//     times out (400 ms), L gives that connection up and sends the change
//     again on a new one, where it commits.
//  3. Once F is back, its fetches are held again until L has taken it out
//     again, over the new connection.
//  4. Then L's held controller connections are released: the first
//     AlterPartition, made against the partition epoch before both
//     changes, reaches the controller while F is behind. The controller
//     must refuse it (INVALID_UPDATE_VERSION); applied, it puts F back in
//     the ISR short of the high watermark.
//
// A step that does not happen in time (a leadership moved, a node went
// down) ends the aim and its stalls. It reports false, having done
// nothing, when no partition fits or the safety phase is too short for it;
// done runs when it ends.
func (n *clusterNemesis) stallISRChange(done func()) bool {
	a, ok := n.startISRAim(n.connRand, false, done)
	if !ok {
		return false
	}
	r := n.r
	r.probes.add("fault.stall_connection")
	r.probes.add("fault.stall_connection_isr")
	r.logf("fault stall_connection_isr: n%d's fetches to n%d, then n%d's controller requests to n%d",
		a.follower, a.leader, a.leader, a.ctl+1)
	a.await(false, a.stallController)
	return true
}

// startISRAim is the first step the aims at a follower share: it picks a
// target (isrTarget) and holds F's fetches to L, holding L as a node
// taken out. It reports false, having done nothing, when no partition
// fits, F has no fetch connection to hold, or the safety phase is too
// short for two lag times.
func (n *clusterNemesis) startISRAim(rand *rng.Rand, preferredOnly bool, done func()) (*isrAim, bool) {
	lag := n.r.opts.ReplicaLagTime
	if n.r.w.Now()+2*lag+2*time.Second > n.safetyEnd {
		return nil, false
	}
	a, ok := n.isrTarget(rand, preferredOnly)
	if !ok {
		return nil, false
	}
	a.n, a.done = n, done
	// A shrink comes at the first replica tick (every lag/2) past the lag.
	a.limit = 2*lag + 2*time.Second
	if !a.stallFetches() {
		return nil, false
	}
	a.release = n.hold(a.l)
	// The heal ends it at once; this bound is never reached otherwise,
	// each step having its own.
	n.later(4*a.limit, a.end)
	return a, true
}

// isrAim is one stallISRChange under way.
type isrAim struct {
	n                *clusterNemesis
	leader, follower int32
	l, f, ctl        int // node indexes
	part             int
	limit            time.Duration
	// fetches are F's connections to L's data port held now; while
	// fetchesHeld, each new one is held too (F's fetcher redials after an
	// error). ctls are L's connections to the controller held now.
	fetches, ctls []uint64
	fetchesHeld   bool
	release, done func()
	ended         bool
}

// isrAimPoll is how often an aim looks at the leader's image.
const isrAimPoll = 20 * time.Millisecond

// inISR reports whether F is in the partition's ISR as L knows it, and
// whether the aim still holds (L runs and leads the partition).
func (a *isrAim) inISR() (in, ok bool) {
	p, ok := a.n.r.ledPartition(a.l, a.part)
	return ok && slices.Contains(p.ISR, a.follower), ok
}

// ledPartition returns partition part of the data topic as node index l's
// image holds it, and whether l runs and leads it (never while the run is
// stopping).
func (r *clusterRun) ledPartition(l, part int) (raftmeta.Partition, bool) {
	b := r.nodes[l].broker()
	if r.stopping || b == nil {
		return raftmeta.Partition{}, false
	}
	t := b.MetadataImage().TopicByName(clusterTopic)
	if t == nil || part >= len(t.Partitions) || t.Partitions[part].Leader != r.nodes[l].id {
		return raftmeta.Partition{}, false
	}
	return t.Partitions[part], true
}

// await runs then once F's membership of the ISR is want, polling; it ends
// the aim if that takes longer than the limit.
func (a *isrAim) await(want bool, then func()) {
	deadline := a.n.r.w.Now() + a.limit
	var poll func()
	poll = func() {
		in, ok := a.inISR()
		switch {
		case !ok || a.n.r.w.Now() > deadline:
			a.end()
		case in == want:
			then()
		default:
			if a.fetchesHeld {
				a.stallFetches()
			}
			a.n.r.w.After(isrAimPoll, "nemesis.stall_connection_isr", poll)
		}
	}
	poll()
}

// stallFetches holds F's fetch connections to L that are not held yet,
// and those it opens from now on, and reports whether any is held.
func (a *isrAim) stallFetches() bool {
	r := a.n.r
	net := r.w.Net()
	for _, id := range net.Conns(r.nodes[a.f].name, r.nodes[a.l].name, dataPort) {
		if !slices.Contains(a.fetches, id) {
			net.StallConn(id, simnet.DialerToAcceptor, a.limit)
			a.fetches = append(a.fetches, id)
		}
	}
	a.fetchesHeld = true
	return len(a.fetches) > 0
}

// stallController is step 2: F is out.
func (a *isrAim) stallController() {
	r := a.n.r
	net := r.w.Net()
	a.ctls = net.Conns(r.nodes[a.l].name, r.nodes[a.ctl].name, controllerPort)
	if len(a.ctls) == 0 {
		a.end()
		return
	}
	for _, id := range a.ctls {
		net.StallConn(id, simnet.DialerToAcceptor, 3*a.limit)
	}
	r.logf("stall_connection_isr: n%d out of the ISR; holding %d controller connection(s) of n%d, releasing its fetches",
		a.follower, len(a.ctls), a.leader)
	a.fetchesHeld = false
	a.unstall(&a.fetches)
	a.await(true, a.stallFetchesAgain)
}

// stallFetchesAgain is step 3: F is back, by the change's second attempt.
func (a *isrAim) stallFetchesAgain() {
	a.n.r.logf("stall_connection_isr: n%d back in the ISR; holding its fetches again", a.follower)
	if !a.stallFetches() {
		a.end()
		return
	}
	a.await(false, a.releaseStale)
}

// releaseStale is step 4: F is out again.
func (a *isrAim) releaseStale() {
	a.n.r.probes.add("fault.stall_connection_isr_released")
	a.n.r.logf("stall_connection_isr: releasing n%d's held controller requests", a.leader)
	a.unstall(&a.ctls)
	// F stays behind a little longer, while the stale change arrives.
	a.n.r.w.After(time.Second, "nemesis.stall_connection_isr", a.end)
}

func (a *isrAim) unstall(ids *[]uint64) {
	net := a.n.r.w.Net()
	for _, id := range *ids {
		net.UnstallConn(id)
	}
	*ids = nil
}

// end releases whatever the aim still holds, once.
func (a *isrAim) end() {
	if a.ended {
		return
	}
	a.ended = true
	a.fetchesHeld = false
	a.unstall(&a.fetches)
	a.unstall(&a.ctls)
	a.release()
	a.done()
}

// isrTarget picks, by rand, a partition of the data topic whose leader is
// running, is not the active controller and may be taken out, and one of
// its followers, of a partition whose high watermark still advances
// without that follower (more replicas than min.insync.replicas). With
// preferredOnly, the follower is the first of the replicas but the
// leader: the one an election that ignored the ISR would pick.
func (n *clusterNemesis) isrTarget(rand *rng.Rand, preferredOnly bool) (*isrAim, bool) {
	var aims []*isrAim
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
		for pi, p := range t.Partitions {
			if p.Leader != cn.id || len(p.Replicas) <= n.r.opts.MinInSync || !n.mayTakeOut(int(cn.id-1)) {
				continue
			}
			for _, id := range p.Replicas {
				if id == cn.id {
					continue
				}
				if id >= 1 && int(id) <= len(n.r.nodes) {
					aims = append(aims, &isrAim{leader: cn.id, follower: id, l: int(cn.id - 1), f: int(id - 1),
						ctl: int(view.Leader - 1), part: pi})
				}
				if preferredOnly {
					break
				}
			}
		}
	}
	if len(aims) == 0 {
		return nil, false
	}
	return aims[rand.Intn(len(aims))], true
}
