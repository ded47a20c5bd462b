package jepsen

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/anishathalye/porcupine"
)

func buildLog(values ...string) *logNode {
	var n *logNode
	for _, v := range values {
		n = n.push(v)
	}
	return n
}

func TestLogFindsEveryOffset(t *testing.T) {
	var n *logNode
	for end := int64(1); end <= 300; end++ {
		n = n.push(strconv.FormatInt(end-1, 10))
		for off := int64(0); off < end; off++ {
			if got := n.at(off); got.end != off+1 || got.value != strconv.FormatInt(off, 10) {
				t.Fatalf("log of %d: at(%d) = node %d %q", end, off, got.end, got.value)
			}
		}
	}
}

func TestLogJumpsAreLogarithmic(t *testing.T) {
	var n *logNode
	for i := range 1 << 16 {
		n = n.push(strconv.Itoa(i))
	}
	steps := 0
	for m := n; m.end > 1; steps++ {
		if m.jump.length() >= 1 {
			m = m.jump
		} else {
			m = m.prev
		}
	}
	if steps > 64 {
		t.Fatalf("%d steps from offset %d to 0", steps, n.end-1)
	}
}

func TestLogEquality(t *testing.T) {
	shared := buildLog("a", "b")
	tests := []struct {
		name string
		x, y *logNode
		want bool
	}{
		{"both empty", nil, nil, true},
		{"built apart, same values", buildLog("a", "b", "c"), buildLog("a", "b", "c"), true},
		{"sharing a prefix", shared.push("c"), shared.push("c"), true},
		{"differ at the end", shared.push("c"), shared.push("d"), false},
		{"differ at the start", buildLog("x", "b"), buildLog("a", "b"), false},
		{"prefix", buildLog("a"), buildLog("a", "b"), false},
		{"empty and not", nil, buildLog("a"), false},
		{"values are not concatenated", buildLog("ab", "c"), buildLog("a", "bc"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.x.equal(tt.y); got != tt.want {
				t.Fatalf("equal = %v, want %v", got, tt.want)
			}
			if tt.want && tt.x.hashValue() != tt.y.hashValue() {
				t.Fatal("equal logs hash differently")
			}
		})
	}
}

func TestFetchLegal(t *testing.T) {
	three := &logState{log: buildLog("a", "b", "c")}
	deleted := &logState{log: three.log, start: 1, maybe: 1} // an acknowledged DeleteRecords below 1
	perhaps := &logState{log: three.log, start: 1, maybe: 2} // and one of unknown outcome below 2
	tests := []struct {
		name  string
		state *logState
		in    fetchInput
		out   fetchOutput
		want  bool
	}{
		{"whole log", three, fetchInput{from: 0}, fetchOutput{records: log(0, "a", "b", "c")}, true},
		{"prefix from the middle", three, fetchInput{from: 1}, fetchOutput{records: log(1, "b")}, true},
		{"empty below the end", three, fetchInput{from: 1}, fetchOutput{}, true},
		{"empty at the end", three, fetchInput{from: 3}, fetchOutput{}, true},
		{"out of range past the end", three, fetchInput{from: 4}, fetchOutput{outOfRange: true}, true},
		{"out of range at the end", three, fetchInput{from: 3}, fetchOutput{outOfRange: true}, false},
		{"out of range inside", three, fetchInput{from: 0}, fetchOutput{outOfRange: true}, false},
		{"wrong value", three, fetchInput{from: 1}, fetchOutput{records: log(1, "x")}, false},
		{"past the end", three, fetchInput{from: 2}, fetchOutput{records: log(2, "c", "d")}, false},
		{"gap", three, fetchInput{from: 0}, fetchOutput{records: []Record{{Offset: 0, Value: "a"}, {Offset: 2, Value: "c"}}}, false},
		{"over max", three, fetchInput{from: 0, max: 1}, fetchOutput{records: log(0, "a", "b")}, false},
		{"final read, whole log", three, fetchInput{final: true}, fetchOutput{records: log(0, "a", "b", "c")}, true},
		{"final read, short", three, fetchInput{final: true}, fetchOutput{records: log(0, "a", "b")}, false},
		{"final read past the start, nothing deleted", three, fetchInput{from: 1, final: true}, fetchOutput{records: log(1, "b", "c")}, false},

		{"out of range below the log start", deleted, fetchInput{from: 0}, fetchOutput{outOfRange: true}, true},
		{"records below the log start", deleted, fetchInput{from: 0}, fetchOutput{records: log(0, "a")}, false},
		{"nothing below the log start", deleted, fetchInput{from: 0}, fetchOutput{}, false},
		{"out of range at the log start", deleted, fetchInput{from: 1}, fetchOutput{outOfRange: true}, false},
		{"records at the log start", deleted, fetchInput{from: 1}, fetchOutput{records: log(1, "b", "c")}, true},
		{"final read from the log start", deleted, fetchInput{from: 1, final: true}, fetchOutput{records: log(1, "b", "c")}, true},
		{"final read from below the log start", deleted, fetchInput{final: true}, fetchOutput{records: log(0, "a", "b", "c")}, false},
		{"final read past the log start", deleted, fetchInput{from: 2, final: true}, fetchOutput{records: log(2, "c")}, false},

		{"out of range where a lost DeleteRecords may have moved the start", perhaps, fetchInput{from: 1}, fetchOutput{outOfRange: true}, true},
		{"records where it may not have", perhaps, fetchInput{from: 1}, fetchOutput{records: log(1, "b")}, true},
		{"out of range past where it may have", perhaps, fetchInput{from: 2}, fetchOutput{outOfRange: true}, false},
		{"final read from where it may have", perhaps, fetchInput{from: 2, final: true}, fetchOutput{records: log(2, "c")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetchLegal(tt.state, &tt.in, &tt.out); got != tt.want {
				t.Fatalf("fetchLegal = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeleteStep(t *testing.T) {
	three := buildLog("a", "b", "c")
	tests := []struct {
		name         string
		state        logState
		in           deleteInput
		out          deleteOutput
		legal        bool
		start, maybe int64 // the state after, when legal
	}{
		{"below an offset", logState{log: three}, deleteInput{offset: 2}, deleteOutput{low: 2}, true, 2, 2},
		{"below the high watermark: moved, but not known how far", logState{log: three}, deleteInput{offset: DeleteToHighWatermark}, deleteOutput{low: 3}, true, 0, 3},
		{"below the high watermark, answered beyond the end", logState{log: three, start: 1, maybe: 1}, deleteInput{offset: DeleteToHighWatermark}, deleteOutput{low: 4}, true, 1, 3},
		{"below the start: nothing moves", logState{log: three, start: 2, maybe: 2}, deleteInput{offset: 1}, deleteOutput{low: 2}, true, 2, 2},
		{"answering where another moved the start since", logState{log: three, start: 1, maybe: 1}, deleteInput{offset: 2}, deleteOutput{low: 3}, true, 2, 2},
		{"answered below what was asked", logState{log: three}, deleteInput{offset: 2}, deleteOutput{low: 1}, false, 0, 0},
		{"answered below the start", logState{log: three, start: 2, maybe: 2}, deleteInput{offset: DeleteToHighWatermark}, deleteOutput{low: 1}, false, 0, 0},
		{"asked beyond the end", logState{log: three}, deleteInput{offset: 4}, deleteOutput{low: 4}, false, 0, 0},
		{"unknown outcome: may have moved it", logState{log: three, start: 1, maybe: 1}, deleteInput{offset: 2}, deleteOutput{unknown: true}, true, 1, 2},
		{"unknown outcome, the high watermark", logState{log: three}, deleteInput{offset: DeleteToHighWatermark}, deleteOutput{unknown: true}, true, 0, 3},
		{"unknown outcome past the end: refused", logState{log: three}, deleteInput{offset: 4}, deleteOutput{unknown: true}, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, next := deleteStep(&tt.state, &tt.in, &tt.out)
			if ok != tt.legal {
				t.Fatalf("legal = %v, want %v", ok, tt.legal)
			}
			if st := next.(*logState); ok && (st.start != tt.start || st.maybe != tt.maybe || st.log != three) {
				t.Fatalf("state after: start %d maybe %d, want %d %d", st.start, st.maybe, tt.start, tt.maybe)
			}
		})
	}
}

func TestStatesDifferingInTheLogStartDiffer(t *testing.T) {
	three := buildLog("a", "b", "c")
	x, y, z := &logState{log: three}, &logState{log: three, start: 1, maybe: 1}, &logState{log: three, start: 1, maybe: 2}
	if x.equal(y) || y.equal(z) || x.hash() == y.hash() || y.hash() == z.hash() {
		t.Fatal("states with other log starts compare or hash equal")
	}
	if x.hash() != three.hashValue() || !y.equal(&logState{log: buildLog("a", "b", "c"), start: 1, maybe: 1}) {
		t.Fatal("equal states compare or hash apart")
	}
}

// LogModel's partition functions let porcupine take a mixed history.
func TestLogModelPartitionsMixedHistories(t *testing.T) {
	op := func(call, ret int64, tp TopicPartition, v string, offset int64) porcupine.Operation {
		return porcupine.Operation{Call: call, Return: ret,
			Input: &produceInput{tp: tp, values: []string{v}}, Output: &produceOutput{offset: offset}}
	}
	legal := []porcupine.Operation{op(1, 2, t0, "a", 0), op(3, 4, t1, "b", 0), op(5, 6, t0, "c", 1)}
	if !porcupine.CheckOperations(LogModel(), legal) {
		t.Fatal("two independent logs judged illegal")
	}
	illegal := []porcupine.Operation{op(1, 2, t0, "a", 0), op(3, 4, t1, "b", 0), op(5, 6, t0, "c", 0)}
	if porcupine.CheckOperations(LogModel(), illegal) {
		t.Fatal("offset 0 of t-0 written twice judged legal")
	}
	var events []porcupine.Event
	for i, o := range legal {
		events = append(events,
			porcupine.Event{Kind: porcupine.CallEvent, Value: o.Input, Id: i},
			porcupine.Event{Kind: porcupine.ReturnEvent, Value: o.Output, Id: i})
	}
	if !porcupine.CheckEvents(LogModel(), events) {
		t.Fatal("event form judged illegal")
	}
}

func TestDescribeLogAbbreviates(t *testing.T) {
	var vs []string
	for i := range 20 {
		vs = append(vs, fmt.Sprint(i))
	}
	got := describeLog(buildLog(vs...))
	want := `20 records: ... [12:"12" 13:"13" 14:"14" 15:"15" 16:"16" 17:"17" 18:"18" 19:"19"]`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
