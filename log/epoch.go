package log

import (
	"fmt"
	"strconv"
	"strings"
)

// The leader-epoch cache maps each leader epoch seen in the log to the first
// offset written under it. Epochs and start offsets both increase along the
// list. It answers OffsetForLeaderEpoch, by which a follower finds where its
// log diverges from a new leader's.

// EpochEntry says that leader epoch Epoch wrote its first batch at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

type epochCache struct {
	entries []EpochEntry // ascending in both fields
}

// latest returns the newest entry.
func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at start, as Kafka's assign does: nothing
// changes when the latest entry already has this epoch at or before start;
// otherwise entries that conflict (an epoch at least as new, or a start at
// least as late) are dropped from the end and the new entry appended. It
// reports whether the cache changed.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 || start < 0 {
		return false
	}
	if last, ok := c.latest(); ok && last.Epoch == epoch && last.StartOffset <= start {
		return false
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= start) {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{Epoch: epoch, StartOffset: start})
	return true
}

// truncateFromEnd drops entries that start at or after end (the new log end).
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries that start at or before start (the new log
// start), except that the last of them is kept, moved to start: its epoch
// still covers the offsets from there.
func (c *epochCache) truncateFromStart(start int64) bool {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return false
	}
	kept := EpochEntry{Epoch: c.entries[i-1].Epoch, StartOffset: start}
	changed := i > 1 || c.entries[0] != kept
	c.entries = append([]EpochEntry{kept}, c.entries[i:]...)
	return changed
}

// endOffsetFor answers OffsetForLeaderEpoch as Kafka does: for the latest
// epoch, the log end; for an older epoch, the start of the next newer epoch
// in the cache, with the newest epoch not above the one asked for (or the
// one asked for, when the cache holds nothing older). ok is false when there
// is no answer (UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET): an epoch of -1,
// one newer than any known, or an empty cache.
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64, bool) {
	last, ok := c.latest()
	switch {
	case epoch < 0 || !ok:
		return -1, -1, false
	case last.Epoch == epoch:
		return epoch, logEnd, true
	}
	// The first entry with an epoch above the one asked for.
	i := 0
	for i < len(c.entries) && c.entries[i].Epoch <= epoch {
		i++
	}
	if i == len(c.entries) {
		return -1, -1, false
	}
	if i == 0 {
		return epoch, c.entries[0].StartOffset, true
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset, true
}

// epochForOffset returns the epoch that wrote offset, as far as the cache
// knows.
func (c *epochCache) epochForOffset(offset int64) (int32, bool) {
	epoch, found := int32(-1), false
	for _, e := range c.entries {
		if e.StartOffset > offset {
			break
		}
		epoch, found = e.Epoch, true
	}
	return epoch, found
}

// from returns a copy of the entries that cover offsets at and after offset.
func (c *epochCache) from(offset int64) epochCache {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= offset {
		i++
	}
	return epochCache{entries: append([]EpochEntry(nil), c.entries[i:]...)}
}

// check compares a batch's leader epoch, which its CRC does not cover, with
// the epoch the cache gives its first offset at or after logStart. Epoch -1
// (none) passes: no single flipped bit makes it from a valid epoch. So does
// a batch wholly below the log start, of which the cache knows nothing.
func (c *epochCache) check(h *header, logStart int64) error {
	if h.LeaderEpoch == -1 || h.lastOffset() < logStart {
		return nil // no epoch, or one the cache no longer knows
	}
	if e, ok := c.epochForOffset(max(h.BaseOffset, logStart)); !ok || e != h.LeaderEpoch {
		return corruptError("batch at offset %d has leader epoch %d, the log's epoch there is %d", h.BaseOffset, h.LeaderEpoch, e)
	}
	return nil
}

// The leader-epoch-checkpoint file is Kafka's text format, version 1, with a
// checksum line added (a flipped digit must not move an epoch):
//
//	1
//	<count>
//	<epoch> <start offset>     (count lines)
//	crc32c <8 hex digits>      (over every byte before this line)
const epochCheckpointVersion = 1

func (c *epochCache) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n%d\n", epochCheckpointVersion, len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return appendChecksumLine([]byte(b.String()))
}

func decodeEpochCheckpoint(p []byte) (epochCache, error) {
	lines, err := checkedLines(p)
	if err != nil {
		return epochCache{}, fmt.Errorf("leader-epoch checkpoint: %w", err)
	}
	if len(lines) < 2 || lines[0] != strconv.Itoa(epochCheckpointVersion) {
		return epochCache{}, fmt.Errorf("leader-epoch checkpoint: bad version line")
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count != len(lines)-2 {
		return epochCache{}, fmt.Errorf("leader-epoch checkpoint: count %q for %d entries", lines[1], len(lines)-2)
	}
	var c epochCache
	for _, line := range lines[2:] {
		var e EpochEntry
		if _, err := fmt.Sscanf(line, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
			return epochCache{}, fmt.Errorf("leader-epoch checkpoint: entry %q: %v", line, err)
		}
		if last, ok := c.latest(); (ok && (e.Epoch <= last.Epoch || e.StartOffset <= last.StartOffset)) || e.Epoch < 0 || e.StartOffset < 0 {
			return epochCache{}, fmt.Errorf("leader-epoch checkpoint: entry %q is out of order", line)
		}
		c.entries = append(c.entries, e)
	}
	return c, nil
}
