package simfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

func newDisk(seed uint64) (*Disk, *sched.Scheduler) {
	s := sched.New()
	return New(rng.New(seed).Fork("disk"), sched.Direct(s, "n1")), s
}

// await runs the scheduler until the completion started by start reports,
// checking that it does not report inside start itself.
func await(t *testing.T, s *sched.Scheduler, start func(done func(error))) error {
	t.Helper()
	var got error
	called := 0
	start(func(err error) { called++; got = err })
	if called != 0 {
		t.Fatal("done ran before Sync/SyncDir returned")
	}
	for called == 0 && s.Step() {
	}
	if called != 1 {
		t.Fatalf("done ran %d times, want once", called)
	}
	return got
}

func mustCreate(t *testing.T, d *Disk, name string) env.File {
	t.Helper()
	f, err := d.Create(name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	return f
}

func mustWrite(t *testing.T, f env.File, p string) {
	t.Helper()
	if n, err := f.Write([]byte(p)); n != len(p) || err != nil {
		t.Fatalf("Write(%q) = %d, %v", p, n, err)
	}
}

func readAll(t *testing.T, d *Disk, name string) string {
	t.Helper()
	f, err := d.Open(name)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	defer f.Close()
	size, _ := f.Size()
	p := make([]byte, size)
	if n, err := f.ReadAt(p, 0); n != len(p) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt of %q = %d, %v", name, n, err)
	}
	return string(p)
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func TestWriteReadAndPosition(t *testing.T) {
	d, _ := newDisk(1)
	f := mustCreate(t, d, "f")
	mustWrite(t, f, "hello ")
	mustWrite(t, f, "world")
	if n, err := f.WriteAt([]byte("W"), 6); n != 1 || err != nil {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	mustWrite(t, f, "!") // WriteAt did not move the position
	if got := readAll(t, d, "f"); got != "hello World!" {
		t.Fatalf("contents %q", got)
	}
	p := make([]byte, 5)
	if n, err := f.ReadAt(p, 9); n != 3 || err != io.EOF || string(p[:n]) != "ld!" {
		t.Fatalf("short ReadAt = %d %q, %v; want 3 \"ld!\", EOF", n, p[:n], err)
	}
	if n, err := f.ReadAt(p, 12); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v; want 0, EOF", n, err)
	}
	if n, err := f.ReadAt(nil, 100); n != 0 || err != nil {
		t.Fatalf("empty ReadAt = %d, %v; want 0, nil", n, err)
	}
	if size, err := f.Size(); size != 12 || err != nil {
		t.Fatalf("Size = %d, %v", size, err)
	}
	if f.Name() != "f" {
		t.Fatalf("Name = %q", f.Name())
	}
}

func TestWritePastEndAndTruncateZeroFill(t *testing.T) {
	d, _ := newDisk(1)
	f := mustCreate(t, d, "f")
	if _, err := f.WriteAt([]byte("xy"), 3); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, d, "f"); got != "\x00\x00\x00xy" {
		t.Fatalf("write past the end: %q", got)
	}
	// Cutting and growing again must expose zeros, not the old bytes.
	if err := f.Truncate(1); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, d, "f"); got != "\x00\x00\x00\x00\x00" {
		t.Fatalf("after cut and grow: %q", got)
	}
	wantErr(t, "Truncate(-1)", f.Truncate(-1), ErrNegativeOffset)
	wantErr(t, "Truncate(huge)", f.Truncate(MaxFileSize+1), ErrTooLarge)
	_, err := f.WriteAt([]byte("x"), MaxFileSize)
	wantErr(t, "WriteAt(huge)", err, ErrTooLarge)
	_, err = f.WriteAt([]byte("x"), -1)
	wantErr(t, "WriteAt(-1)", err, ErrNegativeOffset)
	_, err = f.ReadAt(make([]byte, 1), -1)
	wantErr(t, "ReadAt(-1)", err, ErrNegativeOffset)
}

func TestCreateTruncatesAnExistingFileSeenByOpenHandles(t *testing.T) {
	d, _ := newDisk(1)
	f := mustCreate(t, d, "f")
	mustWrite(t, f, "old contents")
	g := mustCreate(t, d, "f")
	if size, _ := f.Size(); size != 0 {
		t.Fatalf("the older handle sees size %d after Create truncated the file", size)
	}
	mustWrite(t, g, "new")
	if got := readAll(t, d, "f"); got != "new" {
		t.Fatalf("contents %q", got)
	}
}

func TestLookupErrors(t *testing.T) {
	d, s := newDisk(1)
	mustCreate(t, d, "file")
	if err := d.MkdirAll("dir/sub"); err != nil {
		t.Fatal(err)
	}
	_, err := d.Open("missing")
	wantErr(t, "Open(missing)", err, fs.ErrNotExist)
	_, err = d.Create("nodir/f")
	wantErr(t, "Create under a missing directory", err, fs.ErrNotExist)
	_, err = d.Create("file/f")
	wantErr(t, "Create under a file", err, ErrNotDir)
	_, err = d.Create("dir")
	wantErr(t, "Create over a directory", err, ErrIsDir)
	_, err = d.Open("dir")
	wantErr(t, "Open of a directory", err, ErrIsDir)
	_, err = d.Stat("dir/missing")
	wantErr(t, "Stat(missing)", err, fs.ErrNotExist)
	_, err = d.List("file")
	wantErr(t, "List of a file", err, ErrNotDir)
	_, err = d.List("missing")
	wantErr(t, "List(missing)", err, fs.ErrNotExist)
	wantErr(t, "MkdirAll through a file", d.MkdirAll("file/x"), ErrNotDir)
	wantErr(t, "SyncDir of a file", await(t, s, func(done func(error)) { d.SyncDir("file", done) }), ErrNotDir)
	wantErr(t, "SyncDir(missing)", await(t, s, func(done func(error)) { d.SyncDir("missing", done) }), fs.ErrNotExist)
}

func TestInvalidPathsAreRejected(t *testing.T) {
	d, s := newDisk(1)
	mustCreate(t, d, "a")
	for _, name := range []string{"", "/a", "a/", "./a", "a/./b", "a/../b", "..", "a//b", "/"} {
		_, err := d.Create(name)
		wantErr(t, "Create("+name+")", err, fs.ErrInvalid)
		_, err = d.Open(name)
		wantErr(t, "Open("+name+")", err, fs.ErrInvalid)
		wantErr(t, "Remove("+name+")", d.Remove(name), fs.ErrInvalid)
		wantErr(t, "Rename(a, "+name+")", d.Rename("a", name), fs.ErrInvalid)
		wantErr(t, "Rename("+name+", a)", d.Rename(name, "a"), fs.ErrInvalid)
		_, err = d.List(name)
		wantErr(t, "List("+name+")", err, fs.ErrInvalid)
		_, err = d.Stat(name)
		wantErr(t, "Stat("+name+")", err, fs.ErrInvalid)
		wantErr(t, "MkdirAll("+name+")", d.MkdirAll(name), fs.ErrInvalid)
		wantErr(t, "SyncDir("+name+")", await(t, s, func(done func(error)) { d.SyncDir(name, done) }), fs.ErrInvalid)
	}
	// The root is "." for directory operations, and is no file.
	_, err := d.Create(".")
	wantErr(t, "Create(.)", err, fs.ErrInvalid)
	wantErr(t, "Remove(.)", d.Remove("."), fs.ErrInvalid)
	if names, err := d.List("."); err != nil || !slices.Equal(names, []string{"a"}) {
		t.Fatalf("List(.) = %v, %v", names, err)
	}
	if err := d.MkdirAll("."); err != nil {
		t.Fatalf("MkdirAll(.) = %v", err)
	}
	if fi, err := d.Stat("."); err != nil || !fi.IsDir {
		t.Fatalf("Stat(.) = %+v, %v", fi, err)
	}
}

func TestClosedFileReportsErrClosed(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "second Close", f.Close(), env.ErrClosed)
	_, err := f.Write([]byte("x"))
	wantErr(t, "Write", err, env.ErrClosed)
	_, err = f.WriteAt([]byte("x"), 0)
	wantErr(t, "WriteAt", err, env.ErrClosed)
	_, err = f.ReadAt(make([]byte, 1), 0)
	wantErr(t, "ReadAt", err, env.ErrClosed)
	wantErr(t, "Truncate", f.Truncate(0), env.ErrClosed)
	_, err = f.Size()
	wantErr(t, "Size", err, env.ErrClosed)
	wantErr(t, "Sync", await(t, s, f.Sync), env.ErrClosed)
}

func TestRename(t *testing.T) {
	d, _ := newDisk(1)
	f := mustCreate(t, d, "a")
	mustWrite(t, f, "A")
	mustWrite(t, mustCreate(t, d, "b"), "B")
	if err := d.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, d, "b"); got != "A" {
		t.Fatalf("b after replacing it with a: %q", got)
	}
	_, err := d.Stat("a")
	wantErr(t, "Stat(a) after the rename", err, fs.ErrNotExist)
	mustWrite(t, f, "2") // the open handle follows the file
	if got := readAll(t, d, "b"); got != "A2" {
		t.Fatalf("b after a write through the handle opened as a: %q", got)
	}
	if err := d.Rename("b", "b"); err != nil {
		t.Fatalf("Rename onto itself: %v", err)
	}
	wantErr(t, "Rename(missing)", d.Rename("missing", "c"), fs.ErrNotExist)
	wantErr(t, "Rename into a missing directory", d.Rename("b", "nodir/c"), fs.ErrNotExist)

	for _, dir := range []string{"d1/x", "d2", "d3"} {
		if err := d.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "Rename a directory onto a non-empty one", d.Rename("d2", "d1"), ErrNotEmpty)
	wantErr(t, "Rename a file onto a directory", d.Rename("b", "d2"), ErrIsDir)
	wantErr(t, "Rename a directory onto a file", d.Rename("d2", "b"), ErrNotDir)
	wantErr(t, "Rename a directory beneath itself", d.Rename("d1", "d1/x/d1"), fs.ErrInvalid)
	if err := d.Rename("d3", "d2"); err != nil {
		t.Fatalf("Rename a directory onto an empty one: %v", err)
	}
	if err := d.Rename("b", "d1/x/b"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("d1", "d2/moved"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, d, "d2/moved/x/b"); got != "A2" {
		t.Fatalf("file moved with its directory: %q", got)
	}
	if names, _ := d.List("."); !slices.Equal(names, []string{"d2"}) {
		t.Fatalf("root after the renames: %v", names)
	}
}

func TestRemove(t *testing.T) {
	d, _ := newDisk(1)
	f := mustCreate(t, d, "f")
	if err := d.MkdirAll("dir/sub"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("f"); err != nil {
		t.Fatal(err)
	}
	// An open handle keeps working on the removed file's contents.
	mustWrite(t, f, "still here")
	p := make([]byte, 5)
	if n, err := f.ReadAt(p, 0); n != 5 || err != nil || string(p) != "still" {
		t.Fatalf("read of a removed file = %q, %v", p[:n], err)
	}
	wantErr(t, "Remove(missing)", d.Remove("f"), fs.ErrNotExist)
	wantErr(t, "Remove of a non-empty directory", d.Remove("dir"), ErrNotEmpty)
	if err := d.Remove("dir/sub"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("dir"); err != nil {
		t.Fatal(err)
	}
	if names, err := d.List("."); err != nil || len(names) != 0 {
		t.Fatalf("List(.) = %v, %v; want empty", names, err)
	}
}

func TestListMkdirAllStat(t *testing.T) {
	d, _ := newDisk(1)
	for _, dir := range []string{"b/y", "a", "b/x", "b/y"} {
		if err := d.MkdirAll(dir); err != nil {
			t.Fatalf("MkdirAll(%q): %v", dir, err)
		}
	}
	mustWrite(t, mustCreate(t, d, "b/f"), "12345")
	if names, err := d.List("b"); err != nil || !slices.Equal(names, []string{"f", "x", "y"}) {
		t.Fatalf("List(b) = %v, %v", names, err)
	}
	if fi, err := d.Stat("b/f"); err != nil || fi != (env.FileInfo{Name: "f", Size: 5}) {
		t.Fatalf("Stat(b/f) = %+v, %v", fi, err)
	}
	if fi, err := d.Stat("b/y"); err != nil || fi != (env.FileInfo{Name: "y", IsDir: true}) {
		t.Fatalf("Stat(b/y) = %+v, %v", fi, err)
	}
}

func TestSyncsCompleteOnTheLoopInIssueOrder(t *testing.T) {
	d, s := newDisk(7)
	if err := d.SetSyncLatency(time.Microsecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f := mustCreate(t, d, "f")
	var order []int
	for i := range 50 {
		mustWrite(t, f, "x")
		f.Sync(func(err error) {
			if err != nil {
				t.Errorf("sync %d: %v", i, err)
			}
			order = append(order, i)
		})
	}
	if len(order) != 0 {
		t.Fatal("a done ran inside Sync")
	}
	if d.Pending() != 50 {
		t.Fatalf("Pending = %d, want 50", d.Pending())
	}
	for s.Step() {
	}
	for i, got := range order {
		if got != i {
			t.Fatalf("syncs completed in order %v", order)
		}
	}
	if len(order) != 50 || d.Pending() != 0 {
		t.Fatalf("%d syncs completed, %d pending", len(order), d.Pending())
	}
}

func TestSyncMakesWhatWasWrittenDurable(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "abc")
	var durableAtDone []byte
	f.Sync(func(err error) {
		if err != nil {
			t.Fatal(err)
		}
		durableAtDone, _ = d.ReadDurable("f")
	})
	mustWrite(t, f, "def") // after the Sync was issued: not captured
	if got, _ := d.ReadDurable("f"); len(got) != 0 {
		t.Fatalf("durable before the sync completed: %q", got)
	}
	for s.Step() {
	}
	if string(durableAtDone) != "abc" {
		t.Fatalf("durable when done ran: %q, want \"abc\"", durableAtDone)
	}
	if err := await(t, s, f.Sync); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.ReadDurable("f"); string(got) != "abcdef" {
		t.Fatalf("durable after the second sync: %q", got)
	}
}

func TestSyncDirMakesEntriesDurable(t *testing.T) {
	d, s := newDisk(1)
	mustCreate(t, d, "f")
	if err := d.MkdirAll("dir"); err != nil {
		t.Fatal(err)
	}
	if names, _ := d.ListDurable("."); len(names) != 0 {
		t.Fatalf("durable entries before SyncDir: %v", names)
	}
	if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Fatal(err)
	}
	if names, _ := d.ListDurable("."); !slices.Equal(names, []string{"dir", "f"}) {
		t.Fatalf("durable entries after SyncDir: %v", names)
	}
	if err := d.Rename("f", "dir/g"); err != nil {
		t.Fatal(err)
	}
	// Syncing the target directory makes the whole rename durable: the
	// file leaves the root as it arrives in dir.
	if err := await(t, s, func(done func(error)) { d.SyncDir("dir", done) }); err != nil {
		t.Fatal(err)
	}
	root, _ := d.ListDurable(".")
	sub, _ := d.ListDurable("dir")
	if !slices.Equal(root, []string{"dir"}) || !slices.Equal(sub, []string{"g"}) {
		t.Fatalf("durable after SyncDir(dir): root %v, dir %v", root, sub)
	}
}

func TestCrashInvalidatesFilesAndDropsPendingSyncs(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Fatal(err)
	}
	if err := d.SetSyncLatency(time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "unsynced")
	ran := false
	f.Sync(func(error) { ran = true })
	d.SyncDir(".", func(error) { ran = true })
	d.Crash()
	for s.Step() {
	}
	if ran {
		t.Fatal("a sync issued before the crash completed after it")
	}
	if got, _ := d.ReadDurable("f"); len(got) > len("unsynced") {
		t.Fatalf("durable contents %q", got)
	}
	_, err := f.Write([]byte("x"))
	wantErr(t, "Write after a crash", err, env.ErrClosed)
	wantErr(t, "Close after a crash", f.Close(), env.ErrClosed)
	if st := d.Stats(); st.SyncsLost != 2 || st.Crashes != 1 {
		t.Fatalf("stats %+v: want 2 syncs lost, 1 crash", st)
	}
}

// overSeeds runs a small crash scenario on many seeds and returns how often
// each outcome was seen.
func overSeeds(t *testing.T, n int, scenario func(d *Disk, s *sched.Scheduler) string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for seed := range uint64(n) {
		d, s := newDisk(seed)
		seen[scenario(d, s)]++
	}
	return seen
}

func TestSyncedDataWithoutSyncedEntryMayVanish(t *testing.T) {
	seen := overSeeds(t, 200, func(d *Disk, s *sched.Scheduler) string {
		f := mustCreate(t, d, "f")
		mustWrite(t, f, "data")
		if err := await(t, s, f.Sync); err != nil {
			t.Fatal(err)
		}
		d.Crash()
		names, _ := d.List(".")
		if len(names) == 0 {
			return "vanished"
		}
		if got := readAll(t, d, "f"); got != "data" {
			t.Fatalf("a synced file survived with %q", got)
		}
		return "survived"
	})
	if seen["vanished"] == 0 || seen["survived"] == 0 {
		t.Fatalf("outcomes %v: a file whose entry was not synced should sometimes vanish, sometimes not", seen)
	}
}

func TestRenameAcrossDirectoriesIsAtomicInACrash(t *testing.T) {
	seen := overSeeds(t, 200, func(d *Disk, s *sched.Scheduler) string {
		if err := d.MkdirAll("a"); err != nil {
			t.Fatal(err)
		}
		if err := d.MkdirAll("b"); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, mustCreate(t, d, "a/f"), "x")
		for _, dir := range []string{"a", "b", "."} {
			if err := await(t, s, func(done func(error)) { d.SyncDir(dir, done) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Rename("a/f", "b/g"); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, d, "b/later") // after the rename in b: may be lost alone
		d.Crash()
		a, _ := d.List("a")
		b, _ := d.List("b")
		switch {
		case slices.Equal(a, []string{"f"}) && len(b) == 0:
			return "old name"
		case len(a) == 0 && slices.Equal(b, []string{"g"}):
			return "new name"
		case len(a) == 0 && slices.Equal(b, []string{"g", "later"}):
			return "new name and later"
		}
		t.Fatalf("after the crash a = %v, b = %v", a, b)
		return ""
	})
	if len(seen) != 3 {
		t.Fatalf("outcomes %v: want all three", seen)
	}
}

func TestDirectoryRenameMovesItsSubtreeAtomicallyInACrash(t *testing.T) {
	seen := overSeeds(t, 200, func(d *Disk, s *sched.Scheduler) string {
		for _, dir := range []string{"p/d", "q"} {
			if err := d.MkdirAll(dir); err != nil {
				t.Fatal(err)
			}
		}
		f := mustCreate(t, d, "p/d/f")
		mustWrite(t, f, "data")
		if err := await(t, s, f.Sync); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{"p/d", "p", "q", "."} {
			if err := await(t, s, func(done func(error)) { d.SyncDir(dir, done) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Rename("p/d", "q/d"); err != nil {
			t.Fatal(err)
		}
		d.Crash()
		p, _ := d.List("p")
		q, _ := d.List("q")
		var where string
		switch {
		case slices.Equal(p, []string{"d"}) && len(q) == 0:
			where = "p"
		case len(p) == 0 && slices.Equal(q, []string{"d"}):
			where = "q"
		default:
			t.Fatalf("after the crash p = %v, q = %v", p, q)
		}
		if got := readAll(t, d, where+"/d/f"); got != "data" {
			t.Fatalf("%s/d/f = %q", where, got)
		}
		return where
	})
	if len(seen) != 2 {
		t.Fatalf("outcomes %v: want both", seen)
	}
}

func TestNewDirectoryVanishesWithItsFiles(t *testing.T) {
	seen := overSeeds(t, 200, func(d *Disk, s *sched.Scheduler) string {
		if err := d.MkdirAll("c"); err != nil {
			t.Fatal(err)
		}
		f := mustCreate(t, d, "c/f")
		mustWrite(t, f, "data")
		if err := await(t, s, f.Sync); err != nil {
			t.Fatal(err)
		}
		if err := await(t, s, func(done func(error)) { d.SyncDir("c", done) }); err != nil {
			t.Fatal(err)
		}
		d.Crash()
		if _, err := d.Stat("c"); err != nil {
			return "vanished"
		}
		if got := readAll(t, d, "c/f"); got != "data" {
			t.Fatalf("c survived with c/f = %q", got)
		}
		return "survived"
	})
	if len(seen) != 2 {
		t.Fatalf("outcomes %v: want both", seen)
	}
}

func TestFailNextFailsExactlyTheNextOperation(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	mustWrite(t, f, "abc")
	if err := d.MkdirAll("dir"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		op  Op
		run func() error
	}{
		{OpRead, func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{OpWrite, func() error { _, err := f.Write([]byte("x")); return err }},
		{OpTruncate, func() error { return f.Truncate(1) }},
		{OpSync, func() error { return await(t, s, f.Sync) }},
		{OpCreate, func() error { _, err := d.Create("g"); return err }},
		{OpOpen, func() error { _, err := d.Open("f"); return err }},
		{OpRename, func() error { return d.Rename("f", "h") }},
		{OpRemove, func() error { return d.Remove("dir") }},
		{OpMkdir, func() error { return d.MkdirAll("x") }},
		{OpSyncDir, func() error { return await(t, s, func(done func(error)) { d.SyncDir(".", done) }) }},
		{OpList, func() error { _, err := d.List("."); return err }},
		{OpStat, func() error { _, err := d.Stat("."); return err }},
	}
	for _, c := range cases {
		if err := d.FailNext(c.op, env.ErrIO); err != nil {
			t.Fatal(err)
		}
		wantErr(t, c.op.String()+" after FailNext", c.run(), env.ErrIO)
	}
	// Nothing changed, and every operation succeeds again.
	if got := readAll(t, d, "f"); got != "abc" {
		t.Fatalf("f after failed operations: %q", got)
	}
	if names, _ := d.List("."); !slices.Equal(names, []string{"dir", "f"}) {
		t.Fatalf("root after failed operations: %v", names)
	}
	if got, _ := d.ReadDurable("f"); len(got) != 0 {
		t.Fatalf("a failed sync made %q durable", got)
	}
	for _, c := range cases {
		if err := c.run(); err != nil {
			t.Fatalf("%v without a fault: %v", c.op, err)
		}
	}
	if st := d.Stats(); st.InjectedIO != len(cases) || st.SyncsFailed != 2 {
		t.Fatalf("stats %+v", st)
	}
	if d.FailNext(opCount, env.ErrIO) == nil || d.FailNext(OpRead, nil) == nil {
		t.Fatal("FailNext accepted an unknown op or a nil error")
	}
}

func TestNoSpaceWriteWritesAPrefix(t *testing.T) {
	shorter := 0
	for seed := range uint64(50) {
		d, _ := newDisk(seed)
		f := mustCreate(t, d, "f")
		mustWrite(t, f, "0123")
		if err := d.FailNext(OpWrite, env.ErrNoSpace); err != nil {
			t.Fatal(err)
		}
		n, err := f.Write([]byte("456789"))
		wantErr(t, "Write on a full disk", err, env.ErrNoSpace)
		if n < 0 || n >= 6 {
			t.Fatalf("short write reported %d of 6 bytes", n)
		}
		if n > 0 {
			shorter++
		}
		mustWrite(t, f, "!") // the position advanced by n
		if got, want := readAll(t, d, "f"), "0123"+"456789"[:n]+"!"; got != want {
			t.Fatalf("contents %q, want %q", got, want)
		}
	}
	if shorter == 0 {
		t.Fatal("no ENOSPC write ever wrote a prefix")
	}
}

func TestFaultRates(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	mustWrite(t, f, "abc")
	if d.SetFaults(Faults{EIORate: 1.5}) == nil || d.SetFaults(Faults{BitFlipRate: -1}) == nil {
		t.Fatal("SetFaults accepted a rate outside [0, 1]")
	}
	if err := d.SetFaults(Faults{EIORate: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := f.ReadAt(make([]byte, 1), 0)
	wantErr(t, "ReadAt", err, env.ErrIO)
	wantErr(t, "Sync", await(t, s, f.Sync), env.ErrIO)
	wantErr(t, "Rename", d.Rename("f", "g"), env.ErrIO)
	if _, err := d.List("."); err != nil {
		t.Fatalf("List failed at EIORate 1: %v", err)
	}
	if err := d.SetFaults(Faults{NoSpaceRate: 1}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Truncate growing", f.Truncate(10), env.ErrNoSpace)
	if err := f.Truncate(1); err != nil {
		t.Fatalf("a shrinking truncate failed at NoSpaceRate 1: %v", err)
	}
	if err := d.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("f", "g"); err != nil {
		t.Fatal(err)
	}
}

func TestReadPathFlipLeavesStoredBytesIntact(t *testing.T) {
	d, _ := newDisk(1)
	f := mustCreate(t, d, "f")
	want := bytes.Repeat([]byte{0x5a}, 64)
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	d.FlipNextRead()
	got := make([]byte, 64)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if flipped := bitsDiffer(got, want); flipped != 1 {
		t.Fatalf("FlipNextRead flipped %d bits, want 1", flipped)
	}
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the read after a read-path flip returned %x, %v", got, err)
	}
	if err := d.SetFaults(Faults{BitFlipRate: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(got, 0); err != nil || bitsDiffer(got, want) != 1 {
		t.Fatalf("at BitFlipRate 1 a read flipped %d bits (%v)", bitsDiffer(got, want), err)
	}
	if st := d.Stats(); st.ReadFlips != 2 {
		t.Fatalf("ReadFlips = %d, want 2", st.ReadFlips)
	}
}

func bitsDiffer(a, b []byte) int {
	n := 0
	for i := range a {
		for x := a[i] ^ b[i]; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

func TestMediumFlipPersistsUntilOverwritten(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	want := bytes.Repeat([]byte{0xa5}, 8)
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := await(t, s, f.Sync); err != nil {
		t.Fatal(err)
	}
	if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Fatal(err)
	}
	if d.FlipBit("f", 8) == nil || d.FlipBit("missing", 0) == nil || d.FlipBit("f", -1) == nil {
		t.Fatal("FlipBit accepted an offset outside the durable contents or a missing file")
	}
	if err := d.FlipBit("f", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xa5}, 5); err != nil { // an unsynced write over byte 5
		t.Fatal(err)
	}
	if err := d.FlipBit("f", 5); err != nil { // hidden by the page cache
		t.Fatal(err)
	}
	got := []byte(readAll(t, d, "f"))
	if bitsDiffer(got, want) != 1 || got[3] == want[3] {
		t.Fatalf("after flips at 3 and under the write at 5: %x", got)
	}
	durable, _ := d.ReadDurable("f")
	if bitsDiffer(durable, want) != 2 {
		t.Fatalf("durable contents %x: want bits flipped at 3 and 5", durable)
	}
	d.Crash()
	got = []byte(readAll(t, d, "f"))
	if got[3] == want[3] {
		t.Fatalf("the medium flip at 3 did not survive the crash: %x", got)
	}
}

// TestTornWritesArePrefixesOrWholeSectors checks the two shapes of a torn
// write directly.
func TestTornWritesArePrefixesOrWholeSectors(t *testing.T) {
	// Sectors [100, 512) to [1024, 1536) lie within the old contents; the
	// one from 1536 reaches past their end, as do those after it.
	old := bytes.Repeat([]byte{'o'}, 2000)
	p := bytes.Repeat([]byte{'n'}, 2500)
	const off = 100
	shapes := map[string]int{}
	for seed := range uint64(300) {
		d, _ := newDisk(seed)
		c := content{b: append([]byte(nil), old...), size: int64(len(old))}
		d.tear(&c, fileOp{off: off, p: p})
		got := c.bytes()
		shapes[tornShape(t, old, got, off, len(p))]++
	}
	if shapes["prefix"] == 0 || shapes["sectors"] == 0 {
		t.Fatalf("shapes seen: %v", shapes)
	}
}

// tornShape classifies the result of tearing a write of n bytes of 'n' at off
// over old, failing on a result that is neither a byte prefix nor a set of
// whole sectors.
func tornShape(t *testing.T, old, got []byte, off, n int) string {
	t.Helper()
	if len(got) < len(old) || len(got) > off+n {
		t.Fatalf("torn write left length %d (old %d, write [%d, %d))", len(got), len(old), off, off+n)
	}
	isNew := func(i int) bool { return i >= off && i < len(got) && got[i] == 'n' }
	for i := range got {
		if !isNew(i) && (i >= len(old) || got[i] != old[i]) {
			t.Fatalf("byte %d is %q: neither old nor written", i, got[i])
		}
	}
	prefix := true
	for i := off + 1; i < off+n; i++ {
		if isNew(i) && !isNew(i-1) {
			prefix = false
		}
	}
	if prefix {
		return "prefix"
	}
	for s := off; s < off+n; {
		e := min((s/SectorSize+1)*SectorSize, off+n)
		for i := s; i < e; i++ {
			if isNew(i) != isNew(s) {
				t.Fatalf("sector [%d, %d) kept in part: %q", s, e, got[s:min(e, len(got))])
			}
		}
		s = e
	}
	return "sectors"
}

// BenchmarkAppendAndSync appends 1 KiB records to a log-like file that is
// cut back every 4 MiB, with a Sync every 16 records.
func BenchmarkAppendAndSync(b *testing.B) {
	d, s := newDisk(1)
	f, err := d.Create("log")
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 1024)
	b.SetBytes(int64(len(p)))
	for i := 0; b.Loop(); i++ {
		if _, err := f.WriteAt(p, int64(i%4096)*int64(len(p))); err != nil {
			b.Fatal(err)
		}
		if i%16 == 15 {
			f.Sync(nil)
			for s.Step() {
			}
		}
		if i%4096 == 4095 {
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func TestCrashProcessKeepsThePageCacheVolatile(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "f")
	if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "synced")
	if err := await(t, s, f.Sync); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "+cached")
	g := mustCreate(t, d, "g") // an entry not yet durable
	mustWrite(t, g, "new")
	if err := d.SetSyncLatency(time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	ran := false
	f.Sync(func(error) { ran = true })
	d.SyncDir(".", func(error) { ran = true })
	d.CrashProcess()
	for s.Step() {
	}
	if ran {
		t.Fatal("a sync issued before the process crash called back after it")
	}
	_, err := f.Write([]byte("x"))
	wantErr(t, "Write after a process crash", err, env.ErrClosed)
	wantErr(t, "Close after a process crash", g.Close(), env.ErrClosed)
	if got := readAll(t, d, "f"); got != "synced+cached" {
		t.Fatalf("after a process crash f reads %q, want the page cache's %q", got, "synced+cached")
	}
	if got := readAll(t, d, "g"); got != "new" {
		t.Fatalf("after a process crash g reads %q", got)
	}
	if got, _ := d.ReadDurable("f"); string(got) != "synced" {
		t.Fatalf("the abandoned sync made %q durable, want only %q", got, "synced")
	}
	if names, _ := d.ListDurable("."); !slices.Equal(names, []string{"f"}) {
		t.Fatalf("the abandoned SyncDir made %v durable", names)
	}
	if st := d.Stats(); st.SyncsLost != 2 || st.ProcessCrashes != 1 || st.Crashes != 0 {
		t.Fatalf("stats %+v: want 2 syncs lost, 1 process crash, no crash", st)
	}
	// The next process's sync of the same file is not held up by the
	// abandoned one, and makes the cached data durable.
	f2, err := d.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	if err := await(t, s, f2.Sync); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.ReadDurable("f"); string(got) != "synced+cached" {
		t.Fatalf("after the new process's sync f holds %q durably", got)
	}
}

func TestPowerLossAfterProcessCrashMayDropTheCache(t *testing.T) {
	seen := overSeeds(t, 200, func(d *Disk, s *sched.Scheduler) string {
		f := mustCreate(t, d, "f")
		mustWrite(t, f, "synced")
		if err := await(t, s, f.Sync); err != nil {
			t.Fatal(err)
		}
		if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, "+cached")
		d.CrashProcess()
		if got := readAll(t, d, "f"); got != "synced+cached" {
			t.Fatalf("after a process crash f reads %q", got)
		}
		d.Crash()
		got := readAll(t, d, "f")
		if lost := d.Stats().LostAfterKill; got != "synced+cached" && lost == 0 {
			t.Fatalf("f reads %q after the crash, yet %d changes counted lost after the kill", got, lost)
		}
		if got != "synced" && got != "synced+cached" {
			return "torn"
		}
		return got
	})
	if seen["synced"] == 0 || seen["synced+cached"] == 0 {
		t.Fatalf("outcomes %v: a crash after a process crash must sometimes keep, sometimes drop the cached write", seen)
	}
}
