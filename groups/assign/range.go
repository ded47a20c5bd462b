package assign

import (
	"slices"
	"strings"
	"unicode/utf16"
)

// Range is Kafka's "range" server-side assignor (RangeAssignor, as
// rewritten in Kafka 3.9): each topic's partitions are cut into contiguous
// ranges, handed to the topic's subscribers in member order, the first
// partitions%subscribers of them one partition more. Members subscribed to
// the same topics of equal partition counts therefore get the same
// partition numbers of every topic (co-partitioning, which joins need).
//
// It ignores current assignments. Its stickiness is the member order:
// static members first, by group.instance.id, then dynamic members by
// member id, so a static member that restarts with a new member id gets
// its ranges back while the group and the topics stay the same. Both
// orders compare strings as Java does, by UTF-16 code units.
type Range struct{}

// Name implements Assignor.
func (Range) Name() string { return "range" }

// Assign implements Assignor.
func (Range) Assign(spec GroupSpec, topics TopicDescriber) (GroupAssignment, error) {
	g, err := newGroup(spec, topics)
	if err != nil {
		return GroupAssignment{}, err
	}
	order := make([]int, len(g.members))
	for m := range order {
		order[m] = m
	}
	slices.SortFunc(order, func(a, b int) int { return rangeCompare(g.members[a], g.members[b]) })
	for t := range g.topics {
		var subscribers []int
		for _, m := range order {
			if g.subscribes(m, t) {
				subscribers = append(subscribers, m)
			}
		}
		g.assignRanges(t, subscribers)
	}
	return g.result(), nil
}

// assignRanges cuts topics[t] into one range per subscriber, in order.
func (g *group) assignRanges(t int, subscribers []int) {
	if len(subscribers) == 0 {
		return
	}
	n := int(g.partitions[t])
	quota, extra := n/len(subscribers), n%len(subscribers)
	p := 0
	for i, m := range subscribers {
		size := quota
		if i < extra {
			size++
		}
		for end := p + size; p < end; p++ {
			g.set(t, int32(p), m)
		}
	}
}

// rangeCompare orders members as Kafka's RangeAssignor sorts them.
func rangeCompare(a, b Member) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		return javaCompare(a.InstanceID, b.InstanceID)
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return javaCompare(a.ID, b.ID)
}

// javaCompare compares two strings as Java's String.compareTo does: by
// UTF-16 code units. Go compares UTF-8 bytes, which is code point order; the
// two differ when a character above U+FFFF (a surrogate pair, D800-DFFF)
// meets one in E000-FFFF.
func javaCompare(a, b string) int {
	if !aboveUDFFF(a) || !aboveUDFFF(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

// aboveUDFFF reports whether s may hold a character from U+E000 up, whose
// UTF-8 starts with a byte from 0xEE. Without one on either side, byte order
// is UTF-16 order.
func aboveUDFFF(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xEE {
			return true
		}
	}
	return false
}
