package simrun

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Epoch bumps aimed at a follower that cannot learn them. Leader-epoch
// fencing (KIP-101, KIP-320) exists for a follower whose metadata lags: it
// fetches from the broker it last knew as leader with the epoch it last
// knew, and a leader at a newer epoch must answer FENCED_LEADER_EPOCH
// rather than serve it, or the follower appends past a point it should
// have truncated to. Random faults seldom make it: the follower has to be
// cut off from the metadata while still reaching its leader, and the
// leader's epoch has to move, with the same leader, in that while. The
// replication mutant "leader accepts a stale epoch" was caught by 1 seed
// in 200.
//
// For a partition led by L with a follower F (F may be taken out):
//
//  1. F is cut off from the controller quorum (its links to every
//     controller port, both ways; its data links work), so its image
//     stays at the partition's epoch E while it goes on fetching from L.
//  2. The partition is reassigned so that a replica other than L and F
//     leaves: with three replicas or more, one of the others is dropped;
//     with two, a third broker is added and, once it has joined, dropped
//     again. A replica leaving bumps the leader epoch, L staying leader
//     (as KRaft's PartitionChangeBuilder does).
//  3. Once L leads at an epoch above E, it appends the producers' records
//     at that epoch, and F's fetches at E must be fenced, for a second or
//     two.
//  4. F is healed, and the partition gets its replicas back.
//
// A step that does not happen in time ends the aim (F healed, replicas
// restored). The checks that catch a leader serving F: the follower's
// invariant that a fetch at epoch E gets no batch of a later epoch
// (node/fetcher.go checkServedEpochs), and the replica comparison.

// staleFollowerSeeds is the share of the replicated seeds with partitions
// among their faults that aim some of them this way.
const staleFollowerSeeds = 0.7

// staleFollowerAimer schedules the aims, and sends the reassignments from
// a machine of its own, as an operator would.
type staleFollowerAimer struct {
	*aimSchedule
	*operator
	busy bool
}

func (n *clusterNemesis) startStaleFollowers() {
	r := n.r
	if r.cfg.MetaOnly || r.opts.ReplicationFactor < 2 || !slices.Contains(r.opts.Faults, FaultPartition) {
		return
	}
	a := &staleFollowerAimer{}
	if a.aimSchedule = n.startAims("nemesis/stale_follower", staleFollowerSeeds, a.aim); a.aimSchedule == nil {
		return
	}
	a.operator = n.startOperator("epoch-bumper", a.aimSchedule)
	a.after(a.uniform(time.Second, 4*time.Second))
}

// staleAim is one aim under way.
type staleAim struct {
	a                *staleFollowerAimer
	leader, follower int32
	l, f             int // node indexes
	part             int
	epoch            int32   // the partition's leader epoch in F's image at the cut
	replicas         []int32 // the partition's replicas before the aim
	extra            int32   // with two replicas, the broker added and then dropped
	heal             func()  // ends F's cut and releases its hold
	moved            bool    // a reassignment of the aim's was accepted
	// fenced is F's count of fenced fetches when L's epoch moved, once
	// struck says it did.
	fenced          int
	bumpSeen, ended bool
}

// aim starts step 1 and reports whether it did.
func (a *staleFollowerAimer) aim() bool {
	n := a.n
	if a.busy || !a.up() || n.r.w.Now()+10*time.Second > n.safetyEnd {
		return false
	}
	t, ok := a.target()
	if !ok || !n.draw() {
		return false
	}
	a.busy = true
	r := n.r
	t.heal = n.cutFromController(t.f)
	r.probes.add("fault.stale_follower")
	if fb := r.nodes[t.f].broker(); fb != nil {
		if p := fb.MetadataImage().TopicByName(clusterTopic); p != nil && t.part < len(p.Partitions) {
			t.epoch = p.Partitions[t.part].LeaderEpoch
		}
	}
	r.logf("fault stale_follower: n%d cut off from the controllers at epoch %d of %s-%d, led by n%d",
		t.follower, t.epoch, clusterTopic, t.part, t.leader)
	// The aim's own bound; the heal ends it sooner.
	n.later(20*time.Second, t.end)
	if t.extra != 0 {
		t.reassign(append(slices.Clone(t.replicas), t.extra), func() { t.awaitJoined(t.bump) })
	} else {
		t.bump()
	}
	return true
}

// target picks, by rand, a partition of the data topic, its leader L, a
// follower F, and, when the partition has two replicas, a broker to add
// and drop. L and F must run, and F must be free to be taken out. F may be
// the active controller: cut off, it steps down, and its image stays
// where it was all the same.
func (a *staleFollowerAimer) target() (*staleAim, bool) {
	n := a.n
	var aims []*staleAim
	for _, cn := range n.r.nodes {
		b := cn.broker()
		if b == nil || !cn.running() {
			continue
		}
		t := b.MetadataImage().TopicByName(clusterTopic)
		if t == nil {
			continue
		}
		for pi, p := range t.Partitions {
			if p.Leader != cn.id || len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
				continue
			}
			var extra []int32
			if len(p.Replicas) == 2 {
				for _, o := range n.r.nodes {
					if !slices.Contains(p.Replicas, o.id) && o.running() {
						extra = append(extra, o.id)
					}
				}
				if len(extra) == 0 {
					continue
				}
			}
			for _, id := range p.Replicas {
				if id == cn.id || id < 1 || int(id) > len(n.r.nodes) {
					continue
				}
				fn := n.r.nodes[id-1]
				if fb := fn.broker(); fb == nil || !fn.running() || !n.mayTakeOut(int(id-1)) {
					continue
				}
				s := &staleAim{a: a, leader: cn.id, follower: id, l: int(cn.id - 1), f: int(id - 1), part: pi,
					replicas: slices.Clone(p.Replicas)}
				if len(extra) > 0 {
					s.extra = extra[a.rand.Intn(len(extra))]
				}
				aims = append(aims, s)
			}
		}
	}
	if len(aims) == 0 {
		return nil, false
	}
	return aims[a.rand.Intn(len(aims))], true
}

// bump is step 2: a replica other than L and F leaves.
func (t *staleAim) bump() {
	var target []int32
	dropped := false
	for _, id := range t.current() {
		if id != t.leader && id != t.follower && !dropped {
			dropped = true
			continue
		}
		target = append(target, id)
	}
	if !dropped {
		t.end()
		return
	}
	t.reassign(target, func() { t.await(t.bumped, t.struck) })
}

// current is the partition's replicas as L knows them, or those before the
// aim.
func (t *staleAim) current() []int32 {
	if p, ok := t.a.n.r.ledPartition(t.l, t.part); ok {
		return p.Replicas
	}
	return t.replicas
}

// reassign asks the cluster to move the partition to replicas, and runs
// then once it accepted; the aim ends after five refusals (a controller
// being elected, F having been the one, answers NOT_CONTROLLER meanwhile).
func (t *staleAim) reassign(replicas []int32, then func()) {
	r := t.a.n.r
	var try func(left int)
	try = func(left int) {
		t.a.sendReassignment(reassignment(t.part, replicas), t.f, func(code int16) {
			r.logf("stale_follower: %s-%d to %v: error %d", clusterTopic, t.part, replicas, code)
			t.moved = t.moved || code == 0
			switch {
			case t.ended:
			case code == 0:
				then()
			case left == 0:
				t.end()
			default:
				r.w.After(300*time.Millisecond, "nemesis.stale_follower", func() { try(left - 1) })
			}
		})
	}
	try(4)
}

// reassignment is the request that moves one partition of the data topic.
func reassignment(part int, replicas []int32) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = clusterTopic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = int32(part), replicas
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// awaitJoined runs then once the added broker has joined the partition
// (the reassignment completed).
func (t *staleAim) awaitJoined(then func()) {
	t.await(func(p raftmeta.Partition) bool {
		return slices.Contains(p.Replicas, t.extra) && len(p.AddingReplicas) == 0
	}, then)
}

// bumped says L leads at an epoch above the one F's image is stuck at.
func (t *staleAim) bumped(p raftmeta.Partition) bool { return p.LeaderEpoch > t.epoch }

// await polls L's image until cond holds, then runs then; it ends the aim
// if L stops leading or it takes longer than eight seconds.
func (t *staleAim) await(cond func(raftmeta.Partition) bool, then func()) {
	r := t.a.n.r
	deadline := r.w.Now() + 8*time.Second
	var poll func()
	poll = func() {
		if t.ended {
			return
		}
		p, ok := r.ledPartition(t.l, t.part)
		switch {
		case !ok || r.w.Now() > deadline:
			t.end()
		case cond(p):
			then()
		default:
			r.w.After(isrAimPoll, "nemesis.stale_follower", poll)
		}
	}
	poll()
}

// struck is step 3: L leads at a newer epoch while F knows the old one.
func (t *staleAim) struck() {
	r := t.a.n.r
	r.probes.add("fault.stale_follower_bumped")
	t.bumpSeen = true
	if fb := r.nodes[t.f].broker(); fb != nil {
		t.fenced = fb.ReplicationView().FencedFetches
	}
	r.logf("stale_follower: n%d leads %s-%d at a newer epoch; n%d still knows epoch %d", t.leader, clusterTopic, t.part, t.follower, t.epoch)
	r.w.After(t.a.uniform(time.Second, 2*time.Second), "nemesis.stale_follower", t.end)
}

// end is step 4, once: F healed, the partition's replicas restored.
func (t *staleAim) end() {
	if t.ended {
		return
	}
	t.ended = true
	r := t.a.n.r
	if fb := r.nodes[t.f].broker(); t.bumpSeen && fb != nil && fb.ReplicationView().FencedFetches > t.fenced {
		r.probes.add("fault.stale_follower_fenced")
	}
	if t.heal != nil {
		t.heal()
	}
	// The replicas before the aim, once it moved them, whoever leads by
	// now (L's own view may be gone): a reassignment to the replicas a
	// partition has already changes nothing.
	if t.moved && !r.stopping {
		t.a.sendReassignment(reassignment(t.part, t.replicas), -1, func(code int16) {
			r.logf("stale_follower: %s-%d back to %v: error %d", clusterTopic, t.part, t.replicas, code)
		})
	}
	t.a.busy = false
	if !r.stopping {
		t.a.gap()
	}
}
