package simrun

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/stretchr/testify/require"
)

// clusterSeeds is how many seeds the short cluster sweep runs per shape
// and workload: a dozen, or SLUICE_CLUSTER_SEEDS (make sim: 2,000).
func clusterSeeds(t *testing.T) uint64 {
	if s := os.Getenv("SLUICE_CLUSTER_SEEDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		return n
	}
	return 12
}

// clusterShapes are the shapes the sweeps run: 3 and 5 combined nodes,
// and 3 controllers with 2 broker-only nodes.
var clusterShapes = []struct{ nodes, brokerOnly int }{{3, 0}, {5, 0}, {5, 2}}

// TestClusterSimSweep runs every shape with the metadata workload alone
// and with the data workload too, through the seeds' faults.
func TestClusterSimSweep(t *testing.T) {
	for _, shape := range clusterShapes {
		for _, metaOnly := range []bool{true, false} {
			for seed := uint64(1); seed <= clusterSeeds(t); seed++ {
				cfg := Config{Seed: seed, Nodes: shape.nodes, BrokerOnly: shape.brokerOnly, Duration: 10 * time.Second, MetaOnly: metaOnly}
				s := Run(cfg)
				t.Log(s.Line())
				if !s.OK() {
					t.Errorf("%s\n%s\nreplay: %s", s.Line(), s.Details(), replay(cfg))
				}
			}
		}
	}
}

// replay is the command that runs cfg again.
func replay(cfg Config) string {
	cmd := fmt.Sprintf("sluice sim run --nodes %d", cfg.Nodes)
	if cfg.BrokerOnly > 0 {
		cmd += fmt.Sprintf(" --broker-only %d", cfg.BrokerOnly)
	}
	if cfg.MetaOnly {
		cmd += " --meta-only"
	}
	return cmd + fmt.Sprintf(" --seed %d --duration %s", cfg.Seed, cfg.Duration)
}

// With no faults, the data workload on a cluster passes: producers find
// the leaders, consumers read, the final reads see every acknowledged
// write.
func TestClusterDataWithoutFaults(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := Run(Config{Seed: seed, Nodes: 3, Duration: 5 * time.Second, noFaults: true})
		require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
		produced := 0
		for _, e := range s.History {
			if e.Kind == jepsen.KindOk && e.Type == jepsen.TypeProduce {
				produced++
			}
		}
		require.Greater(t, produced, 20, s.Line())
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
				s := Run(Config{Seed: seed, Nodes: 3, Duration: 10 * time.Second, Sabotage: tc.sabotage, MetaOnly: true})
				if !s.OK() {
					caught++
					require.Contains(t, s.Details(), tc.want)
				}
			}
			require.Positive(t, caught, "no seed caught the sabotage")
		})
	}
}

// On a cluster too, the durability oracle holds each answer against the
// disk of the node that gave it: with every sync reported done early and
// no fault at all, every seed is caught at the first answers, which
// without the oracle pass. (Not in page-cache seeds, whose answers promise
// nothing about the disk.)
func TestClusterOracleCatchesAHighWatermarkAheadOfTheDisk(t *testing.T) {
	for seed, ran := uint64(1), 0; ran < 3; seed++ {
		if ChooseClusterOptions(seed, 3).PageCache {
			continue
		}
		ran++
		cfg := Config{Seed: seed, Nodes: 3, Duration: 5 * time.Second, noFaults: true, DiskSabotage: simfs.SabotageSyncEarly}
		s := Run(cfg)
		require.False(t, s.OK(), "seed %d: the oracle missed syncs reported done early: %s", seed, s.Line())
		require.Contains(t, s.Details(), "violation: durability: ")
		cfg.NoOracle = true
		s = Run(cfg)
		require.True(t, s.OK(), "seed %d: without faults nothing but the oracle should see it: %s\n%s", seed, s.Line(), s.Details())
	}
}

// Nodes 1 is the single broker's run, the very same as Nodes 0.
func TestOneNodeIsTheSingleBrokerRun(t *testing.T) {
	a := Run(Config{Seed: 11, Duration: 2 * time.Second})
	b := Run(Config{Seed: 11, Nodes: 1, Duration: 2 * time.Second})
	require.Equal(t, a.Line(), b.Line())
	require.Zero(t, b.Nodes)
}

// The aimed faults reach the moments they aim at within a few seeds of
// their fault class: a follower cut off from the metadata fenced at its
// stale epoch, a paused controller sent a request its stale image would
// answer wrongly, and its answers then unconfirmed, a learner whose image
// stopped refused a lease.
func TestClusterAimsReachTheirMoments(t *testing.T) {
	for _, tc := range []struct {
		nodes, brokerOnly int
		set               []string
		want              []string
	}{
		{3, 0, []string{"faults=pause"}, []string{"fault.pause_controller_steered", "meta.controller_unconfirmed"}},
		{3, 0, []string{"faults=partition", "rf=3"}, []string{"fault.stale_follower_bumped", "fault.stale_follower_fenced"}},
		// The lagging-image aim: a learner leading, its raft connections
		// held, its partition moved away, then asked; the lease withheld.
		{5, 2, []string{"rf=3"}, []string{"fault.lagging_image_moved", "meta.lease_withheld"}},
	} {
		t.Run(tc.set[0], func(t *testing.T) {
			reached := map[string]bool{}
			for seed := uint64(1); seed <= 20 && len(reached) < len(tc.want); seed++ {
				s := Run(Config{Seed: seed, Nodes: tc.nodes, BrokerOnly: tc.brokerOnly, Duration: 15 * time.Second, Set: tc.set})
				require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
				for _, c := range s.Probes {
					if slices.Contains(tc.want, c.Name) && c.Count > 0 {
						reached[c.Name] = true
					}
				}
			}
			for _, p := range tc.want {
				require.True(t, reached[p], "no seed of 20 reached %s", p)
			}
		})
	}
}
