package groups

import (
	"container/heap"
	"time"
)

// timerKind names what a timer does when it fires.
type timerKind uint8

const (
	// timerHeartbeat expires a member (or a pending member) that missed its
	// session timeout.
	timerHeartbeat timerKind = iota
	// timerJoin ends the join phase of a rebalance (the rebalance timeout,
	// or a step of the initial delay).
	timerJoin
	// timerSync removes members that did not send SyncGroup within the
	// rebalance timeout of the join's end.
	timerSync
	// timerRetention runs offset expiry.
	timerRetention
	// timerConsumerSession fences a KIP-848 member that missed its session
	// timeout.
	timerConsumerSession
	// timerConsumerRebalance fences a KIP-848 member that did not revoke
	// its partitions within its rebalance timeout.
	timerConsumerRebalance
)

type timerKey struct {
	kind   timerKind
	group  string
	member string
}

type timerEntry struct {
	at  time.Time
	seq uint64
	key timerKey
}

// timers is a set of one-shot deadlines, one per key. Setting a key again
// moves it; the heap keeps the stale entry until it reaches the top, where
// it is discarded because the map no longer holds its time. Ties fire in the
// order they were set, so Tick is deterministic.
type timers struct {
	at  map[timerKey]timerEntry
	h   timerHeap
	seq uint64
}

func newTimers() timers { return timers{at: make(map[timerKey]timerEntry)} }

func (t *timers) set(k timerKey, at time.Time) {
	t.seq++
	e := timerEntry{at: at, seq: t.seq, key: k}
	t.at[k] = e
	heap.Push(&t.h, e)
	if len(t.h) > 64 && len(t.h) > 4*len(t.at) {
		t.compact()
	}
}

func (t *timers) cancel(k timerKey) { delete(t.at, k) }

// next returns the earliest live deadline, or the zero time.
func (t *timers) next() (timerEntry, bool) {
	for len(t.h) > 0 {
		top := t.h[0]
		if cur, ok := t.at[top.key]; ok && cur.seq == top.seq {
			return top, true
		}
		heap.Pop(&t.h)
	}
	return timerEntry{}, false
}

// popDue removes and returns the earliest deadline at or before now.
func (t *timers) popDue(now time.Time) (timerKey, bool) {
	e, ok := t.next()
	if !ok || e.at.After(now) {
		return timerKey{}, false
	}
	heap.Pop(&t.h)
	delete(t.at, e.key)
	return e.key, true
}

func (t *timers) compact() {
	live := t.h[:0]
	for _, e := range t.h {
		if cur, ok := t.at[e.key]; ok && cur.seq == e.seq {
			live = append(live, e)
		}
	}
	t.h = live
	heap.Init(&t.h)
}

type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
