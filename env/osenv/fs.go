package osenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/env"
)

// fileSystem is the production env.FS: an os.Root over the node's data
// directory, so that no name (not even through a symbolic link) reaches
// outside it.
type fileSystem struct {
	node   *Node
	root   *os.Root
	syncer groupSyncer
}

// errBadPath explains the one form of name env.FS accepts.
var errBadPath = fmt.Errorf("%w: want a relative, slash-separated path without empty, \".\" or \"..\" elements (or \".\" for the root)", fs.ErrInvalid)

// checkPath rejects a name that is absolute, escapes the root, or is not in
// the canonical form every implementation of env.FS agrees on.
func checkPath(op, name string) error {
	if !fs.ValidPath(name) {
		return &fs.PathError{Op: op, Path: name, Err: errBadPath}
	}
	return nil
}

func (s *fileSystem) Create(name string) (env.File, error) {
	return s.open("create", name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

func (s *fileSystem) Open(name string) (env.File, error) {
	return s.open("open", name, os.O_RDWR)
}

func (s *fileSystem) open(op, name string, flag int) (env.File, error) {
	if err := checkPath(op, name); err != nil {
		return nil, err
	}
	osf, err := s.root.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, mapErr(err)
	}
	dev, err := deviceOf(osf)
	if err != nil {
		osf.Close()
		return nil, mapErr(err)
	}
	f := &file{fs: s, name: name, f: osf, elsewhere: dev != s.syncer.dev}
	if !register(s.node, s.node.files, f) {
		osf.Close()
		return nil, &fs.PathError{Op: op, Path: name, Err: env.ErrClosed}
	}
	// Even a file opened without a write may need a flush: a process that
	// crashed may have left its writes in the page cache (log recovery
	// syncs such segments before it trusts them).
	s.syncer.noteWrite(f, 0)
	return f, nil
}

func (s *fileSystem) Rename(oldname, newname string) error {
	if err := checkPath("rename", oldname); err != nil {
		return err
	}
	if err := checkPath("rename", newname); err != nil {
		return err
	}
	return mapErr(s.root.Rename(oldname, newname))
}

func (s *fileSystem) Remove(name string) error {
	if err := checkPath("remove", name); err != nil {
		return err
	}
	return mapErr(s.root.Remove(name))
}

func (s *fileSystem) List(dir string) ([]string, error) {
	if err := checkPath("list", dir); err != nil {
		return nil, err
	}
	d, err := s.root.Open(dir)
	if err != nil {
		return nil, mapErr(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, mapErr(err)
	}
	slices.Sort(names)
	return names, nil
}

func (s *fileSystem) MkdirAll(dir string) error {
	if err := checkPath("mkdirall", dir); err != nil {
		return err
	}
	return mapErr(s.root.MkdirAll(dir, 0o755))
}

func (s *fileSystem) Stat(name string) (env.FileInfo, error) {
	if err := checkPath("stat", name); err != nil {
		return env.FileInfo{}, err
	}
	fi, err := s.root.Stat(name)
	if err != nil {
		return env.FileInfo{}, mapErr(err)
	}
	info := env.FileInfo{Name: fi.Name(), IsDir: fi.IsDir()}
	if !info.IsDir {
		info.Size = fi.Size()
	}
	return info, nil
}

// SyncDir fsyncs dir on a goroutine of its own and reports on the loop.
func (s *fileSystem) SyncDir(dir string, done func(error)) {
	if done == nil {
		panic("osenv: SyncDir with a nil callback")
	}
	if err := checkPath("syncdir", dir); err != nil {
		s.node.post(func() { done(err) })
		return
	}
	spawned := s.node.spawn(func() {
		err := s.syncDir(dir)
		s.node.post(func() { done(err) })
	})
	if !spawned {
		s.node.post(func() { done(env.ErrClosed) }) // dropped: the node is closed
	}
}

func (s *fileSystem) syncDir(dir string) error {
	d, err := s.root.Open(dir)
	if err != nil {
		return mapErr(err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return mapErr(fmt.Errorf("syncdir %s: %w", dir, err))
	}
	return nil
}

// file is the production env.File. Reads and writes are plain pread/pwrite
// calls on the loop (they hit the page cache); Syncs go to the node's
// groupSyncer, which covers the Syncs of many files with one flush.
type file struct {
	fs   *fileSystem
	name string
	f    *os.File

	// mu guards the state shared with the sync worker and Node.Close.
	mu sync.Mutex
	// closed is set by Close (or Node.Close): every later call fails with
	// env.ErrClosed.
	closed bool
	// lastWrite and durable are the node-wide numbers of this file's last
	// completed write and of the last write a flush has made durable
	// (sync.go); guarded by the syncer's mu.
	lastWrite, durable uint64
	// pending counts this file's Syncs queued or in flight. While it is
	// above zero, f stays open even after Close: the last Sync to finish
	// closes it.
	pending int
	// elsewhere says the file is on another filesystem than the data
	// directory, which the syncer's syncfs does not cover.
	elsewhere bool
	// queued counts this file's Syncs in the syncer's queue or batch, and
	// unsyncedBytes the bytes written to it since a flush covered it;
	// guarded by the syncer's mu.
	queued        int
	unsyncedBytes int64
}

func (f *file) Name() string { return f.name }

// usable returns env.ErrClosed once the file is closed.
func (f *file) usable(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: env.ErrClosed}
	}
	return nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	n, err := f.f.ReadAt(p, off)
	return n, mapErr(err)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	n, err := f.f.Write(p)
	f.fs.syncer.noteWrite(f, n)
	return n, mapErr(err)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	n, err := f.f.WriteAt(p, off)
	f.fs.syncer.noteWrite(f, n)
	return n, mapErr(err)
}

func (f *file) Truncate(size int64) error {
	if err := f.usable("truncate"); err != nil {
		return err
	}
	err := f.f.Truncate(size)
	f.fs.syncer.noteWrite(f, 0)
	return mapErr(err)
}

func (f *file) Size() (int64, error) {
	if err := f.usable("stat"); err != nil {
		return 0, err
	}
	fi, err := f.f.Stat()
	if err != nil {
		return 0, mapErr(err)
	}
	return fi.Size(), nil
}

// Sync implements env.File. Syncs issued while the node's sync worker is
// busy are grouped, across files: one flush issued after all of them covers
// them all. A Sync of a file that a flush has already covered up to its last
// write completes without one. The callbacks of one file's Syncs run in the
// order the Syncs were issued (those of different files may not).
//
// A failed flush is reported to every Sync of the file it covered. After
// one, the kernel may have dropped the dirty pages it could not write, so a
// later Sync can succeed without the data being durable: callers must treat
// a Sync error as fatal for the file.
func (f *file) Sync(done func(error)) {
	if done == nil {
		panic("osenv: Sync with a nil callback")
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		err := &fs.PathError{Op: "sync", Path: f.name, Err: env.ErrClosed}
		f.fs.node.post(func() { done(err) })
		return
	}
	f.pending++
	f.mu.Unlock()
	f.fs.syncer.enqueue(f, done)
}

// syncFinished settles one Sync of f, and closes the descriptor if Close
// came while Syncs were pending.
func (f *file) syncFinished() {
	f.mu.Lock()
	f.pending--
	release := f.closed && f.pending == 0
	f.mu.Unlock()
	if release {
		// Close already returned; its error can only be logged.
		if err := f.release(); err != nil {
			f.fs.node.log.Warn("close after sync failed", "file", f.name, "err", err)
		}
	}
}

// dup duplicates the file's descriptor, for a sendfile that may outlive
// the file's Close.
func (f *file) dup() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return -1, &fs.PathError{Op: "sendfile", Path: f.name, Err: env.ErrClosed}
	}
	rc, err := f.f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	dup := func(raw uintptr) { fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) }
	if err := rc.Control(dup); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, mapErr(&fs.PathError{Op: "sendfile", Path: f.name, Err: derr})
	}
	return fd, nil
}

// Close implements env.File. If a Sync is in flight the descriptor stays open
// until it completes; the worker closes it then.
func (f *file) Close() error {
	already, err := f.shut()
	if already {
		return &fs.PathError{Op: "close", Path: f.name, Err: env.ErrClosed}
	}
	return err
}

// closeForNode closes the file on behalf of Node.Close; unlike Close it is
// quiet about a file already closed.
func (f *file) closeForNode() error {
	_, err := f.shut()
	return err
}

// shut marks the file closed and releases it unless a Sync still holds it;
// it reports whether the file was closed already.
func (f *file) shut() (already bool, err error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return true, nil
	}
	f.closed = true
	busy := f.pending > 0
	f.mu.Unlock()
	if busy {
		return false, nil
	}
	return false, f.release()
}

// release closes the descriptor. It runs exactly once per file, after closed
// was set and no worker is left.
func (f *file) release() error {
	unregister(f.fs.node, f.fs.node.files, f)
	f.fs.syncer.forget(f)
	return mapErr(f.f.Close())
}

// ioError is an OS error classified as one of env's errors: errors.Is finds
// both the class (env.ErrIO, env.ErrNoSpace, env.ErrClosed) and the original.
type ioError struct {
	class error
	err   error
}

func (e *ioError) Error() string   { return e.err.Error() }
func (e *ioError) Unwrap() []error { return []error{e.class, e.err} }

// mapErr classifies an OS error for errors.Is against env's errors. A
// missing file needs nothing: the OS error already matches fs.ErrNotExist.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EIO):
		return &ioError{class: env.ErrIO, err: err}
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return &ioError{class: env.ErrNoSpace, err: err}
	case errors.Is(err, os.ErrClosed):
		return &ioError{class: env.ErrClosed, err: err}
	}
	return err
}
