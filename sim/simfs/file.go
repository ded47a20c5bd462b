package simfs

import (
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/sched"
)

// file is an open file: a position on an inode, valid until closed or until
// the disk crashes.
type file struct {
	d           *Disk
	ino         *inode
	name        string
	pos         int64
	incarnation uint64
	closed      bool
}

var _ env.File = (*file)(nil)

func (d *Disk) open(name string, ino *inode) *file {
	return &file{d: d, ino: ino, name: name, incarnation: d.incarnation}
}

// check reports env.ErrClosed for a closed file or one opened before a crash.
func (f *file) check(verb string) error {
	if f.closed || f.incarnation != f.d.incarnation {
		return pathError(verb, f.name, env.ErrClosed)
	}
	return nil
}

// Name returns the path the file was opened with, even after a rename.
func (f *file) Name() string { return f.name }

// ReadAt reads at off from what the page cache holds (durable or not).
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathError("read", f.name, ErrNegativeOffset)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := f.d.inject(OpRead, false); err != nil {
		return 0, pathError("read", f.name, err)
	}
	if off >= f.ino.data.Len() {
		return 0, io.EOF
	}
	n := f.ino.data.readAt(p, off)
	f.d.maybeFlipRead(p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write writes at the file's position and advances it by what was written.
func (f *file) Write(p []byte) (int, error) {
	if err := f.check("write"); err != nil {
		return 0, err
	}
	n, err := f.write(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// WriteAt writes at off, extending the file if needed.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathError("write", f.name, ErrNegativeOffset)
	}
	return f.write(p, off)
}

// write is Write and WriteAt on a valid file. A write failing with an
// injected ENOSPC writes a seeded prefix of p, as write(2) does when the
// device fills up, and one refused by a full disk writes what fits in the
// file's blocks; any other failure writes nothing.
func (f *file) write(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off+int64(len(p)) > MaxFileSize {
		return 0, pathError("write", f.name, ErrTooLarge)
	}
	n := len(p)
	err := f.d.inject(OpWrite, true)
	if err != nil {
		n = 0
		if errors.Is(err, env.ErrNoSpace) {
			n = f.d.faults.Intn(len(p))
			f.d.stats.ShortWrites++
		}
		err = pathError("write", f.name, err)
	}
	if end := off + int64(n); err == nil && f.d.full && end > held(f.ino.data.Len()) {
		// A full disk takes what fits in the blocks the file holds.
		n = int(max(0, held(f.ino.data.Len())-off))
		err = f.d.noSpace("write", f.name)
	}
	if n > 0 {
		f.d.change(f.ino, fileOp{off: off, p: append([]byte(nil), p[:n]...)})
	}
	return n, err
}

// Truncate cuts the file to size or extends it with zeros.
func (f *file) Truncate(size int64) error {
	if err := f.check("truncate"); err != nil {
		return err
	}
	switch {
	case size < 0:
		return pathError("truncate", f.name, ErrNegativeOffset)
	case size > MaxFileSize:
		return pathError("truncate", f.name, ErrTooLarge)
	}
	if err := f.d.inject(OpTruncate, size > f.ino.data.Len()); err != nil {
		return pathError("truncate", f.name, err)
	}
	if f.d.full && size > held(f.ino.data.Len()) {
		return f.d.noSpace("truncate", f.name)
	}
	shrunk := size < f.ino.data.Len()
	f.d.change(f.ino, fileOp{trunc: true, size: size})
	f.d.observe(Event{Op: OpTruncate, Name: f.name, Shrunk: shrunk})
	return nil
}

// Size returns the file's current length, durable or not.
func (f *file) Size() (int64, error) {
	if err := f.check("size"); err != nil {
		return 0, err
	}
	return f.ino.data.Len(), nil
}

// Sync makes everything written so far durable, then calls done on the loop.
func (f *file) Sync(done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if err := f.check("sync"); err != nil {
		f.d.fail("disk.sync", f.name, err, done)
		return
	}
	var err error
	if injected := f.d.inject(OpSync, true); injected != nil {
		err = pathError("sync", f.name, injected)
	}
	f.d.enqueueSync(f.ino, "disk.sync", f.name, err, done)
}

// Dup returns another open file on the same inode, as dup(2) gives another
// descriptor: it stays valid when f is closed, still reads the contents
// after the name is removed or renamed, and dies with f's process (a crash
// or a process crash makes it fail with env.ErrClosed). It has its own
// position, starting at 0. simnet's SendFile reads through one, as osenv
// sends from a duplicated descriptor, so that the sender may close f.
func (f *file) Dup() (env.File, error) {
	if err := f.check("dup"); err != nil {
		return nil, err
	}
	return f.d.open(f.name, f.ino), nil
}

// Close releases the file; its unsynced writes stay in the page cache and
// its Syncs in flight still complete.
func (f *file) Close() error {
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// pendingSync is a Sync or SyncDir in flight.
type pendingSync struct {
	op          Op     // OpSync or OpSyncDir
	name        string // what it syncs, for the observer
	upto        uint64 // the changes it makes durable: seq <= upto
	err         error  // an injected failure, reported instead
	done        func(error)
	incarnation uint64
	ready       bool // its latency has elapsed; it completes once first in line
}

// enqueueSync starts a Sync of a file or a SyncDir of a directory that
// captures every change issued so far.
func (d *Disk) enqueueSync(ino *inode, kind, name string, err error, done func(error)) {
	if d.sabotage == SabotageSyncEarly && !ino.isDir && err == nil {
		done = d.earlyDone(kind, name, done)
	}
	op := OpSync
	if ino.isDir {
		op = OpSyncDir
	}
	ps := &pendingSync{op: op, name: name, upto: d.seq, err: err, done: done, incarnation: d.incarnation}
	ino.syncs = append(ino.syncs, ps)
	d.pendingSyncs++
	label := sched.Label{Kind: kind, Digest: syncDigest(name, ino, d.seq)}
	latency := d.syncLatency()
	d.loop.Schedule(latency, label, func() { d.syncReady(ino, ps) })
	d.observe(Event{Op: op, Name: name, Latency: latency})
}

// syncDigest summarizes a sync for the trace: the name synced, the length it
// captured and the change it captures up to.
func syncDigest(name string, ino *inode, upto uint64) uint64 {
	b := binary.LittleEndian.AppendUint64([]byte(name), upto)
	b = binary.LittleEndian.AppendUint64(b, uint64(ino.data.Len()))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ino.entries)))
	return sched.Digest(b)
}

// syncReady runs when a sync's latency has elapsed: it completes that sync
// and any ready ones after it, in the order issued, unless a crash came first.
func (d *Disk) syncReady(ino *inode, ps *pendingSync) {
	if ps.incarnation != d.incarnation {
		return // the disk crashed since: this sync never happened
	}
	ps.ready = true
	for len(ino.syncs) > 0 {
		next := ino.syncs[0]
		if next.incarnation != d.incarnation {
			ino.syncs = ino.syncs[1:] // abandoned by a process crash
			continue
		}
		if !next.ready {
			break
		}
		ino.syncs = ino.syncs[1:]
		d.pendingSyncs--
		d.complete(ino, next)
		next.done(next.err)
		if d.incarnation != next.incarnation {
			return // done crashed the disk
		}
		d.observe(Event{Op: next.op, Name: next.name, Done: true, Pending: d.pendingSyncs})
	}
}

func (d *Disk) complete(ino *inode, ps *pendingSync) {
	switch {
	case ps.err != nil:
		d.stats.SyncsFailed++
	case ino.isDir:
		if flushDir(ino, d.rollLimit(ino, ps.upto)) {
			d.durableGen++
		}
		d.stats.SyncsDone++
	default:
		if flushFile(ino, ps.upto) {
			d.durableGen++
		}
		d.stats.SyncsDone++
	}
}

// fail reports an error to a sync's done on the loop, on a later turn.
func (d *Disk) fail(kind, name string, err error, done func(error)) {
	inc := d.incarnation
	d.loop.Schedule(0, sched.Label{Kind: kind, Digest: sched.Digest([]byte(name))}, func() {
		if inc == d.incarnation {
			done(err)
		}
	})
}

func (d *Disk) syncLatency() time.Duration {
	span := uint64(d.latencyMax - d.latencyMin)
	return d.latencyMin + time.Duration(d.latency.Uint64n(span+1))
}
