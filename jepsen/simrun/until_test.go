package simrun

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run stopped at T is the full run up to T, entry for entry, and says
// what each node held then; one stopped past its end is the run itself.
func TestUntilStopsTheRunWhereItWas(t *testing.T) {
	var full, cut strings.Builder
	whole := Run(Config{Seed: 5, Nodes: 3, Duration: 5 * time.Second, Trace: &full})
	s := Run(Config{Seed: 5, Nodes: 3, Duration: 5 * time.Second, Trace: &cut, Until: 3200 * time.Millisecond})
	require.Equal(t, 3200*time.Millisecond, s.Stopped)
	require.Equal(t, "stopped", s.Result())
	require.True(t, s.OK())
	require.Contains(t, s.Line(), "result=stopped")
	require.Greater(t, s.Time, 3200*time.Millisecond, "the time of the first event past it, which did not run")
	require.Less(t, s.Time, 4*time.Second)
	// The verdict's folds end the stopped run's trace; before them, it is
	// the full run's beginning.
	before, _, ok := strings.Cut(cut.String(), "check.verdict")
	require.True(t, ok)
	before = before[:strings.LastIndexByte(before, '\n')+1]
	require.True(t, strings.HasPrefix(full.String(), before), "the stopped run's trace is the full run's beginning")
	require.Greater(t, strings.Count(before, "\n"), 1000)
	for _, want := range []string{"state at 3.2", "n1: ", "n2: ", "n3: ", "quorum: term ", "image: topic jepsen:", "replica jepsen-0: ", " hw ", " leo ", `group "sim-group-2" (shard `, " Stable generation "} {
		require.Contains(t, s.State, want)
	}
	past := Run(Config{Seed: 5, Nodes: 3, Duration: 5 * time.Second, Until: time.Hour})
	require.Zero(t, past.Stopped)
	require.Equal(t, whole.Trace, past.Trace)

	one := Run(Config{Seed: 4, Duration: 5 * time.Second, Until: 2 * time.Second})
	require.Equal(t, "stopped", one.Result())
	require.Contains(t, one.State, "broker: ")
}
