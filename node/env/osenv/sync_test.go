package osenv

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/node/env"
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
			var a, b *file
			synced := 0
			do(t, n, func(e env.Env) error {
				fa, err := e.FS.Create("a")
				if err != nil {
					return err
				}
				fb, err := e.FS.Create("b")
				if err != nil {
					return err
				}
				a, b = fa.(*file), fb.(*file)
				for _, f := range []env.File{fa, fb} {
					if _, err := f.Write(make([]byte, 4096)); err != nil {
						return err
					}
				}
				fa.Sync(func(err error) {
					if err != nil {
						t.Error(err)
					}
					synced++
				})
				return nil
			})
			waitFor(t, n, func() bool { return synced == 1 })
			durable := func(f *file) bool {
				n.fs.syncer.mu.Lock()
				defer n.fs.syncer.mu.Unlock()
				return f.lastWrite <= f.durable
			}
			if !durable(a) {
				t.Fatal("the synced file is not marked durable")
			}
			if durable(b) == perFile {
				t.Fatalf("the other file durable = %v after the flush, want %v", durable(b), !perFile)
			}
		})
	}
}
