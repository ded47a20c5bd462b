package simrun

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seedCount is how many seeds the sweep runs: SLUICE_SEEDS, or a few for
// `make test`.
func seedCount(t *testing.T, def int) int {
	s := os.Getenv("SLUICE_SEEDS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "SLUICE_SEEDS")
	require.Positive(t, n, "SLUICE_SEEDS")
	return n
}

// TestSweep runs seeds one after another (each swaps crypto/rand's reader,
// so never in parallel) and requires every one to pass: the history checks
// out and the broker recovers once the faults stop. It reports which
// probes fired across the sweep, and which never did.
func TestSweep(t *testing.T) {
	seeds := seedCount(t, 60)
	fired := map[string]int{} // probe -> seeds it fired in
	var failed []string
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		s := Run(Config{Seed: seed})
		for _, c := range s.Probes {
			fired[c.Name]++
		}
		if !s.OK() {
			details := s.Details()
			if len(details) > 2000 {
				details = details[:2000] + " ..."
			}
			failed = append(failed, fmt.Sprintf("%s\n%s\nreplay: sluice sim run --seed %d --duration %s", s.Line(), details, seed, s.Duration))
		}
	}
	var names []string
	for _, name := range KnownProbes() {
		if fired[name] == 0 {
			names = append(names, name)
		}
	}
	t.Logf("%d seeds; probes that never fired: %s", seeds, strings.Join(names, ", "))
	for _, f := range failed {
		t.Errorf("%s", f)
	}
}

// TestDeterminism runs seeds twice each and requires the same summary line
// and the same history, event for event.
func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{3, 4, 424242} {
		a := Run(Config{Seed: seed, Duration: 10 * time.Second})
		b := Run(Config{Seed: seed, Duration: 10 * time.Second})
		require.Equal(t, a.Line(), b.Line(), "seed %d", seed)
		require.True(t, reflect.DeepEqual(a.History, b.History), "seed %d: histories differ", seed)
		require.Positive(t, a.Ops, "seed %d made no operations", seed)
	}
}

// quiet is a run without faults, so that only sabotage can fail it.
func quiet() *Options {
	o := ChooseOptions(7)
	o.Faults = nil
	o.Partitions, o.Producers, o.Consumers = 2, 2, 1
	return &o
}

func TestQuietRunPasses(t *testing.T) {
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: quiet()})
	require.True(t, s.OK(), "%s\n%s", s.Line(), s.Details())
	require.Greater(t, s.Ops, 50, s.Line())
}

// The check must catch a broker that lies; the clients can be made to lie
// for it, so a sweep cannot pass for want of looking.
func TestSabotagedOffsetsAreCaught(t *testing.T) {
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: quiet(), Sabotage: SabotageShiftOffset})
	require.False(t, s.OK(), s.Line())
	require.Contains(t, s.Line(), "result=violation")
	require.Contains(t, s.Details(), "linearizable")
}

func TestSabotagedFinalReadIsCaught(t *testing.T) {
	s := Run(Config{Seed: 7, Duration: 5 * time.Second, Options: quiet(), Sabotage: SabotageDropFromFinal})
	require.False(t, s.OK(), s.Line())
	require.Contains(t, s.Details(), "lost-write")
}

func TestOptionsEverySeedChoosesAreValid(t *testing.T) {
	for seed := uint64(0); seed < 1000; seed++ {
		o := ChooseOptions(seed)
		require.NoError(t, o.validate(), "seed %d: %s", seed, o)
		require.Equal(t, o.String(), ChooseOptions(seed).String())
	}
}

func TestBadOptionsFailTheRunWithoutPanicking(t *testing.T) {
	o := ChooseOptions(1)
	o.Partitions = 0
	s := Run(Config{Seed: 1, Options: &o})
	require.False(t, s.OK())
	require.Contains(t, s.Details(), "partitions must be")
}
