package simrun

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clusterSeeds is how many seeds the short cluster sweep runs per size:
// a dozen, or SLUICE_SEEDS.
func clusterSeeds(t *testing.T) uint64 {
	if s := os.Getenv("SLUICE_SEEDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		return n
	}
	return 12
}

func TestClusterSimSweep(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		for seed := uint64(1); seed <= clusterSeeds(t); seed++ {
			s := Run(Config{Seed: seed, Nodes: nodes, Duration: 10 * time.Second})
			t.Log(s.Line())
			if !s.OK() {
				t.Errorf("nodes=%d seed=%d: %s\n%s\nreplay: sluice sim run --nodes %d --seed %d --duration 10s", nodes, seed, s.Line(), s.Details(), nodes, seed)
			}
		}
	}
}

func TestClusterDeterminism(t *testing.T) {
	for _, seed := range []uint64{3, 7} {
		a := Run(Config{Seed: seed, Nodes: 3, Duration: 5 * time.Second})
		b := Run(Config{Seed: seed, Nodes: 3, Duration: 5 * time.Second})
		require.Equal(t, a.Line(), b.Line(), "seed %d", seed)
		require.Equal(t, a.MetaHistory, b.MetaHistory, "seed %d", seed)
	}
	// A cluster run is not the single broker's run of the seed.
	require.NotEqual(t, Run(Config{Seed: 3, Nodes: 3, Duration: 5 * time.Second}).Trace, Run(Config{Seed: 3, Duration: 5 * time.Second}).Trace)
}

func TestClusterRefusesTwoNodes(t *testing.T) {
	s := Run(Config{Seed: 1, Nodes: 2})
	require.False(t, s.OK())
	require.Contains(t, s.Details(), "at least 3 nodes")
}

// A broken cluster is caught by some seed: a node whose applied log
// diverges (its image digest off at one index), and a describe that lost
// its topic.
func TestClusterSabotageIsCaught(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sabotage Sabotage
		want     string
	}{
		{"skipped record", SabotageImageDigest, "applied-diverged"},
		{"lost topic", SabotageDescribeAbsent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caught := 0
			for seed := uint64(1); seed <= 4; seed++ {
				s := Run(Config{Seed: seed, Nodes: 3, Duration: 10 * time.Second, Sabotage: tc.sabotage})
				if !s.OK() {
					caught++
					require.Contains(t, s.Details(), tc.want)
				}
			}
			require.Positive(t, caught, "no seed caught the sabotage")
		})
	}
}
