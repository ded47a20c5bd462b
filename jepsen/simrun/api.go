package simrun

import (
	"fmt"
	"strings"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/sim"
)

// A Workload is a user's own clients in a run, beside the run's: they
// live on nodes of the run's world, dial the brokers over its network
// (env.Net; wire.Client speaks the protocol), and record what they did in
// the run's data history, which the run checks with the rest
// (jepsen.Check: porcupine, then Kafka's invariants, the final reads of
// the topic included, so a record the workload was told is written must
// be there at the end).
type Workload struct {
	// Name names the workload's nodes' failures.
	Name string
	// Start adds the workload's nodes (World.AddNode); it is called once,
	// after the brokers and the topic are set up and before the safety
	// phase begins.
	Start func(WorkloadContext)
	// Idle, if set, reports that nothing of the workload is in flight:
	// the liveness phase waits for it, as for the run's own clients,
	// before the final reads.
	Idle func() bool
}

// WorkloadContext is what a workload's Start is given.
type WorkloadContext struct {
	World *sim.World
	// Brokers are the host:port addresses of the brokers' client
	// listeners.
	Brokers []string
	// Topic is the run's data topic, of Partitions partitions.
	Topic      string
	Partitions int
	// History is the run's data history. A workload's client ids must
	// be at least FirstWorkloadClient, apart from the run's own.
	History *jepsen.History
	// Stopping reports that the safety phase is over: start nothing new
	// that Idle would have to wait long for.
	Stopping func() bool
}

// FirstWorkloadClient is the lowest client id a Workload may record
// under: the run's own clients use ids below it.
const FirstWorkloadClient = 10000

// A Checker is a user's own check of a finished run: it reads the summary
// (its histories, options, probes) and returns what it found wrong, one
// message each. A finding fails the run as "violation: Name: message"
// (Finding "failure/Name"), so Minimize shrinks it like any other.
type Checker struct {
	// Name is one word.
	Name  string
	Check func(Summary) []string
}

// check runs the configuration's checkers over s, adding what they find
// to its failures.
func (cfg Config) check(s *Summary) {
	for _, c := range cfg.Checkers {
		if c.Name == "" || strings.ContainsAny(c.Name, " :") || c.Check == nil {
			s.Failures = append(s.Failures, fmt.Sprintf("checker %q: a checker needs a one-word name and a Check", c.Name))
			continue
		}
		for _, msg := range c.Check(*s) {
			s.Failures = append(s.Failures, fmt.Sprintf("violation: %s: %s", c.Name, msg))
		}
	}
}

// startWorkloads starts the configuration's workloads.
func (cfg Config) startWorkloads(ctx WorkloadContext) {
	for _, wl := range cfg.Workloads {
		if wl.Start != nil {
			wl.Start(ctx)
		}
	}
}

// workloadsIdle says no workload has anything in flight.
func (cfg Config) workloadsIdle() bool {
	for _, wl := range cfg.Workloads {
		if wl.Idle != nil && !wl.Idle() {
			return false
		}
	}
	return true
}
