package simrun

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/sim/simnet"
)

// Leaderships moved away from a leader whose metadata has stopped while its
// heartbeats get through. A broker leads only on a lease its heartbeats
// renew, and a heartbeat renews it only while the broker's image keeps up
// with the committed log (raftmeta's ImageLagMax). Random partitions seldom
// make the moment that needs the second half: a broker cut off from the
// controllers loses its heartbeats too. Swarm seed 8646 found it once in
// thousands of seeds (a learner whose raft link stayed down after a heal).
//
// For a partition led by L, a broker-only node (a raft learner), with
// another replica in the ISR (a voter cut off this way turns pre-candidate
// within an election timeout, forgets who the controller is, and its
// heartbeats stop: its lease runs out on its own):
//
//  0. If L leads nothing, the partition is reassigned with L first and a
//     preferred election makes it the leader.
//  1. L's connections to the voters' controller ports are held (simnet's
//     StallConn): raft's messages to a learner go over connections it
//     dialed, and a held connection never breaks, so L's image stops; its
//     heartbeats give up on the held connection and go on over a new one.
//  2. The partition is reassigned without L, so that its leadership moves
//     to another replica while L, in its image, still leads it.
//  3. Past the staleness a lease allows (1.5 s: ImageLagMax, then a
//     heartbeat), until the aim ends 2.5-4 s after the move, half the data
//     clients' operations go to the partition: producers, as if their
//     metadata were fresh, to the successor; consumers, as if theirs came
//     from L, to L at L's leader epoch (so that L, once it follows at a
//     newer epoch, fences them rather than serve them as a follower). A leader that acts on its stale image serves a high
//     watermark below what its successor acknowledged, which the
//     linearizability checker sees (probe fault.lagging_image_served
//     counts the reads L served).
//  4. L is healed, and the partition gets its replicas back.
//
// A step that does not happen in time ends the aim.

// laggingImageSeeds is the share of the replicated seeds with faults and
// broker-only nodes that aim some of them this way.
const laggingImageSeeds = 0.7

type laggingImageAimer struct {
	*aimSchedule
	*operator
	busy bool
}

func (n *clusterNemesis) startLaggingImages() {
	r := n.r
	learners := slices.ContainsFunc(r.nodes, func(cn *clusterNode) bool { return !cn.voter })
	if r.cfg.MetaOnly || r.opts.ReplicationFactor < 2 || !learners {
		return
	}
	a := &laggingImageAimer{}
	if a.aimSchedule = n.startAims("nemesis/lagging_image", laggingImageSeeds, a.aim); a.aimSchedule == nil {
		return
	}
	a.operator = n.startOperator("leader-mover", a.aimSchedule)
	a.after(a.uniform(2*time.Second, 6*time.Second))
}

// lagAim is one aim under way.
type lagAim struct {
	a        *laggingImageAimer
	leader   int32
	l        int  // L's node index
	promote  bool // L is in the ISR, and becomes leader first (step 0)
	part     int
	replicas []int32 // the partition's replicas before the aim
	heal     func()
	moved    bool // a reassignment of the aim's was accepted
	ended    bool
}

// aim starts step 1 and reports whether it did.
func (a *laggingImageAimer) aim() bool {
	n := a.n
	if a.busy || !a.up() || n.r.w.Now()+8*time.Second > n.safetyEnd {
		return false
	}
	t, ok := a.target()
	if !ok || !n.draw() {
		return false
	}
	a.busy = true
	n.later(25*time.Second, t.end) // the aim's own bound; the heal ends it sooner
	if t.promote {
		t.promoteLearner()
	} else {
		t.cut()
	}
	return true
}

// cut is step 1.
func (t *lagAim) cut() {
	n := t.a.n
	r := n.r
	t.heal = n.stallRaftTo(t.l, 12*time.Second)
	r.probes.add("fault.lagging_image")
	r.logf("fault lagging_image: n%d's image cut off, leading %s-%d with replicas %v", t.leader, clusterTopic, t.part, t.replicas)
	var without []int32
	for _, id := range t.replicas {
		if id != t.leader {
			without = append(without, id)
		}
	}
	// Once the cut has stopped L's image (a raft heartbeat interval or
	// two), the leadership moves.
	r.w.After(300*time.Millisecond, t.a.label, func() { t.reassign(without, t.struck) })
}

// promoteLearner is step 0, for a learner in the ISR that leads nothing:
// the partition is reassigned with it first, then a preferred election
// makes it the leader.
func (t *lagAim) promoteLearner() {
	r := t.a.n.r
	first := []int32{t.leader}
	for _, id := range t.replicas {
		if id != t.leader {
			first = append(first, id)
		}
	}
	r.logf("lagging_image: moving %s-%d's leadership to n%d", clusterTopic, t.part, t.leader)
	t.reassign(first, func() {
		t.a.sendElectPreferred(t.part, -1, func(code int16) {
			r.logf("lagging_image: preferred election of %s-%d: error %d", clusterTopic, t.part, code)
			deadline := r.w.Now() + 3*time.Second
			var poll func()
			poll = func() {
				switch _, ok := r.ledPartition(t.l, t.part); {
				case t.ended:
				case ok && t.a.n.faulted[t.l] == 0:
					t.cut()
				case r.w.Now() > deadline || t.a.n.faulted[t.l] > 0:
					t.end()
				default:
					r.w.After(isrAimPoll, t.a.label, poll)
				}
			}
			poll()
		})
	})
}

// target picks, by rand, a partition of the data topic with a running
// broker-only node L free to be taken out in its ISR, and another ISR
// member that runs; leaders first.
func (a *laggingImageAimer) target() (*lagAim, bool) {
	n := a.n
	var aims []*lagAim
	for i, cn := range n.r.nodes {
		b := cn.broker()
		if b == nil || !cn.running() || cn.voter || !n.mayTakeOut(i) {
			continue
		}
		t := b.MetadataImage().TopicByName(clusterTopic)
		if t == nil {
			continue
		}
		for pi, p := range t.Partitions {
			if !slices.Contains(p.ISR, cn.id) || len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
				continue
			}
			others := 0
			for _, id := range p.ISR {
				if id != cn.id && id >= 1 && int(id) <= len(n.r.nodes) && n.r.nodes[id-1].running() {
					others++
				}
			}
			if others > 0 {
				aims = append(aims, &lagAim{a: a, leader: cn.id, l: i, part: pi, replicas: slices.Clone(p.Replicas), promote: p.Leader != cn.id})
			}
		}
	}
	if len(aims) == 0 {
		return nil, false
	}
	leading := slices.DeleteFunc(slices.Clone(aims), func(t *lagAim) bool { return t.promote })
	if len(leading) > 0 {
		aims = leading
	}
	return aims[a.rand.Intn(len(aims))], true
}

// reassign moves the partition to replicas, then runs then; the aim ends
// after five refusals.
func (t *lagAim) reassign(replicas []int32, then func()) {
	r := t.a.n.r
	var try func(left int)
	try = func(left int) {
		if t.ended {
			return
		}
		t.a.sendReassignment(reassignment(t.part, replicas), t.l, func(code int16) {
			r.logf("lagging_image: %s-%d to %v: error %d", clusterTopic, t.part, replicas, code)
			switch {
			case t.ended:
			case code == 0:
				t.moved = true
				then()
			case left == 0:
				t.end()
			default:
				r.w.After(300*time.Millisecond, t.a.label, func() { try(left - 1) })
			}
		})
	}
	try(4)
}

// struck is step 3: L's successor leads (in its own image) while L's image
// still says L does.
func (t *lagAim) struck() {
	r := t.a.n.r
	deadline := r.w.Now() + 5*time.Second
	var poll func()
	poll = func() {
		if t.ended {
			return
		}
		if lp, stale := r.ledPartition(t.l, t.part); stale {
			if successor, ok := t.successor(); ok {
				r.probes.add("fault.lagging_image_moved")
				r.logf("lagging_image: %s-%d moved away from n%d to n%d; n%d's image still says it leads", clusterTopic, t.part, t.leader, successor, t.leader)
				// Past the staleness a lease allows (ImageLagMax, then a
				// heartbeat), half the clients' operations go to the
				// partition: writes to the successor, reads to L.
				r.w.After(1500*time.Millisecond, t.a.label, func() {
					if !t.ended && !r.stopping {
						r.steer = &dataSteer{part: int32(t.part), stale: t.leader, fresh: successor, staleEpoch: lp.LeaderEpoch}
					}
				})
				r.w.After(t.a.uniform(2500*time.Millisecond, 4*time.Second), t.a.label, t.end)
				return
			}
		}
		if r.w.Now() > deadline {
			t.end()
			return
		}
		r.w.After(isrAimPoll, t.a.label, poll)
	}
	poll()
}

// successor returns the node other than L that leads the partition in its
// own image, if one does.
func (t *lagAim) successor() (int32, bool) {
	for i, cn := range t.a.n.r.nodes {
		if i != t.l {
			if _, ok := t.a.n.r.ledPartition(i, t.part); ok {
				return cn.id, true
			}
		}
	}
	return 0, false
}

// end is step 4, once: L healed, the partition's replicas restored.
func (t *lagAim) end() {
	if t.ended {
		return
	}
	t.ended = true
	r := t.a.n.r
	r.steer = nil
	if t.heal != nil {
		t.heal()
	}
	if t.moved && !r.stopping {
		t.a.sendReassignment(reassignment(t.part, t.replicas), -1, func(code int16) {
			r.logf("lagging_image: %s-%d back to %v: error %d", clusterTopic, t.part, t.replicas, code)
		})
	}
	t.a.busy = false
	if !r.stopping {
		t.a.gap()
	}
}

// stallRaftTo holds, both ways, every connection the learner of index i
// dialed to a voter's controller port, for at most d, and holds i; the
// heal releases both. Raft's leader sends to a learner on the learner's
// own connection, which a hold never breaks (no reset, no timeout), so the
// learner's image stops; its heartbeats, on a connection of the broker's
// controller client that gives up on the held one at its request timeout,
// go on over a new one.
func (n *clusterNemesis) stallRaftTo(i int, d time.Duration) (heal func()) {
	r := n.r
	net := r.w.Net()
	self := r.nodes[i].name
	var held []uint64
	for _, other := range r.nodes {
		if other.voter && other.name != self {
			for _, id := range net.Conns(self, other.name, controllerPort) {
				if net.StallConn(id, simnet.BothWays, d) {
					held = append(held, id)
				}
			}
		}
	}
	return n.holdDuring(i, "metadata held (its raft connections stalled), heartbeats flowing", func() {
		for _, id := range held {
			net.UnstallConn(id)
		}
	})
}
