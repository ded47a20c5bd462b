package simfs

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/sluicemq/sluice/env"
)

// diskLock is a lock held on a file (see Lock).
type diskLock struct {
	d    *Disk
	ino  *inode
	name string
	// incarnation is the process that took the lock: the lock dies with it.
	incarnation uint64
	released    bool
}

var _ io.Closer = (*diskLock)(nil)

// Lock takes the lock of the named file, creating the file if it is
// missing, as env.FS requires: a second Lock of a file whose lock is held
// fails at once with an *env.LockedError, whoever asks, until the holder
// closes it or its process ends (Crash, CrashProcess). The lock is on the
// file, not on its name. It is no change to the disk: a crash has nothing
// of it to keep or lose, though the file's entry, when Lock created it, is
// as volatile as any other until its directory is synced.
//
// Faults: EIO strikes Lock as it strikes Open, and ENOSPC (a rate, or a
// full disk) a Lock that must create its file.
func (d *Disk) Lock(name string) (io.Closer, error) {
	if err := d.begin(OpLock, "lock", name, false); err != nil {
		return nil, err
	}
	parent, base, ino, err := d.lookup("lock", name)
	switch {
	case err != nil:
		return nil, err
	case ino == nil && d.full:
		return nil, d.noSpace("lock", name)
	case ino == nil:
		ino = d.newInode(false)
		d.link(parent, base, ino)
	case ino.isDir:
		return nil, pathError("lock", name, ErrIsDir)
	}
	if held := d.locks[ino]; held.live() {
		d.stats.LocksRefused++
		return nil, &env.LockedError{Name: name, Holder: held.holder()}
	}
	l := &diskLock{d: d, ino: ino, name: name, incarnation: d.incarnation}
	if d.locks == nil {
		d.locks = make(map[*inode]*diskLock)
	}
	d.locks[ino] = l
	return l, nil
}

// live reports whether the lock is still held: neither released nor dead
// with its process.
func (l *diskLock) live() bool {
	return l != nil && !l.released && l.incarnation == l.d.incarnation
}

// holder names the process holding the lock. The disk numbers the
// processes that use it: 1 for the first, one more after each Crash or
// CrashProcess.
func (l *diskLock) holder() string {
	return fmt.Sprintf("simulated process %d", l.incarnation+1)
}

// Close releases the lock. After its process ended the lock is gone
// already, and Close says so with env.ErrClosed, as it would of a file.
func (l *diskLock) Close() error {
	if !l.live() {
		return &fs.PathError{Op: "unlock", Path: l.name, Err: env.ErrClosed}
	}
	l.released = true
	delete(l.d.locks, l.ino)
	return nil
}
