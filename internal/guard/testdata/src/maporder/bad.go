// Package maporder shows map loops whose order can leak out; the guard
// rejects each one.
package maporder

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

type node struct {
	names map[string]int
	out   []string
	sum   float64
	last  string
}

func output(m map[string]int, w *strings.Builder) {
	for k := range m { // want `map-order: range over a map: its order is random and the call w.WriteString\(k\) at line 21 depends on it; range over slices.Sorted\(maps.Keys\(m\)\) instead`
		w.WriteString(k)
	}
}

func firstMatch(m map[string]int) string {
	for k, v := range m { // want `the return at line 28`
		if v > 0 {
			return k
		}
	}
	return ""
}

func earlyBreak(m map[string]int) (n int) {
	for _, v := range m { // want `the break at line 37`
		if v > 10 {
			break
		}
		n += v
	}
	return n
}

func lastWins(n *node, m map[string]int) {
	for k := range m { // want `the assignment to n.last at line 46`
		n.last = k
	}
	inverse := make(map[int]string)
	for k, v := range m { // want `the assignment to inverse\[v\]`
		inverse[v] = k // two keys with one value: the last one wins
	}
}

func floats(n *node, m map[string]float64) {
	for _, v := range m { // want `the assignment to n.sum`
		n.sum += v // floating-point addition is not associative
	}
}

func strs(m map[string]int) (s string) {
	for k := range m { // want `the assignment to s`
		s += k
	}
	return s
}

func unsorted(m map[string]int) []string {
	var keys []string
	for k := range m { // want `appends to keys in random order, and keys is not sorted after the loop`
		keys = append(keys, k)
	}
	return keys
}

func sortedBefore(m map[string]int) []string {
	var keys []string
	slices.Sort(keys)
	for k := range m { // want `keys is not sorted after the loop`
		keys = append(keys, k)
	}
	return keys
}

func intoField(n *node, m map[string]int) {
	for k := range m { // want `the assignment to n.out`
		n.out = append(n.out, k)
	}
	slices.Sort(n.out)
}

func impureCall(m map[string]int, seen func(string) bool) (n int) {
	for k := range m { // want `the call seen\(k\)`
		if seen(k) {
			n++
		}
	}
	return n
}

func closures(m map[string]int) (fs []func()) {
	for k := range m { // want `the function literal`
		fs = append(fs, func() { _ = k })
	}
	return fs
}

func sends(m map[string]int, ch chan string) {
	for k := range m { // want `the channel send`
		ch <- k
	}
}

func outerVars(m map[string]int) string {
	var k string
	for k = range m { // want `assigns its elements to variables declared outside the loop`
	}
	return k
}

func formatted(m map[string]int) {
	for k, v := range m { // want `the call fmt.Sprint\(k, v\)`
		_ = fmt.Sprint(k, v)
	}
}

func iterators(m map[string]int) []string {
	keys := slices.Collect(maps.Keys(m)) // want `map-order: maps.Keys yields in random order`
	for k := range maps.Keys(m) {        // want `map-order: range over a map appends to keys in random order`
		keys = append(keys, k+"!")
	}
	for v := range maps.Values(m) { // want `the call slices.Insert`
		keys = slices.Insert(keys, 0, fmt.Sprint(v))
	}
	f := maps.All[map[string]int] // want `maps.All yields in random order`
	_ = f
	return keys
}

func generic[M ~map[K]V, K comparable, V any](m M) (keys []K) {
	for k := range m { // want `keys is not sorted after the loop`
		keys = append(keys, k)
	}
	return keys
}

type set map[string]struct{}

func named(s set, w *strings.Builder) {
	for k := range s { // want `the call w.WriteString\(k\)`
		w.WriteString(k)
	}
}

func nestedLeak(m map[string]map[string]int, w *strings.Builder) {
	for _, inner := range m { // want `the call w.WriteString\(k\) at line 157`
		for k := range inner { // want `the call w.WriteString\(k\)`
			w.WriteString(k)
		}
	}
}

func typeSwitchLeak(m map[string]any) (last int) {
	for _, v := range m { // want `the assignment to last`
		switch x := v.(type) {
		case int:
			last = x
		}
	}
	return last
}

// An accumulator commutes with itself, but read anywhere else in the body
// it tells how many elements came before.
func numbering(m map[string]int) map[string]int {
	ids := make(map[string]int)
	next := 0
	for k := range m { // want `map-order: range over a map: its order is random and reaches line 178, where next, which the loop accumulates into, is read outside its own updates; range over slices.Sorted\(maps.Keys\(m\)\) instead`
		ids[k] = next
		next++
	}
	return ids
}

func runningTotal(m map[string]int, out map[string]int) {
	total := 0
	for k, v := range m { // want `total, which the loop accumulates into`
		total += v
		out[k] = total
	}
}

func accumulatorInCondition(m map[string]int, st *stats) (big int) {
	for _, v := range m { // want `st.count, which the loop accumulates into`
		st.count++
		if st.count > 3 {
			big += v
		}
	}
	return big
}

func accumulatorAsIndex(m map[string]int, slots []string) {
	var next int
	for k := range m { // want `reaches line 206, where next, which the loop accumulates into, is read outside its own updates`
		next += len(k)
		slots[next%len(slots)] = "x"
	}
}

func accumulatorInCall(m map[string]int, seen map[int]bool) {
	count := 0
	for k := range m { // want `count, which`
		count++
		if strings.HasPrefix(k, strings.Repeat("x", count)) {
			seen[count] = true
		}
	}
}

func perKeyCounts(m map[string]int, hist map[int]int, firsts map[string]bool) {
	for k, v := range m { // want `hist\[v\], which`
		hist[v]++
		firsts[k] = hist[v] == 1
	}
}

func selfFeeding(m map[string]int, st *stats) {
	for _, v := range m { // want `st.bytes, which`
		st.bytes += v
		st.count += st.bytes
	}
	for _, v := range m { // want `st.high, which`
		st.high = max(st.high, int64(v))
		st.count = st.count + int(st.high)
	}
}

func wholeStruct(m map[string]int, st *stats, snaps map[string]stats) {
	for k := range m { // want `st, which`
		st.count++
		snaps[k] = *st
	}
}

func collectedAndRead(m map[string]int, sizes map[string]int) {
	var keys []string
	for k := range m { // want `keys, which`
		keys = append(keys, k)
		sizes[k] = len(keys)
	}
	slices.Sort(keys)
}

func resets(m map[string]int, st *stats) {
	n := 0
	for _, v := range m { // want `n, which`
		if v < 0 {
			n = 0
		}
		n++
	}
	for _, v := range m { // want `st.any, which`
		st.any = st.any || v > 0
		st.any = false // false does not absorb ||: it undoes the ones before
	}
	for range m {
	}
	for _, v := range m { // want `n, which`
		n += v
		*&n = 0
	}
}

func lastConstant(m map[string]int, st *stats) {
	for _, v := range m { // want `st.high and st.high are set to different constants \(1, 2\), so the last iteration wins`
		if v > 0 {
			st.high = 1
		} else {
			st.high = 2
		}
	}
}

func nestedAccumulator(m map[string]map[string]int, out map[string]int) {
	total := 0
	for k, inner := range m { // want `total, which`
		for _, v := range inner {
			total += v
		}
		out[k] = total
	}
}

type stats struct {
	count, bytes int
	any          bool
	high         int64
}

func perKeyLeak(m map[string]string, out map[string]int) {
	for k, v := range m { // want `out\[v\], which`
		out[k]++
		if out[v] > 1 { // another iteration's counter
			out[k] = 0
		}
	}
}
