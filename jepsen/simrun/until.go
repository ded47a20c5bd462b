package simrun

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/node"
	"github.com/sluicemq/sluice/sim"
)

// Stepping into a seed (Config.Until): the run stops just before the first
// event past the virtual time asked for, and each node's state is written
// out as it stands then (Summary.State): what a reader needs to step
// through a failure a few hundred milliseconds at a time, without a
// debugger in the simulated world.

// untilStop stops a run at a virtual time.
type untilStop struct {
	at time.Duration
	// dump returns the state and the failures seen so far; set once the
	// run exists.
	dump     func() (string, []string)
	state    string
	failures []string
	fired    bool
}

// untilReached unwinds the run from inside the scheduler once it is
// stopped; execute recovers it.
type untilReached struct{}

func newUntil(cfg Config) *untilStop {
	if cfg.Until <= 0 {
		return nil
	}
	return &untilStop{at: cfg.Until}
}

// check stops the run if the event about to be delivered is past the time.
func (u *untilStop) check(at time.Duration) {
	if u == nil || u.fired || at <= u.at {
		return
	}
	u.fired = true
	u.state, u.failures = u.dump()
	panic(untilReached{})
}

// reached says whether the run was stopped: its history is cut short,
// and is not checked.
func (u *untilStop) reached() bool { return u != nil && u.fired }

// summarize marks a summary of a stopped run: its state, and the
// failures seen before the stop (its history was not checked).
func (u *untilStop) summarize(s Summary) Summary {
	if !u.reached() {
		return s
	}
	s.Stopped, s.State = u.at, u.state
	s.Failures = u.failures
	return s
}

// stopped says whether p, recovered from a run, is the stop's unwinding.
func stopped(p any) bool {
	_, ok := p.(untilReached)
	return ok
}

// dumpNode writes one node's process, quorum, image, replicas and groups.
func dumpNode(b *strings.Builder, n *sim.Node, broker *node.Broker, voter bool) {
	var v node.MetadataView
	if broker != nil {
		v = broker.MetadataView()
	}
	state := "running"
	switch {
	case !n.Up():
		state = "down"
	case n.Paused():
		state = "paused"
	case broker == nil:
		state = "up, its broker not made"
	case !v.Running:
		state = "up, starting or stopped"
	}
	fmt.Fprintf(b, "%s: %s, incarnation %d", n.Name(), state, n.Incarnation())
	if !voter {
		b.WriteString(", broker-only")
	}
	b.WriteString("\n")
	if broker == nil || !n.Up() {
		return
	}
	if v.Term != 0 || v.Applied != 0 {
		fmt.Fprintf(b, "  quorum: term %d, leader %d, applied %d, running %t, active controller %t\n", v.Term, v.Leader, v.Applied, v.Running, v.Controller)
	}
	if im := broker.MetadataImage(); im != nil {
		for _, name := range im.TopicNames() {
			t := im.TopicByName(name)
			fmt.Fprintf(b, "  image: topic %s:", name)
			for _, p := range t.Partitions {
				fmt.Fprintf(b, " [%d leader %d epoch %d isr %v replicas %v]", p.Index, p.Leader, p.LeaderEpoch, p.ISR, p.Replicas)
			}
			b.WriteString("\n")
		}
	}
	for _, p := range broker.PartitionViews() {
		fmt.Fprintf(b, "  replica %s-%d: %s epoch %d isr %v log start %d hw %d leo %d", p.Topic, p.Partition, p.Role, p.LeaderEpoch, p.ISR, p.LogStart, p.HighWatermark, p.LogEnd)
		if !p.Recovered {
			b.WriteString(" (recovering)")
		}
		b.WriteString("\n")
	}
	for _, g := range broker.GroupViews() {
		fmt.Fprintf(b, "  group %q (shard %d): %s %s generation %d, %d members, %d offsets\n", g.ID, g.Shard, g.Protocol, g.State, g.Generation, g.Members, g.Offsets)
	}
}
