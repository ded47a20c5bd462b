package maporder

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// The map loops below are accepted: each gives the same result whatever
// order the map yields.

type session struct {
	last    time.Time
	expired bool
	size    int
}

type stats struct {
	count, bytes int
	any          bool
	high         int64
}

// (a) collect, then sort after the loop.
func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedFiltered(m map[string]*session) (ids []string, sizes []int) {
	for id, s := range m {
		if s.expired {
			continue
		}
		ids = append(ids, id)
		sizes = append(sizes, s.size)
	}
	slices.Sort(ids)
	slices.SortFunc(sizes, func(a, b int) int { return a - b })
	return ids, sizes
}

func sortedByFunc(m map[string]int) {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].k < all[j].k })
}

// (b) commutative updates.
func expire(m map[string]*session, now time.Time, timeout time.Duration) {
	for id, s := range m {
		if now.Sub(s.last) > timeout {
			delete(m, id)
		}
	}
}

func copyInto(dst, src map[string]int) {
	for k, v := range src {
		dst[k] = v * 2
	}
}

func toSet(m map[string]int) map[int]struct{} {
	set := make(map[int]struct{})
	for _, v := range m {
		set[v] = struct{}{} // the same value whoever writes last
	}
	return set
}

func counters(m map[string]*session, st *stats, perSize map[int]int) {
	for _, s := range m {
		st.count++
		st.bytes += s.size
		perSize[s.size]++
		st.high = max(st.high, int64(s.size))
		st.any = st.any || s.expired
		if s.expired {
			st.any = true
		}
	}
}

func bits(m map[string]uint64) (or, and uint64) {
	and = ^uint64(0)
	for _, v := range m {
		or |= v
		and &= v
		or = or | v
	}
	return or, and
}

// (c) iteration-local work, nested loops and switches.
func nested(m map[string]map[string]int, totals map[string]int) {
	for k, inner := range m {
		sum := 0
		for _, v := range inner {
			sum += v
		}
		var best int
		for i := 0; i < 3; i++ {
			if i > sum {
				break // leaves the inner loop only
			}
			best = i
		}
		switch {
		case sum > 10:
			totals[k] = sum + best
		default:
			break // leaves the switch only
		}
		name := strings.ToUpper(k)
		_ = name
	}
}

func typeSwitch(m map[string]any) (ints int) {
	for _, v := range m {
		switch x := v.(type) {
		case int:
			ints += x
		}
	}
	return ints
}

// (d) assertions.
func check(m map[string]int) {
	for k, v := range m {
		if v < 0 {
			panic("negative count for " + k)
		}
	}
}

// Loops that see no element at all.
func blanks(m map[string]int, tick func()) {
	for range m {
		tick()
	}
	for _, _ = range m {
		tick()
	}
}

// The maps iterators, sorted or gathered into a map.
func iteratorsOK(m map[string]int) (map[string]int, []string) {
	keys := slices.Sorted(maps.Keys(m))
	_ = slices.SortedFunc(maps.Values(m), func(a, b int) int { return a - b })
	clone := maps.Collect(maps.All(m))
	maps.Insert(clone, maps.All(m))
	n := 0
	for range maps.Keys(m) {
		n++
	}
	for k := range maps.Keys(m) {
		clone[k]++
	}
	return clone, keys
}

func genericOK[M ~map[K]V, K comparable, V any](m M, dst M) {
	for k, v := range m {
		dst[k] = v
	}
}

// Slices, arrays, strings, channels and integers are ordered.
func ordered(s []string, w *strings.Builder, ch chan int) {
	for _, x := range s {
		w.WriteString(x)
	}
	for i := range 3 {
		_ = i
	}
	for v := range ch {
		_ = v
	}
}

// Accumulators read only by their own updates, or after the loop.
func accumulatorsOK(m map[string]int, st *stats, hist map[int]int, out map[string]int) int {
	next := 0
	for k, v := range m {
		next++
		hist[v]++
		hist[len(k)] += v // hist[v] and hist[len(k)] may be one counter: both only add
		st.count += v
		st.high = 0 // a field no update accumulates into
		st.any = true
		if v > 0 {
			st.any = true // the same constant twice
		}
	}
	for _, v := range m {
		st.bytes = st.bytes + v
		st.count = min(st.count, v, st.count)
		st.any = st.any || v > 0
		st.any = true // true absorbs ||
	}
	for k, inner := range map[string]map[string]int{} {
		sum := 0 // one per iteration of the outer loop
		for _, v := range inner {
			sum += v
		}
		out[k] = sum + next // next is not updated in this loop
	}
	flags := make(map[string]int)
	for k, v := range m {
		if v > 0 {
			flags[k] = 1 // per key: no two iterations write one place
		} else {
			flags[k] = 2
		}
	}
	return next
}

// m[k] for the loop's key belongs to one iteration: it may be reset and
// read there.
func perKeyOK(m map[string][]int, out map[string]int, big map[string]bool) {
	for k, xs := range m {
		out[k] = 0
		for _, x := range xs {
			out[k] += x
		}
		if out[k] > 10 {
			big[k] = true
		}
	}
}
