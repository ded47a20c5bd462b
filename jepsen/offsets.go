package jepsen

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// CheckOffsets is the check of what the broker said about a partition's
// offsets: ListOffsets answers (latest, earliest, by timestamp) and the
// high watermark and log start offset of every fetch answer that recorded
// them.
const CheckOffsets = "offsets"

// The offsets check. The high watermark (which ListOffsets latest answers
// too) and the log start offset are facts about the log at the moment of an
// answer; the final read shows the log as it ended, from its log start.
// Nothing in the workloads checked here removes records but DeleteRecords
// (no retention, no unclean election), and the history holds every
// DeleteRecords, so:
//
//   - a high watermark never exceeds the end of the final read, and never
//     falls below the end of a produce acknowledged before it was asked
//     for, nor below a high watermark or a log start answered before it
//     was asked for (a log start never passes the high watermark);
//   - a fetch returns only records below the high watermark it reports,
//     and that high watermark is not below its log start offset; it
//     returns nothing when it asked from below the log start it reports;
//   - a log start offset never goes back, and never exceeds where the
//     final read begins, unless a DeleteRecords not acknowledged by then
//     (its answer lost, or still to come) was invoked before the higher
//     answer: the broker moves the log start in memory before the new one
//     is durable, and a crash between the two brings the old one back;
//   - an acknowledged DeleteRecords is durable: a log start answered after
//     one was acknowledged with low watermark L (a fetch's, ListOffsets
//     earliest's, another DeleteRecords' low watermark) is at least L, and
//     a fetch asked after it from below L (the final read included)
//     answers OFFSET_OUT_OF_RANGE, not records;
//   - a log start never exceeds the furthest offset a DeleteRecords
//     invoked before it was answered asked for (no bound once one asked
//     for the high watermark): records go only when a client asks;
//   - ListOffsets by timestamp T answers the first offset whose record has
//     a timestamp of at least T (Kafka reads the log up to the high
//     watermark for it), or -1 only if no record below the high watermark
//     known before it was asked has one. Below the final read's start the
//     records are unknown, and below where the log start may have stood
//     the answer was free to skip them.
//
// Without DeleteRecords the log start is 0 throughout: every rule about it
// says so.

// offsetMark is one answer about a partition's high watermark or log
// start: an op, and the value it gave.
type offsetMark struct {
	op    *op
	value int64
	what  string // how the answer is described in a message
	// epoch is the leader epoch the answer is known to come from (an
	// upper bound for an acknowledgement), -1 when unknown.
	epoch int32
}

// markEpoch is the epoch an event carries, -1 when none.
func markEpoch(e *Event) int32 {
	if e.Epoch == nil {
		return -1
	}
	return *e.Epoch
}

func (m offsetMark) asked() int64    { return m.op.invoke.Time }
func (m offsetMark) answered() int64 { return m.op.done.Time }

// partitionOffsets gathers a partition's answers for the checks.
type partitionOffsets struct {
	tp         TopicPartition
	highMarks  []offsetMark // ListOffsets latest, fetch high watermarks
	startMarks []offsetMark // ListOffsets earliest, fetch log starts
	lookups    []*op        // ListOffsets by timestamp
	fetches    []*op        // fetch oks with watermarks
	acked      []offsetMark // acknowledged produces, valued at their end
	// reads are every fetch ok, the final read included, valued at the
	// offset asked from: each says the log start was at most that.
	reads []offsetMark
	// deleted are acknowledged DeleteRecords, valued at their low
	// watermark; deletes are every DeleteRecords not definitely failed.
	deleted []offsetMark
	deletes []*op
}

func checkOffsets(a *analysis) []Violation {
	var vs []Violation
	for _, tp := range a.partitions {
		po := a.gatherOffsets(tp)
		from, final, hasFinal := a.finalRead(tp)
		starts := slices.Concat(po.startMarks, po.deleted)
		vs = append(vs, po.checkFetches()...)
		vs = append(vs, checkBackwards(tp, "high watermark", po.highMarks, nil)...)
		vs = append(vs, checkBackwards(tp, "log start offset", po.startMarks, po.unsettledSince)...)
		vs = append(vs, po.checkAcked()...)
		vs = append(vs, po.checkDeleted(starts)...)
		vs = append(vs, po.checkStartBelowHigh(starts)...)
		if hasFinal {
			// Where the final read begins is the log start as it ended.
			starts = append(starts, offsetMark{&a.ops[a.final[tp]], from, "the final read", -1})
		}
		vs = append(vs, po.checkStartAsked(starts)...)
		if hasFinal {
			vs = append(vs, po.checkAgainstFinal(&a.ops[a.final[tp]], from, final)...)
			vs = append(vs, po.checkLookups(from, final)...)
		}
	}
	return vs
}

func (a *analysis) gatherOffsets(tp TopicPartition) *partitionOffsets {
	po := &partitionOffsets{tp: tp}
	for i := range a.ops {
		o := &a.ops[i]
		inv := o.invoke
		if inv.TopicPartition != tp {
			continue
		}
		if inv.Type == TypeDeleteRecords && o.outcome() != KindFail {
			po.deletes = append(po.deletes, o)
		}
		if o.outcome() != KindOk {
			continue
		}
		switch {
		case inv.Type == TypeProduce && o.done.Offset != OffsetUnknown:
			po.acked = append(po.acked, offsetMark{o, o.done.Offset + int64(len(inv.Values)), "acknowledged produce", markEpoch(o.done)})
		case inv.Type == TypeFetch:
			what := "a fetch"
			if inv.Final {
				what = "the final read"
			}
			po.reads = append(po.reads, offsetMark{o, inv.From, what, -1})
			if w := o.done.Watermarks; w != nil {
				po.fetches = append(po.fetches, o)
				po.highMarks = append(po.highMarks, offsetMark{o, w.HighWatermark, "fetch", markEpoch(&o.invoke)})
				if w.LogStart >= 0 { // unknown before fetch v5
					po.startMarks = append(po.startMarks, offsetMark{o, w.LogStart, "fetch", -1})
				}
			}
		case inv.Type == TypeListOffsets && inv.Target == TargetLatest:
			po.highMarks = append(po.highMarks, offsetMark{o, o.done.Offset, "ListOffsets latest", -1})
		case inv.Type == TypeListOffsets && inv.Target == TargetEarliest:
			po.startMarks = append(po.startMarks, offsetMark{o, o.done.Offset, "ListOffsets earliest", -1})
		case inv.Type == TypeListOffsets:
			po.lookups = append(po.lookups, o)
		case inv.Type == TypeDeleteRecords:
			po.deleted = append(po.deleted, offsetMark{o, o.done.Offset, "DeleteRecords", -1})
		}
	}
	return po
}

// unsettledSince returns the time from which an answer about the log start
// may show a DeleteRecords whose effect a crash undid, as seen by an
// answer asked at asked: the invoke of the first DeleteRecords not
// acknowledged by then (nor definitely failed), or asked itself if there
// is none.
func (po *partitionOffsets) unsettledSince(asked int64) int64 {
	since := asked
	for _, d := range po.deletes {
		if d.outcome() == KindOk && d.done.Time < asked {
			continue
		}
		since = min(since, d.invoke.Time)
	}
	return since
}

// checkFetches: a fetch serves only below the high watermark it reports,
// which is not below the log start it reports, and serves nothing from
// below that log start.
func (po *partitionOffsets) checkFetches() []Violation {
	var vs []Violation
	for _, o := range po.fetches {
		w := o.done.Watermarks
		if w.LogStart >= 0 && w.LogStart > w.HighWatermark {
			vs = append(vs, po.violation([]*op{o}, "a fetch of %s reported log start %d above its high watermark %d",
				po.tp, w.LogStart, w.HighWatermark))
		}
		if rs := o.done.Records; len(rs) > 0 && rs[len(rs)-1].Offset >= w.HighWatermark {
			vs = append(vs, po.violation([]*op{o}, "a fetch of %s returned offset %d at or above the high watermark %d it reported",
				po.tp, rs[len(rs)-1].Offset, w.HighWatermark))
		}
		if w.LogStart >= 0 && o.invoke.From < w.LogStart {
			vs = append(vs, po.violation([]*op{o}, "a fetch of %s from %d was answered with records, not OFFSET_OUT_OF_RANGE, though it reported log start %d",
				po.tp, o.invoke.From, w.LogStart))
		}
	}
	return vs
}

// checkBackwards: a value answered after another was answered is not
// below it. Each answer is compared with the largest value answered before
// it was asked for (a later answer may overlap an earlier one in time, and
// then either order is possible), and with unsettled (when not nil) only
// with those answered before unsettled(its ask): later ones may show what
// a crash undid.
func checkBackwards(tp TopicPartition, what string, marks []offsetMark, unsettled func(int64) int64) []Violation {
	return belowEarlierByEpoch(tp, marks, marks, unsettled, func(m, prior offsetMark) string {
		return fmt.Sprintf("the %s of %s went back: %s answered %d after %s had answered %d",
			what, tp, m.what, m.value, prior.what, prior.value)
	})
}

// checkAcked: the high watermark covers every produce acknowledged before
// it was asked for (acks=all: an acknowledged record is below the high
// watermark), by a leader of an epoch at least the acknowledging one's.
func (po *partitionOffsets) checkAcked() []Violation {
	return belowEarlierByEpoch(po.tp, po.highMarks, po.acked, nil, func(m, prior offsetMark) string {
		return fmt.Sprintf("%s of %s answered high watermark %d, below %d, the end of a produce acknowledged before it was asked",
			m.what, po.tp, m.value, prior.value)
	})
}

// belowEarlierByEpoch is belowEarlier holding each mark of a known epoch
// only to the earlier marks of epochs at most its own (and to those of
// unknown epoch); a mark of unknown epoch is held to all of them. Without
// epochs (a single broker) it is belowEarlier.
func belowEarlierByEpoch(tp TopicPartition, marks, earlier []offsetMark, since func(int64) int64, describe func(m, prior offsetMark) string) []Violation {
	var epochs []int32
	for _, m := range marks {
		if m.epoch >= 0 && !slices.Contains(epochs, m.epoch) {
			epochs = append(epochs, m.epoch)
		}
	}
	slices.Sort(epochs)
	var unknown []offsetMark
	for _, m := range marks {
		if m.epoch < 0 {
			unknown = append(unknown, m)
		}
	}
	if vs := belowEarlier(tp, unknown, earlier, since, describe); len(vs) > 0 {
		return vs
	}
	for _, e := range epochs {
		var at, upTo []offsetMark
		for _, m := range marks {
			if m.epoch == e {
				at = append(at, m)
			}
		}
		for _, m := range earlier {
			if m.epoch <= e {
				upTo = append(upTo, m)
			}
		}
		if vs := belowEarlier(tp, at, upTo, since, describe); len(vs) > 0 {
			return vs
		}
	}
	return nil
}

// checkDeleted: an acknowledged DeleteRecords is durable. No log start
// answered after it is below its low watermark, and no read asked after
// it from below that is answered with records.
func (po *partitionOffsets) checkDeleted(starts []offsetMark) []Violation {
	vs := belowEarlier(po.tp, starts, po.deleted, nil, func(m, prior offsetMark) string {
		return fmt.Sprintf("the log start offset of %s went back below an acknowledged DeleteRecords: %s answered %d after DeleteRecords was acknowledged with low watermark %d",
			po.tp, m.what, m.value, prior.value)
	})
	return append(vs, belowEarlier(po.tp, po.reads, po.deleted, nil, func(m, prior offsetMark) string {
		return fmt.Sprintf("%s of %s from %d was answered with records, not OFFSET_OUT_OF_RANGE, after DeleteRecords was acknowledged with low watermark %d: deleted records came back",
			m.what, po.tp, m.value, prior.value)
	})...)
}

// checkStartBelowHigh: a high watermark is not below a log start answered
// before it was asked for (the high watermark never goes back, and the
// log start never passes it).
func (po *partitionOffsets) checkStartBelowHigh(starts []offsetMark) []Violation {
	return belowEarlier(po.tp, po.highMarks, starts, nil, func(m, prior offsetMark) string {
		return fmt.Sprintf("%s of %s answered high watermark %d, below the log start %d that %s answered before it was asked",
			m.what, po.tp, m.value, prior.value, prior.what)
	})
}

// checkStartAsked: the log start moves only as far as a DeleteRecords
// asked: no answer about it exceeds the furthest offset asked for by a
// DeleteRecords invoked before it was answered.
func (po *partitionOffsets) checkStartAsked(starts []offsetMark) []Violation {
	for _, m := range starts {
		asked, bounded := int64(0), true
		for _, d := range po.deletes {
			if d.invoke.Time > m.answered() {
				continue
			}
			if d.invoke.Offset == DeleteToHighWatermark {
				bounded = false
				break
			}
			asked = max(asked, d.invoke.Offset)
		}
		if bounded && m.value > asked {
			return []Violation{po.violation([]*op{m.op}, "%s of %s answered log start %d, beyond %d, the furthest any DeleteRecords had asked for",
				m.what, po.tp, m.value, asked)}
		}
	}
	return nil
}

// belowEarlier reports each mark of marks whose value is below the largest
// value of an earlier mark (answered before it was asked, or with since
// not nil, before since(its ask)), one violation per partition and kind:
// the first is what matters, the rest follow.
func belowEarlier(tp TopicPartition, marks, earlier []offsetMark, since func(int64) int64, describe func(m, prior offsetMark) string) []Violation {
	byAnswer := slices.Clone(earlier)
	slices.SortFunc(byAnswer, func(x, y offsetMark) int { return cmp.Compare(x.answered(), y.answered()) })
	// best[i] indexes the largest of byAnswer[:i+1].
	best := make([]int, len(byAnswer))
	for i := range byAnswer {
		best[i] = i
		if i > 0 && byAnswer[best[i-1]].value >= byAnswer[i].value {
			best[i] = best[i-1]
		}
	}
	byAsk := slices.Clone(marks)
	slices.SortFunc(byAsk, func(x, y offsetMark) int { return cmp.Compare(x.asked(), y.asked()) })
	for _, m := range byAsk {
		cut := m.asked()
		if since != nil {
			cut = since(cut)
		}
		n, _ := slices.BinarySearchFunc(byAnswer, cut, func(x offsetMark, t int64) int { return cmp.Compare(x.answered(), t) })
		if n == 0 {
			continue
		}
		if prior := byAnswer[best[n-1]]; m.value < prior.value {
			return []Violation{{Check: CheckOffsets, Partition: tp, Events: append(prior.op.evidence(), m.op.evidence()...),
				Message: describe(m, prior)}}
		}
	}
	return nil
}

// checkAgainstFinal: no high watermark beyond the final read's end, no log
// start beyond where it begins unless a DeleteRecords still unsettled when
// the final read was asked may have shown in it.
func (po *partitionOffsets) checkAgainstFinal(finalOp *op, from int64, final []Record) []Violation {
	end := from
	if len(final) > 0 {
		end = final[len(final)-1].Offset + 1
	}
	var vs []Violation
	for _, m := range po.highMarks {
		if m.value > end {
			vs = append(vs, po.violation([]*op{m.op}, "%s of %s answered high watermark %d, beyond %d, the end of the final read",
				m.what, po.tp, m.value, end))
			break
		}
	}
	since := po.unsettledSince(finalOp.invoke.Time)
	for _, m := range slices.Concat(po.startMarks, po.deleted) {
		if m.value > from && m.answered() < since {
			vs = append(vs, po.violation([]*op{m.op, finalOp}, "%s of %s answered log start %d, beyond %d, where the final read begins",
				m.what, po.tp, m.value, from))
			break
		}
	}
	return vs
}

// checkLookups: ListOffsets by timestamp answers the first offset whose
// record's timestamp is at least the one asked for, as the final read
// shows the records (those from where it begins), from where the log
// start may have stood when it was asked.
func (po *partitionOffsets) checkLookups(from int64, final []Record) []Violation {
	for i, r := range final {
		if r.Offset != from+int64(i) {
			return nil // a final read with gaps: the read-shape check reports it
		}
	}
	end := from + int64(len(final))
	// firstAtLeast returns the first offset in [lo, limit) whose record's
	// timestamp is at least ts, or -1; lo is at least from.
	firstAtLeast := func(ts, lo, limit int64) int64 {
		for o := lo; o < min(limit, end); o++ {
			if final[o-from].Timestamp >= ts {
				return o
			}
		}
		return -1
	}
	var vs []Violation
	for _, o := range po.lookups {
		target, got := o.invoke.Target, o.done.Offset
		lo := max(from, po.startAtMost(o))
		if got >= 0 {
			if got < from {
				continue // among records the final read does not show
			}
			lo = min(lo, got)
			if firstAtLeast(target, lo, got+1) != got {
				vs = append(vs, po.lookupViolation(o, from, final, firstAtLeast(target, lo, end)))
			}
			continue
		}
		// -1: nothing at or after the timestamp below the high watermark
		// as it stood when the question was asked, at least the largest
		// answered or acknowledged before.
		known := int64(0)
		for _, m := range slices.Concat(po.highMarks, po.acked) {
			if m.answered() < o.invoke.Time {
				known = max(known, m.value)
			}
		}
		if want := firstAtLeast(target, lo, known); want >= 0 {
			vs = append(vs, po.lookupViolation(o, from, final, want))
		}
	}
	return vs
}

// startAtMost bounds where the log start may have stood when o was
// answered: the furthest a DeleteRecords invoked before had asked for
// (math.MaxInt64 once one asked for the high watermark).
func (po *partitionOffsets) startAtMost(o *op) int64 {
	bound := int64(0)
	for _, d := range po.deletes {
		if d.invoke.Time > o.done.Time {
			continue
		}
		if d.invoke.Offset == DeleteToHighWatermark {
			return math.MaxInt64
		}
		bound = max(bound, d.invoke.Offset)
	}
	return bound
}

func (po *partitionOffsets) lookupViolation(o *op, from int64, final []Record, want int64) Violation {
	target, got := o.invoke.Target, o.done.Offset
	end := from + int64(len(final))
	gotWhat := "no record"
	if got >= from && got < end {
		gotWhat = fmt.Sprintf("offset %d (timestamp %d)", got, final[got-from].Timestamp)
	} else if got >= 0 {
		gotWhat = fmt.Sprintf("offset %d, beyond the final read", got)
	}
	wantWhat := "no record has that timestamp"
	if want >= 0 {
		wantWhat = fmt.Sprintf("offset %d (timestamp %d)", want, final[want-from].Timestamp)
	}
	return po.violation([]*op{o}, "ListOffsets of %s for timestamp %d answered %s; the final read says %s",
		po.tp, target, gotWhat, wantWhat)
}

func (po *partitionOffsets) violation(ops []*op, format string, args ...any) Violation {
	var evidence []Event
	for _, o := range ops {
		evidence = append(evidence, o.evidence()...)
	}
	return Violation{Check: CheckOffsets, Partition: po.tp, Events: evidence, Message: fmt.Sprintf(format, args...)}
}
