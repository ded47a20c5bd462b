package faultfs_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/envtest"
	"github.com/sluicemq/sluice/env/faultfs"
	"github.com/sluicemq/sluice/env/osenv"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

// simWorld is the simulator's conformance world with every node's FS
// wrapped in a faultfs.FS without rules: the wrapper must be invisible.
type simWorld struct {
	t testing.TB
	w *sim.World
}

func (sw *simWorld) node(name string) *sim.Node {
	if n := sw.w.Node(name); n != nil {
		return n
	}
	return sw.w.AddNode(name, nil)
}

func (sw *simWorld) Node(name string) env.Env {
	e := sw.node(name).Env()
	e.FS = faultfs.New(e.FS)
	return e
}

func (sw *simWorld) ListenAddr(name string) string { return name + ":0" }

func (sw *simWorld) Do(name string, f func()) {
	sw.t.Helper()
	done := false
	sw.node(name).Post(func() { f(); done = true })
	if !sw.w.RunUntil(func() bool { return done }, time.Hour) {
		sw.t.Fatalf("Do on %s never ran", name)
	}
}

func (sw *simWorld) RunUntil(cond func() bool) {
	sw.t.Helper()
	if !sw.w.RunUntil(cond, time.Hour) {
		sw.t.Fatal("condition never held")
	}
}

func (sw *simWorld) Kill(name string) {
	n := sw.node(name)
	n.Kill()
	n.Restart()
}

// TestConformanceThroughTheWrapper runs envtest over wrapped simulated
// disks: with no rule, faultfs changes nothing a caller can see, SendFile
// through a wrapped file included.
func TestConformanceThroughTheWrapper(t *testing.T) {
	envtest.Run(t, func(t testing.TB) envtest.World { return &simWorld{t: t, w: sim.New(7)} })
}

func newDisk(t *testing.T) (*faultfs.FS, *simfs.Disk, *sched.Scheduler) {
	t.Helper()
	s := sched.New()
	d := simfs.New(rng.New(1), sched.Direct(s, "n1"))
	if err := d.MkdirAll("a/b"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a/f", "a/b/g", "h"} {
		f, err := d.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return faultfs.New(d), d, s
}

// calls makes one call of every kind but the asynchronous ones, on the
// files of newDisk, and returns which failed, by kind.
func calls(fsys *faultfs.FS) []string {
	var failed []string
	note := func(what string, err error) {
		if err != nil {
			failed = append(failed, what)
		}
	}
	f, err := fsys.Open("a/f")
	note("open a/f", err)
	if f == nil { // to go on with the file's calls: counted, not failed
		fsys.SetEnabled(false)
		f, _ = fsys.Open("a/f")
		fsys.SetEnabled(true)
	}
	_, err = f.Write([]byte("x"))
	note("write a/f", err)
	_, err = f.WriteAt([]byte("y"), 1)
	note("writeat a/f", err)
	if _, err = f.ReadAt(make([]byte, 1), 0); err != io.EOF { // the writes may have failed
		note("read a/f", err)
	}
	note("truncate a/f", f.Truncate(1))
	_, err = f.Size()
	note("size a/f", err)
	note("close a/f", f.Close())
	g, err := fsys.Create("a/b/g")
	note("create a/b/g", err)
	if g == nil {
		fsys.SetEnabled(false)
		g, _ = fsys.Open("a/b/g")
		fsys.SetEnabled(true)
	}
	_, err = g.Write([]byte("z"))
	note("write a/b/g", err)
	note("close a/b/g", g.Close())
	_, err = fsys.Stat("h")
	note("stat h", err)
	_, err = fsys.List("a")
	note("list a", err)
	note("mkdirall a/c", fsys.MkdirAll("a/c"))
	note("rename h a/h2", fsys.Rename("h", "a/h2"))
	note("remove a/c", fsys.Remove("a/c"))
	l, err := fsys.Lock("a/.lock")
	note("lock a/.lock", err)
	if l != nil {
		l.Close()
	}
	return failed
}

// TestPredicates: each predicate fails exactly the calls it names.
func TestPredicates(t *testing.T) {
	var (
		write  = faultfs.Kinds(faultfs.Write)
		underA = faultfs.PathPrefix("a/")
	)
	for _, tc := range []struct {
		name string
		when faultfs.Predicate
		want []string
	}{
		{"Path", faultfs.Path("a/f"), []string{"open a/f", "write a/f", "writeat a/f", "read a/f", "truncate a/f", "size a/f", "close a/f"}},
		{"PathNewName", faultfs.Path("a/h2"), []string{"rename h a/h2"}},
		{"PathPrefix", faultfs.PathPrefix("a/b/"), []string{"create a/b/g", "write a/b/g", "close a/b/g"}},
		{"Kinds", faultfs.Kinds(faultfs.Write, faultfs.Stat), []string{"write a/f", "writeat a/f", "write a/b/g", "stat h"}},
		{"And", faultfs.And(write, faultfs.Path("a/b/g")), []string{"write a/b/g"}},
		{"Or", faultfs.Or(faultfs.Kinds(faultfs.List), faultfs.Kinds(faultfs.Lock)), []string{"list a", "lock a/.lock"}},
		{"Not", faultfs.And(underA, faultfs.Not(faultfs.PathPrefix("a/f"))), []string{"create a/b/g", "write a/b/g", "close a/b/g", "mkdirall a/c", "rename h a/h2", "remove a/c", "lock a/.lock"}},
		{"Nth", faultfs.Nth(2, write), []string{"writeat a/f"}},
		{"FromNth", faultfs.FromNth(2, write), []string{"writeat a/f", "write a/b/g"}},
		{"Func", func(op faultfs.Op) bool { return op.Kind == faultfs.Write && op.Off == -1 }, []string{"write a/f", "write a/b/g"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, _, _ := newDisk(t)
			rule := fsys.Inject(env.ErrIO, tc.when)
			if got := calls(fsys); !slices.Equal(got, tc.want) {
				t.Fatalf("failed %q, want %q", got, tc.want)
			}
			wantHits := len(tc.want)
			for _, reopened := range []string{"open a/f", "create a/b/g"} {
				if slices.Contains(tc.want, reopened) {
					wantHits++ // calls opened it again with injection off
				}
			}
			if rule.Hits() != wantHits {
				t.Fatalf("Hits() = %d, want %d", rule.Hits(), wantHits)
			}
		})
	}
}

// TestInjectedErrors: an injected error matches the rule's error and
// ErrInjected, names its path, and the failed call changed nothing.
func TestInjectedErrors(t *testing.T) {
	fsys, disk, _ := newDisk(t)
	fsys.Inject(env.ErrNoSpace, faultfs.Kinds(faultfs.Write, faultfs.Create, faultfs.Rename))
	f, err := fsys.Open("a/f")
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.Write([]byte("data"))
	var pe *fs.PathError
	if n != 0 || !errors.Is(err, env.ErrNoSpace) || !errors.Is(err, faultfs.ErrInjected) || !errors.As(err, &pe) || pe.Path != "a/f" {
		t.Fatalf("Write = %d, %v; want 0 and a PathError for a/f matching env.ErrNoSpace and ErrInjected", n, err)
	}
	if size, _ := f.Size(); size != 0 {
		t.Fatalf("a failed write wrote: size %d", size)
	}
	if _, err := fsys.Create("new"); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("Create: %v", err)
	}
	if _, err := disk.Stat("new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Create created the file: %v", err)
	}
	if err := fsys.Rename("h", "h2"); !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("Rename: %v", err)
	}
	if _, err := disk.Stat("h"); err != nil {
		t.Fatalf("a failed Rename moved the file: %v", err)
	}
	// Close fails and closes all the same.
	fsys.Inject(env.ErrIO, faultfs.Kinds(faultfs.Close))
	if err := f.Close(); !errors.Is(err, env.ErrIO) {
		t.Fatalf("Close: %v", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("ReadAt after a failed Close: %v, want env.ErrClosed", err)
	}
}

// TestAsyncFailuresComeThroughTheCallback: Sync and SyncDir report an
// injected failure on the loop, never inside the call, and a file's Syncs
// still complete in the order issued.
func TestAsyncFailuresComeThroughTheCallback(t *testing.T) {
	fsys, _, s := newDisk(t)
	fsys.Inject(env.ErrIO, faultfs.Nth(2, faultfs.Kinds(faultfs.Sync)))
	fsys.Inject(env.ErrIO, faultfs.Kinds(faultfs.SyncDir))
	f, err := fsys.Open("a/f")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for i := 1; i <= 3; i++ {
		f.Sync(func(err error) { order = append(order, fmt.Sprintf("sync %d: %v", i, errors.Is(err, env.ErrIO))) })
	}
	fsys.SyncDir("a", func(err error) { order = append(order, fmt.Sprintf("syncdir: %v", errors.Is(err, env.ErrIO))) })
	if len(order) != 0 {
		t.Fatalf("callbacks ran inside the calls: %q", order)
	}
	for s.Step() {
	}
	want := []string{"sync 1: false", "sync 2: true", "sync 3: false"}
	syncs := slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s == "syncdir: true" })
	if !slices.Equal(syncs, want) || len(order) != 4 || !slices.Contains(order, "syncdir: true") {
		t.Fatalf("completions %q; want %q and a failed syncdir", order, want)
	}
}

// TestSetEnabledAndStop: with injection off nothing fails but the rules go
// on counting; a stopped rule neither fails nor counts; Calls counts every
// call.
func TestSetEnabledAndStop(t *testing.T) {
	fsys, _, _ := newDisk(t)
	third := fsys.Inject(env.ErrIO, faultfs.Nth(3, faultfs.Kinds(faultfs.Stat)))
	stats := fsys.Count(faultfs.Kinds(faultfs.Stat))
	stat := func() error { _, err := fsys.Stat("h"); return err }
	fsys.SetEnabled(false)
	for range 3 {
		if err := stat(); err != nil {
			t.Fatalf("Stat failed with injection off: %v", err)
		}
	}
	fsys.SetEnabled(true)
	fourth := fsys.Inject(env.ErrIO, faultfs.Nth(1, faultfs.Kinds(faultfs.Stat)))
	if err := stat(); !errors.Is(err, env.ErrIO) {
		t.Fatalf("Stat with a fresh rule: %v", err)
	}
	fourth.Stop()
	if err := stat(); err != nil {
		t.Fatalf("Stat after Stop: %v", err)
	}
	if third.Hits() != 1 || fourth.Hits() != 1 || stats.Hits() != 5 || fsys.Calls(faultfs.Stat) != 5 {
		t.Fatalf("hits %d, %d, counted %d, calls %d; want 1, 1, 5, 5", third.Hits(), fourth.Hits(), stats.Hits(), fsys.Calls(faultfs.Stat))
	}
}

// TestDupIsWrappedToo: simnet's SendFile reads through a file's Dup; the
// duplicate of a wrapped file is wrapped, so the rules strike those reads.
func TestDupIsWrappedToo(t *testing.T) {
	fsys, _, _ := newDisk(t)
	fsys.Inject(env.ErrIO, faultfs.Kinds(faultfs.Read))
	f, err := fsys.Open("a/f")
	if err != nil {
		t.Fatal(err)
	}
	dup, err := f.(interface{ Dup() (env.File, error) }).Dup()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := dup.ReadAt(make([]byte, 1), 0); !errors.Is(err, env.ErrIO) {
		t.Fatalf("read through the duplicate: %v, want the injected env.ErrIO", err)
	}
}

// TestOverOSEnv: the same rules over real files and osenv's loop.
func TestOverOSEnv(t *testing.T) {
	dir := t.TempDir()
	loop := osenv.NewLoop()
	go loop.Run()
	defer loop.Stop()
	n, err := osenv.New(osenv.Config{Dir: dir, Loop: loop, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fsys := faultfs.New(n.Env().FS)
	fsys.Inject(env.ErrNoSpace, faultfs.And(faultfs.Path("f"), faultfs.Kinds(faultfs.Write)))
	fsys.Inject(env.ErrIO, faultfs.Kinds(faultfs.Sync))
	fsys.Inject(env.ErrIO, faultfs.Kinds(faultfs.Lock))

	var writeErr, lockErr error
	syncErr := make(chan error, 1)
	loop.Post(func() {
		f, err := fsys.Create("f")
		if err != nil {
			syncErr <- err
			return
		}
		_, writeErr = f.Write([]byte("x"))
		_, lockErr = fsys.Lock(".lock")
		f.Sync(func(err error) { syncErr <- err; f.Close() })
	})
	select {
	case err := <-syncErr:
		if !errors.Is(err, env.ErrIO) || !errors.Is(err, faultfs.ErrInjected) {
			t.Fatalf("Sync reported %v, want the injected env.ErrIO", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Sync never called back")
	}
	if !errors.Is(writeErr, env.ErrNoSpace) || !errors.Is(lockErr, env.ErrIO) {
		t.Fatalf("Write: %v, Lock: %v; want the injected errors", writeErr, lockErr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || len(b) != 0 {
		t.Fatalf("f holds %q, %v: the failed write reached the disk", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the failed Lock created its file: %v", err)
	}
}
