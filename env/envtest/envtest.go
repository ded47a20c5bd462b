// Package envtest is the conformance suite for implementations of package
// env. The same test bodies run against osenv (real files, real sockets, real
// time) and against the simulator, so that code tested in the simulator
// behaves the same way in production.
//
// An implementation provides a World and calls Run from its own tests:
//
//	func TestConformance(t *testing.T) { envtest.Run(t, newWorld) }
//
// The bodies touch a node only inside World.Do and World.RunUntil, because
// its state belongs to its loop: in the simulator every loop is one
// goroutine, in osenv each loop is a goroutine of its own. A body therefore
// computes inside Do and returns an error, and fails the test outside.
//
// What the suite pins down beyond the comments in package env:
//   - callbacks (Sync, SyncDir, timers, Dial, Post) never run inside the call
//     that schedules them;
//   - operations on a closed file, and a second Close of a file or a
//     connection, fail with env.ErrClosed; a Sync of a closed file reports
//     env.ErrClosed through its callback;
//   - timers set in one loop turn fire in deadline order, ties in the order
//     they were set; a timer set with d <= 0 fires before any with d > 0;
//   - OnData never delivers an empty slice;
//   - a connection accepted on a listener has that listener's Addr as its
//     LocalAddr, and the dialer's connection has it as its RemoteAddr;
//   - where connections implement env.FileSender: file ranges go out in
//     order with the writes around them, even if the file is closed or
//     removed right after; a closed file, a negative range or a closed
//     connection is refused at once; and a file truncated before its range
//     is sent ends the stream (the peer gets a prefix of what was queued,
//     then a close; the sender's OnClose reports an error), unless the
//     range had already gone out;
//   - a Lock is refused while the same file's lock is held, by the same
//     process too, and is free again after Close or, in worlds that can
//     kill a node (Killer), after the holder's death; a lock file is
//     created if missing, and the refusal is an *env.LockedError.
package envtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
)

// World is a small set of nodes of one implementation that can reach each
// other over its network.
type World interface {
	// Node returns the environment of the named node, creating it (with an
	// empty disk) on first use. It is called from the test's goroutine, not
	// from inside Do or RunUntil.
	Node(name string) env.Env
	// ListenAddr returns an address the named node can pass to Net.Listen.
	// The address actually bound is Listener.Addr.
	ListenAddr(name string) string
	// Do runs f on the named node's loop and returns once f has run.
	Do(node string, f func())
	// RunUntil lets the world run until cond holds, evaluating cond on the
	// loop(s) between events, so that cond may read any node's state. It
	// fails the test if cond does not hold within a generous bound (real
	// time for osenv, virtual time for the simulator).
	RunUntil(cond func() bool)
}

// Killer is implemented by worlds that can end a node's process abruptly
// and start another over the same disk. The tests that need it are skipped
// in worlds without it.
type Killer interface {
	// Kill ends the named node's process as kill -9 does, keeping its disk
	// (and, in the simulator, its page cache); afterwards Node(name)
	// returns the environment of a new process over that disk.
	Kill(name string)
}

// NewWorld makes a fresh World for one test; it registers its own cleanup
// with t.Cleanup.
type NewWorld func(t testing.TB) World

// Run runs every conformance test against worlds made by newWorld, one fresh
// world per test.
func Run(t *testing.T, newWorld NewWorld) {
	for _, tc := range tests() {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newWorld(t)) })
	}
}

type test struct {
	name string
	run  func(t *testing.T, w World)
}

func tests() []test {
	return []test{
		{"FileWriteRead", testFileWriteRead},
		{"FileWriteAtTruncate", testFileWriteAtTruncate},
		{"FileReopen", testFileReopen},
		{"Directories", testDirectories},
		{"RenameReplaces", testRenameReplaces},
		{"NotExist", testNotExist},
		{"ClosedFile", testClosedFile},
		{"SyncCompletesOnLoopInOrder", testSyncOrder},
		{"SyncDir", testSyncDir},
		{"SyncInFlightAtClose", testSyncInFlightAtClose},
		{"LockExcludes", testLockExcludes},
		{"LockDiesWithProcess", testLockDiesWithProcess},
		{"TimersFireInDeadlineOrder", testTimerOrder},
		{"TimerStop", testTimerStop},
		{"PostOrder", testPostOrder},
		{"StreamBothDirections", testStream},
		{"ManyConnections", testManyConnections},
		{"PeerSeesCloseAfterData", testPeerSeesClose},
		{"NoEventsAfterLocalClose", testNoEventsAfterLocalClose},
		{"DialNobodyListening", testDialRefused},
		{"ListenerCloseKeepsConnections", testListenerClose},
		{"WriteAfterCloseFails", testWriteAfterClose},
		{"SendFileInterleavesWithWrites", testSendFile},
		{"SendFileOfTruncatedFile", testSendFileTruncated},
	}
}

// on runs f on node's loop and fails the test with the error f returns.
func on(t *testing.T, w World, node string, f func(e env.Env) error) {
	t.Helper()
	e := w.Node(node)
	var err error
	w.Do(node, func() { err = f(e) })
	if err != nil {
		t.Fatalf("on %s: %v", node, err)
	}
}

// --- files ---

func writeFile(fsys env.FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readFile(fsys env.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f)
}

func readAll(f env.File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	p := make([]byte, size)
	if n, err := f.ReadAt(p, 0); n != len(p) || (err != nil && err != io.EOF) {
		return nil, fmt.Errorf("read %s: got %d of %d bytes: %v", f.Name(), n, size, err)
	}
	return p, nil
}

// wantContent checks f's whole content.
func wantContent(f env.File, want []byte) error {
	got, err := readAll(f)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s holds %q, want %q", f.Name(), got, want)
	}
	return nil
}

func testFileWriteRead(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		f, err := e.FS.Create("f")
		if err != nil {
			return err
		}
		defer f.Close()
		if f.Name() != "f" {
			return fmt.Errorf("envtest: Name() = %q, want %q", f.Name(), "f")
		}
		for _, s := range []string{"hello", ", ", "world"} {
			if n, err := f.Write([]byte(s)); n != len(s) || err != nil {
				return fmt.Errorf("envtest: Write(%q) = %d, %v", s, n, err)
			}
		}
		if size, err := f.Size(); size != 12 || err != nil {
			return fmt.Errorf("envtest: Size() = %d, %v; want 12", size, err)
		}
		if err := wantContent(f, []byte("hello, world")); err != nil {
			return err
		}
		// Reads past the end are short and say io.EOF.
		p := make([]byte, 5)
		if n, err := f.ReadAt(p, 10); n != 2 || err != io.EOF || string(p[:n]) != "ld" {
			return fmt.Errorf("envtest: ReadAt(5 bytes, 10) = %d %q, %v; want 2 \"ld\", io.EOF", n, p[:n], err)
		}
		if n, err := f.ReadAt(p, 12); n != 0 || err != io.EOF {
			return fmt.Errorf("envtest: ReadAt at the end = %d, %v; want 0, io.EOF", n, err)
		}
		if n, err := f.ReadAt(p, 100); n != 0 || err != io.EOF {
			return fmt.Errorf("envtest: ReadAt past the end = %d, %v; want 0, io.EOF", n, err)
		}
		return nil
	})
}

func testFileWriteAtTruncate(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		f, err := e.FS.Create("f")
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write([]byte("hello, world")); err != nil {
			return err
		}
		// WriteAt overwrites in place and leaves the position alone.
		if n, err := f.WriteAt([]byte("HELLO"), 0); n != 5 || err != nil {
			return fmt.Errorf("envtest: WriteAt = %d, %v", n, err)
		}
		if _, err := f.Write([]byte("!")); err != nil {
			return err
		}
		if err := wantContent(f, []byte("HELLO, world!")); err != nil {
			return err
		}
		// WriteAt past the end extends the file with zeros in the gap.
		if _, err := f.WriteAt([]byte("x"), 16); err != nil {
			return err
		}
		if err := wantContent(f, []byte("HELLO, world!\x00\x00\x00x")); err != nil {
			return err
		}
		if err := f.Truncate(5); err != nil {
			return err
		}
		if err := wantContent(f, []byte("HELLO")); err != nil {
			return err
		}
		if err := f.Truncate(8); err != nil {
			return err
		}
		if err := wantContent(f, []byte("HELLO\x00\x00\x00")); err != nil {
			return err
		}
		return f.Truncate(0)
	})
}

func testFileReopen(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		if err := writeFile(e.FS, "f", []byte("hello")); err != nil {
			return err
		}
		// Open keeps the content and starts the position at 0.
		f, err := e.FS.Open("f")
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte("J")); err != nil {
			return err
		}
		if err := wantContent(f, []byte("Jello")); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		// Create truncates an existing file.
		f, err = e.FS.Create("f")
		if err != nil {
			return err
		}
		defer f.Close()
		if size, err := f.Size(); size != 0 || err != nil {
			return fmt.Errorf("envtest: Size() after Create of an existing file = %d, %v; want 0", size, err)
		}
		return nil
	})
}

func wantList(fsys env.FS, dir string, want ...string) error {
	got, err := fsys.List(dir)
	if err != nil {
		return err
	}
	if len(got) != len(want) || (len(got) > 0 && !slices.Equal(got, want)) {
		return fmt.Errorf("envtest: List(%q) = %q, want %q", dir, got, want)
	}
	return nil
}

func testDirectories(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		fsys := e.FS
		if err := wantList(fsys, "."); err != nil {
			return fmt.Errorf("a new node's disk is not empty: %w", err)
		}
		if err := fsys.MkdirAll("d/e/f"); err != nil {
			return err
		}
		if err := fsys.MkdirAll("d/e"); err != nil {
			return fmt.Errorf("envtest: MkdirAll of an existing directory: %w", err)
		}
		for _, name := range []string{"d/z", "d/b", "d/e/y"} {
			if err := writeFile(fsys, name, []byte(name)); err != nil {
				return err
			}
		}
		if err := wantList(fsys, ".", "d"); err != nil {
			return err
		}
		if err := wantList(fsys, "d", "b", "e", "z"); err != nil {
			return err
		}
		if err := wantList(fsys, "d/e/f"); err != nil {
			return err
		}
		fi, err := fsys.Stat("d/e/y")
		if want := (env.FileInfo{Name: "y", Size: 5}); fi != want || err != nil {
			return fmt.Errorf("envtest: Stat(d/e/y) = %+v, %v; want %+v", fi, err, want)
		}
		fi, err = fsys.Stat("d/e")
		if fi.Name != "e" || !fi.IsDir || err != nil {
			return fmt.Errorf("envtest: Stat(d/e) = %+v, %v; want a directory named e", fi, err)
		}
		// Rename moves across directories.
		if err := fsys.Rename("d/z", "d/e/f/z"); err != nil {
			return err
		}
		if err := wantList(fsys, "d", "b", "e"); err != nil {
			return err
		}
		if got, err := readFile(fsys, "d/e/f/z"); string(got) != "d/z" || err != nil {
			return fmt.Errorf("renamed file holds %q, %v; want %q", got, err, "d/z")
		}
		// Remove takes files and empty directories, not full ones.
		if err := fsys.Remove("d/e"); err == nil {
			return errors.New("envtest: Remove of a non-empty directory succeeded")
		}
		for _, name := range []string{"d/e/f/z", "d/e/f", "d/e/y"} {
			if err := fsys.Remove(name); err != nil {
				return err
			}
		}
		if err := wantList(fsys, "d/e"); err != nil {
			return err
		}
		if err := fsys.Remove("d/e"); err != nil {
			return err
		}
		return wantList(fsys, "d", "b")
	})
}

func testRenameReplaces(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		if err := writeFile(e.FS, "old", []byte("new content")); err != nil {
			return err
		}
		if err := writeFile(e.FS, "target", []byte("old content")); err != nil {
			return err
		}
		if err := e.FS.Rename("old", "target"); err != nil {
			return err
		}
		if err := wantList(e.FS, ".", "target"); err != nil {
			return err
		}
		got, err := readFile(e.FS, "target")
		if string(got) != "new content" || err != nil {
			return fmt.Errorf("target holds %q, %v after Rename; want %q", got, err, "new content")
		}
		return nil
	})
}

func testNotExist(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		fsys := e.FS
		if err := fsys.MkdirAll("d"); err != nil {
			return err
		}
		_, errOpen := fsys.Open("d/missing")
		_, errCreate := fsys.Create("nodir/f")
		_, errStat := fsys.Stat("missing")
		_, errList := fsys.List("missing")
		checks := []struct {
			op  string
			err error
		}{
			{"Open of a missing file", errOpen},
			{"Create in a missing directory", errCreate},
			{"Stat of a missing file", errStat},
			{"List of a missing directory", errList},
			{"Remove of a missing file", fsys.Remove("missing")},
			{"Rename of a missing file", fsys.Rename("missing", "d/x")},
		}
		for _, c := range checks {
			if !errors.Is(c.err, fs.ErrNotExist) {
				return fmt.Errorf("%s: err = %v, want fs.ErrNotExist", c.op, c.err)
			}
		}
		return wantList(fsys, "d")
	})
}

func testClosedFile(t *testing.T, w World) {
	var syncErr error
	syncCalled := false
	on(t, w, "a", func(e env.Env) error {
		f, err := e.FS.Create("f")
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		_, errWrite := f.Write([]byte("x"))
		_, errWriteAt := f.WriteAt([]byte("x"), 0)
		_, errReadAt := f.ReadAt(make([]byte, 1), 0)
		_, errSize := f.Size()
		checks := []struct {
			op  string
			err error
		}{
			{"Write", errWrite},
			{"WriteAt", errWriteAt},
			{"ReadAt", errReadAt},
			{"Size", errSize},
			{"Truncate", f.Truncate(0)},
			{"Close", f.Close()},
		}
		for _, c := range checks {
			if !errors.Is(c.err, env.ErrClosed) {
				return fmt.Errorf("%s of a closed file: err = %v, want env.ErrClosed", c.op, c.err)
			}
		}
		f.Sync(func(err error) { syncCalled, syncErr = true, err })
		if syncCalled {
			return errors.New("envtest: Sync ran its callback before returning")
		}
		return nil
	})
	w.RunUntil(func() bool { return syncCalled })
	on(t, w, "a", func(env.Env) error {
		if !errors.Is(syncErr, env.ErrClosed) {
			return fmt.Errorf("envtest: Sync of a closed file reported %v, want env.ErrClosed", syncErr)
		}
		return nil
	})
}

// syncLog records Sync completions in the order they arrive.
type syncLog struct {
	done []int
	errs []error
	// early is set if a callback ran before its Sync returned.
	early bool
}

func (l *syncLog) issue(sync func(func(error)), id int) {
	returned := false
	sync(func(err error) {
		if !returned {
			l.early = true
		}
		l.done = append(l.done, id)
		l.errs = append(l.errs, err)
	})
	returned = true
}

func (l *syncLog) check(want ...int) error {
	if l.early {
		return errors.New("a sync callback ran before the call returned")
	}
	if !slices.Equal(l.done, want) {
		return fmt.Errorf("syncs completed in order %v, want %v", l.done, want)
	}
	for i, err := range l.errs {
		if err != nil {
			return fmt.Errorf("sync %d failed: %w", l.done[i], err)
		}
	}
	return nil
}

func testSyncOrder(t *testing.T, w World) {
	var l syncLog
	var f env.File
	on(t, w, "a", func(e env.Env) error {
		var err error
		if f, err = e.FS.Create("f"); err != nil {
			return err
		}
		for i := 1; i <= 5; i++ {
			if _, err := f.Write(bytes.Repeat([]byte{byte(i)}, 1000)); err != nil {
				return err
			}
			l.issue(f.Sync, i)
		}
		return nil
	})
	w.RunUntil(func() bool { return len(l.done) == 5 })
	on(t, w, "a", func(env.Env) error {
		if err := l.check(1, 2, 3, 4, 5); err != nil {
			return err
		}
		return f.Close()
	})
}

func testSyncDir(t *testing.T, w World) {
	var l syncLog
	var missingErr error
	missingDone := false
	on(t, w, "a", func(e env.Env) error {
		if err := e.FS.MkdirAll("d/e"); err != nil {
			return err
		}
		if err := writeFile(e.FS, "d/e/f", []byte("x")); err != nil {
			return err
		}
		syncDir := func(dir string) func(func(error)) {
			return func(done func(error)) { e.FS.SyncDir(dir, done) }
		}
		l.issue(syncDir("d/e"), 1)
		l.issue(syncDir("d"), 2)
		l.issue(syncDir("."), 3)
		e.FS.SyncDir("missing", func(err error) { missingDone, missingErr = true, err })
		return nil
	})
	w.RunUntil(func() bool { return len(l.done) == 3 && missingDone })
	on(t, w, "a", func(env.Env) error {
		slices.Sort(l.done) // SyncDirs of different directories may complete in any order
		if err := l.check(1, 2, 3); err != nil {
			return err
		}
		if !errors.Is(missingErr, fs.ErrNotExist) {
			return fmt.Errorf("envtest: SyncDir of a missing directory reported %v, want fs.ErrNotExist", missingErr)
		}
		return nil
	})
}

func testLockExcludes(t *testing.T, w World) {
	on(t, w, "a", func(e env.Env) error {
		fsys := e.FS
		lock, err := fsys.Lock(".lock")
		if err != nil {
			return err
		}
		if _, err := fsys.Stat(".lock"); err != nil {
			return fmt.Errorf("envtest: Lock did not create its file: %v", err)
		}
		if err := wantLocked(fsys, ".lock"); err != nil {
			return err
		}
		other, err := fsys.Lock("other")
		if err != nil {
			return fmt.Errorf("envtest: Lock of another file while .lock is held: %v", err)
		}
		if err := lock.Close(); err != nil {
			return err
		}
		if err := lock.Close(); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: second Close of a lock: err = %v, want env.ErrClosed", err)
		}
		again, err := fsys.Lock(".lock")
		if err != nil {
			return fmt.Errorf("envtest: Lock after the holder's Close: %v", err)
		}
		if err := fsys.MkdirAll("d"); err != nil {
			return err
		}
		_, errMissing := fsys.Lock("missing/.lock")
		_, errBad := fsys.Lock("../.lock")
		_, errDir := fsys.Lock("d")
		switch {
		case !errors.Is(errMissing, fs.ErrNotExist):
			return fmt.Errorf("envtest: Lock in a missing directory: err = %v, want fs.ErrNotExist", errMissing)
		case !errors.Is(errBad, fs.ErrInvalid):
			return fmt.Errorf("envtest: Lock of %q: err = %v, want fs.ErrInvalid", "../.lock", errBad)
		case errDir == nil:
			return errors.New("envtest: Lock of a directory succeeded")
		}
		return errors.Join(again.Close(), other.Close())
	})
}

// wantLocked checks that a Lock of name is refused at once, as held.
func wantLocked(fsys env.FS, name string) error {
	l, err := fsys.Lock(name)
	if err == nil {
		l.Close()
		return fmt.Errorf("envtest: a second Lock of %s succeeded while the first is held", name)
	}
	var locked *env.LockedError
	if !errors.Is(err, env.ErrLocked) || !errors.As(err, &locked) || locked.Name != name {
		return fmt.Errorf("envtest: a second Lock of %s: err = %v (%T), want an *env.LockedError naming it", name, err, err)
	}
	return nil
}

func testLockDiesWithProcess(t *testing.T, w World) {
	k, ok := w.(Killer)
	if !ok {
		t.Skip("this world cannot kill a node")
	}
	var dead io.Closer
	on(t, w, "a", func(e env.Env) error {
		var err error
		dead, err = e.FS.Lock(".lock")
		return err
	})
	k.Kill("a")
	on(t, w, "a", func(e env.Env) error {
		lock, err := e.FS.Lock(".lock")
		if err != nil {
			return fmt.Errorf("envtest: Lock after its holder was killed: %v", err)
		}
		if err := wantLocked(e.FS, ".lock"); err != nil {
			return err
		}
		if err := dead.Close(); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: Close of a dead process's lock: err = %v, want env.ErrClosed", err)
		}
		if err := wantLocked(e.FS, ".lock"); err != nil {
			return fmt.Errorf("after the dead lock's Close: %w", err)
		}
		return lock.Close()
	})
}

func testSyncInFlightAtClose(t *testing.T, w World) {
	var l syncLog
	on(t, w, "a", func(e env.Env) error {
		f, err := e.FS.Create("f")
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte("durable")); err != nil {
			return err
		}
		l.issue(f.Sync, 1)
		return f.Close()
	})
	w.RunUntil(func() bool { return len(l.done) == 1 })
	on(t, w, "a", func(e env.Env) error {
		if err := l.check(1); err != nil {
			return err
		}
		got, err := readFile(e.FS, "f")
		if string(got) != "durable" || err != nil {
			return fmt.Errorf("after Sync and Close the file holds %q, %v; want %q", got, err, "durable")
		}
		return nil
	})
}

// --- loop and clock ---

func testTimerOrder(t *testing.T, w World) {
	var fired []string
	var start time.Time
	var lastAt time.Time
	on(t, w, "a", func(e env.Env) error {
		rec := func(name string) func() {
			return func() {
				fired = append(fired, name)
				lastAt = e.Clock.Now()
			}
		}
		start = e.Clock.Now()
		e.Clock.AfterFunc(30*time.Millisecond, rec("30ms"))
		e.Clock.AfterFunc(10*time.Millisecond, func() {
			rec("10ms-a")()
			e.Clock.AfterFunc(0, rec("nested"))
		})
		e.Clock.AfterFunc(0, rec("0"))
		e.Clock.AfterFunc(20*time.Millisecond, rec("20ms"))
		e.Clock.AfterFunc(10*time.Millisecond, rec("10ms-b"))
		e.Clock.AfterFunc(-time.Second, rec("negative"))
		if len(fired) != 0 {
			return fmt.Errorf("timers %v fired inside AfterFunc", fired)
		}
		return nil
	})
	w.RunUntil(func() bool { return len(fired) == 7 })
	on(t, w, "a", func(e env.Env) error {
		// Top-level timers, set in one turn, fire strictly by deadline.
		top := slices.DeleteFunc(slices.Clone(fired), func(s string) bool { return s == "nested" })
		if want := []string{"negative", "0", "10ms-a", "10ms-b", "20ms", "30ms"}; !slices.Equal(top, want) {
			return fmt.Errorf("timers fired in order %v, want %v", top, want)
		}
		// Where "nested" falls is up to the clock: its deadline is the
		// moment 10ms-a ran, which real time puts a hair before 10ms-b's.
		if i, j := slices.Index(fired, "nested"), slices.Index(fired, "10ms-a"); i < j {
			return fmt.Errorf("a timer set from a timer's callback fired before that timer: %v", fired)
		}
		if elapsed := lastAt.Sub(start); elapsed < 30*time.Millisecond {
			return fmt.Errorf("30ms timer fired after %v", elapsed)
		}
		return nil
	})
}

func testTimerStop(t *testing.T, w World) {
	var fired []string
	var stopped, keep, early env.Timer
	on(t, w, "a", func(e env.Env) error {
		rec := func(name string) func() { return func() { fired = append(fired, name) } }
		early = e.Clock.AfterFunc(time.Millisecond, rec("early"))
		stopped = e.Clock.AfterFunc(5*time.Millisecond, rec("stopped"))
		keep = e.Clock.AfterFunc(10*time.Millisecond, rec("keep"))
		zero := e.Clock.AfterFunc(0, rec("zero"))
		if !zero.Stop() {
			return errors.New("envtest: Stop of a pending d=0 timer returned false")
		}
		if !stopped.Stop() {
			return errors.New("envtest: Stop of a pending timer returned false")
		}
		if stopped.Stop() {
			return errors.New("second Stop of a timer returned true")
		}
		return nil
	})
	w.RunUntil(func() bool { return slices.Contains(fired, "keep") })
	on(t, w, "a", func(e env.Env) error {
		if want := []string{"early", "keep"}; !slices.Equal(fired, want) {
			return fmt.Errorf("fired %v, want %v", fired, want)
		}
		if early.Stop() || keep.Stop() {
			return errors.New("envtest: Stop of a timer that already fired returned true")
		}
		return nil
	})
}

func testPostOrder(t *testing.T, w World) {
	var ran []int
	const n = 100
	on(t, w, "a", func(e env.Env) error {
		for i := range n {
			e.Loop.Post(func() {
				ran = append(ran, i)
				if i == 0 {
					// Posted from the loop: after everything already queued.
					e.Loop.Post(func() { ran = append(ran, n) })
				}
			})
		}
		if len(ran) != 0 {
			return fmt.Errorf("envtest: Post ran %d functions before returning", len(ran))
		}
		return nil
	})
	w.RunUntil(func() bool { return len(ran) == n+1 })
	on(t, w, "a", func(env.Env) error {
		for i, v := range ran {
			if v != i {
				return fmt.Errorf("posted functions ran in order %v", ran)
			}
		}
		return nil
	})
}

// --- network ---

// recorder is a ConnHandler that keeps what it sees and notes every breach
// of the event contract.
type recorder struct {
	data     []byte
	chunks   int
	closed   bool
	closeErr error
	breaches []string
	// onData, if set, runs after each delivery of p.
	onData func(r *recorder, p []byte)
}

func (r *recorder) OnData(p []byte) {
	if r.closed {
		r.breaches = append(r.breaches, "OnData after OnClose")
	}
	if len(p) == 0 {
		r.breaches = append(r.breaches, "OnData with no bytes")
	}
	r.data = append(r.data, p...)
	r.chunks++
	if r.onData != nil {
		r.onData(r, p)
	}
}

func (r *recorder) OnClose(err error) {
	if r.closed {
		r.breaches = append(r.breaches, "OnClose twice")
	}
	r.closed, r.closeErr = true, err
}

func (r *recorder) check(who string) error {
	if len(r.breaches) > 0 {
		return fmt.Errorf("%s: %v", who, r.breaches)
	}
	return nil
}

// server listens on node and records every connection it accepts.
type server struct {
	node  string
	ln    env.Listener
	conns []env.Conn
	recs  []*recorder
}

func listen(t *testing.T, w World, node string) *server {
	t.Helper()
	s := &server{node: node}
	addr := w.ListenAddr(node)
	on(t, w, node, func(e env.Env) error {
		ln, err := e.Net.Listen(addr, func(c env.Conn) env.ConnHandler {
			r := &recorder{}
			s.conns = append(s.conns, c)
			s.recs = append(s.recs, r)
			return r
		})
		s.ln = ln
		return err
	})
	return s
}

// client is the dialing side of one connection.
type client struct {
	conn    env.Conn
	rec     *recorder
	dialErr error
	done    bool // the connected callback has run
	early   bool // it ran inside Dial
}

func dial(t *testing.T, w World, node, addr string) *client {
	t.Helper()
	c := &client{rec: &recorder{}}
	on(t, w, node, func(e env.Env) error {
		returned := false
		e.Net.Dial(addr, func(conn env.Conn, err error) env.ConnHandler {
			c.conn, c.dialErr, c.done, c.early = conn, err, true, !returned
			return c.rec
		})
		returned = true
		return nil
	})
	return c
}

// connect dials s from node and waits until both ends are up.
func connect(t *testing.T, w World, node string, s *server) *client {
	t.Helper()
	var addr string
	want := 0
	w.Do(s.node, func() { addr, want = s.ln.Addr(), len(s.conns)+1 })
	c := dial(t, w, node, addr)
	w.RunUntil(func() bool { return c.done && len(s.conns) >= want })
	on(t, w, node, func(env.Env) error {
		if c.early {
			return errors.New("envtest: Dial ran its callback before returning")
		}
		if c.dialErr != nil || c.conn == nil {
			return fmt.Errorf("dial %s: conn %v, err %v", addr, c.conn, c.dialErr)
		}
		if got := c.conn.RemoteAddr(); got != addr {
			return fmt.Errorf("dialed conn has RemoteAddr %q, want the listener's %q", got, addr)
		}
		return nil
	})
	return c
}

// pattern returns n bytes that differ with seed and position, so that a
// dropped, repeated or reordered chunk shows.
func pattern(seed uint64, n int) []byte {
	p := make([]byte, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// writeChunked writes data to c in chunks of varied sizes, each a fresh
// slice because Write takes ownership.
func writeChunked(c env.Conn, data []byte) error {
	sizes := []int{1, 7, 1500, 100, 65536 + 3, 4096, 17, 30000}
	for i := 0; len(data) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(data))
		if err := c.Write(bytes.Clone(data[:n])); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func testStream(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	up := pattern(1, 300<<10)
	down := pattern(2, 300<<10)
	on(t, w, "b", func(env.Env) error { return writeChunked(c.conn, up) })
	on(t, w, "a", func(env.Env) error {
		if got, want := s.conns[0].LocalAddr(), s.ln.Addr(); got != want {
			return fmt.Errorf("accepted conn has LocalAddr %q, want the listener's %q", got, want)
		}
		return writeChunked(s.conns[0], down)
	})
	w.RunUntil(func() bool {
		return len(s.recs[0].data) >= len(up) && len(c.rec.data) >= len(down)
	})
	on(t, w, "a", func(env.Env) error {
		if err := errors.Join(s.recs[0].check("server"), c.rec.check("client")); err != nil {
			return err
		}
		if !bytes.Equal(s.recs[0].data, up) {
			return fmt.Errorf("server received %d bytes that differ from the %d sent", len(s.recs[0].data), len(up))
		}
		if !bytes.Equal(c.rec.data, down) {
			return fmt.Errorf("client received %d bytes that differ from the %d sent", len(c.rec.data), len(down))
		}
		if s.recs[0].closed || c.rec.closed {
			return errors.New("a connection closed by nobody reported OnClose")
		}
		return nil
	})
}

func testManyConnections(t *testing.T, w World) {
	s := listen(t, w, "a")
	const n = 5
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = connect(t, w, "b", s)
	}
	// Each client writes its own pattern; the server echoes what arrives,
	// so every byte crosses twice and the streams interleave.
	on(t, w, "a", func(env.Env) error {
		for i, r := range s.recs {
			conn := s.conns[i]
			r.onData = func(r *recorder, p []byte) {
				if err := conn.Write(bytes.Clone(p)); err != nil {
					r.breaches = append(r.breaches, "echo: "+err.Error())
				}
			}
		}
		return nil
	})
	sent := make([][]byte, n)
	on(t, w, "b", func(env.Env) error {
		for i, c := range clients {
			sent[i] = pattern(uint64(10+i), 50<<10+i)
			if err := writeChunked(c.conn, sent[i]); err != nil {
				return err
			}
		}
		return nil
	})
	w.RunUntil(func() bool {
		for i, c := range clients {
			if len(c.rec.data) < len(sent[i]) {
				return false
			}
		}
		return true
	})
	on(t, w, "a", func(env.Env) error {
		for i, c := range clients {
			if err := c.rec.check(fmt.Sprintf("client %d", i)); err != nil {
				return err
			}
			if !bytes.Equal(c.rec.data, sent[i]) {
				return fmt.Errorf("client %d got back %d bytes that differ from the %d it sent", i, len(c.rec.data), len(sent[i]))
			}
		}
		return nil
	})
}

func testPeerSeesClose(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	data := pattern(3, 200<<10)
	on(t, w, "a", func(env.Env) error {
		if err := writeChunked(s.conns[0], data); err != nil {
			return err
		}
		return s.conns[0].Close() // in the same turn: the bytes must still go out first
	})
	w.RunUntil(func() bool { return c.rec.closed })
	on(t, w, "b", func(env.Env) error {
		if err := c.rec.check("client"); err != nil {
			return err
		}
		if c.rec.closeErr != nil {
			return fmt.Errorf("peer's Close reported as error %v, want nil", c.rec.closeErr)
		}
		if !bytes.Equal(c.rec.data, data) {
			return fmt.Errorf("before the close the client got %d bytes that differ from the %d sent", len(c.rec.data), len(data))
		}
		if err := c.conn.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: Write after OnClose: err = %v, want env.ErrClosed", err)
		}
		return nil
	})
	on(t, w, "a", func(env.Env) error {
		if s.recs[0].closed {
			return errors.New("envtest: OnClose was called for a local Close")
		}
		return nil
	})
}

func testNoEventsAfterLocalClose(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	// The server closes on the first bytes; the client keeps writing, and
	// keeps its stream flowing until it sees the close.
	on(t, w, "a", func(env.Env) error {
		conn := s.conns[0]
		s.recs[0].onData = func(r *recorder, _ []byte) {
			if r.chunks == 1 {
				if err := conn.Close(); err != nil {
					r.breaches = append(r.breaches, "Close: "+err.Error())
				}
			}
		}
		return nil
	})
	on(t, w, "b", func(env.Env) error { return writeChunked(c.conn, pattern(4, 100<<10)) })
	w.RunUntil(func() bool { return c.rec.closed })
	on(t, w, "a", func(env.Env) error {
		r := s.recs[0]
		if err := r.check("server"); err != nil {
			return err
		}
		if r.chunks != 1 || r.closed {
			return fmt.Errorf("after a local Close in OnData the handler got %d more OnData and OnClose=%v",
				r.chunks-1, r.closed)
		}
		return c.rec.check("client")
	})
}

func testDialRefused(t *testing.T, w World) {
	s := listen(t, w, "a")
	var addr string
	on(t, w, "a", func(env.Env) error {
		addr = s.ln.Addr()
		return s.ln.Close()
	})
	c := dial(t, w, "b", addr)
	w.RunUntil(func() bool { return c.done })
	on(t, w, "b", func(env.Env) error {
		if c.early {
			return errors.New("envtest: Dial ran its callback before returning")
		}
		if c.conn != nil || c.dialErr == nil {
			return fmt.Errorf("dial to a closed listener %s gave conn %v, err %v; want nil and an error",
				addr, c.conn, c.dialErr)
		}
		return nil
	})
}

func testListenerClose(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	var addr string
	on(t, w, "a", func(env.Env) error {
		addr = s.ln.Addr()
		if err := s.ln.Close(); err != nil {
			return err
		}
		return s.conns[0].Write([]byte("pong"))
	})
	on(t, w, "b", func(env.Env) error { return c.conn.Write([]byte("ping")) })
	w.RunUntil(func() bool { return len(s.recs[0].data) == 4 && len(c.rec.data) == 4 })
	on(t, w, "a", func(env.Env) error {
		if string(s.recs[0].data) != "ping" || string(c.rec.data) != "pong" {
			return fmt.Errorf("after the listener closed the connection carried %q and %q", s.recs[0].data, c.rec.data)
		}
		return nil
	})
	late := dial(t, w, "b", addr)
	w.RunUntil(func() bool { return late.done })
	on(t, w, "b", func(env.Env) error {
		if late.dialErr == nil {
			return fmt.Errorf("dial to a closed listener %s succeeded", addr)
		}
		return nil
	})
}

func testWriteAfterClose(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	on(t, w, "b", func(env.Env) error {
		if err := c.conn.Close(); err != nil {
			return err
		}
		if err := c.conn.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: Write after Close: err = %v, want env.ErrClosed", err)
		}
		if err := c.conn.Close(); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("second Close: err = %v, want env.ErrClosed", err)
		}
		return nil
	})
	w.RunUntil(func() bool { return s.recs[0].closed })
	on(t, w, "a", func(env.Env) error {
		r := s.recs[0]
		if r.closeErr != nil || len(r.data) != 0 {
			return fmt.Errorf("server saw data %q and close %v; want nothing and a clean close", r.data, r.closeErr)
		}
		if err := s.conns[0].Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: Write after OnClose: err = %v, want env.ErrClosed", err)
		}
		return nil
	})
}

// fileSender returns the dialed connection as an env.FileSender, or skips
// the test if the implementation has none (it is optional).
func fileSender(t *testing.T, w World, node string, c *client) env.FileSender {
	t.Helper()
	var fs env.FileSender
	w.Do(node, func() { fs, _ = c.conn.(env.FileSender) })
	if fs == nil {
		t.Skip("connections do not implement env.FileSender")
	}
	return fs
}

func testSendFile(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	fsend := fileSender(t, w, "b", c)
	content := pattern(20, 300<<10)
	var want []byte
	on(t, w, "b", func(e env.Env) error {
		f, err := e.FS.Create("seg")
		if err != nil {
			return err
		}
		if _, err := f.Write(content); err != nil {
			return err
		}
		send := func(off, n int64) error {
			want = append(want, content[off:off+n]...)
			return fsend.SendFile(f, off, n)
		}
		write := func(p string) error {
			want = append(want, p...)
			return c.conn.Write([]byte(p))
		}
		for _, step := range []func() error{
			func() error { return write("head") },
			func() error { return send(100, 200<<10) },
			func() error { return write("mid") },
			func() error { return send(5, 1000) },
			func() error { return send(0, 0) },
			func() error { return send(int64(len(content))-7, 7) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		if err := fsend.SendFile(f, -1, 10); err == nil {
			return errors.New("envtest: SendFile of a negative offset succeeded")
		}
		if err := fsend.SendFile(f, 0, -1); err == nil {
			return errors.New("envtest: SendFile of a negative length succeeded")
		}
		// The queued ranges still go out after the file is closed and
		// removed.
		if err := f.Close(); err != nil {
			return err
		}
		if err := e.FS.Remove("seg"); err != nil {
			return err
		}
		if err := fsend.SendFile(f, 5, 1000); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: SendFile of a closed file: err = %v, want env.ErrClosed", err)
		}
		if err := write("tail"); err != nil {
			return err
		}
		return c.conn.Close()
	})
	w.RunUntil(func() bool { return s.recs[0].closed })
	on(t, w, "a", func(env.Env) error {
		r := s.recs[0]
		if err := r.check("server"); err != nil {
			return err
		}
		if r.closeErr != nil {
			return fmt.Errorf("the sender's Close reached the peer as error %v", r.closeErr)
		}
		if !bytes.Equal(r.data, want) {
			return fmt.Errorf("received %d bytes that differ from the %d sent (%s)", len(r.data), len(want), firstDiff(r.data, want))
		}
		return nil
	})
	on(t, w, "b", func(e env.Env) error {
		if err := fsend.SendFile(nil, 0, 1); !errors.Is(err, env.ErrClosed) {
			return fmt.Errorf("envtest: SendFile after Close: err = %v, want env.ErrClosed", err)
		}
		return nil
	})
}

// firstDiff says where two byte strings first differ.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("first difference at byte %d", i)
}

func testSendFileTruncated(t *testing.T, w World) {
	s := listen(t, w, "a")
	c := connect(t, w, "b", s)
	fsend := fileSender(t, w, "b", c)
	content := pattern(21, 256<<10)
	var f env.File
	on(t, w, "b", func(e env.Env) error {
		var err error
		if f, err = e.FS.Create("seg"); err != nil {
			return err
		}
		if _, err := f.Write(content); err != nil {
			return err
		}
		if err := c.conn.Write([]byte("head")); err != nil {
			return err
		}
		if err := fsend.SendFile(f, 0, int64(len(content))); err != nil {
			return err
		}
		// The caller broke SendFile's rule: the range changed before it
		// was (perhaps) sent.
		if err := f.Truncate(int64(len(content) / 2)); err != nil {
			return err
		}
		// The range may already have been read short and the connection
		// broken (osenv sends at once, off the loop): a Write after that
		// is refused, as Write after a reported close is.
		if err := c.conn.Write([]byte("tail")); err != nil && !errors.Is(err, env.ErrClosed) {
			return err
		}
		return nil
	})
	full := append(append([]byte("head"), content...), "tail"...)
	r := s.recs[0]
	w.RunUntil(func() bool { return len(r.data) == len(full) || (r.closed && c.rec.closed) })
	on(t, w, "b", func(env.Env) error {
		defer f.Close()
		if err := errors.Join(r.check("server"), c.rec.check("client")); err != nil {
			return err
		}
		if bytes.Equal(r.data, full) {
			return c.conn.Close() // the range went out before the truncation
		}
		if len(r.data) >= len(full) || !bytes.Equal(r.data, full[:len(r.data)]) {
			return fmt.Errorf("after a truncation the peer got %d bytes that are no prefix of the %d queued", len(r.data), len(full))
		}
		if c.rec.closeErr == nil {
			return errors.New("the sender's OnClose reported no error for a range cut short")
		}
		return nil
	})
}
