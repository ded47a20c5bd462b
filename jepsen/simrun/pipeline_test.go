package simrun

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/stretchr/testify/require"
)

func probeCount(s Summary, name string) int {
	for _, c := range s.Probes {
		if c.Name == name {
			return c.Count
		}
	}
	return 0
}

// overlapping counts the produces whose invoke came while an earlier
// produce of the same client to the same partition was still open.
func overlapping(events []jepsen.Event) int {
	type key struct {
		client int
		tp     jepsen.TopicPartition
	}
	open := map[key]map[int]bool{}
	n := 0
	for _, e := range events {
		if e.Type != jepsen.TypeProduce {
			continue
		}
		k := key{e.Client, e.TopicPartition}
		if e.Kind == jepsen.KindInvoke {
			if len(open[k]) > 0 {
				n++
			}
			if open[k] == nil {
				open[k] = map[int]bool{}
			}
			open[k][e.Op] = true
			continue
		}
		delete(open[k], e.Op)
	}
	return n
}

func TestPipelinedProducerKeepsSeveralInFlight(t *testing.T) {
	o := quiet()
	o.InFlight, o.Think, o.BatchMax = maxInFlight, 2*time.Millisecond, 3
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: o})
	require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
	require.Contains(t, s.Line(), "inflight=5")
	require.Positive(t, probeCount(s, "produce.pipelined"), s.Line())
	require.Positive(t, overlapping(s.History), "no two produces of one producer to one partition overlapped")
}

// Connection resets and a broker that restarts make the pipelined
// producer rewind and resend its batches; the run must still check out.
func TestPipelinedProducerResendsInOrderThroughFaults(t *testing.T) {
	o := quiet()
	o.InFlight, o.Think = 3, 2*time.Millisecond
	o.Faults, o.FaultEvery = []Fault{FaultReset, FaultRestart, FaultKill, FaultStall}, 300*time.Millisecond
	s := Run(Config{Seed: 11, Duration: 10 * time.Second, Options: o})
	require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
	require.Positive(t, probeCount(s, "produce.pipeline_resend"), s.Line())
	require.Positive(t, probeCount(s, "produce.ok_after_retry"), s.Line())
}

// A broker that appended a producer's pipelined batches out of order would
// be caught by the producer-order check alone; the producer can be made to
// fake one.
func TestSabotagedPipelineOrderIsCaught(t *testing.T) {
	o := quiet()
	o.InFlight, o.Think = maxInFlight, 2*time.Millisecond
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: o, Sabotage: SabotageReorderPipeline})
	require.False(t, s.OK(), s.Line())
	require.Contains(t, s.Details(), "producer-order")
	require.Equal(t, jepsen.CheckProducerOrder, s.Check.Violations[0].Check, s.Details())
}

func TestPipelinedRunIsDeterministic(t *testing.T) {
	o := ChooseOptions(4) // faults: crash, restart, power loss, pause, reset, partition, disk, kill
	o.InFlight = 2
	a := Run(Config{Seed: 4, Duration: 10 * time.Second, Options: &o})
	b := Run(Config{Seed: 4, Duration: 10 * time.Second, Options: &o})
	require.Equal(t, a.Line(), b.Line())
	require.True(t, reflect.DeepEqual(a.History, b.History), "histories differ")
	require.Positive(t, probeCount(a, "produce.pipelined"), a.Line())
}

// The default sweep mixes both producers, and Fetch v18 with the others.
func TestSeedsChoosePipeliningAndFetch18(t *testing.T) {
	byInFlight := map[int]int{}
	fetch18 := 0
	for seed := uint64(1); seed <= 100; seed++ {
		o := ChooseOptions(seed)
		byInFlight[o.inFlight()]++
		if o.FetchVersion == 18 {
			fetch18++
		}
	}
	require.Positive(t, byInFlight[1], "%v", byInFlight)
	require.Positive(t, byInFlight[2]+byInFlight[maxInFlight], "%v", byInFlight)
	require.Positive(t, fetch18)
}

func TestInFlightOutOfRangeIsRefused(t *testing.T) {
	o := ChooseOptions(1)
	o.InFlight = maxInFlight + 1
	s := Run(Config{Seed: 1, Options: &o})
	require.False(t, s.OK())
	require.Contains(t, s.Details(), "in-flight produce requests")
}

func TestNextSequenceWraps(t *testing.T) {
	require.Equal(t, int32(5), nextSequence(2, 3))
	require.Equal(t, int32(0), nextSequence(2147483647, 1))
	require.Equal(t, int32(1), nextSequence(2147483646, 3))
}
