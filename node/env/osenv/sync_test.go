package osenv

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/node/env"
)

// TestSyncsOfManyFilesCompleteInIssueOrder interleaves Syncs of several
// files, so that the worker groups them (syncfs) or, with perFile set as
// after a syncfs error, flushes file by file; either way every callback runs
// once, without error, in the order the Syncs were issued, and a file closed
// with Syncs pending is released by the last of them (checkNoLeaks and the
// node's registry tell).
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
