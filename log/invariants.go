//go:build invariants

package log

import "fmt"

// checkInvariants asserts what the rest of the package relies on about the
// log's shape. It runs after every change when built with -tags invariants
// (the tests and the simulator); it is too slow for production.
func (l *Log) checkInvariants() {
	if len(l.segs) == 0 {
		panic(fmt.Sprintf("log %s: no segment", l.dir))
	}
	for i, s := range l.segs {
		if s.next < s.base || (s.size == 0) != (s.next == s.base) {
			panic(fmt.Sprintf("log %s: segment %d holds [%d, %d) in %d bytes", l.dir, s.base, s.base, s.next, s.size))
		}
		if i+1 < len(l.segs) && s.next != l.segs[i+1].base {
			panic(fmt.Sprintf("log %s: segment %d ends at %d, the next begins at %d", l.dir, s.base, s.next, l.segs[i+1].base))
		}
		for j := 0; j < s.idx.len(); j++ {
			o, p := s.idx.entry(j)
			if o < s.base || o >= s.next || p >= s.size {
				panic(fmt.Sprintf("log %s: segment %d [%d, %d) of %d bytes has index entry (%d, %d)", l.dir, s.base, s.base, s.next, s.size, o, p))
			}
		}
		if s.idxWritten > len(s.idx.buf) || s.tixWritten > len(s.tix.buf) {
			panic(fmt.Sprintf("log %s: segment %d has %d/%d index bytes written of %d/%d", l.dir, s.base, s.idxWritten, s.tixWritten, len(s.idx.buf), len(s.tix.buf)))
		}
	}
	end := l.LogEndOffset()
	if l.logStart < l.segs[0].base || l.logStart > end || l.dur.durable > end {
		panic(fmt.Sprintf("log %s: start %d, first segment %d, durable %d, end %d", l.dir, l.logStart, l.segs[0].base, l.dur.durable, end))
	}
	for i, e := range l.epochs.entries {
		if e.StartOffset > end || (i > 0 && (e.Epoch <= l.epochs.entries[i-1].Epoch || e.StartOffset <= l.epochs.entries[i-1].StartOffset)) {
			panic(fmt.Sprintf("log %s: epoch cache %v with log end %d", l.dir, l.epochs.entries, end))
		}
	}
}
