package simrun

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/sim/simfs"
)

// Sabotage tests for the holes the simulator used to have: a broken
// broker, or a disk that breaks its contract as a broker relying on the
// broken part would, passed every seed because the runs never reached the
// moment that exposed it. Each test sweeps a few seeds with the seeds' own
// choices and requires the sweep to catch the sabotage; it logs, beside,
// what the same seeds caught with the simulator as it was before the hole
// was closed (the figure that shows the hole), which is not asserted: a
// later change to the workload may move it either way.

const holeSeeds, holeDuration = 24, 10 * time.Second

// sweepCaught runs the seeds with cfg (Seed set per seed, each seed's own
// options passed through adjust) and returns those that failed.
func sweepCaught(cfg Config, adjust func(*Options)) []uint64 {
	var caught []uint64
	for seed := uint64(1); seed <= holeSeeds; seed++ {
		c := cfg
		c.Seed, c.Duration = seed, holeDuration
		o := ChooseOptions(seed)
		if adjust != nil {
			adjust(&o)
		}
		c.Options = &o
		if !Run(c).OK() {
			caught = append(caught, seed)
		}
	}
	return caught
}

// asBefore takes away what closed the holes: the faults armed for moments
// and stretched syncs, segments of a few batches, small indexes, short
// checkpoint intervals.
func asBefore(o *Options) {
	o.Faults = slices.DeleteFunc(o.Faults, func(f Fault) bool { return slices.Contains(laterFaults, f) })
	if o.SegmentBytes < 256<<10 {
		o.SegmentBytes = 256 << 10
	}
	o.IndexIntervalBytes, o.IndexBytes, o.CheckpointInterval = 0, 0, 0
}

func requireCaught(t *testing.T, what string, caught, before []uint64) {
	t.Helper()
	t.Logf("%s: caught by seeds %v of 1-%d (with the simulator as it was: %v)", what, caught, holeSeeds, before)
	if len(caught) == 0 {
		t.Fatalf("%s: no seed of 1-%d caught it", what, holeSeeds)
	}
}

// A broker that acknowledges before its sync completes loses what it
// acknowledged only if a crash lands inside the sync: the moments put one
// there. (The oracle is off, so that it is the crash that shows it.)
func TestMomentsCatchAcknowledgementsBeforeTheSync(t *testing.T) {
	cfg := Config{DiskSabotage: simfs.SabotageSyncEarly, NoOracle: true}
	requireCaught(t, "syncs reported done early, no oracle", sweepCaught(cfg, nil), sweepCaught(cfg, asBefore))
}

// A log that rolls without syncing its directory loses the new segment's
// acknowledged records in a crash, if segments roll at all. (The oracle is
// off, so that it is the crash that shows it.)
func TestRollingSegmentsCatchAnUnsyncedRoll(t *testing.T) {
	cfg := Config{DiskSabotage: simfs.SabotageRollUnsynced, NoOracle: true}
	requireCaught(t, "a roll without a directory sync, no oracle", sweepCaught(cfg, nil), sweepCaught(cfg, asBefore))
}

// The durability oracle catches a high watermark ahead of the disk at the
// first answer, with no fault at all: here, every sync reported done early.
func TestOracleCatchesAHighWatermarkAheadOfTheDisk(t *testing.T) {
	noFaults := func(o *Options) { o.Faults = nil }
	cfg := Config{DiskSabotage: simfs.SabotageSyncEarly}
	before := sweepCaught(Config{DiskSabotage: simfs.SabotageSyncEarly, NoOracle: true}, func(o *Options) { noFaults(o); asBefore(o) })
	caught := sweepCaught(cfg, noFaults)
	requireCaught(t, "syncs reported done early, no faults, oracle on", caught, before)
	if len(caught) != holeSeeds {
		t.Fatalf("the oracle caught the sabotage in seeds %v only, want every seed", caught)
	}
	s := Run(Config{Seed: 1, Duration: holeDuration, DiskSabotage: simfs.SabotageSyncEarly})
	requireDetails(t, s, "durability:")
}

// The offsets check catches a wrong answer to ListOffsets by timestamp,
// which no check looked at before.
func TestOffsetsCheckCatchesAWrongLookup(t *testing.T) {
	caught := sweepCaught(Config{Sabotage: SabotageLookupNext}, nil)
	requireCaught(t, "a lookup by timestamp one offset late", caught, nil)
	s := Run(Config{Seed: caught[0], Duration: holeDuration, Sabotage: SabotageLookupNext})
	requireDetails(t, s, "offsets: ListOffsets of")
}

// The offsets check catches an acknowledged deletion that did not hold,
// as a broker that lost a DeleteRecords across a crash (its checkpoint
// torn) shows: the log start comes back below the low watermark. Before
// the workload deleted records, no run could show it. (The oracle is off,
// so that it is the history that shows it.)
func TestOffsetsCheckCatchesALostDeletion(t *testing.T) {
	cfg := Config{Sabotage: SabotageDeleteShort, NoOracle: true}
	deletes := func(on bool) func(*Options) { return func(o *Options) { o.DeleteRecords = on } }
	caught := sweepCaught(cfg, deletes(true))
	requireCaught(t, "a deletion acknowledged further than it went, no oracle", caught, sweepCaught(cfg, deletes(false)))
	o := ChooseOptions(caught[0])
	o.DeleteRecords = true
	cfg.Seed, cfg.Duration, cfg.Options = caught[0], holeDuration, &o
	requireDetails(t, Run(cfg), "after DeleteRecords was acknowledged with low watermark")
}

// The oracle catches the same lie at the answer: the broker's disk does
// not hold the log start it claims.
func TestOracleCatchesALowWatermarkAheadOfTheDisk(t *testing.T) {
	// The first seed of the sweep whose run deletes records and is caught.
	var last Summary
	for seed := uint64(1); seed <= 24; seed++ {
		o := ChooseOptions(seed)
		o.DeleteRecords = true
		last = Run(Config{Seed: seed, Duration: holeDuration, Sabotage: SabotageDeleteShort, Options: &o})
		if !last.OK() {
			break
		}
	}
	requireDetails(t, last, "durability: DeleteRecords of")
}

func requireDetails(t *testing.T, s Summary, fragment string) {
	t.Helper()
	if s.OK() {
		t.Fatalf("seed %d passed: %s", s.Seed, s.Line())
	}
	if d := s.Details(); !strings.Contains(d, fragment) {
		t.Fatalf("seed %d failed, but not with %q:\n%s", s.Seed, fragment, d)
	}
}
