package jepsen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The model's state is one partition's log, offset -> value, as a
// persistent list: every state is a node that shares all earlier entries
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
)

// opMeta travels with each porcupine operation for the visualization.
type opMeta struct {
	op     int
	client int
	info   bool
}

// step is the sequential specification of one partition's log.
func step(state, input, output any) (bool, any) {
	log := state.(*logNode)
	switch in := input.(type) {
	case *produceInput:
		out := output.(*produceOutput)
		if !out.unknown && out.offset != OffsetUnknown && out.offset != log.length() {
			return false, log
		}
		for _, v := range in.values {
			log = log.push(v)
		}
		return true, log
	case *fetchInput:
		return fetchLegal(log, in, output.(*fetchOutput)), log
	}
	return false, log
}

// fetchLegal reports whether a read of log may return out.
func fetchLegal(log *logNode, in *fetchInput, out *fetchOutput) bool {
	end := log.length()
	if out.outOfRange {
		return in.from > end || in.from < 0
	}
	rs := out.records
	if in.max > 0 && len(rs) > in.max {
		return false
	}
	if in.final && (in.from != 0 || int64(len(rs)) != end) {
		return false
	}
	if len(rs) == 0 {
		return true
	}
	last := in.from + int64(len(rs)) - 1
	if in.from < 0 || last >= end {
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
		Init:           func() any { return (*logNode)(nil) },
		Step:           step,
		Equal:          func(a, b any) bool { return a.(*logNode).equal(b.(*logNode)) },
		Hash:           func(s any) uint64 { return s.(*logNode).hashValue() },
		DescribeOperation: func(input, output any) string {
			return describeOperation(input, output)
		},
		DescribeState: func(s any) string { return describeLog(s.(*logNode)) },
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
			s = "final read"
		}
		if in.max > 0 {
			s += " max " + strconv.Itoa(in.max)
		}
		if out.outOfRange {
			return s + " -> OFFSET_OUT_OF_RANGE"
		}
		return s + " -> " + describeRecords(out.records, describeMax)
	}
	return fmt.Sprintf("%v -> %v", input, output)
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
