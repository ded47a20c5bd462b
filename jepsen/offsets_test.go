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

// fetchedAt is fetchedMarks from a leader of epoch.
func fetchedAt(h *History, tp TopicPartition, epoch int32, from, hw int64, records ...Record) {
	h.FetchOkWatermarks(h.InvokeFetchAtEpoch(1, tp, from, 0, epoch), records, Watermarks{HighWatermark: hw, LogStart: 0})
}

func listed(h *History, tp TopicPartition, target, offset int64) {
	h.ListOffsetsOk(h.InvokeListOffsets(2, tp, target), offset)
}

func finalStamped(h *History, tp TopicPartition, ts []int64, values ...string) {
	finalStampedFrom(h, tp, 0, ts, values...)
}

// finalStampedFrom is a final read from from, its records stamped with
// ts[from:].
func finalStampedFrom(h *History, tp TopicPartition, from int64, ts []int64, values ...string) {
	h.FetchOk(h.InvokeFinalRead(9, tp, from), stamped(from, ts[from:], values...))
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
		{"a leader not yet told it was replaced answers an older high watermark", func(h *History) {
			h.ProduceOkAtEpoch(h.InvokeProduce(0, t0, true, "a", "b"), 0, 2) // by the epoch 2 leader
			fetchedAt(h, t0, 2, 0, 2, log(0, "a", "b")...)
			fetchedAt(h, t0, 1, 1, 1, log(1)...) // the epoch 1 leader, stale
			finalRead(h, t0, "a", "b")
		}, ""},
		{"high watermark goes back within an epoch", func(h *History) {
			produced(h, t0, 0, "a", "b")
			fetchedAt(h, t0, 2, 0, 2, log(0, "a", "b")...)
			fetchedAt(h, t0, 2, 1, 1, log(1)...)
			finalRead(h, t0, "a", "b")
		}, "high watermark of t-0 went back"},
		{"a newer leader's high watermark below an older one's", func(h *History) {
			produced(h, t0, 0, "a", "b")
			fetchedAt(h, t0, 1, 0, 2, log(0, "a", "b")...)
			fetchedAt(h, t0, 2, 1, 1, log(1)...)
			finalRead(h, t0, "a", "b")
		}, "high watermark of t-0 went back"},
		{"a newer leader's high watermark below an acknowledgement of an older one", func(h *History) {
			h.ProduceOkAtEpoch(h.InvokeProduce(0, t0, true, "a", "b"), 0, 1)
			fetchedAt(h, t0, 2, 0, 1, log(0, "a")...)
			finalRead(h, t0, "a", "b")
		}, "below 2, the end of a produce acknowledged before it was asked"},
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
		{"the log start follows DeleteRecords", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			fetchedMarks(h, t0, 0, 3, 0, log(0, "a", "b", "c")...)
			deleted(h, t0, 2, 2)
			listed(h, t0, TargetEarliest, 2)
			fetchedMarks(h, t0, 2, 3, 2, log(2, "c")...)
			listed(h, t0, TargetLatest, 3)
			finalFrom(h, t0, 2, "c")
		}, ""},
		{"the log start comes back after a DeleteRecords whose answer was lost", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			d := h.InvokeDeleteRecords(2, t0, 2)
			listed(h, t0, TargetEarliest, 2)
			h.Info(d, errTimeout)
			listed(h, t0, TargetEarliest, 0)
			fetchedMarks(h, t0, 0, 3, 0, log(0, "a", "b", "c")...)
			finalRead(h, t0, "a", "b", "c")
		}, ""},
		{"lookups after DeleteRecords", func(h *History) {
			produced(h, t0, 0, "a", "b", "c", "d")
			listed(h, t0, 150, 1) // the record at 1 is deleted later
			deleted(h, t0, 2, 2)
			listed(h, t0, 250, 3) // 300 at offset 1 is gone
			listed(h, t0, 50, 2)  // the first at or after the log start
			finalStampedFrom(h, t0, 2, ts, "c", "d")
		}, ""},
		{"log start below an acknowledged DeleteRecords", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 2, 2)
			listed(h, t0, TargetEarliest, 1)
		}, "went back below an acknowledged DeleteRecords: ListOffsets earliest answered 1 after DeleteRecords was acknowledged with low watermark 2"},
		{"a fetch's log start below an acknowledged DeleteRecords, though it came back once unknown", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 1, 1)
			h.Info(h.InvokeDeleteRecords(2, t0, 2), errTimeout)
			fetchedMarks(h, t0, 2, 3, 0)
		}, "fetch answered 0 after DeleteRecords was acknowledged with low watermark 1"},
		{"a DeleteRecords acknowledged below an earlier one", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 2, 2)
			deleted(h, t0, 1, 1)
		}, "DeleteRecords answered 1 after DeleteRecords was acknowledged with low watermark 2"},
		{"deleted records read again", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 2, 2)
			fetched(h, t0, 1, log(1, "b", "c")...)
		}, "a fetch of t-0 from 1 was answered with records, not OFFSET_OUT_OF_RANGE, after DeleteRecords was acknowledged with low watermark 2"},
		{"the final read from below an acknowledged DeleteRecords", func(h *History) {
			produced(h, t0, 0, "a", "b")
			deleted(h, t0, 1, 1)
			finalRead(h, t0, "a", "b")
		}, "the final read of t-0 from 0 was answered with records"},
		{"a fetch served from below the log start it reports", func(h *History) {
			produced(h, t0, 0, "a", "b")
			d := h.InvokeDeleteRecords(2, t0, 1)
			fetchedMarks(h, t0, 0, 2, 1, log(0, "a", "b")...)
			h.DeleteRecordsOk(d, 1)
		}, "from 0 was answered with records, not OFFSET_OUT_OF_RANGE, though it reported log start 1"},
		{"the log start moves with no DeleteRecords asking", func(h *History) {
			produced(h, t0, 0, "a", "b")
			deleted(h, t0, 1, 1)
			listed(h, t0, TargetEarliest, 2)
		}, "ListOffsets earliest of t-0 answered log start 2, beyond 1, the furthest any DeleteRecords had asked for"},
		{"the log start moves with no DeleteRecords at all", func(h *History) {
			produced(h, t0, 0, "a", "b")
			fetchedMarks(h, t0, 1, 2, 1, log(1, "b")...)
		}, "fetch of t-0 answered log start 1, beyond 0"},
		{"a low watermark beyond what was asked", func(h *History) {
			produced(h, t0, 0, "a", "b")
			deleted(h, t0, 1, 2)
		}, "DeleteRecords of t-0 answered log start 2, beyond 1"},
		{"a high watermark below the log start", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 2, 2)
			listed(h, t0, TargetLatest, 1)
		}, "answered high watermark 1, below the log start 2 that DeleteRecords answered before it was asked"},
		{"a log start beyond the final read's start, with every DeleteRecords acknowledged", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 2, 2)
			listed(h, t0, TargetEarliest, 2)
			finalFrom(h, t0, 1, "b", "c")
		}, "answered log start 2, beyond 1, where the final read begins"},
		{"lookup after DeleteRecords answers past the first match", func(h *History) {
			produced(h, t0, 0, "a", "b", "c", "d")
			deleted(h, t0, 1, 1)
			listed(h, t0, 150, 3) // 300 at offset 1 is the first at least 150 at or after the start
			finalStampedFrom(h, t0, 1, ts, "b", "c", "d")
		}, "answered offset 3 (timestamp 400); the final read says offset 1 (timestamp 300)"},
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
