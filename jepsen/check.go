package jepsen

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Config tunes Check. The zero value is ready to use.
type Config struct {
	// Timeout bounds porcupine's search of each partition, in real time
	// (porcupine's own clock; this package never reads one). Zero means
	// DefaultTimeout. A search that runs out is reported as Unknown, never
	// as a violation, and is the one part of a check that can differ
	// between two runs of one history: keep histories small enough that
	// it never fires.
	Timeout time.Duration
	// ViolationsMax caps the violations kept per check (the rest are
	// counted in a note). Zero means 20.
	ViolationsMax int
	// TimeoutOnceInvalid bounds porcupine's search instead of Timeout
	// when another check has already found a violation: the verdict is
	// decided, and porcupine's search of a history that lost writes can
	// grow without bound in time and memory. Zero means
	// DefaultTimeoutOnceInvalid.
	TimeoutOnceInvalid time.Duration
}

// DefaultTimeout is Config.Timeout's default, DefaultTimeoutOnceInvalid
// Config.TimeoutOnceInvalid's.
const (
	DefaultTimeout            = 30 * time.Second
	DefaultTimeoutOnceInvalid = 3 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.TimeoutOnceInvalid <= 0 {
		c.TimeoutOnceInvalid = DefaultTimeoutOnceInvalid
	}
	if c.ViolationsMax <= 0 {
		c.ViolationsMax = 20
	}
	return c
}

// Verdict is a check's overall answer.
type Verdict string

const (
	// Valid: every check passed.
	Valid Verdict = "ok"
	// Invalid: at least one check found a violation.
	Invalid Verdict = "violation"
	// Undecided: no violation found, but the history could not be judged
	// in full (it is malformed, or porcupine ran out of time).
	Undecided Verdict = "unknown"
)

// Result is the judgement of a history.
type Result struct {
	Verdict    Verdict
	Violations []Violation
	// Partitions has porcupine's answer for each partition, in order.
	Partitions []PartitionResult
	// Notes are things a reader should know: checks skipped for lack of
	// a final read, violations beyond the cap, Kafka-allowed oddities.
	Notes []string
	// Err is set when the history is malformed; nothing else was checked.
	Err error
}

// PartitionResult is porcupine's answer for one partition.
type PartitionResult struct {
	Partition TopicPartition
	// Operations is the number of operations given to porcupine, after
	// definite failures were dropped and info produces resolved.
	Operations   int
	Linearizable porcupine.CheckResult
}

// OK reports whether every check passed.
func (r Result) OK() bool { return r.Verdict == Valid }

// String is a human-readable report: the verdict, then each violation with
// its events, then the notes.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "result=%s", r.Verdict)
	for _, p := range r.Partitions {
		fmt.Fprintf(&b, " %s=%s(%d ops)", p.Partition, p.Linearizable, p.Operations)
	}
	if r.Err != nil {
		fmt.Fprintf(&b, "\nmalformed history: %v", r.Err)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n%s", v)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s", n)
	}
	return b.String()
}

// Check judges h: porcupine on each partition's log, then the Kafka
// invariants. Operations still pending count as info. Check does not
// modify h.
func Check(h *History, cfg Config) Result {
	if err := h.Err(); err != nil {
		return Result{Verdict: Undecided, Err: fmt.Errorf("recording: %w", err)}
	}
	return CheckEvents(h.Events(), cfg)
}

// CheckEvents judges a history given as its events (as ReadHistory returns
// them).
func CheckEvents(events []Event, cfg Config) Result {
	cfg = cfg.withDefaults()
	a, err := analyze(events)
	if err != nil {
		return Result{Verdict: Undecided, Err: err}
	}
	var r Result
	dups, dupNotes := checkDuplicates(a)
	lost, lostNotes := checkLostWrites(a)
	r.Notes = append(r.Notes, dupNotes...)
	r.Notes = append(r.Notes, lostNotes...)
	var found []Violation
	for _, vs := range [][]Violation{lost, checkOffsetConflict(a), dups, checkReadShape(a), checkPhantom(a), checkProducerOrder(a), checkPositions(a), checkOwnership(a), checkOffsets(a), checkLeaderAcks(a)} {
		if len(vs) > cfg.ViolationsMax {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d more violations not shown", vs[0].Check, len(vs)-cfg.ViolationsMax))
			vs = vs[:cfg.ViolationsMax]
		}
		for _, v := range vs {
			v.Events = uniqueEvents(v.Events)
			found = append(found, v)
		}
	}
	timeout := cfg.Timeout
	if len(found) > 0 {
		timeout = min(timeout, cfg.TimeoutOnceInvalid)
	}
	model := LogModel()
	for _, tp := range a.partitions {
		ops := a.porcupineOps(tp)
		res := a.checkPartition(model, tp, ops, timeout)
		r.Partitions = append(r.Partitions, PartitionResult{Partition: tp, Operations: len(ops), Linearizable: res})
		switch res {
		case porcupine.Illegal:
			r.Violations = append(r.Violations, explainIllegal(model, tp, ops, timeout))
		case porcupine.Unknown:
			r.Notes = append(r.Notes, fmt.Sprintf("%s: porcupine ran out of time after %s on %d operations", tp, timeout, len(ops)))
		}
	}
	r.Violations = append(r.Violations, found...)
	r.Verdict = Valid
	switch {
	case len(r.Violations) > 0:
		r.Verdict = Invalid
	case slices.ContainsFunc(r.Partitions, func(p PartitionResult) bool { return p.Linearizable != porcupine.Ok }):
		r.Verdict = Undecided
	}
	return r
}

// explainIllegal reruns porcupine with the details kept and says how far a
// legal order gets: the longest prefix of operations it can place, the
// state it reaches, and the earliest-called operation it cannot place next.
func explainIllegal(model porcupine.Model, tp TopicPartition, ops []porcupine.Operation, timeout time.Duration) Violation {
	v := Violation{Check: CheckLinearizable, Partition: tp}
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	longest := longestPartial(info)
	placed := make(map[int64]bool) // by call time, unique within a partition
	state := model.Init()
	for _, o := range longest {
		placed[o.Call] = true
		_, state = model.Step(state, o.Input, o.Output)
	}
	var stuck *porcupine.Operation
	for i := range ops {
		if !placed[ops[i].Call] && (stuck == nil || ops[i].Call < stuck.Call) {
			stuck = &ops[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is not linearizable: a legal order places at most %d of its %d operations, reaching log %s",
		tp, len(longest), len(ops), model.DescribeState(state))
	if stuck != nil {
		fmt.Fprintf(&b, "; the earliest operation that cannot follow is %s (%s)",
			model.DescribeOperation(stuck.Input, stuck.Output), model.DescribeOperationMetadata(stuck.Metadata))
	}
	if len(longest) > 0 {
		last := longest[len(longest)-1]
		fmt.Fprintf(&b, "; the last placed is %s (%s)", model.DescribeOperation(last.Input, last.Output), model.DescribeOperationMetadata(last.Metadata))
	}
	v.Message = b.String()
	return v
}

// longestPartial picks, deterministically, the longest of porcupine's
// partial linearizations of a one-partition check.
func longestPartial(info porcupine.LinearizationInfo) []porcupine.Operation {
	parts := info.PartialLinearizationsOperations()
	if len(parts) == 0 {
		return nil
	}
	var best []porcupine.Operation
	for _, p := range parts[0] {
		if len(p) > len(best) || (len(p) == len(best) && callsBefore(p, best)) {
			best = p
		}
	}
	return best
}

// callsBefore orders two equally long linearizations by their call times.
func callsBefore(x, y []porcupine.Operation) bool {
	for i := range x {
		if x[i].Call != y[i].Call {
			return x[i].Call < y[i].Call
		}
	}
	return false
}
