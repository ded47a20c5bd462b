package simrun

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
)

// Fault is a kind of fault the nemesis injects.
type Fault string

// The faults a seed may mix. Each is undone (a restart, a resume, a heal)
// after a seeded while, or at the latest when the liveness phase begins.
const (
	// FaultCrash crashes the broker's machine: memory and unsynced disk
	// state are lost; it restarts from disk.
	FaultCrash Fault = "crash"
	// FaultKill kills the broker's process (kill -9) while its machine
	// stays up: memory is lost but the page cache is kept, so it restarts
	// over unsynced data that a later crash or power loss may still take.
	FaultKill Fault = "kill"
	// FaultRestart shuts the broker down cleanly (SIGTERM) and starts it
	// again.
	FaultRestart Fault = "restart"
	// FaultPowerLoss crashes every node at once, clients included.
	FaultPowerLoss Fault = "powerloss"
	// FaultPause freezes a node (the broker or a client), as SIGSTOP does.
	FaultPause Fault = "pause"
	// FaultReset breaks every connection between a client and the broker.
	FaultReset Fault = "reset"
	// FaultPartition cuts the links between a client and the broker, both
	// ways or one way.
	FaultPartition Fault = "partition"
	// FaultStall delays a link's traffic without breaking it.
	FaultStall Fault = "stall"
	// FaultDisk turns on seeded EIO and ENOSPC rates on the broker's disk
	// for a while, or fails its next operation of one kind.
	FaultDisk Fault = "disk"
	// FaultBitFlip flips a bit of what the broker's next disk read returns.
	FaultBitFlip Fault = "bitflip"
	// FaultClock steps a node's wall clock forwards or backwards.
	FaultClock Fault = "clock"
	// FaultMoment arms a crash, a kill or a power loss for the next time
	// the broker's disk reaches each named moment (see moments.go): a sync
	// in flight, a checkpoint renamed but its directory not synced, a
	// segment rolled, a segment truncated.
	FaultMoment Fault = "moment"
	// FaultSlowSync stretches the broker's sync latencies to as much as
	// seconds for a while, so that crashes fall inside them.
	FaultSlowSync Fault = "slowsync"
)

// allFaults lists every fault, in the order a seed considers them. New
// faults go last, so that the draws for the older ones stay as they were.
var allFaults = []Fault{FaultCrash, FaultRestart, FaultPowerLoss, FaultPause, FaultReset, FaultPartition, FaultStall, FaultDisk, FaultBitFlip, FaultClock, FaultKill}

// laterFaults are faults added after the draws of the options that follow
// allFaults; a seed considers them after all its other choices, so that
// adding them left those as they were.
var laterFaults = []Fault{FaultMoment, FaultSlowSync}

// Options are what a seed chose for a run (swarm testing: each seed picks
// its own shape and its own mix of faults, so rare combinations get runs of
// their own).
type Options struct {
	// Partitions of the one topic.
	Partitions int
	// Producers and Consumers are the client nodes, one client each.
	Producers, Consumers int
	// BatchMax is the most values a produce carries (at least 1).
	BatchMax int
	// Think is the mean pause between a client's operations.
	Think time.Duration
	// ProduceVersion and FetchVersion are the request versions the clients
	// speak (FetchVersion 13 and above names topics by id).
	ProduceVersion, FetchVersion int16
	// SegmentBytes is the broker's log.segment.bytes: small segments make
	// rolls, and crashes across them, frequent. Most seeds choose one of a
	// few batches.
	SegmentBytes int64
	// IndexIntervalBytes is log.index.interval.bytes (0: Kafka's 4096):
	// 1 indexes every batch, larger values leave sparse indexes that
	// lookups must scan past.
	IndexIntervalBytes int32
	// IndexBytes is log.index.size.max.bytes (0: Kafka's 10 MiB): small
	// indexes fill, which rolls the segment.
	IndexBytes int32
	// CheckpointInterval is log.flush.offset.checkpoint.interval.ms (0:
	// Kafka's 60 s, which no run outlasts): seconds make recovery start
	// from checkpoints written across rolls.
	CheckpointInterval time.Duration
	// Faults is the mix; FaultEvery the mean time between two faults.
	Faults     []Fault
	FaultEvery time.Duration
	// CopyFetch takes SendFile away from the network's connections, so that
	// Fetch reads and checks the batches and writes them instead of sending
	// file ranges (its production path, which most seeds take).
	CopyFetch bool
	// SendSmallChunks has the broker send every chunk of batches from its
	// file (node.Config.FetchCopyMax 0), as it did before small chunks
	// were copied in: the sendfile path's faults then reach the small
	// batches of a simulated run too.
	SendSmallChunks bool
	// InFlight is how many Produce requests a producer keeps in flight on
	// its connection. 1 (or 0) sends one at a time and waits for its
	// answer; 2 to 5 pipelines idempotent batches with consecutive
	// sequence numbers, as Kafka clients do (max.in.flight.requests up to
	// 5 with idempotence), see pipeline.go.
	InFlight int
	// DeleteRecords lets the consumers, now and then (a few times a run),
	// delete a partition's records below an offset they have read, so that
	// the log start moves and its checks mean something.
	DeleteRecords bool
}

// ChooseOptions returns the options seed decides. They draw from the
// world's "options" stream only, so a change elsewhere leaves them alone.
func ChooseOptions(seed uint64) Options {
	r := rng.New(seed).Fork("options")
	o := Options{
		Partitions:     1 + r.Intn(4),
		Producers:      1 + r.Intn(3),
		Consumers:      1 + r.Intn(2),
		BatchMax:       pick(r, []int{1, 1, 3, 8}),
		Think:          pick(r, []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond}),
		ProduceVersion: pick(r, []int16{3, 7, 9, 11}),
		FetchVersion:   pick(r, []int16{4, 11, 12, 13, 17}),
		SegmentBytes:   pick(r, []int64{256 << 10, 1 << 20}),
		FaultEvery:     pick(r, []time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}),
	}
	if !r.Chance(0.1) { // one seed in ten runs without faults
		for _, f := range allFaults {
			if r.Chance(0.5) {
				o.Faults = append(o.Faults, f)
			}
		}
	}
	// Later choices draw after every earlier one, so that adding them left
	// the older choices of each seed as they were.
	o.CopyFetch = r.Chance(0.25)
	o.InFlight = pick(r, []int{1, 1, 2, 5})
	if o.FetchVersion == 17 && r.Chance(0.5) {
		o.FetchVersion = 18
	}
	if r.Chance(0.7) {
		o.SegmentBytes = pick(r, []int64{1024, 2048, 4096, 16 << 10})
	}
	o.IndexIntervalBytes = pick(r, []int32{0, 1, 256, 1024})
	o.IndexBytes = pick(r, []int32{0, 0, 192, 1200})
	o.CheckpointInterval = pick(r, []time.Duration{0, 500 * time.Millisecond, 2 * time.Second, 5 * time.Second})
	if len(o.Faults) > 0 {
		for _, f := range laterFaults {
			if r.Chance(0.5) {
				o.Faults = append(o.Faults, f)
			}
		}
	}
	o.DeleteRecords = r.Chance(0.5)
	o.SendSmallChunks = r.Chance(0.5)
	// Checkpoints every few batches: the recovery point then often stands
	// exactly where a segment rolls, which is where a recovery that trusts
	// a segment's index files too early goes wrong (seconds-apart
	// checkpoints almost never land there).
	if r.Chance(0.2) {
		o.CheckpointInterval = 20 * time.Millisecond
	}
	return o
}

func pick[T any](r *rng.Rand, xs []T) T { return xs[r.Intn(len(xs))] }

// String renders the options as space-separated key=value pairs.
func (o Options) String() string {
	faults := "none"
	if len(o.Faults) > 0 {
		names := make([]string, len(o.Faults))
		for i, f := range o.Faults {
			names[i] = string(f)
		}
		faults = strings.Join(names, ",")
	}
	fetchPath := "sendfile"
	switch {
	case o.CopyFetch:
		fetchPath = "copy"
	case o.SendSmallChunks:
		fetchPath = "sendfile-all"
	}
	return fmt.Sprintf("partitions=%d producers=%d consumers=%d batch=%d think=%s produce=v%d fetch=v%d fetchpath=%s inflight=%d segment=%d index=%d/%d checkpoint=%s deleterecords=%v faults=%s every=%s",
		o.Partitions, o.Producers, o.Consumers, o.BatchMax, o.Think, o.ProduceVersion, o.FetchVersion, fetchPath, o.inFlight(),
		o.SegmentBytes, o.IndexIntervalBytes, o.IndexBytes, o.CheckpointInterval, o.DeleteRecords, faults, o.FaultEvery)
}

// inFlight is InFlight with 0 read as 1.
func (o Options) inFlight() int {
	return max(o.InFlight, 1)
}

// validate refuses options a run cannot honour.
func (o Options) validate() error {
	switch {
	case o.Partitions < 1 || o.Partitions > 64:
		return fmt.Errorf("simrun: partitions must be in [1, 64], got %d", o.Partitions)
	case o.Producers < 0 || o.Producers > 16 || o.Consumers < 0 || o.Consumers > 16:
		return fmt.Errorf("simrun: producers and consumers must be in [0, 16], got %d and %d", o.Producers, o.Consumers)
	case o.BatchMax < 1:
		return fmt.Errorf("simrun: batch max must be at least 1, got %d", o.BatchMax)
	case o.Think < 0 || o.FaultEvery <= 0 && len(o.Faults) > 0:
		return fmt.Errorf("simrun: think time %s and fault interval %s must not be negative or zero", o.Think, o.FaultEvery)
	case o.ProduceVersion < 3 || o.ProduceVersion > 12 || o.FetchVersion < 4 || o.FetchVersion > 18:
		return fmt.Errorf("simrun: produce v%d and fetch v%d: the clients speak produce v3-12 and fetch v4-18", o.ProduceVersion, o.FetchVersion)
	case o.InFlight < 0 || o.InFlight > maxInFlight:
		return fmt.Errorf("simrun: in-flight produce requests must be in [1, %d], got %d", maxInFlight, o.InFlight)
	case o.SegmentBytes < 1024:
		return fmt.Errorf("simrun: segment bytes must be at least 1024, got %d", o.SegmentBytes)
	case o.IndexIntervalBytes < 0 || o.IndexBytes != 0 && o.IndexBytes < 96 || o.CheckpointInterval < 0:
		return fmt.Errorf("simrun: index interval %d, index bytes %d (0 or at least 96) and checkpoint interval %s must not be negative",
			o.IndexIntervalBytes, o.IndexBytes, o.CheckpointInterval)
	}
	return nil
}
