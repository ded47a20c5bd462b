package simrun

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/stretchr/testify/require"
)

// Idempotent producers' histories say so, their batches carry up to three
// values, and their retries follow leaders: a few seeds with every producer
// idempotent pass, with acknowledged idempotent produces.
func TestClusterIdempotentProducersPass(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		cfg := Config{Seed: seed, Nodes: 3, Duration: 10 * time.Second, Set: []string{"idempotent=8"}}
		s := Run(cfg)
		require.True(t, s.OK(), "%s\n%s\nreplay: %s --set idempotent=8", s.Line(), s.Details(), replay(cfg))
		acked := 0
		for _, e := range s.History {
			if e.Type == jepsen.TypeProduce && e.Kind == jepsen.KindInvoke {
				require.True(t, e.Idempotent, "%s", e)
				require.LessOrEqual(t, len(e.Values), idempotentValuesMax)
			}
			if e.Type == jepsen.TypeProduce && e.Kind == jepsen.KindOk {
				acked++
			}
		}
		require.Positive(t, acked, s.Line())
	}
}

// The setting is clamped to the producers there are, and a meta-only run
// has none.
func TestClusterIdempotentSetting(t *testing.T) {
	c, err := Choose(Config{Seed: 1, Nodes: 3, Set: []string{"producers=1", "idempotent=8"}})
	require.NoError(t, err)
	require.Equal(t, 1, c.Cluster.IdempotentProducers)
	require.Contains(t, c.String(), " idempotent=1 ")
	c, err = Choose(Config{Seed: 1, Nodes: 3, Set: []string{"idempotent=0"}})
	require.NoError(t, err)
	require.NotContains(t, c.String(), "idempotent=")
	chose := 0
	for seed := uint64(1); seed <= 40; seed++ {
		c, err := Choose(Config{Seed: seed, Nodes: 3, MetaOnly: true})
		require.NoError(t, err)
		require.Zero(t, c.Cluster.IdempotentProducers)
		if ChooseClusterOptions(seed, 3).IdempotentProducers > 0 {
			chose++
		}
	}
	require.InDelta(t, 20, chose, 10, "about half the seeds choose idempotent producers")
}

// A producer that sends a retry of a batch whose fate is unknown as a
// fresh batch (a new epoch, sequence 0) makes its values land twice where
// the earlier attempt had landed: some seed catches it as a duplicate,
// which the same seeds without the sabotage do not show.
func TestClusterIdempotentSabotageIsCaught(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 12 && caught == 0; seed++ {
		cfg := Config{Seed: seed, Nodes: 3, Duration: 10 * time.Second, Set: []string{"idempotent=8"}, Sabotage: SabotageIdempotentFreshRetry}
		s := Run(cfg)
		if s.OK() {
			continue
		}
		caught++
		t.Logf("seed %d: %s", seed, s.Line())
		require.Contains(t, s.Details(), jepsen.CheckDuplicate, "seed %d: %s", seed, s.Line())
		cfg.Sabotage = SabotageNone
		clean := Run(cfg)
		require.True(t, clean.OK(), "seed %d without the sabotage: %s\n%s", seed, clean.Line(), clean.Details())
	}
	require.Positive(t, caught, "no seed caught an idempotent retry sent as a fresh batch")
}
