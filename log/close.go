package log

import "github.com/twmb/franz-go/pkg/kerr"

// Close shuts the log down cleanly: the active segment's indexes are
// trimmed, a producer snapshot is taken at the log end, everything is
// flushed, and the checkpoint records the log end as the recovery point with
// the clean flag, so that the next Open reads no segment. done is called
// when it is over, always, with the error that kept it from finishing
// cleanly; the log is unusable from the call on. A log that has failed is
// only closed (its next Open recovers it); a failed flush writes no
// checkpoint, so nothing unflushed is claimed. A truncation behind its
// barrier is waited for while an attempt is in flight, but not retried: if
// the disk refuses it (full), Close gives up on it, and the disk keeps the
// log as it was before the truncation for the next Open to recover.
func (l *Log) Close(done func(error)) {
	if l.closed || l.closing {
		l.post(func() { done(ErrClosed) })
		return
	}
	l.closing = true
	d := &l.dur
	d.stopTimers()
	if d.barrier && l.failed == nil {
		// A truncation is on its way to the disk: let it get there, unless
		// the disk will not take it (it is full), in which case Close gives
		// up on it rather than wait for space.
		d.readyWaiters = append(d.readyWaiters, func(err error) {
			switch {
			case err == nil:
				l.finishClose(done)
				return
			case l.failed == nil:
				err = &Error{Code: kerr.KafkaStorageError, Msg: "close " + l.dir + " with a truncation not yet durable", Err: err}
			}
			l.closeFiles()
			done(err)
		})
		if d.barrierTimer != nil {
			// Its last attempt failed; there will be no other.
			l.abandonBarrier(d.barrierErr)
		}
		return
	}
	l.finishClose(done)
}

func (l *Log) finishClose(done func(error)) {
	if l.failed != nil {
		err := l.failed
		l.closeFiles()
		l.post(func() { done(err) })
		return
	}
	clean := true
	if err := l.active().trimIndexes(); err != nil {
		l.cfg.Logger.Warn("index trim failed", "segment", l.active().path, "err", err)
		clean = false
	}
	if !l.takeSnapshot(l.LogEndOffset()) {
		clean = false
	}
	l.dur.cleanClose = clean
	l.flushInternal(l.LogEndOffset(), true, func(err error) {
		if err != nil {
			l.closeFiles()
			done(err)
			return
		}
		l.checkpointInternal(func(err error) {
			l.closeFiles()
			done(err)
		})
	})
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.closeFiles()
	}
	for _, t := range l.dur.loose {
		t.f.Close()
	}
	l.dur.loose = nil
	l.closed = true
}
