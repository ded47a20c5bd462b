package simrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A reconfigured quorum keeps its promises and is made whole at the end:
// voters taken out and put back while faults go on (a power loss among
// them, which the operator's machine survives), the run's checks pass, and
// the same seed gives the same trace.
func TestVoterChangesUnderFaults(t *testing.T) {
	removed, added := 0, 0
	for seed, ran := uint64(1), 0; ran < 4; seed++ {
		if ChooseClusterOptions(seed, 3).PageCache {
			continue // no power loss there
		}
		ran++
		cfg := Config{Seed: seed, Nodes: 3, Duration: 15 * time.Second, Set: []string{"voterchanges=true", "faults=kill,pause,partition,powerloss"}}
		s := Run(cfg)
		require.True(t, s.OK(), "seed %d: %s\n%s", seed, s.Line(), s.Details())
		t.Log(s.Line())
		removed += probeCount(s, "voter.removed")
		added += probeCount(s, "voter.added")
		if seed == 1 {
			require.Equal(t, s.Trace, Run(cfg).Trace, "the same seed, another trace")
		}
	}
	require.Positive(t, removed, "no voter was removed")
	require.Positive(t, added, "no voter was added back")
}
