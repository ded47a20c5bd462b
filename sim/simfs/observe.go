package simfs

import (
	"strings"
	"time"

	"github.com/sluicemq/sluice/sim/sched"
)

// Moments. A simulator finds bugs only at the moments it reaches, and a
// fault drawn at a random time almost never lands in the few milliseconds
// between a write and its sync, or between a rename and the sync of its
// directory. An observer (SetObserver) hears each operation that opens such
// a window as it happens, so that a fault can be armed for the named moment
// instead (FoundationDB's BUGGIFY, here kept in the simulator: the code
// under test is not changed).

// Event is an operation an observer hears of, after it took effect.
type Event struct {
	Op   Op
	Name string // the path; for a rename the new name
	// Created is set for a Create that made a new file (not one that
	// truncated an existing file).
	Created bool
	// Shrunk is set for a Truncate that made the file shorter.
	Shrunk bool
	// Latency is, for a Sync or SyncDir issued that will complete, how
	// long until it does: a fault within it lands while the sync is in
	// flight.
	Latency time.Duration
	// Done marks the completion of a Sync or SyncDir (after its done ran):
	// what it captured is durable now, while Pending others are still in
	// flight.
	Done    bool
	Pending int
}

// SetObserver installs f to hear of every Create, Rename, Truncate, Sync
// and SyncDir that takes effect, and of every Sync and SyncDir that
// completes, at once, on the loop of the call (nil removes it). f must not
// call back into the disk; it may schedule events.
func (d *Disk) SetObserver(f func(Event)) { d.observer = f }

func (d *Disk) observe(ev Event) {
	if d.observer != nil {
		d.observer(ev)
	}
}

// Sabotage makes the disk break its contract in one named way, so that a
// test can show which check of the simulator catches a node that relies on
// what the contract forbids. Runs leave it at SabotageNone.
type Sabotage int

const (
	SabotageNone Sabotage = iota
	// SabotageSyncEarly reports every file Sync done on the next turn,
	// while the data becomes durable only after the sync's latency, as a
	// node that acknowledged before its sync completed would: only a crash
	// inside that window shows it.
	SabotageSyncEarly
	// SabotageRollUnsynced makes a SyncDir stop short of linking a second
	// segment (a new *.log file into a directory that already durably
	// holds one) and of everything after it, while reporting success, as a
	// log that rolled without syncing its directory would: only runs whose
	// segments roll show it.
	SabotageRollUnsynced
)

// SetSabotage sets how the disk breaks its contract.
func (d *Disk) SetSabotage(s Sabotage) { d.sabotage = s }

// earlyDone returns the done a sync reports to under SabotageSyncEarly:
// the caller hears of it on the next turn, the sync itself stays in flight.
func (d *Disk) earlyDone(kind, name string, done func(error)) func(error) {
	inc := d.incarnation
	d.loop.Schedule(0, sched.Label{Kind: kind + ".early", Digest: sched.Digest([]byte(name))}, func() {
		if inc == d.incarnation {
			done(nil)
		}
	})
	return func(error) {}
}

// rollLimit returns, under SabotageRollUnsynced, the seq of the first
// change of dir that links a second segment, below which a SyncDir stops;
// else upto.
func (d *Disk) rollLimit(dir *inode, upto uint64) uint64 {
	if d.sabotage != SabotageRollUnsynced {
		return upto
	}
	hasSegment := false
	for name := range dir.durableEntries {
		hasSegment = hasSegment || strings.HasSuffix(name, ".log")
	}
	for _, op := range dir.dirOps {
		if op.seq > upto {
			break
		}
		if op.to == dir && strings.HasSuffix(op.toName, ".log") && dir.durableEntries[op.toName] == nil {
			if hasSegment {
				return op.seq - 1
			}
			hasSegment = true
		}
	}
	return upto
}
