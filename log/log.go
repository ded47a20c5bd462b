package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Config configures a Log. FS, Clock, Loop and Dir are required; every other
// field has Kafka's default when left zero.
type Config struct {
	FS    env.FS
	Clock env.Clock
	Loop  env.Loop
	// Logger receives the log's warnings (recovery, index rebuilds).
	// Default: discard.
	Logger *slog.Logger
	// Dir is the partition's directory, "<topic>-<partition>" under the
	// node's data root (or deeper).
	Dir string

	// SegmentBytes is segment.bytes: a segment rolls before it would grow
	// past it. Default 1 GiB; at most 2 GiB - 1.
	SegmentBytes int64
	// SegmentTime is segment.ms: a segment rolls once its batches span
	// more than this (by their timestamps, as Kafka counts). Default 7 days.
	SegmentTime time.Duration
	// IndexIntervalBytes is index.interval.bytes. Default 4096.
	IndexIntervalBytes int64
	// IndexBytesMax is segment.index.bytes, the size of an index file; a
	// segment rolls when an index is full. Default 10 MiB.
	IndexBytesMax int64
	// MaxMessageBytes is max.message.bytes, the largest batch a producer
	// may append. Default 1048588.
	MaxMessageBytes int
	// TimestampType is message.timestamp.type. Default CreateTime.
	TimestampType TimestampType
	// Compression is compression.type: the codec a leader append stores
	// batches in. Default CompressionProducer, the producer's.
	Compression Compression
	// TimestampBeforeMax and TimestampAfterMax are
	// message.timestamp.before.max.ms and .after.max.ms for CreateTime.
	// Zero (the default) means unbounded.
	TimestampBeforeMax time.Duration
	TimestampAfterMax  time.Duration
	// RetentionTime is retention.ms. Default 7 days; negative: unlimited.
	RetentionTime time.Duration
	// RetentionBytes is retention.bytes. Zero (the default) or negative:
	// unlimited.
	RetentionBytes int64
	// FlushBytes flushes once this many bytes are unflushed. Zero (the
	// default) leaves flushing to FlushInterval and explicit Flush calls, as
	// Kafka's flush.messages does by default.
	FlushBytes int64
	// FlushInterval is flush.ms: unflushed bytes are flushed this long after
	// they were appended. Zero (the default): never by time.
	FlushInterval time.Duration
	// CheckpointInterval bounds how long the recovery point and the log
	// start offset may lag in their checkpoint file. Default 60s (Kafka's
	// log.flush.offset.checkpoint.interval.ms).
	CheckpointInterval time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms. Default 1 day.
	ProducerIDExpiration time.Duration
}

// Kafka's defaults.
const (
	DefaultSegmentBytes         = 1 << 30
	DefaultSegmentTime          = 7 * 24 * time.Hour
	DefaultIndexIntervalBytes   = 4096
	DefaultIndexBytesMax        = 10 << 20
	DefaultMaxMessageBytes      = 1048588
	DefaultRetentionTime        = 7 * 24 * time.Hour
	DefaultCheckpointInterval   = time.Minute
	DefaultProducerIDExpiration = 24 * time.Hour
)

func (c *Config) normalize() error {
	switch {
	case c.FS == nil || c.Clock == nil || c.Loop == nil:
		return fmt.Errorf("log: config needs FS, Clock and Loop")
	case c.Dir == "" || c.Dir == "." || path.Clean(c.Dir) != c.Dir:
		return fmt.Errorf("log: config Dir %q is not a clean directory path", c.Dir)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	setDefault(&c.SegmentBytes, DefaultSegmentBytes)
	setDefault(&c.SegmentTime, DefaultSegmentTime)
	setDefault(&c.IndexIntervalBytes, DefaultIndexIntervalBytes)
	setDefault(&c.IndexBytesMax, DefaultIndexBytesMax)
	setDefault(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	setDefault(&c.RetentionTime, DefaultRetentionTime)
	setDefault(&c.CheckpointInterval, DefaultCheckpointInterval)
	setDefault(&c.ProducerIDExpiration, DefaultProducerIDExpiration)
	switch {
	case c.SegmentBytes < batchHeaderSize || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("log: segment bytes %d is outside [%d, %d]", c.SegmentBytes, batchHeaderSize, math.MaxInt32)
	case c.IndexBytesMax < timeEntrySize*offsetEntrySize:
		return fmt.Errorf("log: index bytes %d is too small", c.IndexBytesMax)
	case c.IndexIntervalBytes < 0 || c.MaxMessageBytes < 0 || c.SegmentTime < 0:
		return fmt.Errorf("log: negative index interval, max message bytes or segment time")
	case c.TimestampType != CreateTime && c.TimestampType != LogAppendTime:
		return fmt.Errorf("log: unknown timestamp type %d", c.TimestampType)
	case c.Compression < CompressionProducer || c.Compression > CompressionZstd:
		return fmt.Errorf("log: unknown compression type %d", c.Compression)
	}
	return nil
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Log is one partition's log. All its methods run on the node's loop; its
// callbacks run there too, always on a later turn than the call that
// registered them.
type Log struct {
	// spareWindows are header readers' window buffers, kept for the next
	// read (Log.reader).
	spareWindows [][]byte

	cfg   Config
	fs    env.FS
	clock env.Clock
	loop  env.Loop
	dir   string
	rules clientRules

	// segs is never empty after Open; the last one is active.
	segs      []*segment
	logStart  int64
	epochs    epochCache
	producers producerState
	// snapshots are the offsets of the producer snapshot files, ascending.
	snapshots []int64
	codecs    codecCache

	dur durability

	// failed is set once a sync fails or an inconsistency cannot be
	// repaired: every later operation returns it.
	failed  error
	closing bool
	closed  bool
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// LogEndOffset is the offset the next batch will get.
func (l *Log) LogEndOffset() int64 { return l.active().next }

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() int64 { return l.logStart }

// DurableOffset is the offset below which everything is on disk: synced,
// and with the directory entries of its files synced.
func (l *Log) DurableOffset() int64 { return l.dur.durable }

// Size is the total length of the segment files' batches.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments returns the base offsets of the segments, oldest first.
func (l *Log) Segments() []int64 {
	out := make([]int64, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.base
	}
	return out
}

// Err returns the error that made the log give up, or nil.
func (l *Log) Err() error { return l.failed }

// usable returns why the log cannot be used at all, or nil.
func (l *Log) usable() error {
	switch {
	case l.closed || l.closing:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	}
	return nil
}

// writable returns why the log refuses appends, or nil.
func (l *Log) writable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.dur.barrier {
		return ErrNotReady
	}
	return nil
}

// fail makes the log give up after err: its files may not hold what memory
// says they do. Every waiter hears of it.
func (l *Log) fail(err error) {
	if l.failed != nil {
		return
	}
	l.cfg.Logger.Error("log failed", "dir", l.dir, "err", err)
	l.failed = &Error{Code: kerr.KafkaStorageError, Msg: "log " + l.dir + " failed", Err: errors.Join(ErrFailed, err)}
	l.dur.failAll(l, l.failed)
}

// post runs f on a later loop turn.
func (l *Log) post(f func()) { l.loop.Post(f) }

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset int64
	LastOffset int64
	// AppendTime is the LogAppendTime given to the batch, or -1 under
	// CreateTime. For a duplicate it is the original batch's timestamp, as
	// Kafka answers.
	AppendTime     int64
	LogStartOffset int64
	// Duplicate says the batch repeated one already in the log (an
	// idempotent producer's retry): nothing was written and the offsets are
	// the original ones.
	Duplicate bool
}

// AppendLeader appends one producer batch as the partition's leader in
// leaderEpoch. It validates the batch, answers a retry of an idempotent
// producer with the original offsets, assigns offsets by rewriting the
// batch's base offset and leader epoch in place (batch belongs to the log
// afterwards: it is modified), and writes it to the page cache. Durability
// comes later; see Flush.
func (l *Log) AppendLeader(batch []byte, leaderEpoch int32) (AppendResult, error) {
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	if latest, ok := l.epochs.latest(); leaderEpoch < 0 || (ok && leaderEpoch < latest.Epoch) {
		return AppendResult{}, newError(kerr.FencedLeaderEpoch, "leader epoch %d is older than the log's latest epoch %d", leaderEpoch, latest.Epoch)
	}
	nowMs := l.clock.Now().UnixMilli()
	h, err := validateClient(batch, &l.rules, nowMs)
	if err != nil {
		return AppendResult{}, err
	}
	dup, err := l.producers.checkClient(&h)
	if err != nil {
		return AppendResult{}, err
	}
	if dup != nil {
		return AppendResult{BaseOffset: dup.FirstOffset, LastOffset: dup.LastOffset, AppendTime: dup.Timestamp, LogStartOffset: l.logStart, Duplicate: true}, nil
	}
	if c := l.cfg.Compression; c != CompressionProducer && h.compression() != c.codec() {
		if batch, h, err = l.codecs.recompress(batch, &h, c, l.rules.maxMessageBytes); err != nil {
			return AppendResult{}, err
		}
	}
	if h.size() > l.cfg.SegmentBytes {
		return AppendResult{}, newError(kerr.RecordListTooLarge, "message batch size is %d bytes, which exceeds the maximum configured segment size of %d", h.size(), l.cfg.SegmentBytes)
	}
	assignLeader(batch, &h, l.LogEndOffset(), leaderEpoch, l.cfg.TimestampType, nowMs)
	if err := l.appendBatches(batch, []header{h}); err != nil {
		return AppendResult{}, err
	}
	res := AppendResult{BaseOffset: h.BaseOffset, LastOffset: h.lastOffset(), AppendTime: -1, LogStartOffset: l.logStart}
	if l.cfg.TimestampType == LogAppendTime {
		res.AppendTime = nowMs
	}
	l.checkInvariants()
	return res, nil
}

// AppendFollower appends batches copied from the leader, which already carry
// their offsets and leader epochs. They must continue the log exactly: the
// first must begin at the log end offset (else ErrUnexpectedOffset), and each
// must pass its checks (framing, magic, CRC). A trailing partial batch, as a
// fetch response may end with, is ignored. Producer state and the
// leader-epoch cache follow the batches, without the checks a producer's
// batch gets.
func (l *Log) AppendFollower(records []byte) (AppendResult, error) {
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	hs, n, err := l.parseFollower(records)
	if err != nil {
		return AppendResult{}, err
	}
	if len(hs) == 0 {
		return AppendResult{BaseOffset: -1, LastOffset: -1, AppendTime: -1, LogStartOffset: l.logStart}, nil
	}
	if err := l.appendBatches(records[:n], hs); err != nil {
		return AppendResult{}, err
	}
	l.checkInvariants()
	return AppendResult{BaseOffset: hs[0].BaseOffset, LastOffset: hs[len(hs)-1].lastOffset(), AppendTime: -1, LogStartOffset: l.logStart}, nil
}

// ErrUnexpectedOffset is wrapped by AppendFollower's error when the batches
// do not begin at the log end offset, or go back to an older leader epoch
// than the log's latest (the follower should have truncated first; Kafka
// would accept them and cut its epoch cache).
var ErrUnexpectedOffset = errors.New("batches do not continue the log")

func (l *Log) parseFollower(p []byte) ([]header, int, error) {
	var hs []header
	want := l.LogEndOffset()
	pos := 0
	for len(p)-pos >= logOverhead {
		length := int64(int32(uint32(p[pos+8])<<24 | uint32(p[pos+9])<<16 | uint32(p[pos+10])<<8 | uint32(p[pos+11])))
		if length < batchHeaderSize-logOverhead {
			return nil, 0, newError(kerr.CorruptMessage, "batch at byte %d: length %d is too short", pos, length)
		}
		size := length + logOverhead
		if int64(len(p)-pos) < size {
			break // a partial batch at the end of a fetch
		}
		batch := p[pos : pos+int(size)]
		h := parseHeader(batch)
		if h.BaseOffset != want {
			return nil, 0, &Error{Code: kerr.UnknownServerError, Msg: fmt.Sprintf("batch begins at offset %d, the log ends at %d", h.BaseOffset, want), Err: ErrUnexpectedOffset}
		}
		if _, err := checkStored(batch, want); err != nil {
			return nil, 0, newError(kerr.CorruptMessage, "%v", err)
		}
		if size > l.cfg.SegmentBytes {
			return nil, 0, newError(kerr.RecordListTooLarge, "batch of %d bytes exceeds the segment size %d", size, l.cfg.SegmentBytes)
		}
		if latest, ok := l.epochs.latest(); ok && h.LeaderEpoch >= 0 && h.LeaderEpoch < latest.Epoch {
			return nil, 0, &Error{Code: kerr.UnknownServerError, Msg: fmt.Sprintf("batch at offset %d has leader epoch %d, below the log's latest %d", h.BaseOffset, h.LeaderEpoch, latest.Epoch), Err: ErrUnexpectedOffset}
		}
		hs = append(hs, h)
		want = h.nextOffset()
		pos += int(size)
	}
	return hs, pos, nil
}

// appendBatches writes batches p (headers hs, offsets assigned, continuing
// the log) to the active segment, rolling first where a batch would not fit,
// with one write per segment. Then it updates what follows from them.
func (l *Log) appendBatches(p []byte, hs []header) error {
	nowMs := l.clock.Now().UnixMilli()
	start, runStart := 0, 0 // byte offsets in p
	var run []header
	for i := range hs {
		h := &hs[i]
		if l.shouldRoll(l.active(), start-runStart, h, nowMs) {
			if err := l.writeRun(p[runStart:start], run); err != nil {
				return err
			}
			if err := l.roll(); err != nil {
				return err
			}
			runStart, run = start, nil
		}
		run = append(run, *h)
		start += int(h.size())
	}
	return l.writeRun(p[runStart:start], run)
}

// shouldRoll applies Kafka's roll rules to the active segment s holding
// pending more bytes about to be written, before batch h.
func (l *Log) shouldRoll(s *segment, pending int, h *header, nowMs int64) bool {
	size := s.size + int64(pending)
	if size == 0 {
		return false
	}
	waited := nowMs - s.created.UnixMilli()
	if s.firstTs >= 0 {
		waited = h.MaxTimestamp - s.firstTs
	}
	return size > l.cfg.SegmentBytes-h.size() ||
		waited > l.cfg.SegmentTime.Milliseconds() ||
		s.indexFull(l.cfg.IndexBytesMax) ||
		!s.canHold(h.lastOffset())
}

// writeRun writes batches to the active segment in one write. A failed
// write is undone (the file cut back) so the log stays as it was; if even
// that fails, the log fails.
func (l *Log) writeRun(p []byte, hs []header) error {
	if len(hs) == 0 {
		return nil
	}
	s := l.active()
	pos := s.size
	n, err := s.log.f.WriteAt(p, pos)
	if n > 0 || err != nil {
		s.log.changes++
	}
	if err == nil && n != len(p) {
		err = fmt.Errorf("short write of %d bytes of %d", n, len(p))
	}
	if err != nil {
		if terr := s.log.f.Truncate(pos); terr != nil {
			l.fail(fmt.Errorf("undo a failed write to %s.log: %w (write: %v)", s.path, terr, err))
			return l.failed
		}
		return storageError(err, "append to %s.log", s.path)
	}
	for i := range hs {
		h := &hs[i]
		s.noteBatch(h, pos, l.cfg.IndexIntervalBytes)
		s.noteAppended(h, pos)
		pos += h.size()
		l.producers.apply(h)
		l.epochs.assign(h.LeaderEpoch, h.BaseOffset)
	}
	if len(s.idx.buf)-s.idxWritten >= headerWindow {
		if err := s.flushIndexes(); err != nil {
			l.cfg.Logger.Warn("index write failed", "segment", s.path, "err", err)
		}
	}
	l.afterAppend(int64(len(p)))
	return nil
}

// roll makes a new active segment at the log end: the old one's indexes are
// trimmed, a producer snapshot is taken at the new base offset, and the old
// segment is flushed in the background, after which the recovery point
// moves to the new segment (as Kafka does on roll).
func (l *Log) roll() error {
	old := l.active()
	base := old.next
	s, err := createSegment(l.fs, l.dir, base, l.clock.Now(), l.cfg.IndexBytesMax)
	if err != nil {
		return storageError(err, "roll to a new segment at offset %d", base)
	}
	if err := old.trimIndexes(); err != nil {
		l.cfg.Logger.Warn("index trim failed", "segment", old.path, "err", err)
	}
	l.segs = append(l.segs, s)
	l.dur.dirDirty = true
	l.takeSnapshot(base)
	// Forced: a round begun before the roll, or one that made base durable
	// already, left the old segment's index files unsynced (they were the
	// active segment's), and the recovery point cannot pass the segment
	// until a round syncs them (recoveryPoint).
	l.flushInternal(base, true, func(err error) {
		if err == nil {
			l.checkpointSoon()
		}
	})
	return nil
}

// segmentFor returns the index of the segment holding offset: the last one
// whose base is at most offset.
func (l *Log) segmentFor(offset int64) int {
	lo, hi := 0, len(l.segs)
	for lo < hi {
		mid := (lo + hi) / 2
		if l.segs[mid].base <= offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return max(lo-1, 0)
}

// Epochs returns the leader-epoch cache, oldest first.
func (l *Log) Epochs() []EpochEntry { return append([]EpochEntry(nil), l.epochs.entries...) }

// LatestEpoch returns the newest leader epoch in the log.
func (l *Log) LatestEpoch() (int32, bool) {
	e, ok := l.epochs.latest()
	return e.Epoch, ok
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the end offset of the
// given epoch (the log end for the latest), and the epoch that answer
// belongs to. ok is false for UNDEFINED_EPOCH_OFFSET.
func (l *Log) EndOffsetForEpoch(epoch int32) (endEpoch int32, endOffset int64, ok bool) {
	return l.epochs.endOffsetFor(epoch, l.LogEndOffset())
}

// EpochForOffset returns the leader epoch that wrote offset, as the cache
// knows it.
func (l *Log) EpochForOffset(offset int64) (int32, bool) { return l.epochs.epochForOffset(offset) }

// RemoveExpiredProducers forgets producers idle for producer.id.expiration.ms
// and returns how many.
func (l *Log) RemoveExpiredProducers() int {
	if l.usable() != nil {
		return 0
	}
	return l.producers.expire(l.clock.Now().UnixMilli(), l.cfg.ProducerIDExpiration.Milliseconds())
}

// ProducerInfo is one producer's state, for DescribeProducers and tests.
type ProducerInfo struct {
	ProducerID     int64
	ProducerEpoch  int16
	LastSequence   int32
	LastTimestamp  int64
	FirstOffset    int64 // of the oldest remembered batch
	LastOffset     int64 // of the newest
	BatchesTracked int
}

// Producers returns the state of every producer, by ascending id.
func (l *Log) Producers() []ProducerInfo {
	var out []ProducerInfo
	for _, id := range l.producers.sortedIDs() {
		e := l.producers.byID[id]
		info := ProducerInfo{ProducerID: id, ProducerEpoch: e.Epoch, LastSequence: e.lastSeq(), LastTimestamp: e.LastTimestamp, FirstOffset: -1, LastOffset: -1, BatchesTracked: len(e.Batches)}
		if len(e.Batches) > 0 {
			info.FirstOffset = e.Batches[0].FirstOffset
			info.LastOffset = e.Batches[len(e.Batches)-1].LastOffset
		}
		out = append(out, info)
	}
	return out
}
