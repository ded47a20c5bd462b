package simrun

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/stretchr/testify/require"
)

// The group draw comes after every other draw: a seed's other options
// are what they were without groups, and about half the seeds have a
// group workload.
func TestGroupOptionsDrawnLast(t *testing.T) {
	with := 0
	for seed := uint64(1); seed <= 200; seed++ {
		o := ChooseClusterOptions(seed, 3)
		if len(o.Groups) > 0 {
			with++
		}
		for _, g := range o.Groups {
			require.True(t, g.Members >= 1 && g.Members <= 6, "seed %d: %+v", seed, g)
			require.True(t, g.Session >= 6*time.Second && g.Session <= 10*time.Second, "seed %d: %+v", seed, g)
		}
		if len(o.Groups) == 2 {
			require.NotEqual(t, o.Groups[0].Protocol, o.Groups[1].Protocol)
		}
	}
	require.True(t, with > 60 && with < 140, "%d of 200 seeds with groups", with)
}

// groupSeeds returns the first n seeds from 1 that have a group workload
// of protocol (any, if "").
func groupSeeds(n int, protocol jepsen.GroupProtocol) []uint64 {
	var seeds []uint64
	for seed := uint64(1); len(seeds) < n; seed++ {
		for _, g := range ChooseClusterOptions(seed, 3).Groups {
			if protocol == "" || g.Protocol == protocol {
				seeds = append(seeds, seed)
				break
			}
		}
	}
	return seeds
}

// Without faults the groups of each protocol get every partition owned,
// commit, and read back what they committed.
func TestClusterGroupsWithoutFaults(t *testing.T) {
	for _, protocol := range []jepsen.GroupProtocol{jepsen.GroupClassic, jepsen.GroupConsumer} {
		for _, seed := range groupSeeds(2, protocol) {
			s := Run(Config{Seed: seed, Nodes: 3, Duration: 10 * time.Second, noFaults: true})
			require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
			counts := map[jepsen.GroupEventKind]int{}
			for _, e := range s.GroupHistory {
				if e.Protocol == protocol || e.Protocol == "" {
					counts[e.Kind]++
				}
			}
			require.Positive(t, counts[jepsen.GroupAssigned], "%s: %v", s.Line(), counts)
			require.Positive(t, counts[jepsen.GroupCommitOk], "%s: %v", s.Line(), counts)
			require.Positive(t, counts[jepsen.GroupFetchOk], "%s: %v", s.Line(), counts)
			require.Positive(t, counts[jepsen.GroupFinal], "%s: %v", s.Line(), counts)
		}
	}
}

// A coordinator that answers commits before the high watermark passes
// them is caught by some seed's failovers and power losses: an
// acknowledged commit is lost. The real coordinator passes the same
// seeds (the sweep runs them).
func TestClusterGroupsCatchAnEarlyAcknowledgement(t *testing.T) {
	caught := 0
	for _, seed := range groupSeeds(30, "") {
		cfg := Config{Seed: seed, Nodes: 3, Duration: 20 * time.Second, Sabotage: SabotageGroupEarlyAck}
		s := Run(cfg)
		var found []string
		for _, f := range s.Failures {
			if strings.HasPrefix(f, "violation: groups: ") {
				found = append(found, f)
			}
		}
		if len(found) == 0 {
			continue
		}
		caught++
		t.Logf("seed %d: %s", seed, found[0])
		cfg.Sabotage = SabotageNone
		real := Run(cfg)
		require.True(t, real.OK(), "the real coordinator fails the seed that caught the sabotage: %s\n%s", real.Line(), real.Details())
	}
	require.Positive(t, caught, "no seed caught a coordinator acknowledging before the high watermark")
}

// A coordinator whose offset fetches answer one past what was committed
// makes a member that takes a partition over skip a record: the first
// group seeds catch it as a skip, and no other checker needs to.
func TestClusterGroupsCatchASkippedRecord(t *testing.T) {
	caught := 0
	for _, seed := range groupSeeds(4, "") {
		s := Run(Config{Seed: seed, Nodes: 3, Duration: 15 * time.Second, Sabotage: SabotageGroupFetchAhead})
		for _, f := range s.Failures {
			if strings.Contains(f, "a record was skipped") {
				caught++
				t.Logf("seed %d: %s", seed, f)
				break
			}
		}
	}
	require.Equal(t, 4, caught, "seeds that caught a coordinator answering offsets ahead of the commits")
}

// Static members, resets and deletions happen in the sweep's seeds: a
// rejoin under the same instance id, its zombie's commit refused as
// fenced, and an operator's reset and deletion acknowledged.
func TestClusterGroupsStaticMembersAndResets(t *testing.T) {
	want := []string{"group.static_rejoin", "group.fenced_static_member", "group.reset", "group.deleted"}
	fired := map[string]bool{}
	for _, seed := range groupSeeds(40, "") {
		o := ChooseClusterOptions(seed, 3)
		if !slices.ContainsFunc(o.Groups, func(g GroupOptions) bool { return g.Static }) && fired["group.reset"] && fired["group.deleted"] {
			continue
		}
		s := Run(Config{Seed: seed, Nodes: 3})
		require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
		for _, c := range s.Probes {
			if slices.Contains(want, c.Name) && c.Count > 0 {
				fired[c.Name] = true
			}
		}
		if len(fired) == len(want) {
			return
		}
	}
	require.Len(t, fired, len(want), "probes fired: %v", fired)
}
