package simrun

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/jepsen"
)

func laneOf(t *testing.T, tl *jepsen.Timeline, group, name string) jepsen.Lane {
	t.Helper()
	i := slices.IndexFunc(tl.Lanes, func(l jepsen.Lane) bool { return l.Group == group && l.Name == name })
	require.GreaterOrEqual(t, i, 0, "no lane %s/%s", group, name)
	return tl.Lanes[i]
}

func classes(spans []jepsen.Span) map[string]int {
	out := map[string]int{}
	for _, s := range spans {
		out[s.Class]++
	}
	return out
}

// Drawing the timeline only watches: the run is the same, trace and all.
// Seed 4 crashes the broker and loses power: the broker's lane shows the
// outages and the faults, the clients' lanes every operation.
func TestTimelineDrawsTheRunWithoutChangingIt(t *testing.T) {
	plain := Run(Config{Seed: 4, Duration: 5 * time.Second})
	drawn := Run(Config{Seed: 4, Duration: 5 * time.Second, Timeline: true})
	require.Nil(t, plain.Timeline)
	require.Equal(t, plain.Trace, drawn.Trace)
	tl := drawn.Timeline
	require.NotNil(t, tl)
	require.Equal(t, drawn.Time, tl.End)
	require.Equal(t, "nodes", tl.Lanes[0].Group)
	require.Equal(t, brokerName, tl.Lanes[0].Name, "the broker first, as the world added it")
	broker := laneOf(t, tl, "nodes", brokerName)
	require.Positive(t, classes(broker.Spans)["down"], "crashes: %+v", broker.Spans)
	require.NotEmpty(t, broker.Points, "the faults")
	for _, s := range broker.Spans {
		require.LessOrEqual(t, s.From, s.To)
		require.LessOrEqual(t, s.To, tl.End)
	}
	spans := 0
	for _, l := range tl.Lanes {
		if l.Group == "clients" {
			spans += len(l.Spans)
		}
	}
	require.Equal(t, drawn.Ops, spans, "one span an operation")
}

// A cluster's timeline has the quorum's leaders and the data partitions'
// leaders, epochs and ISRs, and is the same run too.
func TestClusterTimelineDrawsLeadersAndPartitions(t *testing.T) {
	plain := Run(Config{Seed: 7, Nodes: 3, Duration: 5 * time.Second})
	drawn := Run(Config{Seed: 7, Nodes: 3, Duration: 5 * time.Second, Timeline: true})
	require.Equal(t, plain.Trace, drawn.Trace)
	tl := drawn.Timeline
	leaders := 0
	for _, name := range []string{"n1", "n2", "n3"} {
		leaders += classes(laneOf(t, tl, "quorum", name).Spans)["leader"]
	}
	require.Positive(t, leaders)
	for p := range drawn.Cluster.Partitions {
		lane := laneOf(t, tl, "partitions", clusterTopic+"-"+string(rune('0'+p)))
		require.NotEmpty(t, lane.Spans)
		require.Regexp(t, `^(n\d+|no leader) e\d+ isr\[`, lane.Spans[0].Label)
	}
}

// A violation is marked where its first event happened.
func TestTimelineMarksTheViolation(t *testing.T) {
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: quiet(), Sabotage: SabotageShiftOffset, Timeline: true})
	require.False(t, s.OK())
	require.NotEmpty(t, s.Timeline.Marks)
	placed := 0
	for _, m := range s.Timeline.Marks {
		if len(m.Lines) > 0 {
			placed++
			require.Equal(t, time.Duration(s.History[m.Lines[0]-1].Virtual), m.At)
			require.Less(t, m.At, s.Timeline.End)
		}
	}
	require.Positive(t, placed, "a violation with events: %+v", s.Timeline.Marks)
}
