package simrun

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/jepsen"
)

// Pauses aimed at a controller deposed without knowing it. A controller
// paused past its followers' election timeout resumes believing it leads
// (its CheckQuorum runs on its own later ticks) with an image that lacks
// what its successor committed meanwhile; until it hears of the new term,
// and has made that durable, it takes requests as the active controller.
// An answer it decides without writing (a refusal, a change to what is in
// effect) must wait for a quorum's confirmation (node/controller.go
// confirmController), or it contradicts a change acknowledged before it
// was asked (swarm seed 1159: a config deletion answered as done, the
// config its successor had just set staying). Random pauses seldom make
// it: a request has to reach the paused controller after a change that
// conflicts with it was acknowledged elsewhere, and be waiting there when
// it resumes.
//
// In a cluster of three voters or more:
//
//  1. The active controller C is paused for 1.2-1.95 s: past the election
//     timeout (controller.quorum.election.timeout.ms, 500 ms), so that the
//     others elect a new controller and the metadata clients' changes go
//     through it, and short of broker.session.timeout.ms (2 s), so that C
//     does not resume to fence every broker, whose failed proposals would
//     answer what waits for them.
//  2. While C is paused, a metadata client whose change was acknowledged
//     since the pause began (a new controller answers) sets a topic's
//     config through another node, and then sends C the deletion of that
//     config (controllerPauser.instead), where it waits (its timeout is
//     longer than the pause); the clients' other requests go to the
//     other nodes.
//  3. C resumes, with those requests and its successor's messages
//     waiting.
//
// The checks that catch a stale answer: the metadata model
// (meta-linearizable), the answer contradicting the acknowledged change.

// pausedControllerSeeds is the share of the cluster seeds with pauses
// among their faults that aim some of them this way.
const pausedControllerSeeds = 0.7

// controllerPauser schedules the aims.
type controllerPauser struct {
	*aimSchedule
	// paused is the node index of the controller paused now (-1: none);
	// seq the aim's sequence number, by which each client counts its
	// steps of step 2 afresh (metaClient.pauseSeq).
	paused int
	seq    int
}

func (n *clusterNemesis) startControllerPauses() {
	r := n.r
	voters := 0
	for _, cn := range r.nodes {
		if cn.voter {
			voters++
		}
	}
	if voters < 3 || !slices.Contains(r.opts.Faults, FaultPause) {
		return
	}
	p := &controllerPauser{paused: -1}
	if p.aimSchedule = n.startAims("nemesis/pause_controller", pausedControllerSeeds, p.aim); p.aimSchedule == nil {
		return
	}
	n.pauser = p
	p.after(p.uniform(time.Second, 4*time.Second))
}

// aim is step 1; it reports whether it paused a controller.
func (p *controllerPauser) aim() bool {
	n := p.n
	r := n.r
	if n.r.w.Now()+5*time.Second > n.safetyEnd {
		return false
	}
	c := -1
	for i, cn := range r.nodes {
		if b := cn.broker(); b != nil && cn.running() && !cn.node.Paused() && b.MetadataView().Controller {
			c = i
		}
	}
	if c < 0 || !n.mayTakeOut(c) || !n.draw() {
		return false
	}
	cn := r.nodes[c]
	release := n.hold(c)
	cn.node.Pause()
	p.paused, p.seq = c, p.seq+1
	d := p.uniform(1200*time.Millisecond, 1950*time.Millisecond)
	r.probes.add("fault.pause_controller")
	r.logf("fault pause_controller: n%d, the active controller, paused for %s", cn.id, d)
	drawn := r.rec.during(cn.name, "pause", "the active controller paused")
	n.later(d, func() {
		p.paused = -1
		if cn.node.Paused() {
			cn.node.Resume()
		}
		drawn()
		release()
		if !r.stopping {
			p.after(p.uniform(2*time.Second, 6*time.Second))
		}
	})
	return true
}

// Step 2 for one client, in the order of its steps (metaClient.pauseStep,
// counted in the aim metaClient.pauseSeq).
const (
	pauseStepIdle    = iota // no change of the client acknowledged yet
	pauseStepChanged        // one was: a new controller answers
	pauseStepSetting        // the config set is in flight
	pauseStepSet            // the set was acknowledged
	pauseStepSteered        // the deletion went to the paused controller
)

// instead returns, while a controller is paused, the operation a client
// makes instead of op, the one it drew (step 2). Once a change of the
// client was acknowledged since the pause began (a new controller
// answers), it sets the workload's config key on op's topic through
// another node; once that is acknowledged, it deletes the key through the
// paused controller, whose stale image lacks it: answered without a
// quorum's confirmation, the deletion is acknowledged as a no-op and the
// key stays. The client then reads the key back there once the
// controller has caught up (metaClient.answered), which shows it.
func (p *controllerPauser) instead(c *metaClient, op MetaOp) MetaOp {
	if p == nil || p.paused < 0 {
		return op
	}
	if c.pauseSeq != p.seq {
		c.pauseSeq, c.pauseStep = p.seq, pauseStepIdle
	}
	switch c.pauseStep {
	case pauseStepChanged:
		c.pauseStep = pauseStepSetting
		return MetaOp{Type: jepsen.MetaAlterConfig, Topic: op.Topic, Value: "3600000"}
	case pauseStepSet:
		c.pauseStep, c.steerNext = pauseStepSteered, true
		return MetaOp{Type: jepsen.MetaAlterConfig, Topic: c.pauseTopic}
	}
	return op
}

// target returns the node index a metadata client sends its attempt to,
// drawn as target, while a controller is paused: the paused controller for
// the deletion that instead chose, any other node for the others, so that the
// clients' changes go on meanwhile.
func (p *controllerPauser) target(c *metaClient, op *MetaOp, target int) int {
	if p == nil || p.paused < 0 {
		c.steerNext = false
		return target
	}
	if c.steerNext {
		c.steerNext, c.steered = false, true
		p.n.r.probes.add("fault.pause_controller_steered")
		p.n.r.logf("pause_controller: %s sends its %s of %s to the paused n%d", c.name, op.Type, op.Topic, p.n.r.nodes[p.paused].id)
		return p.paused
	}
	if target == p.paused {
		target = (target + 1) % len(p.n.r.nodes)
	}
	return target
}

// changed notes a change c had acknowledged while a controller is paused.
func (p *controllerPauser) changed(c *metaClient, op MetaOp) {
	if p == nil || p.paused < 0 {
		return
	}
	if c.pauseSeq != p.seq {
		c.pauseSeq, c.pauseStep = p.seq, pauseStepIdle
	}
	switch {
	case c.pauseStep == pauseStepIdle:
		c.pauseStep = pauseStepChanged
	case c.pauseStep == pauseStepSetting && op.Type == jepsen.MetaAlterConfig && op.Value != "":
		c.pauseStep, c.pauseTopic = pauseStepSet, op.Topic
	}
}
