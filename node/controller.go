package node

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
)

// The active controller (DESIGN.md section 5): the raft leader, once it has
// applied every entry of earlier terms, runs raftmeta.Controller, the pure
// state machine of KRaft's decisions. Requests that change metadata become
// its calls; the records each call returns are proposed as one entry, and
// the call's answer goes out once that entry is committed and applied here.
// Heartbeats stay in its memory; its Tick fences the brokers whose sessions
// ran out.
//
// Sessions are timed by monoClock, not by Clock.Now: a clock that jumps (an
// NTP step, or the simulator's clock jumps) must neither fence every broker
// at once nor keep a dead one alive.

// monoClock is a monotonic time for the controller's sessions and the
// coordinators': the node's clock at start, advanced by what Clock.Elapsed
// says has passed since, read at each of a timer's ticks (now) or finer
// (Broker.monoNow). It used to count what Now said passed between ticks,
// taking a jump of more than monoJumpMax as one tick: in the simulator,
// whose Now has no monotonic reading (Go's time.Now has), a forward jump
// of a few seconds then aged every session by as much, and a KIP-848
// coordinator handed a member's partitions on while its session still ran
// (five-node seed 672).
type monoClock struct {
	now   time.Time
	timer env.Timer
	// start and startElapsed anchor the clock: its time is start plus
	// the Elapsed since startElapsed. lastElapsed is Elapsed at the last
	// tick.
	start                     time.Time
	startElapsed, lastElapsed time.Duration
}

// monoTick is monoClock's resolution; sessions are seconds long.
const monoTick = 100 * time.Millisecond

func (b *Broker) startMonoClock() {
	b.mono.start, b.mono.startElapsed = b.env.Clock.Now(), b.env.Clock.Elapsed()
	b.mono.now, b.mono.lastElapsed = b.mono.start, b.mono.startElapsed
	var tick func()
	tick = func() {
		elapsed := b.env.Clock.Elapsed()
		if elapsed-b.mono.lastElapsed > monoJumpMax {
			// The loop stood still that long (the process was stopped,
			// or starved): the leader lease (which this clock times) is
			// given up until the next heartbeat renews it.
			b.hb.leaseUntil = time.Time{}
		}
		b.mono.lastElapsed = elapsed
		b.mono.now = b.mono.start.Add(elapsed - b.mono.startElapsed)
		b.mono.timer = b.env.Clock.AfterFunc(monoTick, tick)
	}
	b.mono.timer = b.env.Clock.AfterFunc(monoTick, tick)
}

// monoNow is monoClock's time read finer than its ticks.
func (b *Broker) monoNow() time.Time {
	return b.mono.start.Add(b.env.Clock.Elapsed() - b.mono.startElapsed)
}

// monoJumpMax is the longest a tick may be late before the loop is taken
// to have stood still.
const monoJumpMax = 5 * time.Second

func (b *Broker) stopMonoClock() {
	if b.mono.timer != nil {
		b.mono.timer.Stop()
	}
}

// controllerConfig is the controller's configuration from the broker's.
func (b *Broker) controllerConfig() raftmeta.ControllerConfig {
	return raftmeta.ControllerConfig{
		SessionTimeout:      b.cfg.BrokerSessionTimeout,
		AutoLeaderRebalance: b.cfg.AutoLeaderRebalanceEnable,
		RebalanceInterval:   b.cfg.LeaderImbalanceCheckInterval,
		ImbalancePercent:    int(b.cfg.LeaderImbalancePerBrokerPercentage),
		ProducerIDBlock:     producerIDBlock,
		CommitTimes:         b.meta.commits,
	}
}

// newController starts a controller from the committed image.
func (b *Broker) newController() {
	b.ctl = raftmeta.NewController(b.image, b.controllerConfig(), b.mono.now, b.env.Rand)
	b.scheduleControllerTick()
}

// propose commits the records of one controller call and calls done with
// the outcome. A lost proposal leaves the controller's view ahead of the
// log, so the controller is rebuilt from the committed image (if this node
// still leads).
//
// A call that wrote nothing (a refusal, a change to what is in effect)
// was still decided against the controller's view, which holds every
// proposal in flight: it is answered once those have committed, with the
// error of one that did not, as Kafka's QuorumController completes a write
// event without records once its earlier writes commit. Answered at once,
// a CreatePartitions was refused INVALID_PARTITIONS for a count that only
// a lost proposal had made (sim seed 952 of the three-node sweep). And it
// is answered only once a quorum has confirmed that this node still leads
// (confirmController): a controller deposed without knowing it decides
// from an image that lacks its successor's changes (sim seed 1159 of the
// swarm: paused, then resumed, it answered the deletion of a config its
// successor had just set as done, writing nothing, and the config stayed).
func (b *Broker) propose(records []raftmeta.Record, done func(error)) {
	if len(records) == 0 {
		b.proposals.await(b.env.Loop, func(err error) {
			if err != nil {
				done(err)
				return
			}
			b.confirmController(done)
		})
		return
	}
	seq := b.proposals.begin()
	b.commit(records, func(err error) {
		if err != nil && b.meta.activeTerm != 0 {
			b.env.Log.Warn("a controller proposal was lost; rebuilding the controller from the committed image", "err", err)
			b.newController()
		}
		b.proposals.end(seq, err)
		done(err)
	})
}

// confirmController calls done(nil) once a quorum has confirmed that this
// node is still the active controller of the term it is now, or with
// the error that says it is not (NOT_CONTROLLER to a client: it retries
// with the new controller, and nothing was written).
func (b *Broker) confirmController(done func(error)) {
	term := b.meta.activeTerm
	if term == 0 || b.meta.node == nil {
		b.env.Loop.Post(func() { done(errNotController) })
		return
	}
	b.meta.node.ConfirmLeadership(func(err error) {
		if err == nil && b.meta.activeTerm != term {
			err = errNotController
		}
		if err != nil {
			b.meta.unconfirmed++
		}
		done(err)
	})
}

// proposalTracker numbers the controller's proposals and holds answers
// that wait for the ones in flight.
type proposalTracker struct {
	made    uint64   // proposals begun
	pending []uint64 // those in flight, in the order begun
	// failed are the proposals that failed while someone waited.
	failed  []failedProposal
	waiters []proposalWaiter
}

type failedProposal struct {
	seq uint64
	err error
}

type proposalWaiter struct {
	upTo uint64 // every proposal up to this one must have ended
	// since is len(failed) when it began to wait: the failures before
	// it came before its decision (the controller was rebuilt after them).
	since int
	done  func(error)
}

func (t *proposalTracker) begin() uint64 {
	t.made++
	t.pending = append(t.pending, t.made)
	return t.made
}

// await calls done, on loop, once every proposal begun so far has ended:
// nil if all committed, else the first failure's error.
func (t *proposalTracker) await(loop env.Loop, done func(error)) {
	if len(t.pending) == 0 {
		loop.Post(func() { done(nil) })
		return
	}
	t.waiters = append(t.waiters, proposalWaiter{upTo: t.made, since: len(t.failed), done: done})
}

// end records that proposal seq ended with err, and answers the waiters
// no proposal in flight holds any more.
func (t *proposalTracker) end(seq uint64, err error) {
	t.pending = slices.DeleteFunc(t.pending, func(s uint64) bool { return s == seq })
	if err != nil && len(t.waiters) > 0 {
		t.failed = append(t.failed, failedProposal{seq, err})
	}
	type answer struct {
		done func(error)
		err  error
	}
	var ready []answer
	t.waiters = slices.DeleteFunc(t.waiters, func(w proposalWaiter) bool {
		if len(t.pending) > 0 && t.pending[0] <= w.upTo {
			return false
		}
		a := answer{done: w.done}
		for _, f := range t.failed[w.since:] {
			if f.seq <= w.upTo {
				a.err = f.err
				break
			}
		}
		ready = append(ready, a)
		return true
	})
	if len(t.waiters) == 0 {
		t.failed = t.failed[:0]
	}
	for _, a := range ready {
		a.done(a.err)
	}
}

// controllerApplied tells the controller the committed image moved, and
// rearms its tick for the new deadline.
func (b *Broker) controllerApplied() {
	if b.ctl == nil {
		return
	}
	b.ctl.Committed(b.mono.now, b.image)
	if err := b.ctl.Err(); err != nil {
		b.env.Log.Error("the controller refused its own decision; rebuilding it", "err", err)
		b.newController()
		return
	}
	b.scheduleControllerTick()
}

// scheduleControllerTick arms the controller's Tick for its deadline.
func (b *Broker) scheduleControllerTick() {
	if b.ctlTimer != nil {
		b.ctlTimer.Stop()
		b.ctlTimer = nil
	}
	deadline := b.ctl.Deadline()
	if deadline.IsZero() {
		return
	}
	wait := max(deadline.Sub(b.mono.now), monoTick)
	ctl := b.ctl
	b.ctlTimer = b.env.Clock.AfterFunc(wait, func() {
		b.ctlTimer = nil
		if b.ctl != ctl {
			return
		}
		if records, _ := ctl.Tick(b.mono.now); len(records) > 0 {
			b.env.Log.Info("controller: sessions ran out or leaders rebalanced", "records", len(records))
			b.propose(records, func(error) {})
		}
		if b.ctl == ctl {
			b.scheduleControllerTick()
		}
	})
}

// dropController forgets the controller when this node stops leading.
func (b *Broker) dropController() {
	if b.ctlTimer != nil {
		b.ctlTimer.Stop()
		b.ctlTimer = nil
	}
	b.ctl = nil
}
