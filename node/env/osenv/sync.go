package osenv

import (
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// groupSyncer makes the node's files durable with as few device flushes as
// it can: one worker goroutine takes every Sync pending on any file and
// covers them with a single call, so that the partitions a produce request
// touched cost one flush between them instead of one each.
//
// One file alone gets an fdatasync. Two or more get one syncfs(2) on the
// data directory's filesystem, which writes back every dirty page of it and
// then flushes the device once. On the virtual disks Sluice is measured on,
// each flush costs the CPU about 0.15 ms of exits into the hypervisor, and
// parallel fdatasyncs of six files took twice the CPU of one syncfs for the
// same bytes (and had a p99 six times longer; see ARCHITECTURE.md). The
// price is that syncfs also writes back other programs' dirty data on the
// same filesystem; Kafka's advice to give log.dirs a disk of their own
// applies.
//
// Errors. A failed writeback of any file of the filesystem is reported once
// to every descriptor opened before it, by syncfs through the descriptor it
// is called on and by fdatasync through the file's own. The syncer calls
// syncfs only through dir, opened when the node was, so no failure after
// that is missed; but syncfs cannot say which file failed. So on a syncfs
// error every file of the batch is fdatasynced to learn its own error, and
// the syncer stays with per-file fdatasync for the rest of the node's life:
// a file whose failure syncfs reported while it was not in the batch then
// learns it from its next fdatasync, instead of from a syncfs that has
// already told its one report.
type groupSyncer struct {
	node *Node
	dir  *os.File // the data directory, for syncfs

	mu      sync.Mutex
	queue   []syncRequest // Syncs not yet taken by the worker, in issue order
	running bool          // a worker goroutine is running
	perFile bool          // after a syncfs error: fdatasync each file
}

type syncRequest struct {
	f    *file
	done func(error)
}

// enqueue queues a Sync of f, which the caller has counted in f.pending,
// and starts the worker if none runs.
func (g *groupSyncer) enqueue(f *file, done func(error)) {
	g.mu.Lock()
	g.queue = append(g.queue, syncRequest{f: f, done: done})
	if g.running {
		g.mu.Unlock()
		return
	}
	g.running = true
	g.mu.Unlock()
	if !g.node.spawn(g.run) {
		// The node is closed: no callback may reach the loop any more, but
		// the files still need their pending counts settled to be released.
		g.mu.Lock()
		batch := g.queue
		g.queue, g.running = nil, false
		g.mu.Unlock()
		for _, r := range batch {
			r.f.syncFinished()
		}
	}
}

// run covers every queued Sync with one flush, posts their callbacks in the
// order the Syncs were issued, and repeats until the queue is empty.
func (g *groupSyncer) run() {
	for {
		g.mu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		perFile := g.perFile
		g.mu.Unlock()

		errs := g.sync(distinctFiles(batch), perFile)
		g.node.post(func() {
			for _, r := range batch {
				r.done(errs[r.f])
			}
		})
		for _, r := range batch {
			r.f.syncFinished()
		}
	}
}

// sync makes files durable and returns the error of each that failed.
func (g *groupSyncer) sync(files []*file, perFile bool) map[*file]error {
	errs := make(map[*file]error)
	if len(files) > 1 && !perFile {
		err := syncfs(g.dir)
		if err == nil {
			return errs
		}
		g.node.log.Warn("syncfs failed; learning each file's error with fdatasync, and syncing file by file from now on",
			"err", err)
		g.mu.Lock()
		g.perFile = true
		g.mu.Unlock()
	}
	for _, f := range files {
		if err := fdatasync(f.f); err != nil {
			errs[f] = mapErr(&fs.PathError{Op: "sync", Path: f.name, Err: err})
		}
	}
	return errs
}

// distinctFiles returns the files of batch, each once, in first-seen order.
func distinctFiles(batch []syncRequest) []*file {
	files := make([]*file, 0, len(batch))
	seen := make(map[*file]bool, len(batch))
	for _, r := range batch {
		if !seen[r.f] {
			seen[r.f] = true
			files = append(files, r.f)
		}
	}
	return files
}

// syncfs flushes the whole filesystem holding d.
func syncfs(d *os.File) error {
	return withFD(d, unix.Syncfs)
}

// fdatasync flushes f's data, and the metadata needed to read it back, to
// the device.
func fdatasync(f *os.File) error {
	return withFD(f, unix.Fdatasync)
}

// withFD runs call on f's descriptor, again while it fails with EINTR.
func withFD(f *os.File, call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		for {
			serr = call(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}
