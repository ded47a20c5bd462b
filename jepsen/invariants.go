package jepsen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The names of the checks, as they appear in Violation.Check.
const (
	CheckLinearizable      = "linearizable"       // porcupine, per partition
	CheckLostWrite         = "lost-write"         // acknowledged or read, then missing from the final read
	CheckOffsetConflict    = "offset-conflict"    // one offset, two values
	CheckDuplicate         = "duplicate"          // an idempotent producer's value at two offsets
	CheckReadShape         = "read-shape"         // a read with a gap, a wrong start, or too many records
	CheckPhantom           = "phantom"            // a read returned a value no produce could have put there
	CheckPositionBackwards = "position-backwards" // a consumer's position went back without a new assignment
	CheckSplitOwnership    = "split-ownership"    // two consumers own one partition in one generation
	CheckProducerOrder     = "producer-order"     // an idempotent producer's acknowledged values out of send order
	CheckLeaderAck         = "leader-ack"         // an acks=1 value read at an offset other than the one acknowledged
)

// Violation is one broken rule, with the events that show it.
type Violation struct {
	Check string
	// Partition is the partition concerned, if one is.
	Partition TopicPartition
	Message   string
	Events    []Event
}

// uniqueEvents returns es without repeats, in time order.
func uniqueEvents(es []Event) []Event {
	out := slices.Clone(es)
	slices.SortFunc(out, func(x, y Event) int { return cmp.Compare(x.Time, y.Time) })
	return slices.CompactFunc(out, func(x, y Event) bool { return x.Time == y.Time })
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Check, v.Message)
	for _, e := range v.Events {
		fmt.Fprintf(&b, "\n    %s", e)
	}
	return b.String()
}

// checkReadShape: a read returns consecutive offsets starting where it
// began, and no more records than it asked for.
func checkReadShape(a *analysis) []Violation {
	var vs []Violation
	for i := range a.ops {
		o := &a.ops[i]
		if o.invoke.Type != TypeFetch || o.outcome() != KindOk {
			continue
		}
		in, rs := o.invoke, o.done.Records
		if in.Max > 0 && len(rs) > in.Max {
			vs = append(vs, Violation{Check: CheckReadShape, Partition: in.TopicPartition, Events: o.evidence(),
				Message: fmt.Sprintf("fetch of %s asked for at most %d records and got %d", in.TopicPartition, in.Max, len(rs))})
		}
		for j, r := range rs {
			if want := in.From + int64(j); r.Offset != want {
				vs = append(vs, Violation{Check: CheckReadShape, Partition: in.TopicPartition, Events: o.evidence(),
					Message: fmt.Sprintf("fetch of %s from %d returned offset %d where %d belongs (a gap, a repeat or a wrong start)",
						in.TopicPartition, in.From, r.Offset, want)})
				break
			}
		}
	}
	return vs
}

// checkPhantom: every value a read returns was produced, to this partition,
// by a produce that had been invoked before the read returned and that did
// not fail definitely.
func checkPhantom(a *analysis) []Violation {
	var vs []Violation
	for _, s := range a.sightings {
		read := &a.ops[s.op]
		if read.invoke.Type != TypeFetch {
			continue
		}
		pv, ok := a.produced[s.value]
		if !ok {
			vs = append(vs, Violation{Check: CheckPhantom, Partition: s.tp, Events: read.evidence(),
				Message: fmt.Sprintf("%s@%d holds %q, which nobody produced", s.tp, s.offset, s.value)})
			continue
		}
		prod := &a.ops[pv.op]
		var why string
		switch {
		case prod.invoke.TopicPartition != s.tp:
			why = fmt.Sprintf("was produced to %s", prod.invoke.TopicPartition)
		case prod.outcome() == KindFail:
			why = fmt.Sprintf("was produced by a request that failed definitely (%s)", prod.done.Error)
		case prod.invoke.Time > read.done.Time:
			why = "was produced only after the read returned"
		default:
			continue
		}
		vs = append(vs, Violation{Check: CheckPhantom, Partition: s.tp, Events: append(prod.evidence(), read.evidence()...),
			Message: fmt.Sprintf("a read of %s@%d returned %q, which %s", s.tp, s.offset, s.value, why)})
	}
	return vs
}

type tpOffset struct {
	tp     TopicPartition
	offset int64
}

// checkOffsetConflict: across every read and every acknowledgement, one
// offset of one partition holds one value.
func checkOffsetConflict(a *analysis) []Violation {
	first := make(map[tpOffset]sighting)
	reported := make(map[tpOffset]map[string]bool)
	var vs []Violation
	for _, s := range a.sightings {
		key := tpOffset{s.tp, s.offset}
		f, ok := first[key]
		if !ok {
			first[key] = s
			continue
		}
		if f.value == s.value || reported[key][s.value] {
			continue
		}
		if reported[key] == nil {
			reported[key] = make(map[string]bool)
		}
		reported[key][s.value] = true
		vs = append(vs, Violation{Check: CheckOffsetConflict, Partition: s.tp,
			Events:  append(a.ops[f.op].evidence(), a.ops[s.op].evidence()...),
			Message: fmt.Sprintf("%s@%d holds %q (%s) and %q (%s)", s.tp, s.offset, f.value, a.sawHow(f), s.value, a.sawHow(s))})
	}
	return vs
}

func (a *analysis) sawHow(s sighting) string {
	o := &a.ops[s.op]
	switch {
	case o.invoke.Type == TypeProduce:
		return fmt.Sprintf("acknowledged to op %d", o.invoke.Op)
	case o.invoke.Final:
		return fmt.Sprintf("final read, op %d", o.invoke.Op)
	}
	return fmt.Sprintf("read by op %d", o.invoke.Op)
}

// checkDuplicates: reads find a value at one offset only. Kafka allows a
// non-idempotent producer's retry to land twice; that becomes a note, not a
// violation (but the log model still rejects it: see the package comment).
// Acknowledgements are not reads: one that disagrees with a read is a lost
// write or an offset conflict, not a duplicate.
func checkDuplicates(a *analysis) ([]Violation, []string) {
	type key struct {
		tp    TopicPartition
		value string
	}
	offsets := make(map[key][]sighting)
	var order []key
	for _, s := range a.sightings {
		if a.ops[s.op].invoke.Type != TypeFetch {
			continue
		}
		k := key{s.tp, s.value}
		seen := offsets[k]
		if len(seen) == 0 {
			order = append(order, k)
		}
		if !slices.ContainsFunc(seen, func(x sighting) bool { return x.offset == s.offset }) {
			offsets[k] = append(seen, s)
		}
	}
	var vs []Violation
	var notes []string
	for _, k := range order {
		seen := offsets[k]
		if len(seen) < 2 {
			continue
		}
		var where []string
		var events []Event
		for _, s := range seen {
			where = append(where, fmt.Sprintf("%d (%s)", s.offset, a.sawHow(s)))
			events = append(events, a.ops[s.op].evidence()...)
		}
		msg := fmt.Sprintf("%q sits at several offsets of %s: %s", k.value, k.tp, strings.Join(where, ", "))
		pv, ok := a.produced[k.value]
		if ok && !a.ops[pv.op].invoke.Idempotent {
			notes = append(notes, msg+" (non-idempotent producer: Kafka allows it, the log model does not)")
			continue
		}
		if ok {
			events = append(a.ops[pv.op].evidence(), events...)
		}
		vs = append(vs, Violation{Check: CheckDuplicate, Partition: k.tp, Events: events, Message: msg + " although its producer was idempotent"})
	}
	return vs, notes
}

// checkLostWrites: every acknowledged write, and every value a read
// returned, is in the final read of its partition, at the same offset,
// unless a DeleteRecords took it away: it sat below where the final read
// began (the log start then), and a DeleteRecords covered its offset, one
// acknowledged with a low watermark above it or one whose outcome is
// unknown that asked for an offset above it (or for the high watermark).
// Records are never deleted but on purpose: a value missing below the
// final read's start that no DeleteRecords covered is lost.
func checkLostWrites(a *analysis) ([]Violation, []string) {
	var vs []Violation
	var notes []string
	for _, tp := range a.partitions {
		from, final, ok := a.finalRead(tp)
		if !ok {
			if a.hasAcks(tp) {
				notes = append(notes, fmt.Sprintf("%s has no final read: lost writes not checked there", tp))
			}
			continue
		}
		fr := finalView{from: from, records: final, deleted: a.deletedBelow(tp, from)}
		fr.room = a.unseenRoom(tp, fr.deleted)
		vs = append(vs, a.lostAcks(tp, fr)...)
		vs = append(vs, a.lostReads(tp, fr)...)
	}
	return vs, notes
}

// finalView is a final read as the lost-write check sees it.
type finalView struct {
	from    int64
	records []Record
	// deleted is where a DeleteRecords may have deleted the records below,
	// on purpose, before the final read; room says where a batch no read
	// returned may have sat below it.
	deleted int64
	room    *unseenRoom
}

// deletedBelow returns the offset below which tp's records sat below from,
// where the final read began, and some DeleteRecords covered them.
func (a *analysis) deletedBelow(tp TopicPartition, from int64) int64 {
	covered := int64(0) // every offset below it is covered
	for i := range a.ops {
		o := &a.ops[i]
		if o.invoke.TopicPartition != tp || o.invoke.Type != TypeDeleteRecords {
			continue
		}
		switch o.outcome() {
		case KindOk:
			covered = max(covered, o.done.Offset)
		case KindInfo:
			if o.invoke.Offset == DeleteToHighWatermark {
				covered = max(covered, from)
			}
			covered = max(covered, o.invoke.Offset)
		}
	}
	return min(covered, from)
}

func (a *analysis) hasAcks(tp TopicPartition) bool {
	return slices.ContainsFunc(a.ops, func(o op) bool {
		return o.invoke.TopicPartition == tp && o.invoke.Type == TypeProduce && o.outcome() == KindOk
	})
}

func (a *analysis) lostAcks(tp TopicPartition, fr finalView) []Violation {
	at := finalIndex(fr.records)
	readsOf := a.readsByValue(tp)
	finalOp := &a.ops[a.final[tp]]
	var vs []Violation
	for i := range a.ops {
		o := &a.ops[i]
		if o.invoke.TopicPartition != tp || o.invoke.Type != TypeProduce || o.outcome() != KindOk {
			continue
		}
		for j, v := range o.invoke.Values {
			var missing string
			if base := o.done.Offset; base == OffsetUnknown {
				// Where it sits, a read may tell; else it is perhaps
				// deleted if it may sit where nobody saw, below the
				// deletions.
				if _, ok := at[v]; !ok && !fr.gone(v, readsOf, o) {
					missing = fmt.Sprintf("%q (acknowledged without an offset) is not in the final read of %s", v, tp)
				}
			} else if got, ok := at[v]; (!ok || got != base+int64(j)) && !(!ok && base+int64(j) < fr.deleted) {
				missing = fmt.Sprintf("%q acknowledged at %s@%d is %s", v, tp, base+int64(j), fr.describeAt(base+int64(j), v, got, ok))
			}
			if missing != "" {
				vs = append(vs, Violation{Check: CheckLostWrite, Partition: tp, Message: missing,
					Events: append(o.evidence(), finalOp.evidence()...)})
				break // one report per produce
			}
		}
	}
	return vs
}

func (a *analysis) lostReads(tp TopicPartition, fr finalView) []Violation {
	at := finalIndex(fr.records)
	finalOp := &a.ops[a.final[tp]]
	reported := make(map[string]bool)
	var vs []Violation
	for _, s := range a.sightings {
		o := &a.ops[s.op]
		if s.tp != tp || o.invoke.Type != TypeFetch || o.invoke.Final || reported[s.value] {
			continue
		}
		got, ok := at[s.value]
		if ok && got == s.offset || !ok && s.offset < fr.deleted {
			continue
		}
		reported[s.value] = true
		vs = append(vs, Violation{Check: CheckLostWrite, Partition: tp,
			Events:  append(o.evidence(), finalOp.evidence()...),
			Message: fmt.Sprintf("%q read at %s@%d is %s", s.value, tp, s.offset, fr.describeAt(s.offset, s.value, got, ok))})
	}
	return vs
}

// gone reports whether value v of produce o, acknowledged without an
// offset and missing from the final read, may have been deleted: read at
// an offset below the deletions, or never read and with room there.
func (fr finalView) gone(v string, readsOf map[string][]int64, o *op) bool {
	if offsets := readsOf[v]; len(offsets) > 0 {
		return slices.Min(offsets) < fr.deleted
	}
	return fr.room.fits(o.invoke.Time, len(o.invoke.Values), fr.deleted)
}

// finalIndex maps each value of a final read to its first offset.
func finalIndex(final []Record) map[string]int64 {
	at := make(map[string]int64, len(final))
	for _, r := range final {
		if _, dup := at[r.Value]; !dup {
			at[r.Value] = r.Offset
		}
	}
	return at
}

// describeAt says what the final read shows of a value that belongs at
// offset: found at got instead, or missing, and what it holds there.
func (fr finalView) describeAt(offset int64, value string, got int64, found bool) string {
	var there string
	for _, r := range fr.records {
		if r.Offset == offset {
			there = fmt.Sprintf("; the final read has %q there", r.Value)
		}
	}
	switch {
	case there != "":
	case offset < fr.from:
		there = fmt.Sprintf("; the final read begins at %d, but no DeleteRecords covered %d", fr.from, offset)
	default:
		there = fmt.Sprintf("; the final read ends at %d", fr.from+int64(len(fr.records)))
	}
	if found {
		return fmt.Sprintf("at offset %d in the final read instead%s", got, there)
	}
	return "missing from the final read" + there
}

// checkProducerOrder: per partition, the values an idempotent producer
// had acknowledged appear in the final read in the order it sent them,
// which is the order it invoked them in: an idempotent producer numbers its
// batches in that order and the broker appends them only in sequence, even
// when several are in flight at once (max.in.flight up to 5). Porcupine
// cannot see this: it orders only operations that do not overlap, and
// pipelined produces do. Values missing from the final read are lost writes
// and a value at two offsets is a duplicate (both reported by their own
// checks); here each value counts at its first offset.
func checkProducerOrder(a *analysis) []Violation {
	type key struct {
		client int
		tp     TopicPartition
	}
	acked := make(map[key][]int) // indexes into a.ops, in invoke order
	var order []key
	for i := range a.ops {
		o := &a.ops[i]
		if o.invoke.Type != TypeProduce || !o.invoke.Idempotent || o.outcome() != KindOk {
			continue
		}
		k := key{o.invoke.Client, o.invoke.TopicPartition}
		if len(acked[k]) == 0 {
			order = append(order, k)
		}
		acked[k] = append(acked[k], i)
	}
	slices.SortStableFunc(order, func(x, y key) int {
		if x.tp != y.tp {
			if x.tp.less(y.tp) {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.client, y.client)
	})
	var vs []Violation
	for _, k := range order {
		_, final, ok := a.finalRead(k.tp)
		if !ok {
			continue
		}
		at := finalIndex(final)
		ops := acked[k]
		slices.SortStableFunc(ops, func(x, y int) int { return cmp.Compare(a.ops[x].invoke.Time, a.ops[y].invoke.Time) })
		// prev is the furthest value placed so far: its offset and op.
		prevOffset, prevOp, prevValue := int64(-1), -1, ""
		for _, i := range ops {
			o := &a.ops[i]
			broken := false
			for _, v := range o.invoke.Values {
				off, ok := at[v]
				if !ok {
					continue
				}
				if off < prevOffset {
					finalOp := &a.ops[a.final[k.tp]]
					vs = append(vs, Violation{Check: CheckProducerOrder, Partition: k.tp,
						Events: append(append(a.ops[prevOp].evidence(), o.evidence()...), finalOp.evidence()...),
						Message: fmt.Sprintf("client %d's idempotent produces to %s landed out of send order: %q (op %d) is at %d, before %q (op %d, sent earlier) at %d",
							k.client, k.tp, v, o.invoke.Op, off, prevValue, a.ops[prevOp].invoke.Op, prevOffset)})
					broken = true
					break
				}
				prevOffset, prevOp, prevValue = off, i, v
			}
			if broken {
				break // one report per producer and partition
			}
		}
	}
	return vs
}

// checkPositions: a consumer's position in a partition never moves
// backwards, except across an assignment to that consumer, after which it
// resumes from its group's committed offset.
func checkPositions(a *analysis) []Violation {
	type key struct {
		client int
		tp     TopicPartition
	}
	last := make(map[key]Event)
	var vs []Violation
	for _, n := range a.notes {
		switch n.Type {
		case TypeAssign:
			for k := range last {
				if k.client == n.Client {
					delete(last, k)
				}
			}
		case TypePosition:
			k := key{n.Client, n.TopicPartition}
			prev, ok := last[k]
			if ok && n.Offset < prev.Offset {
				vs = append(vs, Violation{Check: CheckPositionBackwards, Partition: n.TopicPartition, Events: []Event{prev, n},
					Message: fmt.Sprintf("client %d's position in %s went from %d back to %d with no assignment between",
						n.Client, n.TopicPartition, prev.Offset, n.Offset)})
			}
			last[k] = n
		}
	}
	return vs
}

// checkOwnership: in one generation of a group, one consumer owns each
// partition.
func checkOwnership(a *analysis) []Violation {
	type key struct {
		group      string
		generation int32
		tp         TopicPartition
	}
	owners := make(map[key][]Event)
	var order []key
	for _, n := range a.notes {
		if n.Type != TypeAssign {
			continue
		}
		for _, tp := range n.Partitions {
			k := key{n.Group, n.Generation, tp}
			if len(owners[k]) == 0 {
				order = append(order, k)
			}
			if !slices.ContainsFunc(owners[k], func(e Event) bool { return e.Client == n.Client }) {
				owners[k] = append(owners[k], n)
			}
		}
	}
	var vs []Violation
	for _, k := range order {
		es := owners[k]
		if len(es) < 2 {
			continue
		}
		clients := make(map[int]bool)
		for _, e := range es {
			clients[e.Client] = true
		}
		vs = append(vs, Violation{Check: CheckSplitOwnership, Partition: k.tp, Events: es,
			Message: fmt.Sprintf("group %q generation %d gave %s to clients %v", k.group, k.generation, k.tp, slices.Sorted(maps.Keys(clients)))})
	}
	return vs
}

// checkLeaderAcks holds the one promise an acks=1 acknowledgement makes:
// its values, if they are read at all, sit at the offsets acknowledged
// (followers copy batches verbatim, so a value that survives a failover
// keeps its offset).
func checkLeaderAcks(a *analysis) []Violation {
	var vs []Violation
	for _, tp := range a.partitions {
		readsOf := a.readsByValue(tp)
		for i := range a.ops {
			o := &a.ops[i]
			if o.invoke.TopicPartition != tp || !o.leaderAcked() || o.done.Offset == OffsetUnknown {
				continue
			}
			for j, v := range o.invoke.Values {
				want := o.done.Offset + int64(j)
				if at := readsOf[v]; len(at) > 0 && !slices.Equal(at, []int64{want}) {
					vs = append(vs, Violation{Check: CheckLeaderAck, Partition: tp, Events: o.evidence(),
						Message: fmt.Sprintf("%q acknowledged with acks=1 at %s@%d is read at %v", v, tp, want, at)})
					break
				}
			}
		}
	}
	return vs
}
