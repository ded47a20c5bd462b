package jepsen

import (
	"strings"
	"testing"
)

// stamped returns records holding values at offsets from from, each with
// the timestamp given in the same position of ts.
func stamped(from int64, ts []int64, values ...string) []Record {
	rs := log(from, values...)
	for i := range rs {
		rs[i].Timestamp = ts[i]
	}
	return rs
}

func fetchedMarks(h *History, tp TopicPartition, from, hw, start int64, records ...Record) {
	h.FetchOkWatermarks(h.InvokeFetch(1, tp, from, 0), records, Watermarks{HighWatermark: hw, LogStart: start})
}

func listed(h *History, tp TopicPartition, target, offset int64) {
	h.ListOffsetsOk(h.InvokeListOffsets(2, tp, target), offset)
}

func finalStamped(h *History, tp TopicPartition, ts []int64, values ...string) {
	h.FetchOk(h.InvokeFinalRead(9, tp), stamped(0, ts, values...))
}

// TestOffsetsCheck: the offsets check accepts what Kafka may answer and
// names each broken rule.
func TestOffsetsCheck(t *testing.T) {
	ts := []int64{100, 300, 200, 400}
	tests := []struct {
		name  string
		build func(h *History)
		want  string // "" for a legal history, else a fragment of the violation
	}{
		{"watermarks that follow the log", func(h *History) {
			produced(h, t0, 0, "a", "b")
			fetchedMarks(h, t0, 0, 2, 0, stamped(0, ts, "a", "b")...)
			listed(h, t0, TargetLatest, 2)
			listed(h, t0, TargetEarliest, 0)
			produced(h, t0, 2, "c", "d")
			listed(h, t0, TargetLatest, 4)
			finalStamped(h, t0, ts, "a", "b", "c", "d")
		}, ""},
		{"overlapping answers may come in either order", func(h *History) {
			produced(h, t0, 0, "a", "b")
			x := h.InvokeListOffsets(2, t0, TargetLatest)
			y := h.InvokeListOffsets(3, t0, TargetLatest)
			h.ListOffsetsOk(y, 3)
			h.ListOffsetsOk(x, 2)
			produced(h, t0, 2, "c")
			finalRead(h, t0, "a", "b", "c")
		}, ""},
		{"lookups by timestamp", func(h *History) {
			produced(h, t0, 0, "a", "b", "c", "d")
			listed(h, t0, 150, 1) // 300 at offset 1 is the first at least 150
			listed(h, t0, 300, 1)
			listed(h, t0, 301, 3)
			listed(h, t0, 50, 0)
			listed(h, t0, 500, -1)
			finalStamped(h, t0, ts, "a", "b", "c", "d")
		}, ""},
		{"a lookup asked before the records were there may find none", func(h *History) {
			listed(h, t0, 150, -1)
			produced(h, t0, 0, "a", "b")
			finalStamped(h, t0, ts[:2], "a", "b")
		}, ""},
		{"high watermark beyond the final read", func(h *History) {
			produced(h, t0, 0, "a")
			listed(h, t0, TargetLatest, 2)
			finalRead(h, t0, "a")
		}, "beyond 1, the end of the final read"},
		{"high watermark goes back", func(h *History) {
			produced(h, t0, 0, "a", "b")
			fetchedMarks(h, t0, 0, 2, 0, log(0, "a", "b")...)
			listed(h, t0, TargetLatest, 1)
			finalRead(h, t0, "a", "b")
		}, "high watermark of t-0 went back"},
		{"high watermark below an acknowledged produce", func(h *History) {
			produced(h, t0, 0, "a", "b")
			listed(h, t0, TargetLatest, 1)
			finalRead(h, t0, "a", "b")
		}, "below 2, the end of a produce acknowledged before it was asked"},
		{"a fetch serves at its high watermark", func(h *History) {
			produced(h, t0, 0, "a", "b")
			fetchedMarks(h, t0, 0, 1, 0, log(0, "a", "b")...)
			finalRead(h, t0, "a", "b")
		}, "returned offset 1 at or above the high watermark 1"},
		{"log start above the high watermark", func(h *History) {
			produced(h, t0, 0, "a")
			fetchedMarks(h, t0, 1, 1, 2)
			finalRead(h, t0, "a")
		}, "log start 2 above its high watermark 1"},
		{"log start goes back", func(h *History) {
			listed(h, t0, TargetEarliest, 1)
			listed(h, t0, TargetEarliest, 0)
		}, "log start offset of t-0 went back"},
		{"log start beyond the final read's first offset", func(h *History) {
			produced(h, t0, 0, "a", "b")
			listed(h, t0, TargetEarliest, 1)
			finalRead(h, t0, "a", "b")
		}, "beyond 0, where the final read begins"},
		{"lookup answers a later offset than the first match", func(h *History) {
			produced(h, t0, 0, "a", "b", "c", "d")
			listed(h, t0, 150, 2)
			finalStamped(h, t0, ts, "a", "b", "c", "d")
		}, "answered offset 2 (timestamp 200); the final read says offset 1 (timestamp 300)"},
		{"lookup answers a record too early", func(h *History) {
			produced(h, t0, 0, "a", "b", "c", "d")
			listed(h, t0, 350, 2)
			finalStamped(h, t0, ts, "a", "b", "c", "d")
		}, "the final read says offset 3"},
		{"lookup finds nothing where a record below the high watermark matches", func(h *History) {
			produced(h, t0, 0, "a", "b")
			listed(h, t0, 250, -1)
			finalStamped(h, t0, ts[:2], "a", "b")
		}, "answered no record; the final read says offset 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory()
			tc.build(h)
			r := Check(h, checkConfig())
			var got []string
			for _, v := range r.Violations {
				if v.Check == CheckOffsets {
					got = append(got, v.Message)
				}
			}
			switch {
			case tc.want == "" && (len(got) > 0 || !r.OK()):
				t.Fatalf("legal history judged %s:\n%s", r.Verdict, r)
			case tc.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tc.want)):
				t.Fatalf("want an offsets violation containing %q, got:\n%s", tc.want, r)
			}
		})
	}
}
