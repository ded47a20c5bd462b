package jepsen

import (
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Produces of unknown outcome that no read resolved cost porcupine more
// than anything else in a history. Each has an open return, so the search
// may place it at any point after its call, and it always can: at every
// later operation, porcupine tries every subset of the ones still
// unplaced before it finds, or fails to find, the one that leaves the log
// where the operation needs it. A single-broker seed with twenty power
// losses and DeleteRecords (swarm seed 5463) left thirteen of them on one
// partition, two records of room for them below its final read, and a
// search that grew past 24 GB before its budget ran out.
//
// Most of them did not land. Any subset of them may be left out of the
// search: a legal order of the others is one of all of them, the ones left
// out placed after everything, where they change nothing any operation
// saw. So the check first tries the subsets that can explain the history:
// none of them, then the ones whose records exactly fill the offsets no
// acknowledgement or read accounts for below the final read (the unseen
// room's gaps: nothing else may have written there). Only if no such
// subset passes does porcupine search them all. The verdict is the same;
// only the time to reach it changes.

// maxFillings bounds the subsets tried before the whole search.
const maxFillings = 16

// checkPartition is porcupine's verdict on one partition's operations.
func (a *analysis) checkPartition(model porcupine.Model, tp TopicPartition, ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	var open []int // the produces of unknown outcome no read resolved
	for i, o := range ops {
		if out, ok := o.Output.(*produceOutput); ok && out.unknown {
			open = append(open, i)
		}
	}
	if len(open) == 0 {
		return porcupine.CheckOperationsTimeout(model, ops, timeout)
	}
	for _, keep := range a.fillings(tp, ops, open) {
		if porcupine.CheckOperationsTimeout(model, without(ops, open, keep), timeout) == porcupine.Ok {
			return porcupine.Ok
		}
	}
	return porcupine.CheckOperationsTimeout(model, ops, timeout)
}

// without returns ops less the open ones not in keep (both are indexes
// into ops; keep is a subset of open).
func without(ops []porcupine.Operation, open, keep []int) []porcupine.Operation {
	drop := make([]bool, len(ops))
	for _, i := range open {
		drop[i] = !slices.Contains(keep, i)
	}
	var out []porcupine.Operation
	for i, o := range ops {
		if !drop[i] {
			out = append(out, o)
		}
	}
	return out
}

// fillings returns the subsets of open to try, in order: none, then up to
// maxFillings-1 that fill every gap of the room below tp's final read
// exactly, each produce within one gap, none placed below the floor of
// what was shown in use before it was sent.
func (a *analysis) fillings(tp TopicPartition, ops []porcupine.Operation, open []int) [][]int {
	subsets := [][]int{nil}
	finalFrom, _, hasFinal := a.finalRead(tp)
	if !hasFinal || finalFrom == 0 {
		return subsets
	}
	room := a.unseenRoom(tp, finalFrom)
	size := func(i int) int64 { return int64(len(ops[i].Input.(*produceInput).values)) }
	used := make([]bool, len(ops))
	var chosen []int
	// fill chooses produces for gap g from at on (the gap filled below
	// at), trying open[from:] next; it stops once enough subsets are found.
	var fill func(g int, at int64, from int)
	fill = func(g int, at int64, from int) {
		switch {
		case len(subsets) >= maxFillings:
			return
		case g == len(room.gaps):
			subsets = append(subsets, slices.Clone(chosen))
			return
		case at == room.gaps[g][1]:
			if g+1 < len(room.gaps) {
				fill(g+1, room.gaps[g+1][0], 0)
			} else {
				fill(g+1, at, 0)
			}
			return
		}
		for k := from; k < len(open); k++ {
			i := open[k]
			if used[i] || at+size(i) > room.gaps[g][1] || room.floor(ops[i].Call) > at {
				continue
			}
			used[i], chosen = true, append(chosen, i)
			fill(g, at+size(i), k+1)
			used[i], chosen = false, chosen[:len(chosen)-1]
		}
	}
	if len(room.gaps) > 0 {
		fill(0, room.gaps[0][0], 0)
	}
	return subsets
}
