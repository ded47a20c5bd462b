package jepsen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The model's state is one partition's log, offset -> value, and its log
// start (logState). The log is a persistent list: every state is a node that shares all earlier entries
// with the state it grew from. Porcupine explores many orders of the same
// operations and keeps every state it visits, so states must be cheap to
// make (one node per appended value), to hash (kept incrementally) and to
// compare (walk back until the two lists share a node, which is usually
// soon). A nil *logNode is the empty log.
//
// A fetch must look up the entry at an arbitrary offset; each node carries
// a jump pointer (Myers' skew-binary scheme) so that reaching an ancestor
// takes O(log n) steps instead of walking the whole list.
type logNode struct {
	prev  *logNode
	jump  *logNode // an ancestor; see push
	end   int64    // the log's length: this node's value sits at end-1
	value string
	hash  uint64
}

func (n *logNode) length() int64 {
	if n == nil {
		return 0
	}
	return n.end
}

func (n *logNode) jumpNode() *logNode {
	if n == nil {
		return nil // the empty log is its own jump
	}
	return n.jump
}

// push returns the log n with value appended.
func (n *logNode) push(value string) *logNode {
	next := &logNode{prev: n, end: n.length() + 1, value: value}
	// Jump twice as far as n's jump when n's jump and its jump's jump
	// cover equal distances; otherwise jump to n. This keeps every ancestor
	// reachable in O(log n) steps.
	j := n.jumpNode()
	if n.length()-j.length() == j.length()-j.jumpNode().length() {
		next.jump = j.jumpNode()
	} else {
		next.jump = n
	}
	next.hash = mix(n.hashValue() ^ hashString(value))
	return next
}

func (n *logNode) hashValue() uint64 {
	if n == nil {
		return 0x9e3779b97f4a7c15
	}
	return n.hash
}

// at returns the node whose value sits at offset, which must lie in [0,
// length).
func (n *logNode) at(offset int64) *logNode {
	end := offset + 1
	for n.end > end {
		if n.jump.length() >= end {
			n = n.jump
		} else {
			n = n.prev
		}
	}
	return n
}

func (n *logNode) equal(other *logNode) bool {
	if n.length() != other.length() || n.hashValue() != other.hashValue() {
		return false
	}
	for n != other {
		if n.value != other.value {
			return false
		}
		n, other = n.prev, other.prev
	}
	return true
}

// tail returns the last k entries of the log, oldest first.
func (n *logNode) tail(k int) []Record {
	var rs []Record
	for ; n != nil && len(rs) < k; n = n.prev {
		rs = append(rs, Record{Offset: n.end - 1, Value: n.value})
	}
	slices.Reverse(rs)
	return rs
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix is SplitMix64's finalizer: it spreads every input bit over the
// output, so that logs differing in one value hash far apart.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// logState is the model's state: the log and what DeleteRecords did to its
// front. Records below the log start stay in the log (offsets go on from
// its end) but may not be read. A DeleteRecords whose answer was lost may
// have moved the log start only for a while: the broker moves it in memory
// before the new start is durable, and a crash between the two brings the
// old start back. So the model keeps two bounds:
//
//   - start, moved by acknowledged DeleteRecords to the offsets they asked
//     for (durable, so for good): a fetch from below it answers
//     OFFSET_OUT_OF_RANGE, nothing else;
//   - maybe, at least start, the furthest any DeleteRecords placed so far,
//     acknowledged or not, may have moved it: a fetch from at or above
//     maybe must not answer OFFSET_OUT_OF_RANGE (unless past the end),
//     one from between the two may answer either way.
//
// States are immutable: step returns a new one or the one it was given.
// Without DeleteRecords both bounds stay 0 and the model is the log alone.
type logState struct {
	log          *logNode
	start, maybe int64
}

var emptyState = &logState{}

func (s *logState) equal(other *logState) bool {
	return s.start == other.start && s.maybe == other.maybe && s.log.equal(other.log)
}

func (s *logState) hash() uint64 {
	h := s.log.hashValue()
	if s.start != 0 || s.maybe != 0 {
		h = mix(h ^ mix(uint64(s.start)+0x632be59bd9b4e019) ^ uint64(s.maybe))
	}
	return h
}

// The model's inputs and outputs. Pointers, so that porcupine copies
// nothing as it explores.
type (
	produceInput struct {
		tp     TopicPartition
		values []string
	}
	produceOutput struct {
		// offset is where values[0] landed, or OffsetUnknown.
		offset int64
		// unknown: an info produce that no read resolved. It appends at
		// whatever the end is when porcupine places it.
		unknown bool
	}
	fetchInput struct {
		tp    TopicPartition
		from  int64
		max   int
		final bool
	}
	fetchOutput struct {
		records    []Record
		outOfRange bool
	}
	deleteInput struct {
		tp TopicPartition
		// offset is the offset asked for, or DeleteToHighWatermark.
		offset int64
	}
	deleteOutput struct {
		// low is the low watermark answered.
		low int64
		// unknown: a DeleteRecords whose outcome is unknown. Wherever
		// porcupine places it, it may have moved the log start for a
		// while; it never moves it for good.
		unknown bool
	}
)

// opMeta travels with each porcupine operation for the visualization.
type opMeta struct {
	op     int
	client int
	info   bool
}

// step is the sequential specification of one partition's log.
func step(state, input, output any) (bool, any) {
	st := state.(*logState)
	switch in := input.(type) {
	case *produceInput:
		out := output.(*produceOutput)
		log := st.log
		if !out.unknown && out.offset != OffsetUnknown && out.offset != log.length() {
			return false, state
		}
		for _, v := range in.values {
			log = log.push(v)
		}
		return true, &logState{log: log, start: st.start, maybe: st.maybe}
	case *fetchInput:
		return fetchLegal(st, in, output.(*fetchOutput)), state
	case *deleteInput:
		return deleteStep(st, in, output.(*deleteOutput))
	}
	return false, state
}

// deleteStep applies a DeleteRecords. The broker moves the log start when
// the request arrives and answers, once that is durable, with the log
// start of that later moment, which another DeleteRecords may have moved
// further: so an acknowledged one moves the start to the offset it asked
// for (which was at most the high watermark, so at most the log's end) and
// answers at least that. Asked for the high watermark, it moved the start
// to a point the model does not know (the high watermark is not modeled: a
// fetch may return less than the log holds), at most its answer and the
// log's end: perhaps so far. Whether the low watermark answered was durable
// is the offsets check's business. One of unknown outcome may have moved
// the start so far for a while; it changes nothing if the broker would
// have refused it (past the end).
func deleteStep(st *logState, in *deleteInput, out *deleteOutput) (bool, any) {
	end := st.log.length()
	if in.offset > end {
		return out.unknown, st
	}
	if out.unknown {
		upTo := in.offset
		if upTo == DeleteToHighWatermark {
			upTo = end
		}
		return true, st.movedTo(st.start, upTo)
	}
	if out.low < max(st.start, in.offset) {
		return false, st
	}
	if in.offset == DeleteToHighWatermark {
		return true, st.movedTo(st.start, min(out.low, end))
	}
	return true, st.movedTo(max(st.start, in.offset), in.offset)
}

// movedTo returns st with its start at least start and maybe at least
// maybe (and start).
func (st *logState) movedTo(start, maybe int64) *logState {
	maybe = max(st.maybe, maybe, start)
	if start == st.start && maybe == st.maybe {
		return st
	}
	return &logState{log: st.log, start: start, maybe: maybe}
}

// fetchLegal reports whether a read of the log in st may return out.
func fetchLegal(st *logState, in *fetchInput, out *fetchOutput) bool {
	log := st.log
	end := log.length()
	if out.outOfRange {
		return in.from > end || in.from < st.maybe
	}
	if in.from < st.start {
		return false // below the log start: OFFSET_OUT_OF_RANGE, nothing else
	}
	rs := out.records
	if in.max > 0 && len(rs) > in.max {
		return false
	}
	if in.final && (in.from > st.maybe || in.from+int64(len(rs)) != end) {
		return false
	}
	if len(rs) == 0 {
		return true
	}
	last := in.from + int64(len(rs)) - 1
	if last >= end {
		return false
	}
	n := log.at(last)
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Offset != in.from+int64(i) || rs[i].Value != n.value {
			return false
		}
		n = n.prev
	}
	return true
}

// LogModel is the porcupine model of Kafka partitions: the state is one
// partition's log, and the partition functions split a history by
// topic-partition. Check builds its operations; the model is exported for
// callers that want to drive porcupine themselves.
func LogModel() porcupine.Model {
	return porcupine.Model{
		Partition:      partitionOperations,
		PartitionEvent: partitionEvents,
		Init:           func() any { return emptyState },
		Step:           step,
		Equal:          func(a, b any) bool { return a.(*logState).equal(b.(*logState)) },
		Hash:           func(s any) uint64 { return s.(*logState).hash() },
		DescribeOperation: func(input, output any) string {
			return describeOperation(input, output)
		},
		DescribeState: func(s any) string { return describeState(s.(*logState)) },
		DescribeOperationMetadata: func(m any) string {
			meta, ok := m.(opMeta)
			if !ok {
				return ""
			}
			if meta.info {
				return fmt.Sprintf("op %d, client %d, outcome unknown (open return)", meta.op, meta.client)
			}
			return fmt.Sprintf("op %d, client %d", meta.op, meta.client)
		},
	}
}

func inputPartition(input any) TopicPartition {
	switch in := input.(type) {
	case *produceInput:
		return in.tp
	case *fetchInput:
		return in.tp
	case *deleteInput:
		return in.tp
	}
	return TopicPartition{}
}

func partitionOperations(ops []porcupine.Operation) [][]porcupine.Operation {
	return groupByPartition(ops, func(o porcupine.Operation) TopicPartition { return inputPartition(o.Input) })
}

func partitionEvents(events []porcupine.Event) [][]porcupine.Event {
	// A return event carries an output; find its partition by its call.
	tps := make(map[int]TopicPartition)
	for _, e := range events {
		if e.Kind == porcupine.CallEvent {
			tps[e.Id] = inputPartition(e.Value)
		}
	}
	return groupByPartition(events, func(e porcupine.Event) TopicPartition { return tps[e.Id] })
}

// groupByPartition splits xs by partition, keeping their order within each,
// with partitions in (topic, partition) order.
func groupByPartition[T any](xs []T, key func(T) TopicPartition) [][]T {
	index := make(map[TopicPartition]int)
	var tps []TopicPartition
	var groups [][]T
	for _, x := range xs {
		tp := key(x)
		i, ok := index[tp]
		if !ok {
			i = len(groups)
			index[tp] = i
			tps = append(tps, tp)
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], x)
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if tps[a].less(tps[b]) {
			return -1
		}
		if tps[b].less(tps[a]) {
			return 1
		}
		return 0
	})
	sorted := make([][]T, len(groups))
	for i, j := range order {
		sorted[i] = groups[j]
	}
	return sorted
}

const describeMax = 8

func describeOperation(input, output any) string {
	switch in := input.(type) {
	case *produceInput:
		out := output.(*produceOutput)
		s := "produce " + quoteValues(in.values, describeMax)
		switch {
		case out.unknown:
			return s + " -> ?"
		case out.offset == OffsetUnknown:
			return s + " -> ok (offset not given)"
		}
		return s + " -> " + strconv.FormatInt(out.offset, 10)
	case *fetchInput:
		out := output.(*fetchOutput)
		s := "fetch from " + strconv.FormatInt(in.from, 10)
		if in.final {
			s = "final read from " + strconv.FormatInt(in.from, 10)
		}
		if in.max > 0 {
			s += " max " + strconv.Itoa(in.max)
		}
		if out.outOfRange {
			return s + " -> OFFSET_OUT_OF_RANGE"
		}
		return s + " -> " + describeRecords(out.records, describeMax)
	case *deleteInput:
		out := output.(*deleteOutput)
		s := "delete records below " + describeDeleteOffset(in.offset)
		if out.unknown {
			return s + " -> ?"
		}
		return s + " -> low watermark " + strconv.FormatInt(out.low, 10)
	}
	return fmt.Sprintf("%v -> %v", input, output)
}

func describeState(s *logState) string {
	d := describeLog(s.log)
	switch {
	case s.start == 0 && s.maybe == 0:
		return d
	case s.start == s.maybe:
		return fmt.Sprintf("%s, log start %d", d, s.start)
	}
	return fmt.Sprintf("%s, log start %d (perhaps up to %d)", d, s.start, s.maybe)
}

func describeLog(n *logNode) string {
	if n == nil {
		return "[]"
	}
	var b strings.Builder
	if n.end > describeMax {
		fmt.Fprintf(&b, "%d records: ... ", n.end)
	}
	b.WriteString(describeRecords(n.tail(describeMax), describeMax))
	return b.String()
}

func describeRecords(rs []Record, max int) string {
	return describeList(rs, max, func(r Record) string { return fmt.Sprintf("%d:%q", r.Offset, r.Value) })
}

func quoteValues(vs []string, max int) string {
	return describeList(vs, max, strconv.Quote)
}

// describeList writes items as "[a b c ... N more]", at most max of them.
func describeList[T any](items []T, max int, describe func(T) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, item := range items {
		if i == max {
			fmt.Fprintf(&b, " ... %d more", len(items)-max)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(describe(item))
	}
	b.WriteByte(']')
	return b.String()
}
