// Package simfs is the simulated disk of one node: an in-memory env.FS that
// keeps what is durable apart from what is only in the page cache, so that a
// crash takes away what the POSIX contract of env.FS allows to be lost, and
// never more: nothing that was synced, nothing a real disk could not show.
//
// # State
//
// Files and directories are inodes. A file has durable contents (what the
// medium holds) and a list of changes since then (writes and truncates, in
// the order issued); what reads see is the durable contents with every change
// applied. A directory has durable entries and a list of entry changes since
// then (links made by Create and MkdirAll, unlinks made by Remove, and
// renames); a rename between two directories is one change listed in both.
//
//	file:       durable bytes ── w1 ── t2 ── w3 ── w4      (reads see all)
//	                            └──── Sync issued here ────┘ captures w1..w4
//	directory:  durable entries ── +a ── a→b ── -c          (List sees all)
//
// # Sync and SyncDir
//
// File.Sync captures the changes issued so far; after a seeded latency its
// completion runs on the node's loop, applies the captured changes to the
// durable contents and calls done. Syncs of one file complete in the order
// issued, whatever their latencies: a completion that comes early waits for
// the ones before it. SyncDir does the same for a directory's entries. When a
// SyncDir makes a rename between two directories durable, it also makes
// durable the other directory's changes issued before that rename (a journal
// commits them together), so that each directory's lost changes are always a
// suffix of its list. A file's data and its directory entry are independent:
// a file synced but never linked durably vanishes in a crash.
//
// A Sync that fails (an injected EIO or ENOSPC) makes nothing durable; the
// writes stay in the page cache and a later successful Sync captures them.
// Linux can instead drop the dirty pages after a failed fsync (so a retried
// fsync "succeeds" over lost data); that is not modeled: callers must treat a
// failed Sync as leaving the file's durability unknown either way.
//
// # Crash
//
// Crash is a power loss. Open files become invalid (env.ErrClosed), pending
// completions never run (an incarnation number guards them, whatever the
// loop does with their events), and the unsynced state is resolved by seeded
// choices, as follows:
//
//   - Each directory keeps a prefix of its unsynced entry changes, the rest is
//     lost, as a metadata journal commits them in order. Directories choose
//     apart, except that a rename between two directories is kept in both or
//     in neither: afterwards the file is under its old name or its new one,
//     never both, never neither (prefixes are made consistent by shortening
//     them, never by lengthening). So a crash may keep a create in one
//     directory and lose an earlier one in another: POSIX allows it, though
//     ext4 and xfs, with one journal for all directories (and an fsync of a
//     file that commits it), would not. Code must not rely on either.
//   - What the kept entries no longer reach (a file or a directory whose
//     link was lost, and everything beneath it) is gone.
//   - Each surviving file keeps its durable contents plus a prefix of its
//     unsynced changes, in order. The last kept change, when it is a write,
//     may be torn: either only a prefix of its bytes reached the medium, or
//     only some of its 512-byte sectors (aligned to file offsets) did, where
//     sectors past the file's previous end are kept only as a prefix, so a
//     torn write never leaves a hole of zeros that nothing wrote. A truncate
//     is never torn. Nothing appears that was not written (or zero-filled by
//     a truncate or a write past the end).
//
// After Crash the disk's current state is what survived, all of it durable.
// Real page-cache writeback can persist non-adjacent dirty pages of a file
// out of order; this disk keeps a prefix of the changes only (plus the torn
// last one), which recovery code that truncates at the first bad record
// handles the same way.
//
// # CrashProcess
//
// CrashProcess is the death of the process while the machine stays up, as
// kill -9 is: open files become invalid (env.ErrClosed) and the completions
// of its Syncs and SyncDirs never run, but nothing on the disk changes. The
// page cache survives: the next process reads every change, synced or not,
// and the unsynced ones stay exactly as volatile as before, so a later Crash
// may still take them. A Sync in flight at the kill is abandoned without
// making anything durable; the kernel would finish it at some point, and a
// power loss before that point is the case modeled (background writeback of
// dirty pages is not modeled either). A process that recovers from the disk
// must therefore sync what it read before it relies on it being durable.
//
// # Locks
//
// Lock is held by the process that took it, numbered by the incarnation:
// a Crash or a CrashProcess ends that process and with it every lock it
// held, as the kernel drops a dead process's flocks, while a second Lock
// of a held file fails whoever asks (the simulator runs one process per
// disk at a time, so a second broker on the same disk is a second Lock of
// that process). Locks change nothing on the disk and draw nothing from
// its random streams beyond their fault injection.
//
// # Faults
//
// SetFaults sets seeded per-operation rates and FailNext injects a failure on
// demand; see Faults and Op for which operations each fault applies to. A
// failed operation changes nothing, except a write failing with ENOSPC, which
// writes a seeded prefix (possibly empty) of its bytes and reports how many,
// as write(2) does when the device fills up. A bit flip is either on the read
// path (Faults.BitFlipRate, FlipNextRead: the returned bytes are corrupted,
// the stored ones are not) or on the medium (FlipBit: the durable byte is
// corrupted and stays so across reads and crashes until overwritten).
//
// # A full disk
//
// SetFull(true) fills the disk, deterministically, until SetFull(false):
// whatever would allocate fails with an error matching env.ErrNoSpace,
// while what uses only space already held succeeds, syncs included (unlike
// Faults.NoSpaceRate, which fails syncs too). Space is held in blocks of
// BlockSize: a file holds its current length rounded up to BlockSize. So
// while full,
//
//   - Create of a new name and MkdirAll that must make a directory fail;
//     Create of an existing file (which truncates it) succeeds, and so does
//     MkdirAll of existing directories;
//   - a write that would end past the file's held blocks writes the bytes
//     that fit in them (possibly none) and fails, as write(2) does; a write
//     ending within them succeeds, so a small append may still land in a
//     file's last block;
//   - a truncate that would grow the file past its held blocks fails and
//     changes nothing; any other truncate succeeds;
//   - Sync, SyncDir, Rename, Remove and reads succeed (a rename or a remove
//     needing a new directory block is not modeled).
//
// Fullness is not a fault: it changes no random stream, survives crashes,
// and composes with SetFaults and FailNext, which strike first.
//
// Every random choice draws from the disk's own streams (latency, faults,
// crash), forked from the stream given to New by label, so the same seed and
// the same calls give the same results, and enabling faults does not change
// latencies.
package simfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// MaxFileSize bounds a file's length, so that a write at an absurd offset
// gets an error instead of exhausting memory.
const MaxFileSize = 1 << 30

// SectorSize is the unit in which a torn write may reach the medium.
const SectorSize = 512

// BlockSize is the unit in which a file holds space, for a full disk (see
// SetFull).
const BlockSize = 4096

// Default sync latencies, drawn uniformly in [min, max] per Sync or SyncDir:
// roughly an SSD's fsync.
const (
	DefaultSyncLatencyMin = 100 * time.Microsecond
	DefaultSyncLatencyMax = 3 * time.Millisecond
)

// Errors for misuse that POSIX reports with its own codes.
var (
	ErrNotDir   = errors.New("not a directory")
	ErrIsDir    = errors.New("is a directory")
	ErrNotEmpty = errors.New("directory not empty")
	ErrTooLarge = errors.New("file too large")
	// ErrNegativeOffset is returned for a read, write or truncate at a
	// negative offset or size.
	ErrNegativeOffset = errors.New("negative offset")
)

// Disk is one node's simulated disk. It implements env.FS. Like everything
// in a node, it is used from one goroutine.
type Disk struct {
	loop    sched.NodeLoop
	latency *rng.Rand // sync latencies
	faults  *rng.Rand // injected failures, short writes, bit flips
	crash   *rng.Rand // what a crash keeps

	root   *inode
	nextID uint64
	// seq orders every change, to files and directories alike; a sync
	// captures the changes with seq at most the value when it was issued.
	seq uint64
	// incarnation is bumped by Crash and CrashProcess. Open files and
	// pending completions carry the incarnation they belong to and are dead
	// once it changes.
	incarnation uint64
	// killedAt is seq at the last CrashProcess: unsynced changes with seq at
	// most this were made by a process that died with the machine up.
	killedAt uint64
	// locks are the locks held, by the inode locked (a lock is on the file,
	// not its name). Each belongs to the incarnation that took it and dies
	// with it.
	locks map[*inode]*diskLock

	rates        Faults
	failNext     [opCount][]error
	flipNextRead int
	full         bool // see SetFull
	latencyMin   time.Duration
	latencyMax   time.Duration

	pendingSyncs int
	stats        Stats
	// durableGen counts the changes to what is durable, for
	// DurableGeneration.
	durableGen uint64
	// observer and sabotage: see observe.go.
	observer func(Event)
	sabotage Sabotage
}

var _ env.FS = (*Disk)(nil)

// New returns an empty disk that draws from r (this disk's own stream) and
// runs sync completions on loop.
func New(r *rng.Rand, loop sched.NodeLoop) *Disk {
	if r == nil || loop == nil {
		panic("simfs.New: a random stream and a loop are required")
	}
	d := &Disk{
		loop:       loop,
		latency:    r.Fork("latency"),
		faults:     r.Fork("faults"),
		crash:      r.Fork("crash"),
		latencyMin: DefaultSyncLatencyMin,
		latencyMax: DefaultSyncLatencyMax,
	}
	d.root = d.newInode(true)
	return d
}

// SetSyncLatency sets the range from which each Sync and SyncDir draws its
// latency.
func (d *Disk) SetSyncLatency(lo, hi time.Duration) error {
	if lo < 0 || hi < lo {
		return fmt.Errorf("simfs: sync latency range [%v, %v] is invalid", lo, hi)
	}
	d.latencyMin, d.latencyMax = lo, hi
	return nil
}

// Create creates the named file, or truncates it if it exists.
func (d *Disk) Create(name string) (env.File, error) {
	if err := d.begin(OpCreate, "create", name, false); err != nil {
		return nil, err
	}
	parent, base, ino, err := d.lookup("create", name)
	if err != nil {
		return nil, err
	}
	created := ino == nil
	switch {
	case ino == nil && d.full:
		return nil, d.noSpace("create", name)
	case ino == nil:
		ino = d.newInode(false)
		d.link(parent, base, ino)
	case ino.isDir:
		return nil, pathError("create", name, ErrIsDir)
	default:
		d.change(ino, fileOp{trunc: true, size: 0})
	}
	d.observe(Event{Op: OpCreate, Name: name, Created: created})
	return d.open(name, ino), nil
}

// Open opens an existing file.
func (d *Disk) Open(name string) (env.File, error) {
	if err := d.begin(OpOpen, "open", name, false); err != nil {
		return nil, err
	}
	_, _, ino, err := d.lookup("open", name)
	switch {
	case err != nil:
		return nil, err
	case ino == nil:
		return nil, pathError("open", name, fs.ErrNotExist)
	case ino.isDir:
		return nil, pathError("open", name, ErrIsDir)
	}
	return d.open(name, ino), nil
}

// Rename atomically replaces newname with oldname. A directory may replace
// only an empty directory, a file only a file, and a directory cannot move
// beneath itself.
func (d *Disk) Rename(oldname, newname string) error {
	if !validFile(oldname) || !validFile(newname) {
		return renameError(oldname, newname, fs.ErrInvalid)
	}
	if err := d.inject(OpRename, false); err != nil {
		return renameError(oldname, newname, err)
	}
	srcDir, srcBase, src, err := d.lookup("rename", oldname)
	if err != nil {
		return err
	}
	if src == nil {
		return renameError(oldname, newname, fs.ErrNotExist)
	}
	dstDir, dstBase, dst, err := d.lookup("rename", newname)
	if err != nil {
		return err
	}
	if src == dst {
		return nil // POSIX: renaming a file onto itself does nothing
	}
	if err := checkReplace(src, dst, oldname, newname); err != nil {
		return renameError(oldname, newname, err)
	}
	d.move(srcDir, srcBase, dstDir, dstBase, src)
	d.observe(Event{Op: OpRename, Name: newname})
	return nil
}

func checkReplace(src, dst *inode, oldname, newname string) error {
	switch {
	case src.isDir && strings.HasPrefix(newname, oldname+"/"):
		return fmt.Errorf("%w: cannot move a directory beneath itself", fs.ErrInvalid)
	case dst == nil:
		return nil
	case src.isDir && !dst.isDir:
		return ErrNotDir
	case !src.isDir && dst.isDir:
		return ErrIsDir
	case dst.isDir && len(dst.entries) > 0:
		return ErrNotEmpty
	}
	return nil
}

// Remove removes a file or an empty directory. Open files of a removed file
// keep working on its contents, which vanish with the last reference.
func (d *Disk) Remove(name string) error {
	if err := d.begin(OpRemove, "remove", name, false); err != nil {
		return err
	}
	parent, base, ino, err := d.lookup("remove", name)
	switch {
	case err != nil:
		return err
	case ino == nil:
		return pathError("remove", name, fs.ErrNotExist)
	case ino.isDir && len(ino.entries) > 0:
		return pathError("remove", name, ErrNotEmpty)
	}
	d.unlink(parent, base)
	return nil
}

// List returns the names of the entries of dir, sorted. "." is the root.
func (d *Disk) List(dir string) ([]string, error) {
	ino, err := d.findDir(OpList, "list", dir)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(ino.entries)), nil
}

// MkdirAll creates dir and any missing parents.
func (d *Disk) MkdirAll(dir string) error {
	if err := d.begin(OpMkdir, "mkdir", dir, true); err != nil {
		return err
	}
	if dir == "." {
		return nil
	}
	cur := d.root
	parts := strings.Split(dir, "/")
	for i, part := range parts {
		next := cur.entries[part]
		switch {
		case next == nil && d.full:
			return d.noSpace("mkdir", strings.Join(parts[:i+1], "/"))
		case next == nil:
			next = d.newInode(true)
			d.link(cur, part, next)
		case !next.isDir:
			return pathError("mkdir", strings.Join(parts[:i+1], "/"), ErrNotDir)
		}
		cur = next
	}
	return nil
}

// Stat describes the named file or directory. "." is the root.
func (d *Disk) Stat(name string) (env.FileInfo, error) {
	if err := d.begin(OpStat, "stat", name, true); err != nil {
		return env.FileInfo{}, err
	}
	_, base, ino, err := d.lookup("stat", name)
	switch {
	case err != nil:
		return env.FileInfo{}, err
	case ino == nil:
		return env.FileInfo{}, pathError("stat", name, fs.ErrNotExist)
	case ino.isDir:
		return env.FileInfo{Name: base, IsDir: true}, nil
	}
	return env.FileInfo{Name: base, Size: ino.data.Len()}, nil
}

// SyncDir makes the entries of dir durable, then calls done on the loop.
func (d *Disk) SyncDir(dir string, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	ino, err := d.findDir(OpSyncDir, "syncdir", dir)
	if ino == nil {
		d.fail("disk.syncdir", dir, err, done)
		return
	}
	d.enqueueSync(ino, "disk.syncdir", dir, err, done)
}

// findDir resolves a directory for List and SyncDir, after fault injection.
// It returns the directory's inode with a nil error, the inode with an
// injected error (for SyncDir to report in order), or nil with the error.
func (d *Disk) findDir(op Op, verb, dir string) (*inode, error) {
	if !validDir(dir) {
		return nil, pathError(verb, dir, fs.ErrInvalid)
	}
	injected := d.inject(op, false)
	_, _, ino, err := d.lookup(verb, dir)
	switch {
	case err != nil:
		return nil, err
	case ino == nil:
		return nil, pathError(verb, dir, fs.ErrNotExist)
	case !ino.isDir:
		return nil, pathError(verb, dir, ErrNotDir)
	case injected != nil:
		return ino, pathError(verb, dir, injected)
	}
	return ino, nil
}

// begin validates a path and injects the operation's fault, if any.
func (d *Disk) begin(op Op, verb, name string, rootOK bool) error {
	ok := validFile(name)
	if rootOK {
		ok = validDir(name)
	}
	if !ok {
		return pathError(verb, name, fs.ErrInvalid)
	}
	if err := d.inject(op, op == OpCreate || op == OpMkdir || op == OpLock); err != nil {
		return pathError(verb, name, err)
	}
	return nil
}

// validFile reports whether name is a clean, relative, slash-separated path
// without "..", naming something other than the root.
func validFile(name string) bool {
	return name != "." && fs.ValidPath(name)
}

// validDir is validFile that also accepts the root, ".".
func validDir(name string) bool {
	return fs.ValidPath(name)
}

// lookup resolves a valid path through the current entries. It returns the
// parent directory, the base name and the inode, which is nil when the parent
// exists but has no such entry. The root has no parent.
func (d *Disk) lookup(verb, name string) (parent *inode, base string, ino *inode, err error) {
	if name == "." {
		return nil, ".", d.root, nil
	}
	return walk(d.root, verb, name, func(dir *inode) map[string]*inode { return dir.entries })
}

// walk resolves name from root through the entries that entriesOf gives.
func walk(root *inode, verb, name string, entriesOf func(*inode) map[string]*inode) (*inode, string, *inode, error) {
	dir := root
	parts := strings.Split(name, "/")
	last := len(parts) - 1
	for i, part := range parts[:last] {
		next := entriesOf(dir)[part]
		if next == nil {
			return nil, "", nil, pathError(verb, name, fs.ErrNotExist)
		}
		if !next.isDir {
			return nil, "", nil, pathError(verb, name, fmt.Errorf("%s: %w", strings.Join(parts[:i+1], "/"), ErrNotDir))
		}
		dir = next
	}
	return dir, parts[last], entriesOf(dir)[parts[last]], nil
}

func pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func renameError(oldname, newname string, err error) error {
	return fmt.Errorf("rename %s %s: %w", oldname, newname, err)
}
