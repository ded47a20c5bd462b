package simrun

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
)

// A workload's operations are checked with the run's: one that records a
// produce acknowledged at an offset no record holds fails the run, and the
// liveness phase waits for its Idle.
func TestWorkloadOperationsAreChecked(t *testing.T) {
	idleAsked := false
	liar := Workload{
		Name: "liar",
		Idle: func() bool { idleAsked = true; return true },
		Start: func(ctx WorkloadContext) {
			ctx.World.AddNode("liar", func(e env.Env) {
				e.Clock.AfterFunc(time.Second, func() {
					tp := jepsen.TopicPartition{Topic: ctx.Topic, Partition: 0}
					id := ctx.History.InvokeProduce(FirstWorkloadClient, tp, false, "never-sent")
					ctx.History.ProduceOk(id, 0)
				})
			})
		},
	}
	s := Run(Config{Seed: 7, Duration: 3 * time.Second, Options: quiet(), Workloads: []Workload{liar}})
	require.False(t, s.OK(), s.Line())
	require.True(t, idleAsked)
	require.Contains(t, s.Details(), `"never-sent"`)
	honest := Run(Config{Seed: 7, Duration: 3 * time.Second, Options: quiet(), Workloads: []Workload{{Name: "none", Start: func(WorkloadContext) {}}}})
	require.True(t, honest.OK(), honest.Details())
}

func TestCheckersFailTheRunByName(t *testing.T) {
	found := Checker{Name: "found", Check: func(s Summary) []string { return []string{"one thing"} }}
	s := Run(Config{Seed: 7, Duration: 2 * time.Second, Options: quiet(), Checkers: []Checker{found}})
	require.Equal(t, []string{"violation: found: one thing"}, s.Failures)
	require.Contains(t, s.Findings(), Finding{Check: "failure/found"})
	bad := Run(Config{Seed: 7, Duration: 2 * time.Second, Options: quiet(), Checkers: []Checker{{Name: "two words", Check: found.Check}}})
	require.False(t, bad.OK())
	require.True(t, strings.HasPrefix(bad.Failures[0], `checker "two words": a checker needs a one-word name`), bad.Failures[0])
}
