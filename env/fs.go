package env

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
}

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
