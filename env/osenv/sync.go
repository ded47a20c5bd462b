package osenv

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// groupSyncer makes the node's files durable with as few device flushes as
// it can. One worker goroutine takes every Sync pending on any file and
// covers them with a single call, and a Sync whose file has not been written
// since a flush that covered it completes without another.
//
// The call is one fdatasync when the node has a single file with unsynced
// writes, and otherwise one syncfs(2) on the data directory's filesystem,
// which writes back every dirty page of it and then flushes the device once,
// making every file of the node durable up to the writes completed before it
// started. Partitions that take produce requests in turn thus share flushes
// instead of queueing one behind another's. On the virtual disks Sluice is
// measured on, each flush costs the CPU about 0.15 ms of exits into the
// hypervisor, and parallel fdatasyncs of six files took twice the CPU of one
// syncfs for the same bytes (and had a p99 six times longer; see
// ARCHITECTURE.md). The price is that syncfs also writes back other
// programs' dirty data on the same filesystem; Kafka's advice to give
// log.dirs a disk of their own applies.
//
// Writes are numbered node-wide as they complete (noteWrite); a flush
// started after write number s covers every write numbered up to s, of
// every file for syncfs, of its file for fdatasync.
//
// A syncfs also writes back, and waits for, every other program's dirty
// data on the filesystem; while the machine holds much more dirty data than
// the node's own, the syncer uses fdatasync instead (othersDirty).
//
// Two limits of syncfs are handled: it covers only the data directory's
// filesystem, so a file on another (a mount inside the data directory) is
// always fdatasynced too; and it reports writeback errors only since Linux
// 5.8, so on older kernels the syncer uses fdatasync alone.
//
// Errors. A failed writeback of any file of the filesystem is reported once
// to every descriptor opened before it, by syncfs through the descriptor it
// is called on and by fdatasync through the file's own. The syncer calls
// syncfs only through dir, opened when the node was, so no failure after
// that is missed, and a successful syncfs means no file has failed since the
// node started; but syncfs cannot say which file failed. So on a syncfs
// error every file of the batch is fdatasynced to learn its own error, and
// the syncer stays with per-file fdatasync for the rest of the node's life:
// a file whose failure syncfs reported while it was not in the batch then
// learns it from its next fdatasync.
type groupSyncer struct {
	node *Node
	dir  *os.File // the data directory, for syncfs
	dev  uint64   // the device of dir's filesystem, which syncfs covers

	mu       sync.Mutex
	queue    []syncRequest // Syncs not yet taken by the worker, in issue order
	running  bool          // a worker goroutine is running
	perFile  bool          // after a syncfs error: fdatasync each file
	written  uint64        // writes completed, node-wide
	unsynced map[*file]struct{}
	// unsyncedBytes counts the bytes written to the unsynced files since
	// a flush covered them (overcounted for files written during a flush).
	unsyncedBytes int64
	// othersDirty is the test of othersDirty's name; tests replace it.
	othersDirty func(ours int64) bool
}

type syncRequest struct {
	f    *file
	done func(error)
}

// noteWrite records that a write of n bytes (or a truncation, n = 0) of f
// has completed.
func (g *groupSyncer) noteWrite(f *file, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.written++
	f.lastWrite = g.written
	f.unsyncedBytes += int64(n)
	g.unsyncedBytes += int64(n)
	if g.unsynced == nil {
		g.unsynced = make(map[*file]struct{})
	}
	g.unsynced[f] = struct{}{}
}

// forget drops a released file from the unsynced set.
func (g *groupSyncer) forget(f *file) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.unsynced, f)
	g.unsyncedBytes -= f.unsyncedBytes
	f.unsyncedBytes = 0
}

// enqueue queues a Sync of f, which the caller has counted in f.pending,
// and starts the worker if none runs. A Sync of a file already durable up
// to its last write completes at once, without a flush.
func (g *groupSyncer) enqueue(f *file, done func(error)) {
	g.mu.Lock()
	if f.lastWrite <= f.durable && f.queued == 0 {
		// No earlier Sync of f is waiting (queued counts those in the queue
		// and in the batch being flushed), and a worker posts a batch's
		// callbacks under mu, in the section that moves durable past them:
		// posted now, this callback runs after every earlier one of f.
		g.node.post(func() { done(nil) })
		g.mu.Unlock()
		f.syncFinished()
		return
	}
	g.queue = append(g.queue, syncRequest{f: f, done: done})
	f.queued++
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
		for _, r := range batch {
			r.f.queued--
		}
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
		upTo := g.written
		whole := !g.perFile && len(g.unsynced) > 1
		ours := g.unsyncedBytes
		// The bytes a flush starting now covers, file by file: a file
		// written during the flush keeps only what came after.
		covered := make(map[*file]int64, len(g.unsynced))
		for f := range g.unsynced {
			covered[f] = f.unsyncedBytes
		}
		g.mu.Unlock()
		if whole && g.othersDirty(ours) {
			// Another program has dirty data on the machine: a syncfs
			// would wait for it to be written back too.
			whole = false
		}

		files := distinctFiles(batch)
		errs, all := g.flush(whole, files)

		// Durability moves and the callbacks are posted in one section, so
		// that a Sync enqueue completes at once (because its file is now
		// durable) cannot overtake an earlier Sync of the same file.
		g.mu.Lock()
		if all {
			for f := range g.unsynced {
				if !f.elsewhere {
					g.markDurable(f, upTo, covered[f]) // each file alone: the order does not matter
				}
			}
			for _, f := range files {
				if f.elsewhere && errs[f] == nil {
					g.markDurable(f, upTo, covered[f])
				}
			}
		} else {
			for _, f := range files {
				if errs[f] == nil {
					g.markDurable(f, upTo, covered[f])
				}
			}
		}
		for _, r := range batch {
			r.f.queued--
		}
		g.node.post(func() {
			for _, r := range batch {
				r.done(errs[r.f])
			}
		})
		g.mu.Unlock()
		for _, r := range batch {
			r.f.syncFinished()
		}
	}
}

// flush makes the batch's files durable: with one syncfs if whole (then all
// reports that every file of the node is durable), else, or should syncfs
// fail, with an fdatasync of each. It returns the error of each file that
// failed.
func (g *groupSyncer) flush(whole bool, files []*file) (errs map[*file]error, all bool) {
	if whole {
		err := syncfs(g.dir)
		if err == nil {
			return g.syncElsewhere(files), true
		}
		g.node.log.Warn("syncfs failed; learning each file's error with fdatasync, and syncing file by file from now on",
			"err", err)
		g.mu.Lock()
		g.perFile = true
		g.mu.Unlock()
	}
	errs = make(map[*file]error)
	for _, f := range files {
		if err := fdatasync(f.f); err != nil {
			errs[f] = mapErr(&fs.PathError{Op: "sync", Path: f.name, Err: err})
		}
	}
	return errs, false
}

// syncElsewhere fdatasyncs the files that live on another filesystem than
// the data directory (a mount inside it), which a syncfs does not cover.
func (g *groupSyncer) syncElsewhere(files []*file) map[*file]error {
	var errs map[*file]error
	for _, f := range files {
		if !f.elsewhere {
			continue
		}
		if err := fdatasync(f.f); err != nil {
			if errs == nil {
				errs = make(map[*file]error)
			}
			errs[f] = mapErr(&fs.PathError{Op: "sync", Path: f.name, Err: err})
		}
	}
	return errs
}

// syncfsReportsErrors says whether this kernel's syncfs returns writeback
// errors: Linux 5.8 and later. On older ones it returns 0 after a failed
// writeback, so the syncer must use fdatasync alone.
func syncfsReportsErrors() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 8
}

// deviceOf returns the device number of f's filesystem.
func deviceOf(f *os.File) (uint64, error) {
	var st unix.Stat_t
	if err := withFD(f, func(fd int) error { return unix.Fstat(fd, &st) }); err != nil {
		return 0, err
	}
	return st.Dev, nil
}

// markDurable records that f is durable up to write upTo, which covered
// bytes of it. Called with mu held.
func (g *groupSyncer) markDurable(f *file, upTo uint64, covered int64) {
	f.durable = max(f.durable, upTo)
	covered = min(covered, f.unsyncedBytes)
	f.unsyncedBytes -= covered
	g.unsyncedBytes -= covered
	if f.lastWrite <= upTo {
		// Nothing was written since the flush started, so nothing of f is
		// unflushed.
		delete(g.unsynced, f)
		g.unsyncedBytes -= f.unsyncedBytes
		f.unsyncedBytes = 0
	}
}

// othersDirtySlack is how much more dirty data than its own the machine may
// hold before the syncer stops using syncfs: enough for the odd log line
// or metadata block of other programs, far less than a writer's seconds.
const othersDirtySlack = 8 << 20

// othersDirty says whether the machine holds more dirty or in-writeback
// page-cache data than ours (the bytes this node wrote and has not flushed)
// plus othersDirtySlack, so that a syncfs would also write back another
// program's data and wait for it. Measured with a program writing 50 MB/s
// beside a broker taking 20,000 records/s: produce p99 25 to 28 ms with
// syncfs, 8 ms with fdatasync. If /proc/meminfo cannot be read it says no.
func othersDirty(ours int64) bool {
	text, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return false
	}
	return dirtyBytes(text) > ours+othersDirtySlack
}

// dirtyCheckEvery is how long an answer of othersDirty stands: reading
// /proc/meminfo costs about 40 µs of CPU, and while the answer is yes the
// untouched files stay unsynced, so every batch would ask again.
const dirtyCheckEvery = 100 * time.Millisecond

// cachedOthersDirty returns a test like othersDirty whose answer is kept
// for dirtyCheckEvery. It is called by the sync worker only.
func cachedOthersDirty(check func(ours int64) bool) func(ours int64) bool {
	var at time.Time
	var answer bool
	return func(ours int64) bool {
		if now := time.Now(); at.IsZero() || now.Sub(at) >= dirtyCheckEvery {
			at, answer = now, check(ours)
		}
		return answer
	}
}

// dirtyBytes sums the Dirty and Writeback lines of /proc/meminfo's text.
func dirtyBytes(meminfo []byte) int64 {
	var total int64
	for line := range strings.Lines(string(meminfo)) {
		for _, key := range []string{"Dirty:", "Writeback:"} {
			if v, ok := strings.CutPrefix(line, key); ok {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
					total += kb << 10
				}
			}
		}
	}
	return total
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
