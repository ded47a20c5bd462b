// Package faultfs wraps an env.FS, and every file opened through it, so
// that chosen operations fail: a test says which calls fail and with what
// error, and the code under test meets that error exactly where a real
// disk would give it.
//
// It works over any env.FS: the simulator's disk, osenv's real files, or
// another wrapper. The simulator's disk has faults of its own (seeded
// rates, FailNext, a full disk); faultfs adds what a test needs to aim:
// one path, one kind of operation, the third write of one file, and the
// same faults over osenv's real disk.
//
// # Rules
//
// A rule is an error and a Predicate over the operation about to run:
//
//	fsys := faultfs.New(disk)
//	fsys.Inject(env.ErrNoSpace, faultfs.Nth(2,
//		faultfs.And(faultfs.Kinds(faultfs.Write), faultfs.PathPrefix("orders-0/"))))
//
// fails the second write to a file under orders-0/. Each call is shown to
// every rule in the order they were added, so counting predicates (Nth,
// FromNth, Count) see every call whatever the other rules do; the first
// rule whose predicate holds fails the call, with its error wrapped so that
// errors.Is finds both that error and ErrInjected. Rule.Stop ends one rule;
// SetEnabled(false) stops all injection while the rules go on counting.
//
// faultfs has no randomness of its own: the same calls meet the same
// failures. A test that wants random failures passes a predicate that
// draws from its own seeded stream.
//
// # What a failure does
//
// A failed call does nothing and returns the error (a failed Write or
// WriteAt writes nothing and returns 0), with two exceptions. Sync and
// SyncDir report through their callback, on the loop and in order with
// the file's other Syncs, as env.FS requires: the inner Sync still runs and
// the injected error replaces its result, which POSIX allows, since a
// failed fsync says nothing of what reached the medium. Close closes the
// file all the same and then reports the error, as close(2) releases the
// descriptor even when it fails.
//
// # Operations
//
// Kinds are named after env.FS's methods: Create, Open, Rename, Remove,
// List, MkdirAll, Stat, SyncDir and Lock on the FS; Read (ReadAt), Write
// (Write and WriteAt), Truncate, Size, Sync and Close on a file. Op.Path is
// the name the call was given, a file's own name for its operations, and
// for Rename the old name (Op.NewPath the new one). A file opened through
// the wrapper also offers Dup when the wrapped file does (simfs: the
// duplicate simnet's SendFile reads through), and its duplicate is wrapped
// too, so the rules strike those reads as well.
//
// Like everything of a node, an FS is used from its loop only.
package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/sluicemq/sluice/env"
)

// Kind is a kind of operation.
type Kind uint8

// The kinds of operation a predicate can tell apart.
const (
	Create Kind = iota
	Open
	Rename
	Remove
	List
	MkdirAll
	Stat
	SyncDir
	Lock
	Read     // File.ReadAt
	Write    // File.Write and File.WriteAt
	Truncate // File.Truncate
	Size     // File.Size
	Sync     // File.Sync
	Close    // File.Close
	kindCount
)

var kindNames = [kindCount]string{"create", "open", "rename", "remove", "list", "mkdirall", "stat", "syncdir", "lock",
	"read", "write", "truncate", "size", "sync", "close"}

func (k Kind) String() string {
	if k >= kindCount {
		return fmt.Sprintf("Kind(%d)", k)
	}
	return kindNames[k]
}

// Op is one call, as a predicate sees it before it runs.
type Op struct {
	Kind Kind
	// Path is the name the call was given; for a file's operations, the
	// name the file was opened with; for Rename, the old name.
	Path string
	// NewPath is Rename's new name, and empty for every other kind.
	NewPath string
	// Off is where a ReadAt or WriteAt starts and the size a Truncate
	// sets; -1 for Write, which writes at the file's position; 0 otherwise.
	Off int64
	// Len is how many bytes a read or a write asks for; 0 otherwise.
	Len int
}

// ErrInjected is matched by every error faultfs injects, beside the error
// the rule gave.
var ErrInjected = errors.New("injected fault")

// injected is an injected error: errors.Is finds the rule's error and
// ErrInjected.
type injected struct{ err error }

func (e *injected) Error() string   { return e.err.Error() + " (injected)" }
func (e *injected) Unwrap() []error { return []error{e.err, ErrInjected} }

// FS is an env.FS that fails the calls its rules choose and passes every
// other call to the FS it wraps.
type FS struct {
	inner   env.FS
	rules   []*Rule
	calls   [kindCount]int
	stopped bool // SetEnabled(false)
}

var _ env.FS = (*FS)(nil)

// New wraps inner. Until a rule is added, every call passes through.
func New(inner env.FS) *FS {
	if inner == nil {
		panic("faultfs.New: nil FS")
	}
	return &FS{inner: inner}
}

// Rule is a fault added by FS.Inject, or a counter added by FS.Count.
type Rule struct {
	err     error // nil: the rule only counts
	when    Predicate
	hits    int
	stopped bool
}

// Hits returns how many calls the rule's predicate held for while the rule
// was active. For a rule added by Inject these are the calls it failed,
// unless an earlier rule failed them first or injection was disabled.
func (r *Rule) Hits() int { return r.hits }

// Stop ends the rule: it fails and counts nothing more.
func (r *Rule) Stop() { r.stopped = true }

// Inject adds a rule that fails the calls when holds for with err (often
// env.ErrIO or env.ErrNoSpace). It panics on a nil err or predicate: a
// rule that cannot fail is a Count.
func (f *FS) Inject(err error, when Predicate) *Rule {
	if err == nil || when == nil {
		panic("faultfs: Inject needs an error and a predicate")
	}
	return f.add(&Rule{err: err, when: when})
}

// Count adds a rule that fails nothing and counts the calls when holds for.
func (f *FS) Count(when Predicate) *Rule {
	if when == nil {
		panic("faultfs: Count needs a predicate")
	}
	return f.add(&Rule{when: when})
}

func (f *FS) add(r *Rule) *Rule {
	f.rules = append(f.rules, r)
	return r
}

// SetEnabled turns injection on (the default) or off. While it is off no
// call fails, but every rule still sees every call and counts it, so Nth
// and Count go on counting.
func (f *FS) SetEnabled(on bool) { f.stopped = !on }

// Calls returns how many calls of kind k have been made through the FS and
// its files, failed or not.
func (f *FS) Calls(k Kind) int {
	if k >= kindCount {
		return 0
	}
	return f.calls[k]
}

// check counts op, shows it to every active rule, and returns the error of
// the first whose predicate holds, or nil.
func (f *FS) check(op Op) error {
	f.calls[op.Kind]++
	var fail error
	for _, r := range f.rules {
		if r.stopped || !r.when(op) {
			continue
		}
		r.hits++
		if fail == nil && r.err != nil && !f.stopped {
			fail = &injected{err: r.err}
		}
	}
	return fail
}

// checkPath is check for an operation on a name, its error a PathError.
func (f *FS) checkPath(kind Kind, name string) error {
	if err := f.check(Op{Kind: kind, Path: name}); err != nil {
		return &fs.PathError{Op: kind.String(), Path: name, Err: err}
	}
	return nil
}

// Create implements env.FS.
func (f *FS) Create(name string) (env.File, error) {
	if err := f.checkPath(Create, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Create(name))
}

// Open implements env.FS.
func (f *FS) Open(name string) (env.File, error) {
	if err := f.checkPath(Open, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Open(name))
}

func (f *FS) wrap(inner env.File, err error) (env.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{fs: f, inner: inner}, nil
}

// Rename implements env.FS.
func (f *FS) Rename(oldname, newname string) error {
	if err := f.check(Op{Kind: Rename, Path: oldname, NewPath: newname}); err != nil {
		return fmt.Errorf("rename %s %s: %w", oldname, newname, err)
	}
	return f.inner.Rename(oldname, newname)
}

// Remove implements env.FS.
func (f *FS) Remove(name string) error {
	if err := f.checkPath(Remove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// List implements env.FS.
func (f *FS) List(dir string) ([]string, error) {
	if err := f.checkPath(List, dir); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

// MkdirAll implements env.FS.
func (f *FS) MkdirAll(dir string) error {
	if err := f.checkPath(MkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

// Stat implements env.FS.
func (f *FS) Stat(name string) (env.FileInfo, error) {
	if err := f.checkPath(Stat, name); err != nil {
		return env.FileInfo{}, err
	}
	return f.inner.Stat(name)
}

// SyncDir implements env.FS. An injected failure replaces the inner
// SyncDir's result.
func (f *FS) SyncDir(dir string, done func(error)) {
	err := f.checkPath(SyncDir, dir)
	f.inner.SyncDir(dir, replace(err, done))
}

// Lock implements env.FS. The lock returned is the wrapped FS's own.
func (f *FS) Lock(name string) (io.Closer, error) {
	if err := f.checkPath(Lock, name); err != nil {
		return nil, err
	}
	return f.inner.Lock(name)
}

// replace returns done itself when nothing was injected, or a callback
// that reports injected instead of the result.
func replace(injected error, done func(error)) func(error) {
	if injected == nil || done == nil {
		return done
	}
	return func(error) { done(injected) }
}

// file is a file opened through an FS.
type file struct {
	fs    *FS
	inner env.File
}

var _ env.File = (*file)(nil)

func (f *file) Name() string { return f.inner.Name() }

func (f *file) fail(op Op) error {
	op.Path = f.inner.Name()
	if err := f.fs.check(op); err != nil {
		return &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
	}
	return nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fail(Op{Kind: Read, Off: off, Len: len(p)}); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.fail(Op{Kind: Write, Off: -1, Len: len(p)}); err != nil {
		return 0, err
	}
	return f.inner.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fail(Op{Kind: Write, Off: off, Len: len(p)}); err != nil {
		return 0, err
	}
	return f.inner.WriteAt(p, off)
}

func (f *file) Truncate(size int64) error {
	if err := f.fail(Op{Kind: Truncate, Off: size}); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *file) Size() (int64, error) {
	if err := f.fail(Op{Kind: Size}); err != nil {
		return 0, err
	}
	return f.inner.Size()
}

// Sync implements env.File. An injected failure replaces the inner Sync's
// result, so the file's Syncs still complete in the order issued.
func (f *file) Sync(done func(error)) {
	err := f.fail(Op{Kind: Sync})
	f.inner.Sync(replace(err, done))
}

// Close implements env.File: the file is closed whether or not a failure
// is injected.
func (f *file) Close() error {
	err := f.fail(Op{Kind: Close})
	if cerr := f.inner.Close(); err == nil {
		err = cerr
	}
	return err
}

// Dup returns a duplicate of the file, wrapped as well, if the wrapped
// file can be duplicated (see the package documentation).
func (f *file) Dup() (env.File, error) {
	d, ok := f.inner.(interface{ Dup() (env.File, error) })
	if !ok {
		return nil, &fs.PathError{Op: "dup", Path: f.inner.Name(), Err: fmt.Errorf("%T cannot be duplicated: %w", f.inner, errors.ErrUnsupported)}
	}
	return f.fs.wrap(d.Dup())
}

// Predicate decides whether a rule applies to an operation. Any func of
// this type will do; those below cover the usual cases and combine.
type Predicate func(Op) bool

// Always holds for every operation.
func Always() Predicate { return func(Op) bool { return true } }

// Path holds for operations on exactly name (either name of a Rename).
func Path(name string) Predicate {
	return func(op Op) bool { return op.Path == name || op.Kind == Rename && op.NewPath == name }
}

// PathPrefix holds for operations on a name that begins with prefix
// (either name of a Rename). A directory's files are PathPrefix("dir/").
func PathPrefix(prefix string) Predicate {
	return func(op Op) bool {
		return strings.HasPrefix(op.Path, prefix) || op.Kind == Rename && strings.HasPrefix(op.NewPath, prefix)
	}
}

// Kinds holds for operations of any of kinds.
func Kinds(kinds ...Kind) Predicate {
	var set [kindCount]bool
	for _, k := range kinds {
		if k < kindCount {
			set[k] = true
		}
	}
	return func(op Op) bool { return set[op.Kind] }
}

// And holds when every one of ps does. It asks them in order and stops at
// the first that does not hold, so a counting predicate placed after
// others counts only the operations those let through.
func And(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if !p(op) {
				return false
			}
		}
		return true
	}
}

// Or holds when any of ps does. It asks them in order and stops at the
// first that holds.
func Or(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if p(op) {
				return true
			}
		}
		return false
	}
}

// Not holds when p does not.
func Not(p Predicate) Predicate { return func(op Op) bool { return !p(op) } }

// Nth holds for the nth operation (counting from 1) that p holds for, and
// for no other. It counts every operation p is asked about and holds for,
// so put the conditions inside it: Nth(3, Kinds(Write)) is the third write.
func Nth(n int, p Predicate) Predicate {
	seen := 0
	return func(op Op) bool {
		if !p(op) {
			return false
		}
		seen++
		return seen == n
	}
}

// FromNth holds for the nth operation p holds for and every one after it:
// a device that fails and stays failed.
func FromNth(n int, p Predicate) Predicate {
	seen := 0
	return func(op Op) bool {
		if !p(op) {
			return false
		}
		seen++
		return seen >= n
	}
}
