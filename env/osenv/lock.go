package osenv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/env"
)

// Lock implements env.FS with flock(2): an exclusive, non-blocking lock on
// the open file description, so that it excludes other processes and
// another Lock of the same process alike, and the kernel drops it when the
// last descriptor closes, which a process's death does. The file is opened
// through the node's os.Root and never truncated before the lock is held,
// so a refused Lock still reads the holder's line.
//
// flock keeps no owner the kernel will report (fcntl's F_GETLK does not see
// flock locks, and F_OFD_GETLK reports an OFD lock's pid as -1), so the
// holder writes its own: once it has the lock, it replaces the file's
// contents with one line, "pid N on host H". A refused Lock reads that line
// into env.LockedError.Holder; between a new holder's lock and its write,
// it reads the previous holder's line or none, and then says nothing.
func (s *fileSystem) Lock(name string) (io.Closer, error) {
	if err := checkPath("lock", name); err != nil {
		return nil, err
	}
	f, err := s.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, mapErr(err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &env.LockedError{Name: name, Holder: readHolder(f)}
		}
		return nil, mapErr(&fs.PathError{Op: "lock", Path: name, Err: err})
	}
	l := &fileLock{fs: s, name: name, f: f}
	if !register(s.node, s.node.locks, l) {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: name, Err: env.ErrClosed}
	}
	if err := writeHolder(f); err != nil {
		// The line only explains a refusal; the lock holds without it.
		s.node.log.Warn("could not write the holder into a lock file", "file", name, "err", err)
	}
	return l, nil
}

// fileLock is a held env.FS lock: the descriptor that holds the flock.
type fileLock struct {
	fs   *fileSystem
	name string

	mu sync.Mutex // guards f against Close racing Node.Close
	f  *os.File   // nil once released
}

// Close releases the lock. It first empties the file, so that a Lock
// refused by the next holder before that one writes its line reports no
// holder rather than this one.
func (l *fileLock) Close() error {
	l.mu.Lock()
	f := l.f
	l.f = nil
	l.mu.Unlock()
	if f == nil {
		return &fs.PathError{Op: "unlock", Path: l.name, Err: env.ErrClosed}
	}
	unregister(l.fs.node, l.fs.node.locks, l)
	f.Truncate(0) // best effort: the line is only a hint
	return mapErr(f.Close())
}

// closeForNode releases the lock on behalf of Node.Close, quietly if it is
// already released.
func (l *fileLock) closeForNode() error {
	err := l.Close()
	if errors.Is(err, env.ErrClosed) {
		return nil
	}
	return err
}

// flock applies how to f's descriptor, retrying if a signal interrupts it.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			if ferr = unix.Flock(int(fd), how); ferr != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	return ferr
}

// holderMax bounds the holder's line: a longer one is not ours.
const holderMax = 256

// holder describes this process, as written into the files it locks.
func holder() string {
	h := fmt.Sprintf("pid %d", os.Getpid())
	if host, err := os.Hostname(); err == nil && host != "" {
		h += " on host " + host
	}
	return h
}

// writeHolder replaces f's contents with this process's line.
func writeHolder(f *os.File) error {
	line := holder() + "\n"
	if _, err := f.WriteAt([]byte(line), 0); err != nil {
		f.Truncate(0) // no line is better than a torn one
		return err
	}
	return f.Truncate(int64(len(line)))
}

// readHolder returns the holder's line from a lock file, or "" if it has
// none that a holder could have written whole. A line of this very process
// says so: two Locks of one process exclude each other too.
func readHolder(f *os.File) string {
	buf := make([]byte, holderMax)
	n, _ := f.ReadAt(buf, 0)
	line, ok := strings.CutSuffix(string(buf[:n]), "\n")
	if !ok || line == "" || !utf8.ValidString(line) || strings.ContainsFunc(line, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return ""
	}
	if line == holder() {
		line += " (this process)"
	}
	return line
}
