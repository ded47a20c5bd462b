package jepsen

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	t0 = TopicPartition{Topic: "t", Partition: 0}
	t1 = TopicPartition{Topic: "t", Partition: 1}
)

var errTimeout = errors.New("i/o timeout")

// Shorthands for histories where nothing overlaps.

func produced(h *History, tp TopicPartition, offset int64, values ...string) {
	h.ProduceOk(h.InvokeProduce(0, tp, true, values...), offset)
}

func fetched(h *History, tp TopicPartition, from int64, records ...Record) {
	h.FetchOk(h.InvokeFetch(1, tp, from, 0), records)
}

func finalRead(h *History, tp TopicPartition, values ...string) {
	finalFrom(h, tp, 0, values...)
}

// finalFrom is a final read that begins at from, the log start then.
func finalFrom(h *History, tp TopicPartition, from int64, values ...string) {
	id := h.InvokeFinalRead(9, tp, from)
	h.FetchOk(id, log(from, values...))
}

func deleted(h *History, tp TopicPartition, offset, low int64) {
	h.DeleteRecordsOk(h.InvokeDeleteRecords(2, tp, offset), low)
}

func outOfRange(h *History, tp TopicPartition, from int64) {
	h.Complete(h.InvokeFetch(1, tp, from, 0), kerr.OffsetOutOfRange)
}

// log returns records holding values at consecutive offsets from from.
func log(from int64, values ...string) []Record {
	var rs []Record
	for i, v := range values {
		rs = append(rs, Record{Offset: from + int64(i), Value: v})
	}
	return rs
}

func checkConfig() Config { return Config{Timeout: 10 * time.Second} }

func TestCheckAcceptsLegalHistories(t *testing.T) {
	tests := []struct {
		name  string
		build func(h *History)
	}{
		{"sequential produces then final read", func(h *History) {
			produced(h, t0, 0, "a")
			produced(h, t0, 1, "b")
			finalRead(h, t0, "a", "b")
		}},
		{"an acks=1 write lost, its offset taken by a later write", func(h *History) {
			produced(h, t0, 0, "a")
			h.ProduceOk(h.InvokeProduceLeaderAck(0, t0, false, "b"), 1) // the leader died before its followers had it
			produced(h, t0, 1, "c")
			finalRead(h, t0, "a", "c")
		}},
		{"an acks=1 write kept where it was acknowledged", func(h *History) {
			h.ProduceOk(h.InvokeProduceLeaderAck(0, t0, false, "a"), 0)
			fetched(h, t0, 0, Record{Offset: 0, Value: "a"})
			finalRead(h, t0, "a")
		}},
		{"concurrent produces land in either order", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			b := h.InvokeProduce(1, t0, true, "b")
			h.ProduceOk(a, 1) // a returns first, yet b was linearized before it
			h.ProduceOk(b, 0)
			finalRead(h, t0, "b", "a")
		}},
		{"pipelined produces of one producer land in send order", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			b := h.InvokeProduce(0, t0, true, "b")
			c := h.InvokeProduce(0, t0, true, "c")
			h.ProduceOk(a, 0)
			h.ProduceOk(b, 1)
			h.ProduceOk(c, 2)
			finalRead(h, t0, "a", "b", "c")
		}},
		{"two producers interleave; an unacknowledged batch lands late", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			x := h.InvokeProduce(1, t0, true, "x")
			b := h.InvokeProduce(0, t0, true, "b")
			c := h.InvokeProduce(0, t0, true, "c")
			h.ProduceOk(x, 0)
			h.ProduceOk(a, 1)
			h.Info(b, errTimeout) // given up: it may land anywhere later
			h.ProduceOk(c, 2)
			finalRead(h, t0, "x", "a", "c", "b")
		}},
		{"unknown produce that landed", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			h.Info(a, errTimeout)
			produced(h, t0, 1, "b")
			finalRead(h, t0, "a", "b")
		}},
		{"unknown produce that landed after later writes", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			h.Complete(a, kerr.NotEnoughReplicasAfterAppend)
			produced(h, t0, 0, "b")
			produced(h, t0, 1, "c")
			finalRead(h, t0, "b", "c", "a")
		}},
		{"unknown produce that never landed", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			h.Complete(a, kerr.RequestTimedOut)
			produced(h, t0, 0, "b")
			finalRead(h, t0, "b")
		}},
		{"pending produce that never landed", func(h *History) {
			h.InvokeProduce(0, t0, true, "a")
			produced(h, t0, 0, "b")
			finalRead(h, t0, "b")
		}},
		{"unknown produce seen only by a read, no final read", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			h.Info(a, errTimeout)
			fetched(h, t0, 0, log(0, "a")...)
			produced(h, t0, 1, "b")
		}},
		{"unknown produce, no final read, never seen", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			h.Info(a, errTimeout)
			produced(h, t0, 0, "b")
			fetched(h, t0, 0, log(0, "b")...)
		}},
		{"definite failure that did not land", func(h *History) {
			a := h.InvokeProduce(0, t0, true, "a")
			h.Complete(a, kerr.NotEnoughReplicas)
			produced(h, t0, 0, "b")
			finalRead(h, t0, "b")
		}},
		{"fetches return prefixes, empty reads and out of range past the end", func(h *History) {
			produced(h, t0, 0, "a")
			produced(h, t0, 1, "b")
			produced(h, t0, 2, "c")
			h.FetchOk(h.InvokeFetch(1, t0, 1, 1), log(1, "b"))
			fetched(h, t0, 0) // fewer than exist (high watermark behind)
			fetched(h, t0, 3) // at the end
			fetched(h, t0, 1, log(1, "b", "c")...)
			oor := h.InvokeFetch(1, t0, 5, 0)
			h.Complete(oor, kerr.OffsetOutOfRange)
			finalRead(h, t0, "a", "b", "c")
		}},
		{"a read concurrent with a produce sees it", func(h *History) {
			p := h.InvokeProduce(0, t0, true, "a")
			f := h.InvokeFetch(1, t0, 0, 0)
			h.FetchOk(f, log(0, "a"))
			h.ProduceOk(p, 0)
			finalRead(h, t0, "a")
		}},
		{"duplicate batch acknowledged without an offset", func(h *History) {
			produced(h, t0, OffsetUnknown, "a")
			produced(h, t0, 1, "b")
			finalRead(h, t0, "a", "b")
		}},
		{"batches land contiguously", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			produced(h, t0, 3, "d")
			fetched(h, t0, 2, log(2, "c", "d")...)
			finalRead(h, t0, "a", "b", "c", "d")
		}},
		{"partitions are independent logs", func(h *History) {
			produced(h, t0, 0, "a")
			produced(h, t1, 0, "b")
			produced(h, t1, 1, "c")
			finalRead(h, t0, "a")
			finalRead(h, t1, "b", "c")
		}},
		{"records below an acknowledged DeleteRecords are gone", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			deleted(h, t0, 2, 2)
			outOfRange(h, t0, 0)
			fetched(h, t0, 2, log(2, "c")...)
			produced(h, t0, 3, "d")
			finalFrom(h, t0, 2, "c", "d")
		}},
		{"DeleteRecords below the high watermark, and below the start", func(h *History) {
			produced(h, t0, 0, "a", "b")
			deleted(h, t0, DeleteToHighWatermark, 2)
			deleted(h, t0, 1, 2)
			finalFrom(h, t0, 2)
		}},
		{"a read concurrent with a DeleteRecords may see the old start", func(h *History) {
			produced(h, t0, 0, "a", "b")
			d := h.InvokeDeleteRecords(2, t0, 1)
			fetched(h, t0, 0, log(0, "a")...)
			outOfRange(h, t0, 0)
			h.DeleteRecordsOk(d, 1)
			finalFrom(h, t0, 1, "b")
		}},
		{"a DeleteRecords whose answer was lost may move the start for a while", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			d := h.InvokeDeleteRecords(2, t0, 2)
			outOfRange(h, t0, 1)
			h.Info(d, errTimeout)
			fetched(h, t0, 0, log(0, "a", "b")...) // a crash brought the old start back
			finalRead(h, t0, "a", "b", "c")
		}},
		{"or for good", func(h *History) {
			produced(h, t0, 0, "a", "b", "c")
			h.Info(h.InvokeDeleteRecords(2, t0, 2), errTimeout)
			finalFrom(h, t0, 2, "c")
		}},
		{"an unknown produce that landed below the final read's start", func(h *History) {
			x := h.InvokeProduce(1, t0, true, "x")
			h.Info(x, errTimeout) // landed at 0, then deleted: no read saw it
			produced(h, t0, 1, "a")
			deleted(h, t0, 2, 2)
			produced(h, t0, 2, "b")
			finalFrom(h, t0, 2, "b")
		}},
		{"a write acknowledged without an offset, deleted", func(h *History) {
			produced(h, t0, OffsetUnknown, "a")
			deleted(h, t0, 1, 1)
			finalFrom(h, t0, 1)
		}},
		{"positions move forward, and back only after an assignment", func(h *History) {
			h.Position(3, t0, 5)
			h.Position(3, t0, 7)
			h.Position(4, t0, 2) // another consumer has its own position
			h.Assigned(3, "g", 2, []TopicPartition{t0})
			h.Position(3, t0, 6)
		}},
		{"ownership moves between generations", func(h *History) {
			h.Assigned(3, "g", 1, []TopicPartition{t0, t1})
			h.Assigned(4, "g", 2, []TopicPartition{t0})
			h.Assigned(3, "g", 2, []TopicPartition{t1})
			h.Assigned(5, "other", 2, []TopicPartition{t0}) // another group
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory()
			tt.build(h)
			r := Check(h, checkConfig())
			if !r.OK() {
				t.Fatalf("want ok, got:\n%s", r)
			}
			for _, p := range r.Partitions {
				if p.Linearizable != porcupine.Ok {
					t.Errorf("%s: %s", p.Partition, p.Linearizable)
				}
			}
		})
	}
}

// violationCases are histories that must fail, each with exactly the
// checks that must report it.
var violationCases = []struct {
	name  string
	build func(h *History)
	want  []string
}{
	{"acknowledged write lost", func(h *History) {
		produced(h, t0, 0, "a")
		produced(h, t0, 1, "b")
		finalRead(h, t0, "a")
	}, []string{CheckLinearizable, CheckLostWrite}},
	{"an acks=1 write read at another offset than acknowledged", func(h *History) {
		produced(h, t0, 0, "a")
		h.ProduceOk(h.InvokeProduceLeaderAck(0, t0, false, "b"), 2)
		finalRead(h, t0, "a", "b")
	}, []string{CheckLeaderAck}},
	{"acknowledged write lost, offset reused", func(h *History) {
		produced(h, t0, 0, "a")
		b := h.InvokeProduce(1, t0, true, "b")
		h.Info(b, errTimeout)
		finalRead(h, t0, "b")
	}, []string{CheckLinearizable, CheckLostWrite, CheckOffsetConflict}},
	{"two acknowledgements at one offset", func(h *History) {
		produced(h, t0, 0, "a")
		produced(h, t0, 0, "b")
	}, []string{CheckLinearizable, CheckOffsetConflict}},
	{"two reads disagree about an offset", func(h *History) {
		a := h.InvokeProduce(0, t0, true, "a")
		b := h.InvokeProduce(1, t0, true, "b")
		fetched(h, t0, 0, log(0, "a")...)
		fetched(h, t0, 0, log(0, "b")...)
		h.Info(a, errTimeout)
		h.Info(b, errTimeout)
	}, []string{CheckLinearizable, CheckOffsetConflict}},
	{"a fetch returns a gap", func(h *History) {
		produced(h, t0, 0, "a")
		produced(h, t0, 1, "b")
		produced(h, t0, 2, "c")
		fetched(h, t0, 0, Record{Offset: 0, Value: "a"}, Record{Offset: 2, Value: "c"})
		finalRead(h, t0, "a", "b", "c")
	}, []string{CheckLinearizable, CheckReadShape}},
	{"a fetch starts after its offset", func(h *History) {
		produced(h, t0, 0, "a")
		produced(h, t0, 1, "b")
		fetched(h, t0, 0, log(1, "b")...)
		finalRead(h, t0, "a", "b")
	}, []string{CheckLinearizable, CheckReadShape}},
	{"a fetch returns more than it asked for", func(h *History) {
		produced(h, t0, 0, "a")
		produced(h, t0, 1, "b")
		h.FetchOk(h.InvokeFetch(1, t0, 0, 1), log(0, "a", "b"))
		finalRead(h, t0, "a", "b")
	}, []string{CheckLinearizable, CheckReadShape}},
	{"offset reused after truncation", func(h *History) {
		produced(h, t0, 0, "a")
		b := h.InvokeProduce(1, t0, true, "b")
		fetched(h, t0, 0, log(0, "a", "b")...) // b was read, so it was committed
		h.Info(b, errTimeout)
		produced(h, t0, 1, "c")
		finalRead(h, t0, "a", "c")
	}, []string{CheckLinearizable, CheckLostWrite, CheckOffsetConflict}},
	{"a read write lost though never acknowledged", func(h *History) {
		a := h.InvokeProduce(0, t0, true, "a")
		fetched(h, t0, 0, log(0, "a")...)
		h.Info(a, errTimeout)
		finalRead(h, t0)
	}, []string{CheckLinearizable, CheckLostWrite}},
	{"duplicate under idempotence", func(h *History) {
		produced(h, t0, 0, "a")
		produced(h, t0, 1, "b")
		finalRead(h, t0, "a", "b", "a")
	}, []string{CheckLinearizable, CheckDuplicate}},
	{"acknowledgements out of real-time order", func(h *History) {
		produced(h, t0, 1, "a")
		produced(h, t0, 0, "b") // invoked after a was acknowledged at 1
		finalRead(h, t0, "b", "a")
	}, []string{CheckLinearizable, CheckProducerOrder}},
	{"pipelined idempotent produces land out of send order", func(h *History) {
		a := h.InvokeProduce(0, t0, true, "a1", "a2")
		b := h.InvokeProduce(0, t0, true, "b")
		h.ProduceOk(b, 0) // concurrent, so linearizable either way
		h.ProduceOk(a, 1)
		finalRead(h, t0, "b", "a1", "a2")
	}, []string{CheckProducerOrder}},
	{"out of send order, acknowledged without offsets", func(h *History) {
		a := h.InvokeProduce(0, t0, true, "a")
		b := h.InvokeProduce(0, t0, true, "b")
		c := h.InvokeProduce(0, t0, true, "c")
		h.ProduceOk(a, OffsetUnknown)
		h.ProduceOk(b, OffsetUnknown)
		h.ProduceOk(c, OffsetUnknown)
		finalRead(h, t0, "a", "c", "b")
	}, []string{CheckProducerOrder}},
	{"out of range inside the log", func(h *History) {
		produced(h, t0, 0, "a")
		f := h.InvokeFetch(1, t0, 1, 0)
		h.Complete(f, kerr.OffsetOutOfRange) // 1 is the end: empty, not out of range
		finalRead(h, t0, "a")
	}, []string{CheckLinearizable}},
	{"a read of a value nobody produced", func(h *History) {
		fetched(h, t0, 0, log(0, "ghost")...)
	}, []string{CheckLinearizable, CheckPhantom}},
	{"a definite failure landed", func(h *History) {
		a := h.InvokeProduce(0, t0, true, "a")
		h.Complete(a, kerr.NotEnoughReplicas)
		finalRead(h, t0, "a")
	}, []string{CheckLinearizable, CheckPhantom}},
	{"a value read from the wrong partition", func(h *History) {
		produced(h, t1, 0, "a")
		fetched(h, t0, 0, log(0, "a")...)
	}, []string{CheckLinearizable, CheckPhantom}},
	{"a read from the future", func(h *History) {
		fetched(h, t0, 0, log(0, "a")...)
		produced(h, t0, 0, "a")
	}, []string{CheckLinearizable, CheckPhantom}},
	{"final read shorter than an acknowledgement without offset", func(h *History) {
		produced(h, t0, OffsetUnknown, "a")
		finalRead(h, t0)
	}, []string{CheckLinearizable, CheckLostWrite}},
	{"records below an acknowledged DeleteRecords come back", func(h *History) {
		produced(h, t0, 0, "a", "b")
		deleted(h, t0, 1, 1)
		fetched(h, t0, 0, log(0, "a", "b")...)
		finalFrom(h, t0, 1, "b")
	}, []string{CheckLinearizable, CheckOffsets}},
	{"a final read from below an acknowledged DeleteRecords", func(h *History) {
		produced(h, t0, 0, "a", "b")
		deleted(h, t0, 1, 1)
		finalRead(h, t0, "a", "b")
	}, []string{CheckLinearizable, CheckOffsets}},
	{"out of range at the log start", func(h *History) {
		produced(h, t0, 0, "a", "b")
		deleted(h, t0, 1, 1)
		outOfRange(h, t0, 1)
		finalFrom(h, t0, 1, "b")
	}, []string{CheckLinearizable}},
	{"an acknowledged write missing below the final read's start, no DeleteRecords covering it", func(h *History) {
		produced(h, t0, 0, "a", "b", "c")
		deleted(h, t0, 1, 1)
		finalFrom(h, t0, 2, "c")
	}, []string{CheckLinearizable, CheckLostWrite, CheckOffsets}},
	{"a read write missing below the final read's start, no DeleteRecords at all", func(h *History) {
		a := h.InvokeProduce(0, t0, true, "a", "b")
		fetched(h, t0, 0, log(0, "a", "b")...)
		h.Info(a, errTimeout)
		finalFrom(h, t0, 1, "b")
	}, []string{CheckLinearizable, CheckLostWrite, CheckOffsets}},
	{"a low watermark below the offset asked for", func(h *History) {
		produced(h, t0, 0, "a", "b")
		deleted(h, t0, 2, 1)
	}, []string{CheckLinearizable}},
	{"a low watermark beyond the log", func(h *History) {
		produced(h, t0, 0, "a", "b")
		deleted(h, t0, DeleteToHighWatermark, 3)
		h.ListOffsetsOk(h.InvokeListOffsets(2, t0, TargetLatest), 2)
	}, []string{CheckOffsets}},
	{"a DeleteRecords beyond the log acknowledged", func(h *History) {
		produced(h, t0, 0, "a", "b")
		deleted(h, t0, 3, 3)
	}, []string{CheckLinearizable}},
	{"position going backwards", func(h *History) {
		h.Position(3, t0, 5)
		h.Position(3, t1, 1)
		h.Position(3, t0, 4)
	}, []string{CheckPositionBackwards}},
	{"two owners in one generation", func(h *History) {
		h.Assigned(3, "g", 7, []TopicPartition{t0})
		h.Assigned(4, "g", 7, []TopicPartition{t1, t0})
	}, []string{CheckSplitOwnership}},
}

func TestCheckReportsViolations(t *testing.T) {
	for _, tt := range violationCases {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory()
			tt.build(h)
			r := Check(h, checkConfig())
			if r.Verdict != Invalid {
				t.Fatalf("want a violation, got:\n%s", r)
			}
			var got []string
			for _, v := range r.Violations {
				if !slices.Contains(got, v.Check) {
					got = append(got, v.Check)
				}
				if len(v.Events) == 0 && v.Check != CheckLinearizable {
					t.Errorf("%s violation without events: %s", v.Check, v.Message)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("failed checks %v, want %v; report:\n%s", got, want, r)
			}
		})
	}
}

// Every check must be able to fail: each appears among the checks some
// violation case expects.
func TestEveryCheckHasAFailingCase(t *testing.T) {
	all := []string{CheckLinearizable, CheckLostWrite, CheckOffsetConflict, CheckDuplicate, CheckReadShape,
		CheckPhantom, CheckPositionBackwards, CheckSplitOwnership, CheckProducerOrder, CheckOffsets}
	for _, c := range all {
		if !slices.ContainsFunc(violationCases, func(vc struct {
			name  string
			build func(h *History)
			want  []string
		}) bool {
			return slices.Contains(vc.want, c)
		}) {
			t.Errorf("no violation case exercises %s", c)
		}
	}
}

func TestNonIdempotentDuplicateIsANote(t *testing.T) {
	h := NewHistory()
	h.ProduceOk(h.InvokeProduce(0, t0, false, "a"), 0)
	finalRead(h, t0, "a", "a")
	r := Check(h, checkConfig())
	for _, v := range r.Violations {
		if v.Check == CheckDuplicate {
			t.Fatalf("duplicate reported for a non-idempotent producer:\n%s", r)
		}
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "non-idempotent") }) {
		t.Fatalf("no note about the duplicate:\n%s", r)
	}
}

func TestNoFinalReadIsNoted(t *testing.T) {
	h := NewHistory()
	produced(h, t0, 0, "a")
	r := Check(h, checkConfig())
	if !r.OK() || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "no final read") {
		t.Fatalf("want ok with a note, got:\n%s", r)
	}
}

func TestViolationExplainsTheLinearizationFailure(t *testing.T) {
	h := NewHistory()
	produced(h, t0, 1, "a")
	produced(h, t0, 0, "b")
	r := Check(h, checkConfig())
	if len(r.Violations) != 1 {
		t.Fatalf("want one violation:\n%s", r)
	}
	msg := r.Violations[0].Message
	for _, want := range []string{"t-0 is not linearizable", `produce ["a"] -> 1`, "0 of its 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

func TestMalformedHistoriesAreErrorsNotVerdicts(t *testing.T) {
	tests := []struct {
		name  string
		build func(h *History)
	}{
		{"completed twice", func(h *History) {
			id := h.InvokeProduce(0, t0, true, "a")
			h.ProduceOk(id, 0)
			h.ProduceOk(id, 0)
		}},
		{"never invoked", func(h *History) { h.Fail(OpID(7), errTimeout) }},
		{"fetch completed as produce", func(h *History) { h.ProduceOk(h.InvokeFetch(0, t0, 0, 0), 0) }},
		{"complete with nil error", func(h *History) { h.Complete(h.InvokeFetch(0, t0, 0, 0), nil) }},
		{"produce without values", func(h *History) { h.InvokeProduce(0, t0, true) }},
		{"value produced twice", func(h *History) {
			produced(h, t0, 0, "a")
			produced(h, t0, 1, "a")
		}},
		{"negative offset acknowledged", func(h *History) { produced(h, t0, -2, "a") }},
		{"negative position", func(h *History) { h.Position(0, t0, -1) }},
		{"delete records completed as a list offsets", func(h *History) { h.ListOffsetsOk(h.InvokeDeleteRecords(0, t0, 1), 1) }},
		{"delete records below a negative offset", func(h *History) { h.DeleteRecordsOk(h.InvokeDeleteRecords(0, t0, -2), 0) }},
		{"a negative low watermark", func(h *History) { h.DeleteRecordsOk(h.InvokeDeleteRecords(0, t0, 1), -1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory()
			tt.build(h)
			r := Check(h, checkConfig())
			if r.Err == nil || r.Verdict != Undecided || r.OK() {
				t.Fatalf("want an error, got:\n%s", r)
			}
		})
	}
}

func TestMalformedEvents(t *testing.T) {
	ok := []Event{
		{Time: 1, Kind: KindInvoke, Op: 0, Type: TypeProduce, TopicPartition: t0, Values: []string{"a"}},
		{Time: 2, Kind: KindOk, Op: 0, Type: TypeProduce, TopicPartition: t0},
	}
	if r := CheckEvents(ok, checkConfig()); r.Err != nil {
		t.Fatalf("base history: %v", r.Err)
	}
	tests := []struct {
		name   string
		mutate func(es []Event)
	}{
		{"time goes backwards", func(es []Event) { es[1].Time = 1 }},
		{"unknown kind", func(es []Event) { es[1].Kind = "maybe" }},
		{"completion for another partition", func(es []Event) { es[1].TopicPartition = t1 }},
		{"completion of another type", func(es []Event) { es[1].Type = TypeFetch }},
		{"completion by another client", func(es []Event) { es[1].Client = 5 }},
		{"invoke of unknown type", func(es []Event) { es[0].Type = "delete"; es[1].Type = "delete" }},
		{"final read from a negative offset", func(es []Event) {
			es[0] = Event{Time: 1, Kind: KindInvoke, Type: TypeFetch, TopicPartition: t0, Final: true, From: -1}
			es[1].Type = TypeFetch
		}},
		{"record at a negative offset", func(es []Event) {
			es[0] = Event{Time: 1, Kind: KindInvoke, Type: TypeFetch, TopicPartition: t0}
			es[1] = Event{Time: 2, Kind: KindOk, Type: TypeFetch, TopicPartition: t0, Records: []Record{{Offset: -1, Value: "a"}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := slices.Clone(ok)
			tt.mutate(es)
			if r := CheckEvents(es, checkConfig()); r.Err == nil {
				t.Fatalf("want an error, got:\n%s", r)
			}
		})
	}
}

func TestCheckDoesNotChangeTheHistory(t *testing.T) {
	h := NewHistory()
	a := h.InvokeProduce(0, t0, true, "a")
	h.Info(a, errTimeout)
	finalRead(h, t0, "a")
	before := slices.Clone(h.Events())
	Check(h, checkConfig())
	if !slices.EqualFunc(before, h.Events(), func(x, y Event) bool { return x.String() == y.String() }) {
		t.Fatal("Check changed the history")
	}
}

func TestViolationsAreCapped(t *testing.T) {
	h := NewHistory()
	for i := range 30 {
		h.Position(0, t0, int64(100-i))
	}
	r := Check(h, Config{ViolationsMax: 5})
	if len(r.Violations) != 5 || !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "24 more") }) {
		t.Fatalf("want 5 violations and a note of 24 more:\n%s", r)
	}
}

// An unknown produce that no read returned is left out of porcupine's
// search when it cannot sit anywhere nobody saw: every offset below the
// final read's start holds another value. One that may sit in a gap stays.
func TestUnseenProduceBelowTheFinalReadStaysOnlyWhereItFits(t *testing.T) {
	for _, tt := range []struct {
		name string
		gap  bool
	}{{"no room", false}, {"a gap", true}} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory()
			produced(h, t0, 0, "a")
			x := h.InvokeProduce(1, t0, true, "x")
			h.Info(x, errTimeout)
			base := int64(1)
			if tt.gap {
				base = 2 // x sat at 1, unread, and was deleted
			}
			produced(h, t0, base, "b")
			deleted(h, t0, base+1, base+1)
			produced(h, t0, base+1, "c")
			finalFrom(h, t0, base+1, "c")
			r := Check(h, checkConfig())
			want := 5 // a, b, the DeleteRecords, c, the final read
			if tt.gap {
				want++ // and x
			}
			if !r.OK() || r.Partitions[0].Operations != want {
				t.Fatalf("want ok with %d operations for porcupine:\n%s", want, r)
			}
		})
	}
}

// Unknown produces no read resolved, that may have filled a gap below the
// final read: porcupine first tries the ones that fill it exactly and
// leaves the rest out (placed after everything), instead of searching
// every subset at every later operation. Twenty-four of them and a gap of
// two records before forty produces: decided in milliseconds (the whole
// search does not end in the budget). When no subset can fill the gap
// (every unknown produce was sent after the gap had to be filled), the
// history is still refused.
func TestUnseenProducesFillTheirGapFirst(t *testing.T) {
	for _, tt := range []struct {
		name  string
		legal bool
	}{{"fillable", true}, {"sent too late", false}} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory()
			produced(h, t0, 0, "a")
			var unknown []OpID
			invoke := func() {
				for i := range 24 {
					unknown = append(unknown, h.InvokeProduce(10+i%4, t0, false, fmt.Sprintf("x%d", i)))
				}
			}
			if tt.legal {
				invoke()
			}
			produced(h, t0, 3, "b") // offsets 1 and 2: two of the unknown ones, unread
			if !tt.legal {
				invoke()
			}
			for i := range 40 {
				produced(h, t0, int64(4+i), fmt.Sprintf("c%d", i))
			}
			for _, id := range unknown {
				h.Info(id, errTimeout)
			}
			deleted(h, t0, 44, 44)
			produced(h, t0, 44, "d")
			finalFrom(h, t0, 44, "d")
			r := Check(h, Config{Timeout: 30 * time.Second})
			if r.OK() != tt.legal || r.Verdict == Undecided {
				t.Fatalf("want legal=%v, decided:\n%s", tt.legal, r)
			}
		})
	}
}
