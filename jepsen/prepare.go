package jepsen

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// op is one operation of a history: its invoke and, unless it is still
// pending, its completion.
type op struct {
	invoke Event
	done   *Event
}

// outcome is how the operation ended; a pending operation is info, and so
// is an acks=1 produce the leader acknowledged (Event.LeaderAck).
func (o *op) outcome() Kind {
	if o.done == nil || o.leaderAcked() {
		return KindInfo
	}
	return o.done.Kind
}

// leaderAcked says o is an acks=1 produce its leader acknowledged.
func (o *op) leaderAcked() bool {
	return o.invoke.LeaderAck && o.done != nil && o.done.Kind == KindOk
}

// evidence returns the events that show what o did.
func (o *op) evidence() []Event {
	if o.done == nil {
		return []Event{o.invoke}
	}
	return []Event{o.invoke, *o.done}
}

// sighting is one place a value was seen: a record a read returned, or
// where an acknowledged produce said its value landed.
type sighting struct {
	tp     TopicPartition
	offset int64
	value  string
	op     int // index into analysis.ops
}

// analysis is a validated history, indexed for the checkers.
type analysis struct {
	ops   []op
	notes []Event
	// produced maps each produced value to its produce (index into ops)
	// and its position in that batch.
	produced map[string]producedValue
	// sightings are in the order of the events that carry them.
	sightings []sighting
	// final maps a partition to its last successful final read.
	final map[TopicPartition]int
	// partitions lists every partition operated on, in order.
	partitions []TopicPartition
	timeLast   int64
}

type producedValue struct {
	op    int
	index int
}

// analyze validates events and indexes them. Any malformation is an error:
// a history the recorder got wrong cannot be judged.
func analyze(events []Event) (*analysis, error) {
	a := &analysis{produced: make(map[string]producedValue), final: make(map[TopicPartition]int)}
	open := make(map[int]int) // op id -> index into a.ops
	seenOp := make(map[int]bool)
	for i, e := range events {
		if i > 0 && e.Time <= events[i-1].Time {
			return nil, fmt.Errorf("event %d (%s): time %d does not follow %d", i, e, e.Time, events[i-1].Time)
		}
		a.timeLast = e.Time
		var err error
		switch e.Kind {
		case KindInvoke:
			if seenOp[e.Op] {
				return nil, fmt.Errorf("event %d (%s): op %d invoked twice", i, e, e.Op)
			}
			seenOp[e.Op] = true
			err = a.addInvoke(e, open)
		case KindOk, KindFail, KindInfo:
			err = a.addCompletion(e, open)
		case KindNote:
			err = validateNote(e)
			a.notes = append(a.notes, e)
		default:
			err = fmt.Errorf("unknown kind %q", e.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", i, e, err)
		}
	}
	for i := range a.ops {
		tp := a.ops[i].invoke.TopicPartition
		if !slices.Contains(a.partitions, tp) {
			a.partitions = append(a.partitions, tp)
		}
	}
	slices.SortFunc(a.partitions, compareTP)
	return a, nil
}

func compareTP(x, y TopicPartition) int {
	switch {
	case x.less(y):
		return -1
	case y.less(x):
		return 1
	}
	return 0
}

func (a *analysis) addInvoke(e Event, open map[int]int) error {
	switch e.Type {
	case TypeProduce:
		if len(e.Values) == 0 {
			return fmt.Errorf("produce without values")
		}
		for j, v := range e.Values {
			if prev, dup := a.produced[v]; dup {
				return fmt.Errorf("value %q already produced by op %d: produce values must be unique", v, a.ops[prev.op].invoke.Op)
			}
			a.produced[v] = producedValue{op: len(a.ops), index: j}
		}
	case TypeFetch:
		if e.From < 0 {
			return fmt.Errorf("fetch from offset %d", e.From)
		}
		if e.Max < 0 {
			return fmt.Errorf("fetch with max %d", e.Max)
		}
	case TypeListOffsets:
		if e.Target < TargetEarliest {
			return fmt.Errorf("list offsets for target %d", e.Target)
		}
	case TypeDeleteRecords:
		if e.Offset < DeleteToHighWatermark {
			return fmt.Errorf("delete records below offset %d", e.Offset)
		}
	default:
		return fmt.Errorf("invoke of type %q", e.Type)
	}
	open[e.Op] = len(a.ops)
	a.ops = append(a.ops, op{invoke: e})
	return nil
}

func (a *analysis) addCompletion(e Event, open map[int]int) error {
	at, ok := open[e.Op]
	if !ok {
		return fmt.Errorf("completes op %d, which is not open", e.Op)
	}
	delete(open, e.Op)
	o := &a.ops[at]
	inv := o.invoke
	if e.Type != inv.Type || e.TopicPartition != inv.TopicPartition || e.Client != inv.Client {
		return fmt.Errorf("does not match its invoke (%s)", inv)
	}
	if e.Kind == KindOk {
		if err := a.addResult(e, at); err != nil {
			return err
		}
	}
	done := e
	o.done = &done
	return nil
}

// addResult records where an ok operation saw or put values.
func (a *analysis) addResult(e Event, at int) error {
	inv := a.ops[at].invoke
	switch inv.Type {
	case TypeProduce:
		if e.Offset < OffsetUnknown {
			return fmt.Errorf("produce acknowledged at offset %d", e.Offset)
		}
		if e.Offset == OffsetUnknown || inv.LeaderAck {
			return nil // an acks=1 acknowledgement shows nothing that must stay
		}
		for j, v := range inv.Values {
			a.sightings = append(a.sightings, sighting{tp: inv.TopicPartition, offset: e.Offset + int64(j), value: v, op: at})
		}
	case TypeFetch:
		for _, r := range e.Records {
			if r.Offset < 0 {
				return fmt.Errorf("fetch returned offset %d", r.Offset)
			}
			a.sightings = append(a.sightings, sighting{tp: inv.TopicPartition, offset: r.Offset, value: r.Value, op: at})
		}
		if inv.Final {
			a.final[inv.TopicPartition] = at
		}
	case TypeListOffsets:
		if e.Offset < -1 || e.Offset == -1 && inv.Target < 0 {
			return fmt.Errorf("list offsets %s answered offset %d", describeTarget(inv.Target), e.Offset)
		}
	case TypeDeleteRecords:
		if e.Offset < 0 {
			return fmt.Errorf("delete records answered low watermark %d", e.Offset)
		}
	}
	return nil
}

func validateNote(e Event) error {
	switch e.Type {
	case TypePosition:
		if e.Offset < 0 {
			return fmt.Errorf("position %d", e.Offset)
		}
	case TypeAssign:
	default:
		return fmt.Errorf("note of type %q", e.Type)
	}
	return nil
}

// finalRead returns where tp's last final read began (its log start
// offset then) and its records, and whether there was one.
func (a *analysis) finalRead(tp TopicPartition) (int64, []Record, bool) {
	at, ok := a.final[tp]
	if !ok {
		return 0, nil, false
	}
	return a.ops[at].invoke.From, a.ops[at].done.Records, true
}

// unseenRoom answers, for one partition, where a batch that no read
// returned may sit: at offsets no acknowledgement or read put another value
// at (the gaps), and past every offset an acknowledgement or a read had
// shown in use before the batch was sent (the floor). With a final read
// that begins at 0 there is no room: every offset is known. Below where a
// final read began, records may have been deleted unread; a batch that
// finds no room there did not land.
type unseenRoom struct {
	times []int64 // answer times of the sightings, ascending
	ends  []int64 // ends[i]: the largest offset+1 shown by times[i]
	gaps  [][2]int64
}

// unseenRoom builds tp's room below limit.
func (a *analysis) unseenRoom(tp TopicPartition, limit int64) *unseenRoom {
	type shown struct{ time, end int64 }
	var all []shown
	var known []int64
	for _, s := range a.sightings {
		if s.tp == tp {
			all = append(all, shown{a.ops[s.op].done.Time, s.offset + 1})
			known = append(known, s.offset)
		}
	}
	slices.SortFunc(all, func(x, y shown) int { return cmp.Compare(x.time, y.time) })
	u := &unseenRoom{}
	end := int64(0)
	for _, x := range all {
		end = max(end, x.end)
		u.times, u.ends = append(u.times, x.time), append(u.ends, end)
	}
	slices.Sort(known)
	next := int64(0) // the first offset not yet known to be taken
	for _, k := range slices.Compact(known) {
		if k >= limit {
			break
		}
		if k > next {
			u.gaps = append(u.gaps, [2]int64{next, k})
		}
		next = k + 1
	}
	if next < limit {
		u.gaps = append(u.gaps, [2]int64{next, limit})
	}
	return u
}

// floor is the least offset a batch sent at time t can have landed at.
func (u *unseenRoom) floor(t int64) int64 {
	i, _ := slices.BinarySearch(u.times, t) // sightings answered before t
	if i == 0 {
		return 0
	}
	return u.ends[i-1]
}

// fits reports whether a batch of n values sent at time t, that no read
// returned, may sit below limit.
func (u *unseenRoom) fits(t int64, n int, limit int64) bool {
	floor := u.floor(t)
	for _, g := range u.gaps {
		if max(g[0], floor)+int64(n) <= min(g[1], limit) {
			return true
		}
	}
	return false
}

// resolve decides where an info produce landed: at the offset some read
// returned one of its values, if every read of that value agrees. It
// returns the base offset, or false if no read returned any of its values.
// A value read at two offsets (a duplicate, which the duplicate check
// reports) resolves nothing.
func (a *analysis) resolve(o *op, readsOf map[string][]int64) (int64, bool) {
	for j, v := range o.invoke.Values {
		offsets := readsOf[v]
		// A base below 0 is impossible; the reads that imply it fail the
		// model on their own.
		if len(offsets) == 1 && offsets[0] >= int64(j) {
			return offsets[0] - int64(j), true
		}
	}
	return 0, false
}

// readsByValue maps every value of tp that some read returned to the
// offsets it was read at.
func (a *analysis) readsByValue(tp TopicPartition) map[string][]int64 {
	m := make(map[string][]int64)
	for _, s := range a.sightings {
		if s.tp != tp || a.ops[s.op].invoke.Type != TypeFetch {
			continue
		}
		if !slices.Contains(m[s.value], s.offset) {
			m[s.value] = append(m[s.value], s.offset)
		}
	}
	return m
}

// porcupineOps builds tp's operations for the model. Definite failures are
// left out (they did not happen), as are fetches that returned nothing
// usable. Info produces and info DeleteRecords get an open return time
// after every event of the history, each its own so that none tie; see the
// package comment for how info produces are resolved. With a final read,
// an info produce that no read returned is dropped unless it may sit below
// where the final read began, deleted since, at offsets nobody saw (see
// unseenRoom): had it landed anywhere else, a read would have returned it.
func (a *analysis) porcupineOps(tp TopicPartition) []porcupine.Operation {
	var ops []porcupine.Operation
	finalFrom, _, hasFinal := a.finalRead(tp)
	var room *unseenRoom
	if finalFrom > 0 {
		room = a.unseenRoom(tp, finalFrom)
	}
	readsOf := a.readsByValue(tp)
	openReturn := a.timeLast
	for i := range a.ops {
		o := &a.ops[i]
		inv := o.invoke
		if inv.TopicPartition != tp {
			continue
		}
		meta := opMeta{op: inv.Op, client: inv.Client}
		pop := porcupine.Operation{ClientId: inv.Client, Call: inv.Time, Metadata: meta}
		switch inv.Type {
		case TypeProduce:
			in := &produceInput{tp: tp, values: inv.Values}
			switch o.outcome() {
			case KindOk:
				pop.Input, pop.Output, pop.Return = in, &produceOutput{offset: o.done.Offset}, o.done.Time
			case KindInfo:
				out := &produceOutput{unknown: true}
				if base, ok := a.resolve(o, readsOf); ok {
					out = &produceOutput{offset: base}
				} else if hasFinal && (room == nil || !room.fits(inv.Time, len(inv.Values), finalFrom)) {
					continue // no read saw it, the final read included: it never landed
				}
				openReturn++
				meta.info = true
				pop.Input, pop.Output, pop.Return, pop.Metadata = in, out, openReturn, meta
			default:
				continue
			}
		case TypeFetch:
			in := &fetchInput{tp: tp, from: inv.From, max: inv.Max, final: inv.Final}
			switch {
			case o.outcome() == KindOk:
				pop.Input, pop.Output, pop.Return = in, &fetchOutput{records: o.done.Records}, o.done.Time
			case o.done != nil && o.done.Code == kerr.OffsetOutOfRange.Code:
				pop.Input, pop.Output, pop.Return = in, &fetchOutput{outOfRange: true}, o.done.Time
			default:
				continue
			}
		case TypeDeleteRecords:
			in := &deleteInput{tp: tp, offset: inv.Offset}
			switch o.outcome() {
			case KindOk:
				pop.Input, pop.Output, pop.Return = in, &deleteOutput{low: o.done.Offset}, o.done.Time
			case KindInfo:
				openReturn++
				meta.info = true
				pop.Input, pop.Output, pop.Return, pop.Metadata = in, &deleteOutput{unknown: true}, openReturn, meta
			default:
				continue
			}
		default:
			continue // not an operation on the log's contents
		}
		ops = append(ops, pop)
	}
	return ops
}
