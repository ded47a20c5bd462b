package simfs

import (
	"errors"
	"io"
	"io/fs"
	"testing"

	"github.com/sluicemq/sluice/env"
)

func mustLock(t *testing.T, d *Disk, name string) io.Closer {
	t.Helper()
	l, err := d.Lock(name)
	if err != nil {
		t.Fatalf("Lock(%q): %v", name, err)
	}
	return l
}

func wantLocked(t *testing.T, d *Disk, name, holder string) {
	t.Helper()
	_, err := d.Lock(name)
	var locked *env.LockedError
	if !errors.As(err, &locked) || !errors.Is(err, env.ErrLocked) || locked.Holder != holder {
		t.Fatalf("Lock(%q) while held: err = %v, want an *env.LockedError with holder %q", name, err, holder)
	}
}

// TestLockDiesWithItsProcess: a lock is refused while held, and free again
// after Close, a process crash (kill -9) or a crash (power loss); a closer
// of a dead process's lock reports env.ErrClosed and releases nothing.
func TestLockDiesWithItsProcess(t *testing.T) {
	for _, end := range []struct {
		name string
		f    func(*Disk)
	}{
		{"CrashProcess", (*Disk).CrashProcess},
		{"Crash", (*Disk).Crash},
	} {
		t.Run(end.name, func(t *testing.T) {
			d, _ := newDisk(1)
			first := mustLock(t, d, ".lock")
			wantLocked(t, d, ".lock", "simulated process 1")
			end.f(d)
			second := mustLock(t, d, ".lock")
			wantErr(t, "Close of a dead process's lock", first.Close(), env.ErrClosed)
			wantLocked(t, d, ".lock", "simulated process 2")
			if err := second.Close(); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "second Close", second.Close(), env.ErrClosed)
			mustLock(t, d, ".lock")
			if got := d.Stats().LocksRefused; got != 2 {
				t.Fatalf("LocksRefused = %d, want 2", got)
			}
		})
	}
}

// TestLockIsOnTheFileNotTheName: like flock, a lock follows its file
// through a rename, and a new file under the old name is another lock.
func TestLockIsOnTheFileNotTheName(t *testing.T) {
	d, _ := newDisk(1)
	mustLock(t, d, "a")
	if err := d.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	wantLocked(t, d, "b", "simulated process 1")
	mustLock(t, d, "a")
}

// TestLockFaults: FailNext and the seeded rates strike Lock; a full disk
// refuses only a Lock that must create its file; a lock file's entry is as
// volatile as any other, and the lock dies in a crash.
func TestLockFaults(t *testing.T) {
	d, _ := newDisk(1)
	if err := d.FailNext(OpLock, env.ErrIO); err != nil {
		t.Fatal(err)
	}
	_, err := d.Lock(".lock")
	wantErr(t, "Lock after FailNext", err, env.ErrIO)
	if _, err := d.Stat(".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Lock created its file: %v", err)
	}

	d.SetFull(true)
	_, err = d.Lock(".lock")
	wantErr(t, "Lock creating its file on a full disk", err, env.ErrNoSpace)
	d.SetFull(false)
	l := mustLock(t, d, ".lock")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	d.SetFull(true)
	l = mustLock(t, d, ".lock") // the file exists: nothing to allocate
	d.SetFull(false)

	if names, err := d.ListDurable("."); err != nil || len(names) != 0 {
		t.Fatalf("durable entries %q, %v: a lock made its file's entry durable", names, err)
	}
	d.Crash()
	wantErr(t, "Close after a crash", l.Close(), env.ErrClosed)

	mustCreate(t, d, "f")
	_, err = d.Lock("f/x")
	wantErr(t, "Lock beneath a file", err, ErrNotDir)
	if err := d.MkdirAll("dir"); err != nil {
		t.Fatal(err)
	}
	_, err = d.Lock("dir")
	wantErr(t, "Lock of a directory", err, ErrIsDir)
}
