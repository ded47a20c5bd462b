package log

import "slices"

// TimestampOffset answers ListOffsets: a record's offset and timestamp, and
// the leader epoch of its batch (-1 if it has none).
type TimestampOffset struct {
	Timestamp   int64
	Offset      int64
	LeaderEpoch int32
}

// OffsetForTimestamp returns the first record at or after the log start
// whose timestamp is at least ts (ListOffsets with a timestamp). found is
// false when no record is that recent.
func (l *Log) OffsetForTimestamp(ts int64) (res TimestampOffset, found bool, err error) {
	if err := l.usable(); err != nil {
		return res, false, err
	}
	for _, s := range l.segs {
		if s.next <= l.logStart {
			continue
		}
		if err := l.confirmMaxTs(s); err != nil {
			return res, false, err
		}
		if s.maxTs == noTimestamp || s.maxTs < ts {
			continue
		}
		res, found, err = l.searchSegment(s, ts)
		if err != nil || found {
			return res, found, err
		}
	}
	return res, false, nil
}

// searchSegment looks for the first record of s at or after the log start
// with a timestamp of at least target, starting where the time index says
// the timestamps reach target.
func (l *Log) searchSegment(s *segment, target int64) (TimestampOffset, bool, error) {
	for attempt := 0; ; attempt++ {
		from := max(s.base, l.logStart)
		entryTs, entryOff, hinted := s.tix.lookup(target)
		if hinted && attempt == 0 {
			from = max(from, entryOff)
		}
		r := s.reader()
		pos, h, err := l.locate(s, r, from)
		if err != nil || pos >= s.size {
			return TimestampOffset{}, false, err
		}
		if hinted && attempt == 0 && from == entryOff && (h.lastOffset() != entryOff || h.MaxTimestamp != entryTs) {
			l.cfg.Logger.Warn("time index disagrees with its segment, rebuilding it", "segment", s.path)
			if err := l.rebuildIndexes(s); err != nil {
				return TimestampOffset{}, false, err
			}
			continue
		}
		var res TimestampOffset
		var found bool
		var ferr error
		_, _, err = s.walk(r, pos, h.BaseOffset, -1, func(pos int64, h *header) bool {
			if h.lastOffset() < l.logStart {
				return true
			}
			// The batch is read whole, CRC checked, even to skip it: its
			// max timestamp is only as good as the CRC that covers it.
			res, found, ferr = l.findRecord(s, pos, h, target, func(offset, ts int64) bool {
				return ts >= target && offset >= l.logStart
			})
			return !found && ferr == nil
		})
		if err == nil {
			err = ferr
		}
		return res, found, err
	}
}

// MaxTimestamp returns the record with the largest timestamp in the log
// (ListOffsets MAX_TIMESTAMP, KIP-734): the first record carrying the
// timestamp of the segment whose max timestamp is the largest.
func (l *Log) MaxTimestamp() (TimestampOffset, bool, error) {
	if err := l.usable(); err != nil {
		return TimestampOffset{}, false, err
	}
	// A segment's max timestamp comes from its time index, which recovery
	// trusted: one that its batch belies is rebuilt, and the choice made
	// again, since the rebuilt segment may no longer be the best.
	for _, s := range l.segs {
		if err := l.confirmMaxTs(s); err != nil {
			return TimestampOffset{}, false, err
		}
	}
	var rebuilt []*segment
	for {
		first := l.segs[0]
		cut := l.logStart > first.base // DeleteRecords moved it into the segment
		var best *segment
		for _, s := range l.segs {
			if s.maxTs != noTimestamp && !(s == first && cut) && (best == nil || s.maxTs > best.maxTs) {
				best = s
			}
		}
		if cut && first.maxTs != noTimestamp && (best == nil || first.maxTs >= best.maxTs) {
			// The first segment's max timestamp may be a record below
			// the log start, which must not be answered: the max of the
			// records after it takes a walk.
			res, found, err := l.maxTimestampFrom(first, l.logStart)
			if err != nil || (found && (best == nil || res.Timestamp >= best.maxTs)) {
				return res, found, err
			}
		}
		if best == nil {
			return TimestampOffset{}, false, nil
		}
		ts, off := best.maxTs, best.maxTsOffset
		r := best.reader()
		pos, h, err := l.locate(best, r, off)
		if err != nil {
			return TimestampOffset{}, false, err
		}
		if pos >= best.size || h.lastOffset() != off || h.MaxTimestamp != ts {
			if slices.Contains(rebuilt, best) {
				return TimestampOffset{}, false, corruptError("%s.log: no batch ends at offset %d with timestamp %d", best.path, off, ts)
			}
			rebuilt = append(rebuilt, best)
			if err := l.rebuildIndexes(best); err != nil {
				return TimestampOffset{}, false, err
			}
			continue
		}
		return l.findRecord(best, pos, &h, ts, func(off, rts int64) bool { return rts == ts && off >= l.logStart })
	}
}

// confirmMaxTs checks a segment's max timestamp that came from its time
// index file against the batches, and rebuilds the indexes from them if
// they disagree: a segment skipped by a timestamp search, or deleted by
// retention.ms, on a wrong max timestamp would lose records. Two ways it
// can be wrong: an entry flipped (the batch it names says otherwise), and
// entries lost: a time index file cut short still parses, its last entry
// an older max. Recovery trusts a segment's index files when the recovery
// point lies past it, but the files can have changed since the checkpoint
// vouched for them: a later process that rebuilt them (a read error, a
// damaged entry) truncated and rewrote them, and a crash before that was
// synced kept only a prefix (simulator seed 574). So the batches after the
// one the last entry names are read too, by header: none may carry a
// newer timestamp. With timestamps that grow, that is the last batch or
// two; it is done once per segment a process loads.
func (l *Log) confirmMaxTs(s *segment) error {
	if !s.maxTsUnconfirmed {
		return nil
	}
	if s.maxTs != noTimestamp {
		r := s.reader()
		pos, h, err := l.locate(s, r, s.maxTsOffset)
		if err != nil {
			return err
		}
		if pos >= s.size || h.lastOffset() != s.maxTsOffset || h.MaxTimestamp != s.maxTs {
			l.cfg.Logger.Warn("time index disagrees with its segment, rebuilding it", "segment", s.path)
			return l.rebuildIndexes(s)
		}
		newer := false
		if _, _, err := s.walk(r, pos+h.size(), h.nextOffset(), -1, func(_ int64, h *header) bool {
			newer = h.MaxTimestamp > s.maxTs
			return !newer
		}); err != nil {
			return err
		}
		if newer {
			l.cfg.Logger.Warn("time index is missing its last entries, rebuilding it", "segment", s.path)
			return l.rebuildIndexes(s)
		}
	}
	s.maxTsUnconfirmed = false
	return nil
}

// maxTimestampFrom returns the first record of s at or after offset from
// with the largest timestamp among them, reading every batch there.
func (l *Log) maxTimestampFrom(s *segment, from int64) (TimestampOffset, bool, error) {
	r := s.reader()
	pos, h, err := l.locate(s, r, from)
	if err != nil || pos >= s.size {
		return TimestampOffset{}, false, err
	}
	var res TimestampOffset
	found := false
	var ferr error
	_, _, err = s.walk(r, pos, h.BaseOffset, -1, func(pos int64, h *header) bool {
		if found && h.MaxTimestamp <= res.Timestamp {
			return true // as checked below, when the batch is read
		}
		var p []byte
		if p, ferr = l.readBatch(s, pos, h); ferr != nil {
			return false
		}
		checked := parseHeader(p)
		ferr = visitRecords(p, &checked, l.codecs.decompressor(), func(offset, ts int64) bool {
			if offset >= from && (!found || ts > res.Timestamp) {
				res, found = TimestampOffset{Timestamp: ts, Offset: offset, LeaderEpoch: max(checked.LeaderEpoch, -1)}, true
			}
			return true
		})
		return ferr == nil
	})
	if err == nil {
		err = ferr
	}
	return res, found, err
}

// findRecord reads the batch h at pos of s, checked, and returns its first
// record that match accepts. A batch whose max timestamp (as checked) is
// below minMaxTs holds none and is not decoded.
func (l *Log) findRecord(s *segment, pos int64, h *header, minMaxTs int64, match func(offset, ts int64) bool) (TimestampOffset, bool, error) {
	p, err := l.readBatch(s, pos, h)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	checked := parseHeader(p)
	if checked.MaxTimestamp < minMaxTs {
		return TimestampOffset{}, false, nil
	}
	var res TimestampOffset
	found := false
	err = visitRecords(p, &checked, l.codecs.decompressor(), func(offset, ts int64) bool {
		if match(offset, ts) {
			res, found = TimestampOffset{Timestamp: ts, Offset: offset, LeaderEpoch: checked.LeaderEpoch}, true
			return false
		}
		return true
	})
	if res.LeaderEpoch < 0 {
		res.LeaderEpoch = -1
	}
	return res, found, err
}

// readBatch reads the whole batch h at pos of s and checks it, its leader
// epoch (outside the CRC) against the cache.
func (l *Log) readBatch(s *segment, pos int64, h *header) ([]byte, error) {
	p := make([]byte, h.size())
	var err error
	for attempt := 0; attempt < readAttempts; attempt++ {
		if err = readFull(s.log.f, p, pos); err != nil {
			return nil, storageError(err, "read %s.log at %d", s.path, pos)
		}
		var checked header
		if checked, err = checkStored(p, h.BaseOffset); err == nil {
			if err = l.epochs.check(&checked, l.logStart); err == nil {
				return p, nil
			}
		}
	}
	return nil, err
}
