package simrun

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A swarm seed runs every shape over a few hundred seeds, and each of its
// choices is what the same seed chooses with that shape named.
func TestSwarmSeedsChooseEveryShape(t *testing.T) {
	seen := map[Shape]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		shape := ChooseShape(seed)
		require.Equal(t, shape, ChooseShape(seed))
		require.GreaterOrEqual(t, shape.Nodes-shape.BrokerOnly, 1)
		if shape.Nodes > 1 {
			require.GreaterOrEqual(t, shape.Nodes-shape.BrokerOnly, 3, "a cluster needs three voters")
		}
		seen[Shape{Nodes: shape.Nodes, BrokerOnly: min(shape.BrokerOnly, 1), MetaOnly: shape.MetaOnly}]++
		swarm, err := Choose(Config{Seed: seed, Swarm: true})
		require.NoError(t, err)
		named, err := Choose(Config{Seed: seed, Nodes: shape.Nodes, BrokerOnly: shape.BrokerOnly, MetaOnly: shape.MetaOnly})
		require.NoError(t, err)
		require.Equal(t, named.String(), swarm.String())
	}
	for _, s := range []Shape{{Nodes: 1}, {Nodes: 3}, {Nodes: 3, MetaOnly: true}, {Nodes: 4}, {Nodes: 4, BrokerOnly: 1}, {Nodes: 5}, {Nodes: 5, BrokerOnly: 1}} {
		require.Positive(t, seen[s], "no seed of 300 chose %s", s)
	}
}

func TestSettingsOverrideTheSeedsChoices(t *testing.T) {
	c, err := Choose(Config{Seed: 4, Set: []string{"faults=crash,kill", "producers=1", "partitions=2", "every=250ms", "faults=kill"}})
	require.NoError(t, err)
	require.Equal(t, []Fault{FaultKill}, c.Options.Faults, "a later setting of a key wins")
	require.Equal(t, 1, c.Options.Producers)
	require.Equal(t, 2, c.Options.Partitions)
	require.Equal(t, 250*time.Millisecond, c.Options.FaultEvery)
	require.Contains(t, c.String(), "producers=1 ")

	c, err = Choose(Config{Seed: 4, Nodes: 3, Set: []string{"groups=none", "faults=none", "moves=false", "acks1=0.5"}})
	require.NoError(t, err)
	require.Nil(t, c.Cluster.Groups)
	require.Empty(t, c.Cluster.Faults)
	require.Equal(t, 0.5, c.Cluster.LeaderAcks)

	for set, want := range map[string]string{
		"producers=99":      "setting producers=99: want a whole number from 0 to 16",
		"bogus=1":           `setting "bogus=1": want key=value with a key of partitions, producers`,
		"faults=meteor":     `fault "meteor" is not one this run can inject`,
		"every=0s":          "setting every=0s: want a duration from 1ms to 1h",
		"deleterecords=yes": "want true or false",
		"producers":         `setting "producers": want key=value`,
	} {
		_, err := Choose(Config{Seed: 4, Set: []string{set}})
		require.ErrorContains(t, err, want, set)
	}
	// A cluster run has keys of its own; a broker's are refused.
	_, err = Choose(Config{Seed: 4, Nodes: 3, Set: []string{"batch=3"}})
	require.ErrorContains(t, err, "a key of clients, partitions")
	// Run fails at once on a setting it cannot apply, naming it.
	s := Run(Config{Seed: 4, Set: []string{"producers=99"}})
	require.False(t, s.OK())
	require.Contains(t, strings.Join(s.Failures, "\n"), "producers=99")
}

// A page-cache seed injects no crash or power loss (its contract lets
// those lose acknowledged records); a setting cannot add them.
func TestSettingsKeepAPageCacheSeedsContract(t *testing.T) {
	for seed := uint64(1); seed < 200; seed++ {
		if !ChooseClusterOptions(seed, 3).PageCache {
			continue
		}
		_, err := Choose(Config{Seed: seed, Nodes: 3, Set: []string{"faults=kill,crash"}})
		require.ErrorContains(t, err, `fault "crash" is not one this run can inject`)
		return
	}
	t.Fatal("no page-cache seed below 200")
}

func TestFaultDrawsFormatAsRanges(t *testing.T) {
	require.Equal(t, "0-3,7,9-10", FormatDraws([]int{9, 0, 1, 2, 3, 7, 10}))
	ks, err := ParseDraws("0-3,7,9-10")
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 3, 7, 9, 10}, ks)
	ks, err = ParseDraws("")
	require.NoError(t, err)
	require.Empty(t, ks)
	for _, bad := range []string{"x", "3-1", "-1", "1,,2", "2x", "1-2-3"} {
		_, err := ParseDraws(bad)
		require.Error(t, err, bad)
	}
}

// Skipping every fault draw leaves a run with none injected; skipping
// none is the run itself.
func TestSkippedFaultDrawsInjectNothing(t *testing.T) {
	plain := Run(Config{Seed: 4, Duration: 5 * time.Second})
	require.Positive(t, plain.FaultDraws, plain.Line())
	require.Contains(t, plain.Line(), "injected=crash")
	again := Run(Config{Seed: 4, Duration: 5 * time.Second, SkipFaults: []int{}})
	require.Equal(t, plain.Trace, again.Trace)
	all := make([]int, 1000)
	for i := range all {
		all[i] = i
	}
	skipped := Run(Config{Seed: 4, Duration: 5 * time.Second, SkipFaults: all})
	require.True(t, skipped.OK(), skipped.Details())
	require.Contains(t, skipped.Line(), "injected=none")
	require.Positive(t, skipped.FaultDraws, "the draws are made, and skipped")
}

// A violation that needs no fault (the clients lie about every final
// read) minimizes to a run with no faults, one producer, a shorter safety
// phase; the smallest run replays to the same summary and finding.
func TestMinimizeShrinksWhileTheViolationHolds(t *testing.T) {
	cfg := Config{Seed: 4, Duration: 8 * time.Second, Sabotage: SabotageDropFromFinal}
	var tries []string
	m, err := Minimize(cfg, 40, func(change string, s Summary, kept bool) { tries = append(tries, change) })
	require.NoError(t, err)
	require.Equal(t, "data/linearizable", m.Finding.Check, "the first finding: porcupine's")
	require.Less(t, m.Smallest.Duration, cfg.Duration)
	require.Contains(t, m.Smallest.Set, "faults=none")
	require.Contains(t, m.Smallest.Set, "producers=1")
	require.Contains(t, m.Summary.Line(), "injected=none")
	require.Equal(t, len(tries)+1, m.Runs)
	require.LessOrEqual(t, m.Runs, 40)
	replay := Run(m.Smallest)
	require.Equal(t, m.Summary.Trace, replay.Trace)
	require.True(t, slices.Contains(replay.Findings(), m.Finding))

	_, err = Minimize(Config{Seed: 4, Duration: 2 * time.Second}, 10, nil)
	require.ErrorIs(t, err, ErrPasses)
}

func TestFindingsNameTheCheckAndWhatItConcerns(t *testing.T) {
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: quiet(), Sabotage: SabotageDropFromFinal})
	fs := s.Findings()
	require.NotEmpty(t, fs)
	require.Contains(t, fs, Finding{Check: "data/lost-write", Subject: fs[0].Subject})
	require.True(t, strings.HasPrefix(fs[0].Subject, "jepsen-"), fs[0].Subject)
	require.Equal(t, "failure/liveness", Finding{Check: "failure/" + failureKind("liveness: produces after healing did not complete")}.String())
	require.Equal(t, "durability", failureKind("violation: durability: lost"))
	require.Equal(t, "panic", failureKind("panic at 1s: boom"))
}

// TestSwarmSimSweep runs swarm seeds, each of its own shape, through their
// faults: SLUICE_SWARM_SEEDS of them (make sim sweeps 2,000 with the
// binary, in parallel processes).
func TestSwarmSimSweep(t *testing.T) {
	n := uint64(8)
	if s := os.Getenv("SLUICE_SWARM_SEEDS"); s != "" {
		var err error
		n, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "SLUICE_SWARM_SEEDS")
	}
	for seed := uint64(1); seed <= n; seed++ {
		cfg := Config{Seed: seed, Swarm: true, Duration: 10 * time.Second}
		s := Run(cfg)
		t.Log(s.Line())
		if !s.OK() {
			t.Errorf("%s\n%s\nreplay: sluice sim run --swarm --seed %d --duration %s", s.Line(), s.Details(), seed, cfg.Duration)
		}
	}
}
