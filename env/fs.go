package env

import (
	"errors"
	"io"
)

// FS is a node's disk. Paths are slash-separated and relative to the node's
// data directory root; the implementation decides where that root lives.
//
// Durability contract (POSIX): a file's contents are durable only once a Sync
// of that file has completed after the write, and a directory entry (a create,
// rename or remove) only once a SyncDir of its parent directory has completed
// after the change. The simulator's crashes take away exactly what this
// contract allows and nothing more.
type FS interface {
	// Create creates the named file, or truncates it if it exists, and opens
	// it for reading and writing. The parent directory must exist.
	Create(name string) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// List returns the names (not paths) of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string) error
	// Stat describes the named file or directory.
	Stat(name string) (FileInfo, error)
	// SyncDir makes the entries of dir durable, then calls done on the loop.
	SyncDir(dir string, done func(error))
	// Lock takes an exclusive lock on the named file, creating the file if
	// it is missing (its parent directory must exist), so that one process
	// at a time owns what the file guards, as Kafka's .lock guards a log
	// directory. The contract:
	//
	//   - Exclusive: while a lock on a file is held, another Lock of it
	//     fails at once (it never waits) with an error matching ErrLocked,
	//     a *LockedError naming the holder where the implementation can
	//     tell. This holds between two Locks of one process, between
	//     processes, and between machines sharing the disk where its
	//     filesystem supports locks (over NFS, Linux emulates flock with
	//     POSIX locks, which exclude only other processes).
	//   - Released by Close, and when the holding process ends however it
	//     ends: an exit, kill -9, a crash, a power loss. A lock therefore
	//     never outlives its holder, and no one ever has to remove a stale
	//     lock file by hand.
	//   - Not durable and not data: taking a lock changes nothing a crash
	//     must keep, and the file's contents belong to the implementation
	//     (osenv writes the holder's pid in it). Never read, write, rename
	//     or remove a lock file: the lock is on the file, not on its name,
	//     so a lock file removed and created again could be locked twice.
	//
	// Close of the returned lock releases it; a second Close, or a Close
	// after the holding process ended, returns an error matching ErrClosed.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is matched by the error of a Lock refused because the file is
// already locked.
var ErrLocked = errors.New("already locked")

// LockedError is the error of a Lock refused because the file is already
// locked. It matches ErrLocked.
type LockedError struct {
	// Name is the name passed to Lock.
	Name string
	// Holder says who holds the lock, as far as the implementation can
	// tell (osenv: "pid 4242 on host b1"); empty when it cannot.
	Holder string
}

func (e *LockedError) Error() string {
	if e.Holder == "" {
		return "lock " + e.Name + ": " + ErrLocked.Error()
	}
	return "lock " + e.Name + ": " + ErrLocked.Error() + " by " + e.Holder
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Unwrap() error { return ErrLocked }

// FileInfo describes a file or directory.
type FileInfo struct {
	Name  string // base name
	Size  int64  // length in bytes (0 for a directory)
	IsDir bool
}

// File is an open file. Reads and writes go to the page cache and return at
// once; Sync makes them durable asynchronously.
type File interface {
	// Name returns the path the file was opened with.
	Name() string
	// ReadAt reads len(p) bytes at off, as io.ReaderAt does: a short read
	// returns io.EOF.
	ReadAt(p []byte, off int64) (int, error)
	// Write writes p at the file's position, which starts at 0 on Create and
	// Open and advances by what is written.
	Write(p []byte) (int, error)
	// WriteAt writes p at off, extending the file if needed. It does not move
	// the position.
	WriteAt(p []byte, off int64) (int, error)
	// Truncate changes the file's size, cutting or zero-extending it.
	Truncate(size int64) error
	// Size returns the file's current length, durable or not.
	Size() (int64, error)
	// Sync makes everything written to the file so far durable, then calls
	// done on the loop. Syncs of one file complete in the order issued.
	Sync(done func(error))
	// Close releases the file. Unsynced writes stay in the page cache (they
	// are not lost by closing, only by a crash). A Sync in flight still
	// completes.
	Close() error
}
