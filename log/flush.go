package log

import (
	"fmt"
	"hash/crc32"
	"path"
	"time"

	"github.com/sluicemq/sluice/env"
)

// Durability. Appends go to the page cache. Three asynchronous machines,
// each with at most one operation in flight, move them to the disk:
//
//   - A flush round syncs every file with changes (the segments' logs, the
//     indexes of inactive segments, new producer snapshots) and, if entries
//     were created or removed, the partition directory (and once, its
//     parent). When every sync has succeeded, everything below the log end
//     offset at the round's start is durable: DurableOffset moves there.
//     Flush waiters name an offset (and optionally demand a round that
//     starts after they asked); rounds follow each other while waiters
//     remain, so concurrent callers share syncs (group commit).
//   - A checkpoint round writes the leader-epoch checkpoint (when it
//     changed) and the recovery-point checkpoint (recovery point =
//     DurableOffset at the round's start, capped at the end of the first
//     inactive segment whose index files are not durable yet; the log
//     start offset; the clean flag),
//     each to a .tmp file that is synced and renamed over the old one, then
//     syncs the directory. Epochs are written first, so the epochs of
//     everything below a durable recovery point are durable too (epochs
//     above it are found again by recovery's scan).
//   - A barrier follows a truncation (by a caller, or by recovery): a forced
//     flush round then a checkpoint round, both started after the
//     truncation. Until it completes, appends get ErrNotReady, so no new
//     byte can reach the disk at a position whose truncation might still be
//     undone by a crash, and no checkpoint on disk still claims a recovery
//     point above the truncation. An attempt that fails without failing the
//     log (the checkpoint did not fit on the disk) is retried a second
//     later, except under Close, which abandons the barrier instead.
//
// A failed sync leaves a file's durability unknown (the kernel may have
// dropped the pages), so it fails the log; reopening it runs recovery. A
// failed write of a checkpoint's temporary file, or a failed rename, only
// fails that checkpoint.
type durability struct {
	durable        int64
	unflushedBytes int64
	dirDirty       bool
	parentDirty    bool
	// loose are new files outside the segments (producer snapshots) that
	// the next flush round syncs and then closes.
	loose []*trackedFile

	round     *flushRound
	roundSeq  uint64 // rounds started
	roundDone uint64 // the latest round completed
	waiters   []flushWaiter
	timer     env.Timer

	ckpt ckptState

	barrier      bool
	barrierSeq   uint64
	readyWaiters []func(error)
	// barrierTimer is armed while a barrier waits to retry after an attempt
	// that failed with barrierErr (the disk was full), and only then: Close
	// relies on it to tell a barrier waiting to retry (abandoned at once)
	// from one with an attempt in flight (waited for).
	barrierTimer env.Timer
	barrierErr   error
	// pending are the file changes of truncations, made by the barrier.
	pending []pendingOp
	// cleanClose is set by Close once the active segment's indexes are
	// trimmed and a snapshot is at the log end: the last checkpoint may
	// then say clean.
	cleanClose bool
}

type flushRound struct {
	seq     uint64
	target  int64 // lowered by a truncation while in flight
	pending int
	err     error
}

type flushWaiter struct {
	upTo  int64
	round uint64 // a round at least this recent must complete
	done  func(error)
}

type ckptState struct {
	inFlight bool
	current  []func(error) // waiting on the round in flight
	next     []func(error) // waiting for a round not yet started
	again    bool
	written  partitionCheckpoint // the content last made durable
	hasFile  bool
	timer    env.Timer
}

const (
	partitionCheckpointFile = "recovery-point-checkpoint"
	epochCheckpointFile     = "leader-epoch-checkpoint"
	tmpSuffix               = ".tmp"
)

// Flush calls done once every offset below upTo (capped at the log end
// offset now) is durable, or with the error that prevents it: the log's
// failure, or ErrTruncated if the offset is truncated away first. This is
// what an acks=all produce waits on under the power-loss durability target.
func (l *Log) Flush(upTo int64, done func(error)) {
	if err := l.usable(); err != nil {
		l.post(func() { done(err) })
		return
	}
	l.flushInternal(upTo, false, done)
}

func (l *Log) flushInternal(upTo int64, force bool, done func(error)) {
	d := &l.dur
	if l.failed != nil {
		err := l.failed
		l.post(func() { done(err) })
		return
	}
	upTo = min(upTo, l.LogEndOffset())
	need := uint64(0)
	if force {
		need = d.roundSeq + 1
	}
	if d.durable >= upTo && d.roundDone >= need {
		l.post(func() { done(nil) })
		return
	}
	d.waiters = append(d.waiters, flushWaiter{upTo: upTo, round: need, done: done})
	l.startFlush()
}

// afterAppend applies the flush policy to n new bytes.
func (l *Log) afterAppend(n int64) {
	d := &l.dur
	d.unflushedBytes += n
	if l.cfg.FlushBytes > 0 && d.unflushedBytes >= l.cfg.FlushBytes {
		l.flushInternal(l.LogEndOffset(), false, func(error) {})
		return
	}
	if l.cfg.FlushInterval > 0 && d.timer == nil {
		d.timer = l.clock.AfterFunc(l.cfg.FlushInterval, func() {
			d.timer = nil
			if l.usable() == nil {
				l.flushInternal(l.LogEndOffset(), false, func(error) {})
			}
		})
	}
}

func (l *Log) startFlush() {
	d := &l.dur
	if d.round != nil || l.failed != nil {
		return
	}
	d.roundSeq++
	r := &flushRound{seq: d.roundSeq, target: l.LogEndOffset()}
	d.round = r
	d.unflushedBytes = 0
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	for i, s := range l.segs {
		l.syncFile(r, s.log, false)
		if i < len(l.segs)-1 && s.indexesUnwritten() {
			// A roll's or a rebuild's index write failed (the disk was
			// full): the checkpoint cannot pass this segment until it is
			// written, so try again.
			if err := s.flushIndexes(); err != nil {
				l.cfg.Logger.Warn("index write failed", "segment", s.path, "err", err)
			}
		}
		if i < len(l.segs)-1 || l.closing {
			l.syncFile(r, s.idxF, false)
			l.syncFile(r, s.tsF, false)
		}
	}
	for _, t := range d.loose {
		l.syncFile(r, t, true)
	}
	d.loose = nil
	if d.dirDirty {
		d.dirDirty = false
		l.syncDir(r, l.dir, &d.dirDirty)
	}
	if d.parentDirty {
		d.parentDirty = false
		l.syncDir(r, parentDir(l.dir), &d.parentDirty)
	}
	if r.pending == 0 {
		l.post(func() { l.finishFlush(r) })
	}
}

func parentDir(dir string) string { return path.Dir(dir) }

func (l *Log) syncFile(r *flushRound, t *trackedFile, closeAfter bool) {
	if t == nil {
		return // a segment whose files the barrier has yet to create
	}
	if !t.dirty() {
		if closeAfter {
			t.f.Close()
		}
		return
	}
	captured := t.changes
	r.pending++
	t.f.Sync(func(err error) {
		if err == nil && captured > t.synced {
			t.synced = captured
		}
		if closeAfter {
			t.f.Close()
		}
		if err != nil {
			err = fmt.Errorf("sync %s: %w", t.f.Name(), err)
		}
		l.syncDone(r, err)
	})
}

func (l *Log) syncDir(r *flushRound, dir string, dirty *bool) {
	r.pending++
	l.fs.SyncDir(dir, func(err error) {
		if err != nil {
			*dirty = true
			err = fmt.Errorf("sync directory %s: %w", dir, err)
		}
		l.syncDone(r, err)
	})
}

func (l *Log) syncDone(r *flushRound, err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
	r.pending--
	if r.pending == 0 {
		l.finishFlush(r)
	}
}

func (l *Log) finishFlush(r *flushRound) {
	d := &l.dur
	if d.round == r {
		d.round = nil
	}
	if r.err != nil {
		l.fail(r.err)
		return
	}
	if l.failed != nil {
		return
	}
	d.roundDone = max(d.roundDone, r.seq)
	d.durable = max(d.durable, r.target)
	kept := d.waiters[:0]
	for _, w := range d.waiters {
		if d.durable >= w.upTo && d.roundDone >= w.round {
			done := w.done
			l.post(func() { done(nil) })
		} else {
			kept = append(kept, w)
		}
	}
	clear(d.waiters[len(kept):])
	d.waiters = kept
	if len(d.waiters) > 0 {
		l.startFlush()
	}
	if d.ckpt.written.RecoveryPoint < d.durable && !l.closing {
		l.checkpointLater()
	}
}

// onTruncate adjusts durability to a log that now ends at end: a round in
// flight can no longer vouch for offsets at or above it, and waiters for
// them are told they are gone.
func (l *Log) onTruncate(end int64) {
	d := &l.dur
	if d.round != nil {
		d.round.target = min(d.round.target, end)
	}
	d.durable = min(d.durable, end)
	kept := d.waiters[:0]
	for _, w := range d.waiters {
		if w.upTo > end {
			done := w.done
			l.post(func() { done(ErrTruncated) })
		} else {
			kept = append(kept, w)
		}
	}
	clear(d.waiters[len(kept):])
	d.waiters = kept
}

// Checkpoint writes the recovery point (DurableOffset now), the log start
// offset and the leader-epoch cache durably, then calls done.
func (l *Log) Checkpoint(done func(error)) {
	if err := l.usable(); err != nil {
		l.post(func() { done(err) })
		return
	}
	l.checkpointInternal(done)
}

func (l *Log) checkpointInternal(done func(error)) {
	if l.failed != nil {
		err := l.failed
		l.post(func() { done(err) })
		return
	}
	l.dur.ckpt.next = append(l.dur.ckpt.next, done)
	l.startCheckpoint()
}

// checkpointLater arms the checkpoint timer, if it is not armed.
func (l *Log) checkpointLater() {
	c := &l.dur.ckpt
	if c.timer != nil {
		return
	}
	c.timer = l.clock.AfterFunc(l.cfg.CheckpointInterval, func() {
		c.timer = nil
		if l.usable() == nil {
			l.startCheckpoint()
		}
	})
}

// checkpointSoon starts a checkpoint round now (or after the one in flight).
func (l *Log) checkpointSoon() {
	if l.usable() == nil {
		l.startCheckpoint()
	}
}

func (l *Log) checkpointContent() (partitionCheckpoint, []byte) {
	epochs := l.epochs.encode()
	rp := l.recoveryPoint()
	return partitionCheckpoint{
		RecoveryPoint:  rp,
		LogStartOffset: l.logStart,
		Clean:          l.closing && l.dur.cleanClose && rp == l.LogEndOffset(),
		EpochsCRC:      crc32.Checksum(epochs, castagnoli),
	}, epochs
}

// recoveryPoint is what a checkpoint may promise recovery: the durable
// offset, but no further than the end of the first inactive segment whose
// index files are not durable yet (their write failed, or no sync has
// covered it), since recovery trusts the indexes of every segment that ends
// below the recovery point, and walks the one that ends at it.
func (l *Log) recoveryPoint() int64 {
	rp := l.dur.durable
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.next >= rp {
			break
		}
		if !s.indexesDurable() {
			return s.next
		}
	}
	return rp
}

func (l *Log) startCheckpoint() {
	d := &l.dur
	c := &d.ckpt
	if l.failed != nil {
		return
	}
	if c.inFlight {
		c.again = true
		return
	}
	content, epochs := l.checkpointContent()
	if len(c.next) == 0 && c.hasFile && content == c.written {
		return
	}
	c.inFlight, c.again = true, false
	c.current, c.next = c.next, nil
	w := &ckptWrite{l: l, content: content}
	if !c.hasFile || content.EpochsCRC != c.written.EpochsCRC {
		w.add(epochCheckpointFile, epochs)
	}
	w.add(partitionCheckpointFile, content.encode())
	w.start()
}

// ckptWrite is one checkpoint round: temporary files written and synced,
// then renamed in order, then the directory synced.
type ckptWrite struct {
	l       *Log
	content partitionCheckpoint
	names   []string
	data    [][]byte
	pending int
	err     error
	fatal   bool
}

func (w *ckptWrite) add(name string, data []byte) {
	w.names = append(w.names, name)
	w.data = append(w.data, data)
}

func (w *ckptWrite) start() {
	l := w.l
	for i, name := range w.names {
		tmp := l.dir + "/" + name + tmpSuffix
		f, err := l.fs.Create(tmp)
		if err == nil {
			_, err = f.WriteAt(w.data[i], 0)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			w.fail(fmt.Errorf("write %s: %w", tmp, err), false)
			continue
		}
		w.pending++
		f.Sync(func(err error) {
			f.Close()
			if err != nil {
				w.fail(fmt.Errorf("sync %s: %w", tmp, err), true)
			}
			w.pending--
			if w.pending == 0 {
				w.renamed()
			}
		})
	}
	if w.pending == 0 {
		l.post(w.renamed)
	}
}

func (w *ckptWrite) fail(err error, fatal bool) {
	if w.err == nil {
		w.err = err
	}
	w.fatal = w.fatal || fatal
}

// renamed moves the synced temporary files into place and syncs the
// directory.
func (w *ckptWrite) renamed() {
	l := w.l
	if l.closed && w.err == nil {
		// Close did not wait for this round (the log had failed): a rename
		// now could land in a directory since deleted and made again.
		w.fail(fmt.Errorf("checkpoint %s: %w", l.dir, ErrClosed), false)
	}
	if w.err == nil {
		for _, name := range w.names {
			from, to := l.dir+"/"+name+tmpSuffix, l.dir+"/"+name
			if err := l.fs.Rename(from, to); err != nil {
				w.fail(fmt.Errorf("rename %s: %w", from, err), false)
				break
			}
		}
	}
	if w.err != nil {
		w.finish()
		return
	}
	l.fs.SyncDir(l.dir, func(err error) {
		if err != nil {
			w.fail(fmt.Errorf("sync directory %s: %w", l.dir, err), true)
		}
		w.finish()
	})
}

func (w *ckptWrite) finish() {
	l := w.l
	c := &l.dur.ckpt
	c.inFlight = false
	waiters := c.current
	c.current = nil
	switch {
	case w.err != nil && w.fatal:
		l.fail(w.err)
		fallthrough
	case l.failed != nil:
		err := l.failed
		for _, done := range waiters {
			l.post(func() { done(err) })
		}
		return
	case w.err != nil:
		err := storageError(w.err, "checkpoint %s", l.dir)
		for _, done := range waiters {
			l.post(func() { done(err) })
		}
	default:
		c.written, c.hasFile = w.content, true
		for _, done := range waiters {
			l.post(func() { done(nil) })
		}
	}
	if c.again || len(c.next) > 0 {
		l.startCheckpoint()
	}
}

// startBarrier makes the log refuse appends until a truncation it holds in
// memory is on disk: a checkpoint with the lowered recovery point first,
// then the pending file changes, then a forced flush. After recovery it
// makes the repairs durable the same way (with no pending changes).
func (l *Log) startBarrier() {
	d := &l.dur
	d.barrier = true
	d.barrierSeq++
	seq := d.barrierSeq
	// This attempt supersedes a retry still waiting (a truncation came
	// while the disk was full). Left armed, that retry's timer would fire
	// during this attempt and forget the timer of this one's own retry, so
	// that a Close meanwhile would wait for an attempt that never comes.
	if d.barrierTimer != nil {
		d.barrierTimer.Stop()
		d.barrierTimer = nil
	}
	l.checkpointInternal(func(err error) {
		if seq != d.barrierSeq || l.failed != nil {
			return
		}
		if err != nil {
			l.retryBarrier(seq, err)
			return
		}
		if err := l.applyPending(); err != nil {
			l.fail(err)
			return
		}
		l.flushInternal(l.LogEndOffset(), true, func(err error) {
			if seq != d.barrierSeq || l.failed != nil {
				return
			}
			if err != nil {
				l.retryBarrier(seq, err)
				return
			}
			d.barrier = false
			for _, done := range d.readyWaiters {
				l.post(func() { done(nil) })
			}
			d.readyWaiters = nil
		})
	})
}

// barrierRetry is how long a barrier whose checkpoint could not be written
// (the disk was full) waits before it tries again.
const barrierRetry = time.Second

// retryBarrier arms the next attempt of a barrier whose attempt failed with
// err, without failing the log: a full disk may get space back. A closing
// log makes no more attempts; the barrier is abandoned instead.
func (l *Log) retryBarrier(seq uint64, err error) {
	d := &l.dur
	if l.closing {
		l.abandonBarrier(err)
		return
	}
	d.barrierErr = err
	d.barrierTimer = l.clock.AfterFunc(barrierRetry, func() {
		if seq != d.barrierSeq {
			return // superseded; the armed timer, if any, is another's
		}
		d.barrierTimer = nil
		if l.failed == nil && !l.closing {
			l.startBarrier()
		}
	})
}

// abandonBarrier gives up on the barrier for Close: its waiters hear err,
// and the truncation it holds never reaches the disk. (An attempt fails
// short of failing the log only at its checkpoint, before any file is
// cut.) The disk keeps the log as it was before the truncation, which the
// next Open recovers; the barrier stays up, so nothing is appended after
// the truncation meanwhile.
func (l *Log) abandonBarrier(err error) {
	d := &l.dur
	d.barrierSeq++ // the callbacks of an attempt in flight are inert
	if d.barrierTimer != nil {
		d.barrierTimer.Stop()
		d.barrierTimer = nil
	}
	waiters := d.readyWaiters
	d.readyWaiters = nil
	for _, done := range waiters {
		l.post(func() { done(err) })
	}
}

// Ready calls done once the log accepts appends: at once, or when the
// barrier after a truncation or a recovery completes.
func (l *Log) Ready(done func(error)) {
	if err := l.usable(); err != nil || !l.dur.barrier {
		l.post(func() { done(err) })
		return
	}
	l.dur.readyWaiters = append(l.dur.readyWaiters, done)
}

// failAll tells every waiter that the log failed.
func (d *durability) failAll(l *Log, err error) {
	var all []func(error)
	for _, w := range d.waiters {
		all = append(all, w.done)
	}
	all = append(all, d.ckpt.current...)
	all = append(all, d.ckpt.next...)
	all = append(all, d.readyWaiters...)
	d.waiters, d.ckpt.current, d.ckpt.next, d.readyWaiters = nil, nil, nil, nil
	for _, done := range all {
		l.post(func() { done(err) })
	}
	d.stopTimers()
}

func (d *durability) stopTimers() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.ckpt.timer != nil {
		d.ckpt.timer.Stop()
		d.ckpt.timer = nil
	}
}
