package simrun

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Without faults, every variant of a seed's configuration tells the
// producers what the base run does.
func TestCompareFindsNoDifferenceOnTheRealBroker(t *testing.T) {
	for _, cfg := range []Config{{Seed: 3, Duration: 8 * time.Second}, {Seed: 7, Nodes: 3, Duration: 8 * time.Second}} {
		choice, err := Choose(cfg)
		require.NoError(t, err)
		c := Compare(cfg, Variants(choice.Shape.Nodes > 1))
		require.True(t, c.Base.OK(), c.Base.Details())
		require.Contains(t, c.Base.Line(), "injected=none")
		for _, v := range c.Variants {
			require.Empty(t, v.Differences, "%s: %s", v.Name, v.Summary.Line())
			require.Positive(t, v.Summary.Ops, v.Name)
		}
		require.True(t, c.OK())
	}
}

// A lie no single run can see (a pipelined producer skipping a value's
// number, once) passes every run's own checks and is caught by comparing
// it with one produce in flight.
func TestCompareCatchesWhatNoSingleRunShows(t *testing.T) {
	cfg := Config{Seed: 3, Duration: 8 * time.Second, Sabotage: SabotagePipelineSkipsValue}
	alone := Run(Config{Seed: 3, Duration: 8 * time.Second, Sabotage: SabotagePipelineSkipsValue, Set: []string{"faults=none", "inflight=5"}})
	require.True(t, alone.OK(), alone.Details())
	c := Compare(cfg, []Variant{{"inflight=1", []string{"inflight=1"}}, {"inflight=5", []string{"inflight=5"}}})
	require.False(t, c.OK())
	require.Empty(t, c.Variants[0].Differences, "the base (in-flight 1) and in-flight 1 agree")
	require.NotEmpty(t, c.Variants[1].Differences)
	require.True(t, strings.Contains(c.Variants[1].Differences[0], "in the base run"), c.Variants[1].Differences[0])
}
