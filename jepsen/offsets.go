package jepsen

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckOffsets is the check of what the broker said about a partition's
// offsets: ListOffsets answers (latest, earliest, by timestamp) and the
// high watermark and log start offset of every fetch answer that recorded
// them.
const CheckOffsets = "offsets"

// The offsets check. The high watermark (which ListOffsets latest answers
// too) and the log start offset are facts about the log at the moment of an
// answer; the final read shows the log as it ended. Nothing in the
// workloads checked here removes records (no retention, no DeleteRecords,
// no unclean election), so:
//
//   - a high watermark never exceeds the end of the final read, and never
//     falls below the end of a produce acknowledged before it was asked
//     for, nor below a high watermark answered before it was asked for;
//   - a fetch returns only records below the high watermark it reports,
//     and that high watermark is not below its log start offset;
//   - a log start offset never goes back, and never exceeds the first
//     offset of the final read;
//   - ListOffsets by timestamp T answers the first offset whose record has
//     a timestamp of at least T (Kafka reads the log up to the high
//     watermark for it), or -1 only if no record below the high watermark
//     known before it was asked has one.
//
// A workload that does remove records (or a failover whose new leader has
// not caught up, KIP-207) must record why, as a note, before this check
// may allow an offset to go back; none does yet.

// offsetMark is one answer about a partition's high watermark or log
// start: an op, and the value it gave.
type offsetMark struct {
	op    *op
	value int64
	what  string // how the answer is described in a message
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
}

func checkOffsets(a *analysis) []Violation {
	var vs []Violation
	for _, tp := range a.partitions {
		po := a.gatherOffsets(tp)
		final, hasFinal := a.finalRead(tp)
		vs = append(vs, po.checkFetches()...)
		vs = append(vs, checkBackwards(tp, "high watermark", po.highMarks)...)
		vs = append(vs, checkBackwards(tp, "log start offset", po.startMarks)...)
		vs = append(vs, po.checkAcked()...)
		if hasFinal {
			vs = append(vs, po.checkAgainstFinal(final)...)
			vs = append(vs, po.checkLookups(final)...)
		}
	}
	return vs
}

func (a *analysis) gatherOffsets(tp TopicPartition) *partitionOffsets {
	po := &partitionOffsets{tp: tp}
	for i := range a.ops {
		o := &a.ops[i]
		inv := o.invoke
		if inv.TopicPartition != tp || o.outcome() != KindOk {
			continue
		}
		switch {
		case inv.Type == TypeProduce && o.done.Offset != OffsetUnknown:
			po.acked = append(po.acked, offsetMark{o, o.done.Offset + int64(len(inv.Values)), "acknowledged produce"})
		case inv.Type == TypeFetch && o.done.Watermarks != nil:
			w := o.done.Watermarks
			po.fetches = append(po.fetches, o)
			po.highMarks = append(po.highMarks, offsetMark{o, w.HighWatermark, "fetch"})
			if w.LogStart >= 0 { // unknown before fetch v5
				po.startMarks = append(po.startMarks, offsetMark{o, w.LogStart, "fetch"})
			}
		case inv.Type == TypeListOffsets && inv.Target == TargetLatest:
			po.highMarks = append(po.highMarks, offsetMark{o, o.done.Offset, "ListOffsets latest"})
		case inv.Type == TypeListOffsets && inv.Target == TargetEarliest:
			po.startMarks = append(po.startMarks, offsetMark{o, o.done.Offset, "ListOffsets earliest"})
		case inv.Type == TypeListOffsets:
			po.lookups = append(po.lookups, o)
		}
	}
	return po
}

// checkFetches: a fetch serves only below the high watermark it reports,
// which is not below the log start it reports.
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
	}
	return vs
}

// checkBackwards: a value answered after another was answered is not
// below it. Each answer is compared with the largest value answered before
// it was asked for (a later answer may overlap an earlier one in time, and
// then either order is possible).
func checkBackwards(tp TopicPartition, what string, marks []offsetMark) []Violation {
	return belowEarlier(tp, marks, marks, func(m, prior offsetMark) string {
		return fmt.Sprintf("the %s of %s went back: %s answered %d after %s had answered %d",
			what, tp, m.what, m.value, prior.what, prior.value)
	})
}

// checkAcked: the high watermark covers every produce acknowledged before
// it was asked for (acks=all: an acknowledged record is below the high
// watermark).
func (po *partitionOffsets) checkAcked() []Violation {
	return belowEarlier(po.tp, po.highMarks, po.acked, func(m, prior offsetMark) string {
		return fmt.Sprintf("%s of %s answered high watermark %d, below %d, the end of a produce acknowledged before it was asked",
			m.what, po.tp, m.value, prior.value)
	})
}

// belowEarlier reports each mark of marks whose value is below the largest
// value of an earlier mark (answered before it was asked), one violation
// per partition and kind: the first is what matters, the rest follow.
func belowEarlier(tp TopicPartition, marks, earlier []offsetMark, describe func(m, prior offsetMark) string) []Violation {
	byAnswer := slices.Clone(earlier)
	slices.SortFunc(byAnswer, func(x, y offsetMark) int { return cmp.Compare(x.answered(), y.answered()) })
	byAsk := slices.Clone(marks)
	slices.SortFunc(byAsk, func(x, y offsetMark) int { return cmp.Compare(x.asked(), y.asked()) })
	var best *offsetMark
	next := 0
	for _, m := range byAsk {
		for next < len(byAnswer) && byAnswer[next].answered() < m.asked() {
			if best == nil || byAnswer[next].value > best.value {
				best = &byAnswer[next]
			}
			next++
		}
		if best != nil && m.value < best.value {
			return []Violation{{Check: CheckOffsets, Partition: tp, Events: append(best.op.evidence(), m.op.evidence()...),
				Message: describe(m, *best)}}
		}
	}
	return nil
}

// checkAgainstFinal: no high watermark beyond the final read's end, no log
// start beyond its first offset.
func (po *partitionOffsets) checkAgainstFinal(final []Record) []Violation {
	end, first := int64(0), int64(-1)
	if len(final) > 0 {
		end, first = final[len(final)-1].Offset+1, final[0].Offset
	}
	var vs []Violation
	for _, m := range po.highMarks {
		if m.value > end {
			vs = append(vs, po.violation([]*op{m.op}, "%s of %s answered high watermark %d, beyond %d, the end of the final read",
				m.what, po.tp, m.value, end))
			break
		}
	}
	for _, m := range po.startMarks {
		if first >= 0 && m.value > first {
			vs = append(vs, po.violation([]*op{m.op}, "%s of %s answered log start %d, beyond %d, where the final read begins",
				m.what, po.tp, m.value, first))
			break
		}
	}
	return vs
}

// checkLookups: ListOffsets by timestamp answers the first offset whose
// record's timestamp is at least the one asked for, as the final read
// shows the records.
func (po *partitionOffsets) checkLookups(final []Record) []Violation {
	for i, r := range final {
		if r.Offset != int64(i) {
			return nil // a final read with gaps: the read-shape check reports it
		}
	}
	// firstAtLeast returns the first offset below limit whose record's
	// timestamp is at least ts, or -1.
	firstAtLeast := func(ts, limit int64) int64 {
		for _, r := range final[:min(limit, int64(len(final)))] {
			if r.Timestamp >= ts {
				return r.Offset
			}
		}
		return -1
	}
	var vs []Violation
	for _, o := range po.lookups {
		target, got := o.invoke.Target, o.done.Offset
		if got >= 0 {
			if firstAtLeast(target, got+1) != got {
				vs = append(vs, po.lookupViolation(o, final, firstAtLeast(target, int64(len(final)))))
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
		if want := firstAtLeast(target, known); want >= 0 {
			vs = append(vs, po.lookupViolation(o, final, want))
		}
	}
	return vs
}

func (po *partitionOffsets) lookupViolation(o *op, final []Record, want int64) Violation {
	target, got := o.invoke.Target, o.done.Offset
	gotWhat := "no record"
	if got >= 0 && got < int64(len(final)) {
		gotWhat = fmt.Sprintf("offset %d (timestamp %d)", got, final[got].Timestamp)
	} else if got >= 0 {
		gotWhat = fmt.Sprintf("offset %d, beyond the final read", got)
	}
	wantWhat := "no record has that timestamp"
	if want >= 0 {
		wantWhat = fmt.Sprintf("offset %d (timestamp %d)", want, final[want].Timestamp)
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
