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
	three := buildLog("a", "b", "c")
	tests := []struct {
		name string
		in   fetchInput
		out  fetchOutput
		want bool
	}{
		{"whole log", fetchInput{from: 0}, fetchOutput{records: log(0, "a", "b", "c")}, true},
		{"prefix from the middle", fetchInput{from: 1}, fetchOutput{records: log(1, "b")}, true},
		{"empty below the end", fetchInput{from: 1}, fetchOutput{}, true},
		{"empty at the end", fetchInput{from: 3}, fetchOutput{}, true},
		{"out of range past the end", fetchInput{from: 4}, fetchOutput{outOfRange: true}, true},
		{"out of range at the end", fetchInput{from: 3}, fetchOutput{outOfRange: true}, false},
		{"out of range inside", fetchInput{from: 0}, fetchOutput{outOfRange: true}, false},
		{"wrong value", fetchInput{from: 1}, fetchOutput{records: log(1, "x")}, false},
		{"past the end", fetchInput{from: 2}, fetchOutput{records: log(2, "c", "d")}, false},
		{"gap", fetchInput{from: 0}, fetchOutput{records: []Record{{Offset: 0, Value: "a"}, {Offset: 2, Value: "c"}}}, false},
		{"over max", fetchInput{from: 0, max: 1}, fetchOutput{records: log(0, "a", "b")}, false},
		{"final read, whole log", fetchInput{final: true}, fetchOutput{records: log(0, "a", "b", "c")}, true},
		{"final read, short", fetchInput{final: true}, fetchOutput{records: log(0, "a", "b")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetchLegal(three, &tt.in, &tt.out); got != tt.want {
				t.Fatalf("fetchLegal = %v, want %v", got, tt.want)
			}
		})
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
