package simfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"

	"github.com/sluicemq/sluice/env"
)

// Op is a kind of operation, for fault injection.
type Op int

// The operations faults apply to. OpWrite covers Write and WriteAt, OpMkdir
// MkdirAll, OpLock taking a lock (releasing one never fails).
const (
	OpRead Op = iota
	OpWrite
	OpTruncate
	OpSync
	OpCreate
	OpOpen
	OpRename
	OpRemove
	OpMkdir
	OpSyncDir
	OpList
	OpStat
	OpLock
	opCount
)

var opNames = [opCount]string{"read", "write", "truncate", "sync", "create", "open", "rename", "remove", "mkdir", "syncdir", "list", "stat", "lock"}

func (op Op) String() string {
	if op < 0 || op >= opCount {
		return fmt.Sprintf("Op(%d)", int(op))
	}
	return opNames[op]
}

// Faults are seeded per-operation failure rates, each a probability in [0, 1].
type Faults struct {
	// EIORate fails an operation with env.ErrIO. It applies to every Op but
	// List and Stat, which a real kernel answers from its caches.
	EIORate float64
	// NoSpaceRate fails with env.ErrNoSpace an operation that may allocate:
	// a write (which then writes a seeded prefix, see File.Write), a
	// truncate that grows the file, Create, MkdirAll, Lock (which may
	// create its file) and Sync (delayed allocation happens at writeback).
	NoSpaceRate float64
	// BitFlipRate flips one bit of the bytes a ReadAt returns, on the read
	// path: the stored bytes stay intact, so reading again may return them.
	BitFlipRate float64
}

// SetFaults sets the seeded fault rates; the zero Faults turns them off.
func (d *Disk) SetFaults(f Faults) error {
	for _, rate := range []float64{f.EIORate, f.NoSpaceRate, f.BitFlipRate} {
		if !(rate >= 0 && rate <= 1) { // false for NaN too
			return fmt.Errorf("simfs: fault rates must lie in [0, 1], got %+v", f)
		}
	}
	d.rates = f
	return nil
}

// FailNext makes the next operation of kind op fail with err (usually
// env.ErrIO or env.ErrNoSpace), ahead of the seeded rates. Calls queue up:
// each one fails one more operation. The failure strikes once the arguments
// are found well-formed (a valid path, an open file), before the operation
// looks anything up: an Open of a missing file fails with err, not
// fs.ErrNotExist. Sync and SyncDir report it through done.
func (d *Disk) FailNext(op Op, err error) error {
	if op < 0 || op >= opCount {
		return fmt.Errorf("simfs: FailNext of unknown %v", op)
	}
	if err == nil {
		return fmt.Errorf("simfs: FailNext(%v) needs an error", op)
	}
	d.failNext[op] = append(d.failNext[op], err)
	return nil
}

// SetFull fills the disk or frees space again: while full, whatever would
// allocate fails with ENOSPC and the rest, syncs included, succeeds (see the
// package documentation for which operations allocate). It draws nothing
// from the disk's random streams, and a crash leaves it as it is.
func (d *Disk) SetFull(full bool) {
	d.full = full
}

// Full reports whether the disk is full (see SetFull).
func (d *Disk) Full() bool { return d.full }

// held is the space a file of size bytes holds: size rounded up to
// BlockSize. While the disk is full the file cannot grow past it.
func held(size int64) int64 {
	return (size + BlockSize - 1) / BlockSize * BlockSize
}

// noSpace counts an allocation refused by a full disk and returns its error.
func (d *Disk) noSpace(verb, name string) error {
	d.stats.FullRefused++
	return pathError(verb, name, env.ErrNoSpace)
}

// inject decides whether an operation fails: an on-demand failure first,
// then the seeded rates. mayAllocate says whether ENOSPC can strike it.
func (d *Disk) inject(op Op, mayAllocate bool) error {
	if q := d.failNext[op]; len(q) > 0 {
		d.failNext[op] = q[1:]
		d.count(q[0])
		return q[0]
	}
	if d.rates.EIORate > 0 && op != OpList && op != OpStat && d.faults.Chance(d.rates.EIORate) {
		d.count(env.ErrIO)
		return env.ErrIO
	}
	if d.rates.NoSpaceRate > 0 && mayAllocate && d.faults.Chance(d.rates.NoSpaceRate) {
		d.count(env.ErrNoSpace)
		return env.ErrNoSpace
	}
	return nil
}

func (d *Disk) count(err error) {
	switch {
	case errors.Is(err, env.ErrIO):
		d.stats.InjectedIO++
	case errors.Is(err, env.ErrNoSpace):
		d.stats.InjectedNoSpace++
	default:
		d.stats.InjectedOther++
	}
}

// FlipNextRead flips one seeded bit of what the next ReadAt that returns
// bytes returns, on the read path (the stored bytes stay intact).
func (d *Disk) FlipNextRead() {
	d.flipNextRead++
}

func (d *Disk) maybeFlipRead(p []byte) {
	switch {
	case d.flipNextRead > 0:
		d.flipNextRead--
	case d.rates.BitFlipRate > 0 && d.faults.Chance(d.rates.BitFlipRate):
	default:
		return
	}
	p[d.faults.Intn(len(p))] ^= 1 << d.faults.Intn(8)
	d.stats.ReadFlips++
}

// FlipBit corrupts the medium: it flips one seeded bit of the durable byte at
// off of the named file (as the current entries name it). Reads return the
// corrupted byte unless an unsynced change has since overwritten or cut it in
// the page cache; the corruption survives crashes until a synced write
// replaces the byte. off must lie within the file's durable contents.
func (d *Disk) FlipBit(name string, off int64) error {
	if !validFile(name) {
		return pathError("flipbit", name, fs.ErrInvalid)
	}
	_, _, ino, err := d.lookup("flipbit", name)
	switch {
	case err != nil:
		return err
	case ino == nil:
		return pathError("flipbit", name, fs.ErrNotExist)
	case ino.isDir:
		return pathError("flipbit", name, ErrIsDir)
	case off < 0 || off >= ino.durable.Len():
		return pathError("flipbit", name, fmt.Errorf("offset %d outside the durable contents [0, %d)", off, ino.durable.Len()))
	}
	bit := byte(1) << d.faults.Intn(8)
	ino.durable.flip(off, bit)
	ino.durableGen++
	ino.durableRewrites++
	d.durableGen++
	if !overwritten(ino.ops, off) {
		// No change since the durable point touched off, so the page cache
		// still shows the medium's byte there.
		ino.data.flip(off, bit)
	}
	d.stats.MediumFlips++
	return nil
}

// overwritten reports whether a change in ops replaced the byte at off: a
// write covering it, or a truncate cutting it off.
func overwritten(ops []fileOp, off int64) bool {
	for _, op := range ops {
		if op.trunc && op.size <= off || !op.trunc && op.off <= off && off < op.off+int64(len(op.p)) {
			return true
		}
	}
	return false
}

// ReadDurable returns the durable contents of the named file, resolving the
// name through durable entries only: what a crash now would keep at the
// least. A file whose entry is not yet durable does not exist here.
func (d *Disk) ReadDurable(name string) ([]byte, error) {
	if !validFile(name) {
		return nil, pathError("readdurable", name, fs.ErrInvalid)
	}
	ino, err := d.lookupDurable("readdurable", name)
	if err != nil {
		return nil, err
	}
	if ino.isDir {
		return nil, pathError("readdurable", name, ErrIsDir)
	}
	return ino.durable.bytes(), nil
}

// DurableInfo describes a file as a crash now would keep it at the least.
type DurableInfo struct {
	// ID names the file's inode: a file replaced by a rename, or removed
	// and created again, has another.
	ID uint64
	// Gen changes whenever the durable contents change: a sync that made
	// changes durable, a crash, a flip on the medium.
	Gen uint64
	// Rewrites changes whenever bytes already durable change (a
	// truncation that shrank the file, a write below its durable end, a
	// flip): what was parsed of the durable contents may no longer hold.
	Rewrites uint64
	Size     int64
}

// DurableGeneration counts the changes to what is durable on the disk, file
// contents and directory entries alike: while it stays the same, so does
// everything ReadDurable, ReadDurableAt, ListDurable and DurableStat report.
// Like them, it draws nothing and injects no fault: it is for checkers that
// look at the disk from outside the node.
func (d *Disk) DurableGeneration() uint64 { return d.durableGen }

// DurableStat describes the named file, resolving the name through durable
// entries only.
func (d *Disk) DurableStat(name string) (DurableInfo, error) {
	if !validFile(name) {
		return DurableInfo{}, pathError("durablestat", name, fs.ErrInvalid)
	}
	ino, err := d.lookupDurable("durablestat", name)
	if err != nil {
		return DurableInfo{}, err
	}
	if ino.isDir {
		return DurableInfo{}, pathError("durablestat", name, ErrIsDir)
	}
	return DurableInfo{ID: ino.id, Gen: ino.durableGen, Rewrites: ino.durableRewrites, Size: ino.durable.Len()}, nil
}

// ReadDurableAt reads the durable contents of the named file at off, as
// io.ReaderAt does (a short read returns io.EOF), resolving the name
// through durable entries only.
func (d *Disk) ReadDurableAt(name string, p []byte, off int64) (int, error) {
	if !validFile(name) {
		return 0, pathError("readdurable", name, fs.ErrInvalid)
	}
	ino, err := d.lookupDurable("readdurable", name)
	if err != nil {
		return 0, err
	}
	switch {
	case ino.isDir:
		return 0, pathError("readdurable", name, ErrIsDir)
	case off < 0:
		return 0, pathError("readdurable", name, ErrNegativeOffset)
	case off >= ino.durable.Len():
		return 0, io.EOF
	}
	n := ino.durable.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// ListDurable returns the durable entries of dir, sorted.
func (d *Disk) ListDurable(dir string) ([]string, error) {
	if !validDir(dir) {
		return nil, pathError("listdurable", dir, fs.ErrInvalid)
	}
	ino := d.root
	if dir != "." {
		var err error
		if ino, err = d.lookupDurable("listdurable", dir); err != nil {
			return nil, err
		}
	}
	if !ino.isDir {
		return nil, pathError("listdurable", dir, ErrNotDir)
	}
	return slices.Sorted(maps.Keys(ino.durableEntries)), nil
}

func (d *Disk) lookupDurable(verb, name string) (*inode, error) {
	_, _, ino, err := walk(d.root, verb, name, func(dir *inode) map[string]*inode { return dir.durableEntries })
	if err == nil && ino == nil {
		err = pathError(verb, name, fs.ErrNotExist)
	}
	return ino, err
}

// Stats counts what the disk has done and what its faults and crashes did.
type Stats struct {
	Crashes        int
	ProcessCrashes int // CrashProcess calls: the page cache was kept
	SyncsDone      int // Syncs and SyncDirs that made their changes durable
	SyncsFailed    int // ... that reported an injected failure instead
	SyncsLost      int // ... still in flight at a crash or a process crash, never completed

	InjectedIO      int
	InjectedNoSpace int
	InjectedOther   int // FailNext with another error
	ShortWrites     int // writes that failed with ENOSPC (some wrote a prefix)
	FullRefused     int // allocations refused because the disk was full (SetFull)
	ReadFlips       int
	MediumFlips     int
	LocksRefused    int // Locks refused because the lock was held

	// Unsynced changes resolved by crashes.
	ChangesKept int // file writes and truncates kept whole
	ChangesLost int
	WritesTorn  int // kept in part
	EntriesKept int // directory changes (links, unlinks, renames)
	EntriesLost int
	// LostAfterKill counts the changes above, lost or torn, that a process
	// ended by CrashProcess had made: a later process could read them from
	// the page cache before the crash took them.
	LostAfterKill int
}

// Stats returns the disk's counters.
func (d *Disk) Stats() Stats { return d.stats }

// Pending reports how many Syncs and SyncDirs are in flight.
func (d *Disk) Pending() int { return d.pendingSyncs }
