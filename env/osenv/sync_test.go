package osenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/env"
)

// TestSyncsOfManyFilesCompleteInIssueOrder interleaves Syncs of several
// files, each after a write to its file (so that none completes early,
// already covered), so that the worker groups them (syncfs) or, with
// perFile set as after a syncfs error, flushes file by file; either way
// every callback runs once, without error, in the order the Syncs were
// issued, and a file closed with Syncs pending is released by the last of
// them (checkNoLeaks and the node's registry tell).
func TestSyncsOfManyFilesCompleteInIssueOrder(t *testing.T) {
	for _, perFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("perFile=%v", perFile), func(t *testing.T) {
			n := startNode(t)
			n.fs.syncer.perFile = perFile
			n.fs.syncer.othersDirty = func(int64) bool { return false }
			const files, rounds = 4, 25
			var got []int
			do(t, n, func(e env.Env) error {
				var fs []env.File
				for i := range files {
					f, err := e.FS.Create(fmt.Sprintf("f%d", i))
					if err != nil {
						return err
					}
					fs = append(fs, f)
				}
				for i := range files * rounds {
					f := fs[i%files]
					if _, err := f.Write(make([]byte, 4096)); err != nil {
						return err
					}
					f.Sync(func(err error) {
						if err != nil {
							t.Errorf("sync %d: %v", i, err)
						}
						got = append(got, i)
					})
				}
				// Closed with Syncs still pending: the last one releases it.
				return fs[0].Close()
			})
			waitFor(t, n, func() bool { return len(got) == files*rounds })
			for i, v := range got {
				if v != i {
					t.Fatalf("callback %d was Sync %d's; want issue order: %v", i, v, got)
				}
			}
			waitFor(t, n, func() bool {
				n.mu.Lock()
				defer n.mu.Unlock()
				return len(n.files) == files-1
			})
		})
	}
}

// TestSyncCoversEveryFileWrittenBeforeIt writes two files and syncs one:
// with more than one file unsynced the flush is a syncfs, which makes both
// durable, so the other file's Sync then completes without a flush of its
// own. With perFile set (after a syncfs error) only the synced file is.
func TestSyncCoversEveryFileWrittenBeforeIt(t *testing.T) {
	for _, perFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("perFile=%v", perFile), func(t *testing.T) {
			n := startNode(t)
			n.fs.syncer.perFile = perFile
			n.fs.syncer.othersDirty = func(int64) bool { return false }
			var a, b *file
			synced := 0
			do(t, n, func(e env.Env) error {
				files, err := createWritten(e, "a", "b")
				if err != nil {
					return err
				}
				a, b = files[0], files[1]
				a.Sync(func(err error) {
					if err != nil {
						t.Error(err)
					}
					synced++
				})
				return nil
			})
			waitFor(t, n, func() bool { return synced == 1 })
			if !isDurable(n, a) {
				t.Fatal("the synced file is not marked durable")
			}
			if isDurable(n, b) == perFile {
				t.Fatalf("the other file durable = %v after the flush, want %v", isDurable(n, b), !perFile)
			}
		})
	}
}

// TestSyncOfAnOpenedFileFlushes: a previous process (crashed, not
// power-lost) left data in the page cache of a file; this process opens it
// and Syncs it without writing (log recovery does). The Sync must flush.
func TestSyncOfAnOpenedFileFlushes(t *testing.T) {
	n := startNode(t)
	g := &n.fs.syncer
	if err := os.WriteFile(filepath.Join(n.fs.syncer.dir.Name(), "seg.log"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var f env.File
	synced := false
	do(t, n, func(e env.Env) error {
		var err error
		if f, err = e.FS.Open("seg.log"); err != nil {
			return err
		}
		f.Sync(func(err error) { synced = err == nil })
		return nil
	})
	waitFor(t, n, func() bool { return synced })
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.written == 0 {
		t.Fatalf("Sync of an opened file completed without any flush (no write noted, worker never ran): data a crashed process left in the page cache is reported durable")
	}
}

// TestSyncsOfOneFileKeepTheirOrder: a Sync of file a queued behind an
// in-flight syncfs (which makes a durable) must not be overtaken by a later
// Sync of a that finds a durable and would complete at once. Which of A2
// and A3 is issued first depends on whether batch 1 completes before the
// second step reaches the loop, so the check is against the order they
// were issued in.
func TestSyncsOfOneFileKeepTheirOrder(t *testing.T) {
	n := startNode(t)
	g := &n.fs.syncer
	var issued, got []string
	var a, b, c env.File
	syncA := func(name string) {
		issued = append(issued, name)
		a.Sync(func(error) { got = append(got, name) })
	}
	do(t, n, func(e env.Env) error {
		var err error
		if a, err = e.FS.Create("a"); err != nil {
			return err
		}
		if b, err = e.FS.Create("b"); err != nil {
			return err
		}
		if c, err = e.FS.Create("c"); err != nil {
			return err
		}
		a.Write(make([]byte, 4096))
		b.Write(make([]byte, 64<<20)) // makes batch 1's syncfs slow
		b.Sync(func(err error) {
			got = append(got, "B1")
			syncA("A3") // no write since A2
		})
		return nil
	})
	// Wait until the worker has taken batch 1 and not finished it.
	waitForValue(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 0 && g.running && b.(*file).durable == 0
	})
	do(t, n, func(e env.Env) error {
		syncA("A2")
		c.Write(make([]byte, 8<<20)) // makes batch 2 slower than the loop
		c.Sync(func(error) { got = append(got, "C") })
		return nil
	})
	waitFor(t, n, func() bool { return len(got) == 4 })
	t.Logf("issued %v, callbacks %v", issued, got)
	var completedA []string
	for _, s := range got {
		if s == "A2" || s == "A3" {
			completedA = append(completedA, s)
		}
	}
	if !slices.Equal(completedA, issued) {
		t.Fatalf("Syncs of a issued %v completed %v", issued, completedA)
	}
}

// TestSyncfsDoesNotCoverAFileOnAnotherFilesystem: a file on another
// filesystem than the data directory (a mount inside it; marked by hand
// here) is not made durable by the syncfs of a Sync of another file, and
// its own Sync flushes it.
func TestSyncfsDoesNotCoverAFileOnAnotherFilesystem(t *testing.T) {
	n := startNode(t)
	n.fs.syncer.othersDirty = func(int64) bool { return false }
	var a, b *file
	synced := 0
	done := func(err error) {
		if err != nil {
			t.Error(err)
		}
		synced++
	}
	do(t, n, func(e env.Env) error {
		files, err := createWritten(e, "a", "b")
		if err != nil {
			return err
		}
		a, b = files[0], files[1]
		a.elsewhere = true
		b.Sync(done)
		return nil
	})
	waitFor(t, n, func() bool { return synced == 1 })
	if !isDurable(n, b) || isDurable(n, a) {
		t.Fatalf("after syncing b: b durable %v (want true), a durable %v (want false)", isDurable(n, b), isDurable(n, a))
	}
	do(t, n, func(env.Env) error { a.Sync(done); return nil })
	waitFor(t, n, func() bool { return synced == 2 })
	if !isDurable(n, a) {
		t.Fatal("a's own Sync did not make it durable")
	}
}

// createWritten creates the named files, each with one 4 KiB write, on the
// loop.
func createWritten(e env.Env, names ...string) ([]*file, error) {
	var files []*file
	for _, name := range names {
		f, err := e.FS.Create(name)
		if err != nil {
			return nil, err
		}
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			return nil, err
		}
		files = append(files, f.(*file))
	}
	return files, nil
}

// isDurable says whether f is marked durable up to its last write.
func isDurable(n *Node, f *file) bool {
	n.fs.syncer.mu.Lock()
	defer n.fs.syncer.mu.Unlock()
	return f.lastWrite <= f.durable
}

// TestOthersDirtyDataTurnsSyncfsOff: while another program has dirty data
// (othersDirty says so), two unsynced files are flushed file by file, so
// the file not synced stays unsynced; the numbers othersDirty is given
// count this node's unsynced bytes.
func TestOthersDirtyDataTurnsSyncfsOff(t *testing.T) {
	n := startNode(t)
	var asked []int64
	n.fs.syncer.othersDirty = func(ours int64) bool {
		asked = append(asked, ours)
		return true
	}
	var a, b *file
	synced := false
	do(t, n, func(e env.Env) error {
		files, err := createWritten(e, "a", "b")
		if err != nil {
			return err
		}
		a, b = files[0], files[1]
		a.Sync(func(err error) { synced = err == nil })
		return nil
	})
	waitFor(t, n, func() bool { return synced })
	if !isDurable(n, a) || isDurable(n, b) {
		t.Fatalf("a durable %v (want true), b durable %v (want false): the flush was a syncfs", isDurable(n, a), isDurable(n, b))
	}
	if len(asked) != 1 || asked[0] != 2*4096 {
		t.Fatalf("othersDirty was asked %v, want once with this node's 8192 unsynced bytes", asked)
	}
	n.fs.syncer.mu.Lock()
	defer n.fs.syncer.mu.Unlock()
	if got := n.fs.syncer.unsyncedBytes; got != 4096 {
		t.Fatalf("%d bytes counted unsynced after a's flush, want b's 4096", got)
	}
}

func TestDirtyBytesSumsDirtyAndWriteback(t *testing.T) {
	meminfo := "MemTotal:       24684004 kB\nDirty:             13860 kB\nWriteback:           120 kB\nWritebackTmp:        7 kB\n"
	if got, want := dirtyBytes([]byte(meminfo)), int64(13860+120)<<10; got != want {
		t.Fatalf("dirtyBytes = %d, want %d", got, want)
	}
}

// TestUnsyncedBytesCountOnlyWhatNoFlushCovered: a file written during every
// flush keeps, after each, only the bytes written since that flush began
// (the count fed to othersDirty must not grow under steady load, or it
// would keep syncfs on however much another program has dirty).
func TestUnsyncedBytesCountOnlyWhatNoFlushCovered(t *testing.T) {
	n := startNode(t)
	var a, b *file
	n.fs.syncer.othersDirty = func(int64) bool {
		// Runs on the worker as each flush begins: writes land during it,
		// to both files, so that the next flush is a syncfs again.
		n.Loop().Post(func() {
			a.Write(make([]byte, 4096))
			b.Write(make([]byte, 4096))
		})
		return false
	}
	rounds := 0
	var round func()
	round = func() {
		a.Sync(func(err error) {
			if err != nil {
				t.Error(err)
			}
			rounds++
			if rounds < 50 {
				round()
			}
		})
	}
	do(t, n, func(e env.Env) error {
		files, err := createWritten(e, "a", "b")
		if err != nil {
			return err
		}
		a, b = files[0], files[1]
		round()
		return nil
	})
	waitFor(t, n, func() bool { return rounds == 50 })
	n.fs.syncer.mu.Lock()
	defer n.fs.syncer.mu.Unlock()
	if a.unsyncedBytes > 2*4096 {
		t.Fatalf("after 50 flushes each overlapped by a 4 KiB write, %d bytes of a are counted unsynced", a.unsyncedBytes)
	}
}
