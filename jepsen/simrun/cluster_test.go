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
