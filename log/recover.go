package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
)

// Open opens the partition log in cfg.Dir, creating the directory if it does
// not exist, and recovers it:
//
//   - Segments wholly below the recovery point are trusted: their indexes
//     are loaded (and rebuilt from batch headers if missing or damaged),
//     nothing else is read.
//   - In the segment holding the recovery point, the batches before it are
//     walked by header (after a clean shutdown not even that: its index
//     files are complete up to it), and from the recovery point on every
//     batch is read whole and checked (framing, offsets in sequence, CRC),
//     as are all later segments. The first batch that fails ends the log:
//     the file is cut there and later segments are removed. A torn or
//     corrupt tail is never served.
//   - The leader-epoch cache is the checkpoint's plus the epochs of the
//     batches scanned; the producer state is the newest snapshot's plus the
//     batches after it.
//
// Unless the log was closed cleanly (and recovery changed nothing), it starts
// behind a barrier (see Ready) that makes everything it holds durable first.
// A missing or damaged checkpoint only costs a longer scan.
func Open(cfg Config) (*Log, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	l := &Log{
		cfg:       cfg,
		fs:        cfg.FS,
		clock:     cfg.Clock,
		loop:      cfg.Loop,
		dir:       cfg.Dir,
		rules:     newClientRules(cfg),
		producers: newProducerState(),
	}
	err := l.load(recoveryStart{rp: -1})
	if errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFailed) {
		// What the recovery point promised does not hold: recover again,
		// scanning the whole log, rather than never open.
		l.cfg.Logger.Error("log does not add up below its recovery point, scanning it whole", "dir", l.dir, "err", err)
		l.closeSegments()
		fresh := &Log{cfg: l.cfg, fs: l.fs, clock: l.clock, loop: l.loop, dir: l.dir, rules: l.rules, producers: newProducerState()}
		l = fresh
		err = l.load(recoveryStart{rp: 0})
	}
	if err != nil {
		l.closeSegments()
		return nil, err
	}
	return l, nil
}

func (l *Log) closeSegments() {
	for _, s := range l.segs {
		s.closeFiles()
	}
}

// markUnsynced makes the first flush sync what a restart (rather than a
// power loss) may have left only in the page cache: every segment from the
// one holding the durable offset on, and the directory and its parent.
func (l *Log) markUnsynced() {
	for i := l.segmentFor(l.dur.durable); i < len(l.segs); i++ {
		for _, t := range []*trackedFile{l.segs[i].log, l.segs[i].idxF, l.segs[i].tsF} {
			t.changes++
		}
	}
	l.dur.dirDirty, l.dur.parentDirty = true, true
}

func unboundedIfZero(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// listing is what a partition directory holds.
type listing struct {
	logs      []int64 // bases of .log files, ascending
	indexes   map[string]bool
	snapshots []int64
	strays    []string // leftover temporary files, orphan indexes
	ckpt      bool
	epochs    bool
}

func (l *Log) listDir() (listing, error) {
	var li listing
	if _, err := l.fs.Stat(l.dir); errors.Is(err, fs.ErrNotExist) {
		if err := l.fs.MkdirAll(l.dir); err != nil {
			return li, storageError(err, "create %s", l.dir)
		}
		l.dur.dirDirty, l.dur.parentDirty = true, true
	} else if err != nil {
		return li, storageError(err, "stat %s", l.dir)
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return li, storageError(err, "list %s", l.dir)
	}
	li.indexes = make(map[string]bool)
	logs := make(map[int64]bool)
	for _, name := range names {
		if base, ok := offsetName(name, ".log"); ok {
			li.logs = append(li.logs, base)
			logs[base] = true
		}
	}
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			li.strays = append(li.strays, name)
		case name == partitionCheckpointFile:
			li.ckpt = true
		case name == epochCheckpointFile:
			li.epochs = true
		}
		if o, ok := offsetName(name, ".snapshot"); ok {
			li.snapshots = append(li.snapshots, o)
		}
		for _, ext := range []string{".index", ".timeindex"} {
			if base, ok := offsetName(name, ext); ok {
				if logs[base] {
					li.indexes[name] = true
				} else {
					li.strays = append(li.strays, name)
				}
			}
		}
	}
	slices.Sort(li.logs)
	slices.Sort(li.snapshots)
	return li, nil
}

// offsetName parses "<20 digits><ext>".
func offsetName(name, ext string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, ext)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	o, err := strconv.ParseInt(digits, 10, 64)
	return o, err == nil && o >= 0
}

// recoveryStart is where recovery begins: the recovery point, and whether the
// log was closed cleanly there.
type recoveryStart struct {
	rp    int64
	clean bool
}

// load lists, checks and recovers the partition's files. A non-negative
// force.rp overrides the checkpoint's recovery point.
func (l *Log) load(force recoveryStart) error {
	li, err := l.listDir()
	if err != nil {
		return err
	}
	for _, name := range li.strays {
		l.dur.dirDirty = true
		if err := l.fs.Remove(l.dir + "/" + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.cfg.Logger.Warn("remove stray file failed", "file", name, "err", err)
		}
	}
	start, err := l.loadCheckpoints(li)
	if err != nil {
		return err
	}
	if force.rp >= 0 {
		start = force
	}
	l.snapshots = li.snapshots
	changed := false
	if len(li.logs) == 0 {
		s, err := createSegment(l.fs, l.dir, l.logStart, l.clock.Now(), l.cfg.IndexBytesMax)
		if err != nil {
			return storageError(err, "create the first segment of %s", l.dir)
		}
		l.segs = []*segment{s}
		l.dur.dirDirty = true
	} else if changed, err = l.recoverSegments(li, start); err != nil {
		return err
	}
	if l.logStart > l.LogEndOffset() {
		// Every segment lies below the log start: start afresh there, as
		// Kafka does.
		l.cfg.Logger.Warn("log start is past the log end, emptying the log", "dir", l.dir, "start", l.logStart, "end", l.LogEndOffset())
		if err := l.restartEmpty(l.logStart); err != nil {
			return err
		}
		changed = true
	}
	end := l.LogEndOffset()
	l.logStart = max(l.logStart, l.segs[0].base)
	l.epochs.truncateFromEnd(end)
	l.epochs.truncateFromStart(l.logStart)
	l.dur.durable = min(start.rp, end)
	l.markUnsynced()
	fresh := len(li.logs) == 0 && !li.ckpt
	if start.rp > end || (!start.clean && !fresh) {
		// After anything but a clean close, files may hold changes that
		// never reached the disk (a cut whose sync a failure prevented):
		// they must before the log moves on, or a segment rolled at the
		// recovery point would make a stale tail look trusted.
		changed = true
	}
	if err := l.rebuildProducers(); err != nil {
		return err
	}
	l.producers.expire(l.clock.Now().UnixMilli(), l.cfg.ProducerIDExpiration.Milliseconds())
	if err := l.active().preallocate(l.cfg.IndexBytesMax); err != nil {
		l.cfg.Logger.Warn("index preallocation failed", "segment", l.active().path, "err", err)
	}
	if changed {
		l.startBarrier()
	}
	l.checkInvariants()
	l.cfg.Logger.Debug("log opened", "dir", l.dir, "start", l.logStart, "end", end, "recovery point", start.rp, "clean", start.clean, "changed", changed, "segments", len(l.segs), "epochs", l.epochs.entries)
	return nil
}

// loadCheckpoints reads the recovery-point and leader-epoch checkpoints. A
// checkpoint that is missing or fails its checksum makes recovery scan
// everything (the epochs are then found again in the batches); one that
// cannot be read fails Open, which may be retried.
func (l *Log) loadCheckpoints(li listing) (recoveryStart, error) {
	var start recoveryStart
	var ck partitionCheckpoint
	var ckErr error = fs.ErrNotExist
	if li.ckpt {
		var ioErr error
		ck, ckErr, ioErr = readCheckpoint(l.fs, l.dir+"/"+partitionCheckpointFile, decodePartitionCheckpoint)
		if ioErr != nil {
			return start, storageError(ioErr, "read the recovery-point checkpoint of %s", l.dir)
		}
	}
	epochs, epErr := epochCache{}, error(nil)
	if li.epochs {
		var ioErr error
		epochs, epErr, ioErr = readCheckpoint(l.fs, l.dir+"/"+epochCheckpointFile, decodeEpochCheckpoint)
		if ioErr != nil {
			return start, storageError(ioErr, "read the leader-epoch checkpoint of %s", l.dir)
		}
	} else if li.ckpt {
		epErr = fs.ErrNotExist // a checkpoint without its epochs: trust neither
	}
	if ckErr == nil && epErr == nil && crc32.Checksum(epochs.encode(), castagnoli) != ck.EpochsCRC {
		// A crash kept one rename of a checkpoint round and not the other.
		epErr = fmt.Errorf("leader-epoch checkpoint does not match the recovery-point checkpoint")
	}
	if ckErr == nil {
		l.logStart = ck.LogStartOffset
		start = recoveryStart{rp: ck.RecoveryPoint, clean: ck.Clean}
		l.dur.ckpt.written, l.dur.ckpt.hasFile = ck, true
	} else if li.ckpt {
		l.cfg.Logger.Warn("recovery-point checkpoint corrupt, scanning the whole log", "dir", l.dir, "err", ckErr)
	}
	if epErr == nil {
		l.epochs = epochs
	} else {
		if li.epochs {
			l.cfg.Logger.Warn("leader-epoch checkpoint unusable, scanning the whole log", "dir", l.dir, "err", epErr)
		}
		start = recoveryStart{}
	}
	return start, nil
}

// readCheckpoint reads and decodes a checkpoint file. It returns the decode
// error separately from a read error: the first means the file is corrupt,
// the second that the disk failed.
func readCheckpoint[T any](fsys env.FS, name string, decode func([]byte) (T, error)) (v T, corrupt, ioErr error) {
	for attempt := 0; attempt < readAttempts; attempt++ {
		var p []byte
		if p, ioErr = readFile(fsys, name, 1<<20); ioErr != nil {
			return v, nil, ioErr
		}
		if v, corrupt = decode(p); corrupt == nil {
			return v, nil, nil
		}
	}
	return v, corrupt, nil
}

// restartEmpty replaces every segment with an empty one at offset.
func (l *Log) restartEmpty(offset int64) error {
	for _, s := range l.segs {
		if err := l.deleteSegmentFiles(s); err != nil {
			return storageError(err, "empty %s", l.dir)
		}
	}
	s, err := createSegment(l.fs, l.dir, offset, l.clock.Now(), l.cfg.IndexBytesMax)
	if err != nil {
		l.segs = nil
		return storageError(err, "create segment at %d", offset)
	}
	l.segs = []*segment{s}
	l.epochs = epochCache{}
	return nil
}

// recoverSegments opens the segment files, loads the trusted ones and scans
// the rest. It reports whether it changed anything on disk.
func (l *Log) recoverSegments(li listing, start recoveryStart) (bool, error) {
	now := l.clock.Now()
	for _, base := range li.logs {
		s := newSegmentState(l.dir, base, now)
		l.segs = append(l.segs, s)
		if err := l.openSegmentFiles(s, li); err != nil {
			return false, err
		}
	}
	// Segments wholly below the log start hold nothing readable: remove
	// them now (a full truncation or retention may have left them behind).
	for len(l.segs) > 1 && l.segs[1].base <= l.logStart {
		if err := l.deleteSegmentFiles(l.segs[0]); err != nil {
			return false, storageError(err, "remove a segment below the log start")
		}
		l.segs = l.segs[1:]
	}
	if err := l.dropStrays(start.rp); err != nil {
		return false, err
	}
	// A segment is trusted whole only when the recovery point lies past
	// its end, not at it: a flush round in flight when the segment rolled
	// makes everything below its end durable, but not the index files that
	// the roll completed (the round began while they were the active
	// segment's, which rounds leave alone). Only a round begun after the
	// roll, which syncs them, can reach further.
	k := 0
	for k+1 < len(l.segs) && l.segs[k+1].base < start.rp {
		k++
	}
	for i := 0; i < k; i++ {
		if !l.loadTrusted(l.segs[i], l.segs[i+1].base) {
			k, start = i, recoveryStart{rp: l.segs[i].base}
			break
		}
	}
	return l.recoverTail(k, start)
}

// dropStrays removes the empty segments below the recovery point: files a
// failed roll could not remove. Below the recovery point every segment has
// data, and only the last segment of a log may be empty.
func (l *Log) dropStrays(rp int64) error {
	kept := l.segs[:0]
	for i, s := range l.segs {
		size, err := s.log.f.Size()
		if err != nil {
			return storageError(err, "size of %s.log", s.path)
		}
		if size == 0 && s.base < rp && (len(kept) > 0 || i < len(l.segs)-1) {
			l.cfg.Logger.Warn("removing a stray empty segment", "segment", s.path, "recovery point", rp)
			if err := l.deleteSegmentFiles(s); err != nil {
				return storageError(err, "remove a stray segment")
			}
			continue
		}
		kept = append(kept, s)
	}
	clear(l.segs[len(kept):])
	l.segs = kept
	return nil
}

func (l *Log) openSegmentFiles(s *segment, li listing) error {
	open := func(ext string) (*trackedFile, error) {
		name := s.path + ext
		if ext != ".log" && !li.indexes[name[len(l.dir)+1:]] {
			l.dur.dirDirty = true
			return createTracked(l.fs, name)
		}
		f, err := l.fs.Open(name)
		if err != nil {
			return nil, err
		}
		return &trackedFile{f: f}, nil
	}
	var err error
	if s.log, err = open(".log"); err != nil {
		return storageError(err, "open %s.log", s.path)
	}
	if s.idxF, err = open(".index"); err != nil {
		return storageError(err, "open %s.index", s.path)
	}
	if s.tsF, err = open(".timeindex"); err != nil {
		return storageError(err, "open %s.timeindex", s.path)
	}
	return nil
}

// loadTrusted sets up a segment wholly below the recovery point, which ends
// at next. It reports false if the segment's data is not what the recovery
// point promised (its batch headers do not add up), so it must be scanned.
func (l *Log) loadTrusted(s *segment, next int64) bool {
	size, err := s.log.f.Size()
	if err != nil {
		l.cfg.Logger.Warn("segment size unreadable", "segment", s.path, "err", err)
		return false
	}
	s.size, s.next = size, next
	idx, ierr := loadIndexFile(s.idxF.f, l.cfg.IndexBytesMax, func(p []byte) (offsetIndex, error) {
		return parseOffsetIndex(p, s.base, size, next)
	})
	tix, terr := loadIndexFile(s.tsF.f, l.cfg.IndexBytesMax, func(p []byte) (timeIndex, error) {
		return parseTimeIndex(p, s.base, next)
	})
	if ierr == nil && terr == nil && (size == 0 || tix.len() > 0) {
		s.idx, s.tix = idx, tix
		s.idxWritten, s.tixWritten = len(idx.buf), len(tix.buf)
		s.maxTs, s.maxTsOffset, _ = tix.last()
		s.maxTsUnconfirmed = true
		return true
	}
	l.cfg.Logger.Warn("index files missing or damaged, rebuilding them", "segment", s.path, "offset index", ierr, "time index", terr)
	if err := l.rebuildIndexes(s); err != nil {
		l.cfg.Logger.Warn("segment below the recovery point does not add up, scanning it", "segment", s.path, "err", err)
		return false
	}
	return true
}

// loadIndexFile reads an index file and parses it, retrying a parse that
// fails (the bytes may have been flipped on the way).
func loadIndexFile[T any](f env.File, limit int64, parse func([]byte) (T, error)) (T, error) {
	var zero T
	size, err := f.Size()
	if err != nil {
		return zero, err
	}
	if size > limit {
		return zero, fmt.Errorf("%s: %d bytes, more than %d", f.Name(), size, limit)
	}
	p := make([]byte, size)
	for attempt := 0; attempt < readAttempts; attempt++ {
		if err = readFull(f, p, 0); err != nil {
			return zero, err
		}
		var v T
		if v, err = parse(p); err == nil {
			return v, nil
		}
	}
	return zero, err
}

// recoverTail recovers segments k and later: the prefix of segment k below
// the recovery point by headers (or from its index files after a clean
// close), then every batch after it read whole and checked. It cuts the log
// at the first batch that fails.
func (l *Log) recoverTail(k int, start recoveryStart) (bool, error) {
	changed := false
	want := l.segs[k].base
	for i := k; i < len(l.segs); i++ {
		s := l.segs[i]
		fileSize, err := s.log.f.Size()
		if err != nil {
			return changed, storageError(err, "size of %s.log", s.path)
		}
		if s.base != want && fileSize == 0 {
			// An empty file a failed roll could not remove.
			l.cfg.Logger.Warn("removing a stray empty segment", "segment", s.path, "expected", want)
			if err := l.deleteSegmentFiles(s); err != nil {
				return changed, storageError(err, "remove a stray segment")
			}
			l.segs = slices.Delete(l.segs, i, i+1)
			i--
			changed = true
			if i == len(l.segs)-1 {
				l.rewriteIndexFiles(l.segs[i], true)
			}
			continue
		}
		if s.base != want {
			l.cfg.Logger.Warn("segment does not continue the log, removing it and what follows", "segment", s.path, "expected", want)
			if err := l.dropFrom(i); err != nil {
				return true, err
			}
			l.rewriteIndexFiles(l.segs[i-1], true)
			return true, nil
		}
		pos := int64(0)
		if i == k && start.rp > s.base {
			ok := start.clean && l.cleanPrefix(s, start.rp, fileSize)
			if !ok {
				l.walkPrefix(s, start.rp, fileSize)
			}
			pos, want = s.size, s.next
		}
		if i == k {
			// The checkpoint may hold epochs of batches the crash took:
			// the epochs from here on are those of the batches scanned.
			l.epochs.truncateFromEnd(want)
		}
		var following env.File
		if i+1 < len(l.segs) {
			following = l.segs[i+1].log.f
		}
		pos, want, err = l.scan(s, pos, want, fileSize, following)
		if err != nil {
			return changed, err
		}
		last := i == len(l.segs)-1
		if pos < fileSize {
			l.cfg.Logger.Warn("invalid bytes at the end of the log, cutting them", "segment", s.path, "position", pos, "file size", fileSize)
			if err := s.log.f.Truncate(pos); err != nil {
				return changed, storageError(err, "truncate %s.log", s.path)
			}
			s.log.changes++
			changed = true
			if err := l.dropFrom(i + 1); err != nil {
				return true, err
			}
			last = true
		}
		l.rewriteIndexFiles(s, last)
		if last {
			break
		}
	}
	return changed, nil
}

// dropFrom removes segment i and every later one, newest first, so that
// one that cannot be removed leaves no hole.
func (l *Log) dropFrom(i int) error {
	for j := len(l.segs) - 1; j >= i; j-- {
		if err := l.deleteSegmentFiles(l.segs[j]); err != nil {
			return storageError(err, "remove a segment past the end of the log")
		}
		l.segs[j] = nil
		l.segs = l.segs[:j]
	}
	return nil
}

// cleanPrefix sets up the part of s below the recovery point rp from its
// index files, which a clean close left complete up to rp, walking only the
// batches after the last index entry. It reports false if anything does not
// add up.
func (l *Log) cleanPrefix(s *segment, rp, fileSize int64) bool {
	idx, err := loadIndexFile(s.idxF.f, l.cfg.IndexBytesMax, func(p []byte) (offsetIndex, error) {
		return parseOffsetIndex(p, s.base, fileSize, math.MaxInt64)
	})
	if err != nil {
		return false
	}
	tix, err := loadIndexFile(s.tsF.f, l.cfg.IndexBytesMax, func(p []byte) (timeIndex, error) {
		return parseTimeIndex(p, s.base, rp+1<<31)
	})
	if err != nil {
		return false
	}
	for idx.len() > 0 {
		if o, _ := idx.entry(idx.len() - 1); o < rp {
			break
		}
		idx.buf = idx.buf[:len(idx.buf)-offsetEntrySize]
	}
	tix.truncateFrom(rp)
	pos, wantBase, wantLast := int64(0), s.base, int64(-1)
	if idx.len() > 0 {
		wantLast, pos = idx.entry(idx.len() - 1)
		wantBase = -1
	}
	entryPos := pos
	r := newHeaderReader(s.log.f, fileSize)
	ts, tsOff, ok := tix.last()
	for wantBase != rp {
		h, err := readChecked(r, pos, wantBase, wantLast, fileSize)
		if err != nil || h.nextOffset() > rp || !followedBy(r, pos+h.size(), h.nextOffset(), fileSize) {
			return false
		}
		// The time index holds the max timestamp only as of its last
		// entry; the batches after it count too.
		if ok && h.MaxTimestamp > ts {
			ts, tsOff = h.MaxTimestamp, h.lastOffset()
		}
		pos += h.size()
		wantBase, wantLast = h.nextOffset(), -1
	}
	if pos > 0 && !ok {
		return false
	}
	if pos > 0 {
		h, err := readChecked(r, 0, s.base, -1, fileSize)
		if err != nil {
			return false
		}
		s.firstTs = h.MaxTimestamp
		s.maxTs, s.maxTsOffset = ts, tsOff
		s.maxTsUnconfirmed = true
	}
	idx.truncateAt(pos, rp)
	s.idx, s.tix = idx, tix
	s.idxWritten, s.tixWritten = len(idx.buf), len(tix.buf)
	s.size, s.next = pos, rp
	s.bytesSinceIndex = pos - entryPos
	return true
}

// walkPrefix builds the part of s below the recovery point rp from its batch
// headers, which are durable: each is confirmed by the one after it, not by
// its CRC. It stops early at anything that does not add up; the scan that
// follows starts there.
func (l *Log) walkPrefix(s *segment, rp, fileSize int64) {
	r := newHeaderReader(s.log.f, fileSize)
	for s.next < rp {
		h, err := readChecked(r, s.size, s.next, -1, fileSize)
		if err != nil || h.nextOffset() > rp || !followedBy(r, s.size+h.size(), h.nextOffset(), fileSize) {
			return
		}
		s.noteBatch(&h, s.size, l.cfg.IndexIntervalBytes)
	}
}

// followedBy confirms a header's length and last offset, which only the CRC
// covers, by what follows it: the file ends at pos, or a header there
// begins at offset next. A header read with a bit flipped on the way must
// not decide where the log's bytes end.
func followedBy(r *headerReader, pos, next, fileSize int64) bool {
	if pos == fileSize {
		return true
	}
	for attempt := 0; attempt < readAttempts; attempt++ {
		if h, err := r.read(pos); err == nil && checkHeaderShape(&h, next) == nil {
			return true
		}
		r.drop()
	}
	return false
}

// scan reads the batches of s from pos, where offset want must begin, to the
// end of the file, checking each whole, and adds the good ones to the
// segment's state and their epochs to the cache. It stops at the first
// batch that fails and returns where.
func (l *Log) scan(s *segment, pos, want, fileSize int64, following env.File) (int64, int64, error) {
	w := &scanWindow{f: s.log.f, limit: fileSize, following: following}
	for pos < fileSize {
		p, err := w.batch(pos, want)
		if err != nil {
			return pos, want, err
		}
		if p == nil {
			break
		}
		h := parseHeader(p)
		if ok, err := l.scannedEpochOK(w, pos, &h); err != nil || !ok {
			if err != nil {
				return pos, want, err
			}
			break
		}
		s.noteBatch(&h, pos, l.cfg.IndexIntervalBytes)
		if latest, ok := l.epochs.latest(); h.LeaderEpoch >= 0 && (!ok || h.LeaderEpoch > latest.Epoch) {
			l.epochs.assign(h.LeaderEpoch, h.BaseOffset)
		}
		pos += h.size()
		want = h.nextOffset()
	}
	return pos, want, nil
}

// scannedEpochOK checks a scanned batch's leader epoch, which its CRC does
// not cover: it is read again from the file until two reads agree, so that
// no bit flipped on the way counts; epochs never go down along a log; and a
// raised one must not be followed by a lower one. A batch that fails
// ends the log. (A flip on the medium that raises the epoch of the log's
// last batch goes unseen.)
func (l *Log) scannedEpochOK(w *scanWindow, pos int64, h *header) (bool, error) {
	epoch, err := w.stableEpoch(pos, h.LeaderEpoch)
	if err != nil || epoch == nil {
		return false, err
	}
	h.LeaderEpoch = *epoch // the window's copy may have been flipped on the way
	latest, ok := l.epochs.latest()
	if h.LeaderEpoch < 0 || (ok && h.LeaderEpoch == latest.Epoch) {
		return true, nil
	}
	if ok && h.LeaderEpoch < latest.Epoch {
		return false, nil
	}
	// A bit flipped on the medium reads the same every time; a raised
	// epoch that the next batch goes back below is such a flip (or the
	// next batch's, and the log ends here either way).
	next, err := w.bytes(pos+h.size(), batchHeaderSize)
	if err != nil {
		return false, err
	}
	if next == nil && pos+h.size() == w.limit && w.following != nil {
		// The last batch of a segment: the next one opens the next file.
		var first [batchHeaderSize]byte
		if readFull(w.following, first[:], 0) == nil {
			next = first[:]
		}
	}
	if next == nil {
		return true, nil
	}
	if n := parseHeader(next); checkHeaderShape(&n, h.nextOffset()) == nil && n.LeaderEpoch >= 0 && n.LeaderEpoch < h.LeaderEpoch {
		return false, nil
	}
	return true, nil
}

// stableEpoch reads the leader epoch of the batch at pos from the file again:
// one read that agrees with seen (what the window holds) settles it; after
// a disagreement, a value needs three votes (seen counting as one), since
// two small reads may well be flipped alike. It returns nil if no value
// gets them.
func (w *scanWindow) stableEpoch(pos int64, seen int32) (*int32, error) {
	var p [4]byte
	votes := map[int32]int{seen: 1}
	for attempt := 0; attempt < 3*readAttempts; attempt++ {
		if err := readFull(w.f, p[:], pos+offLeaderEpoch); err != nil {
			return nil, storageError(err, "read %s at %d", w.f.Name(), pos)
		}
		epoch := int32(binary.BigEndian.Uint32(p[:]))
		votes[epoch]++
		if (attempt == 0 && epoch == seen) || votes[epoch] >= 3 {
			return &epoch, nil
		}
	}
	return nil, nil
}

// rewriteIndexFiles makes a recovered segment's index files match its
// indexes. A failure only costs a rebuild on a later open.
func (l *Log) rewriteIndexFiles(s *segment, active bool) {
	if !active && s.maxTs != noTimestamp {
		s.tix.maybeAppend(s.maxTs, s.maxTsOffset)
	}
	err := s.truncateIndexes(s.size, s.next, l.cfg.IndexBytesMax)
	if err == nil {
		err = s.flushIndexes()
	}
	if err != nil {
		l.cfg.Logger.Warn("index file rewrite failed", "segment", s.path, "err", err)
	}
}

// scanWindow reads whole batches through a large window.
type scanWindow struct {
	f     env.File
	limit int64
	// following is the next segment's file, whose first batch header
	// follows this file's last batch.
	following env.File
	buf       []byte
	win       []byte
	winPos    int64
}

const scanWindowSize = 1 << 20

// batch returns the whole batch at pos if it is there, complete and valid,
// starting at offset want; nil if not (after retries, for bytes that may
// have been flipped on the way); or an error if the file cannot be read.
func (w *scanWindow) batch(pos, want int64) ([]byte, error) {
	for attempt := 0; attempt < readAttempts; attempt++ {
		head, err := w.bytes(pos, batchHeaderSize)
		if err != nil || head == nil {
			return nil, err
		}
		h := parseHeader(head)
		if checkHeaderShape(&h, want) != nil || pos+h.size() > w.limit {
			w.win = nil
			continue
		}
		p, err := w.bytes(pos, h.size())
		if err != nil || p == nil {
			return nil, err
		}
		if _, err := checkStored(p, want); err == nil {
			return p, nil
		}
		w.win = nil
	}
	return nil, nil
}

// bytes returns [pos, pos+n) of the file, or nil if it ends before.
func (w *scanWindow) bytes(pos, n int64) ([]byte, error) {
	if pos+n > w.limit {
		return nil, nil
	}
	if pos >= w.winPos && pos+n <= w.winPos+int64(len(w.win)) {
		return w.win[pos-w.winPos : pos-w.winPos+n], nil
	}
	m := min(max(n, scanWindowSize), w.limit-pos)
	if int64(cap(w.buf)) < m {
		w.buf = make([]byte, m)
	}
	if err := readFull(w.f, w.buf[:m], pos); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil
		}
		return nil, storageError(err, "read %s at %d", w.f.Name(), pos)
	}
	w.win, w.winPos = w.buf[:m], pos
	return w.win[:n], nil
}

// newClientRules derives the checks on appended batches from cfg.
func newClientRules(cfg Config) clientRules {
	return clientRules{
		maxMessageBytes: cfg.MaxMessageBytes,
		timestampType:   cfg.TimestampType,
		beforeMax:       unboundedIfZero(cfg.TimestampBeforeMax),
		afterMax:        unboundedIfZero(cfg.TimestampAfterMax),
	}
}

// Reconfigure applies changed topic settings to the open log, as Kafka
// applies a topic config change: segment size and age, retention, flush
// policy, index interval and the checks on appended batches take effect from
// the next operation that consults them. The log's identity (FS, Clock,
// Loop, Dir) cannot change, and neither can IndexBytesMax, which sized the
// active segment's preallocated index files: it applies after a reopen.
func (l *Log) Reconfigure(cfg Config) error {
	if err := l.usable(); err != nil {
		return err
	}
	cfg.FS, cfg.Clock, cfg.Loop, cfg.Dir = l.cfg.FS, l.cfg.Clock, l.cfg.Loop, l.cfg.Dir
	cfg.IndexBytesMax = l.cfg.IndexBytesMax
	if cfg.Logger == nil {
		cfg.Logger = l.cfg.Logger
	}
	if err := cfg.normalize(); err != nil {
		return err
	}
	l.cfg, l.rules = cfg, newClientRules(cfg)
	return nil
}
