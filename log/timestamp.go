package log

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
		if s.maxTs == noTimestamp || s.maxTs < ts || s.next <= l.logStart {
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
	var best *segment
	for _, s := range l.segs {
		if s.maxTs != noTimestamp && (best == nil || s.maxTs > best.maxTs) {
			best = s
		}
	}
	if best == nil {
		return TimestampOffset{}, false, nil
	}
	for attempt := 0; ; attempt++ {
		ts, off := best.maxTs, best.maxTsOffset
		r := best.reader()
		pos, h, err := l.locate(best, r, off)
		if err != nil {
			return TimestampOffset{}, false, err
		}
		if pos >= best.size || h.lastOffset() != off || h.MaxTimestamp != ts {
			if attempt > 0 {
				return TimestampOffset{}, false, corruptError("%s.log: no batch ends at offset %d with timestamp %d", best.path, off, ts)
			}
			if err := l.rebuildIndexes(best); err != nil {
				return TimestampOffset{}, false, err
			}
			continue
		}
		return l.findRecord(best, pos, &h, ts, func(_, rts int64) bool { return rts == ts })
	}
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
