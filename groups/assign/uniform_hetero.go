package assign

import (
	"cmp"
	"slices"

	"github.com/sluicemq/sluice/internal/invariants"
)

// uniformHeterogeneous assigns for members with different subscriptions,
// in the three steps of Kafka's UniformHeterogeneousAssignmentBuilder:
// every member keeps its current partitions of topics it still subscribes
// to (keepCurrent), the partitions left go one by one to the least loaded
// subscriber of their topic, and then partitions move from the most to the
// least loaded subscribers of each topic until no move within a topic
// narrows a gap.
//
// The result is balanced as far as moves within one topic can make it: for
// every topic with two subscribers or more, a subscriber that holds one of
// its partitions has at most one partition more, in all, than any other
// subscriber. With identical subscriptions that is perfect balance; with
// overlapping ones it is not always (members of 9, 10 and 11 partitions,
// where the first two share one topic and the last two another, satisfy
// it). Kafka stops after 16 rounds over the topics; this runs until a round
// moves nothing, which it reaches since every move lowers the sum of the
// squared loads.
func (g *group) uniformHeterogeneous() {
	subscribers := make([][]int, len(g.topics))
	for m, subs := range g.subs {
		for _, t := range subs {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	order := g.topicOrder(subscribers)
	for _, t := range order {
		for p, o := range g.owner[t] {
			if o < 0 {
				g.set(t, int32(p), g.leastLoaded(subscribers[t]))
			}
		}
	}
	held := make([]int, len(g.members))
	for moved := true; moved; {
		moved = false
		for _, t := range order {
			if len(subscribers[t]) >= 2 && g.balanceTopic(t, subscribers[t], held) {
				moved = true
			}
		}
	}
}

// topicOrder sorts the topics as Kafka's heterogeneous builder does, the
// hardest to balance first: most partitions per subscriber, then fewest
// subscribers, then topic id. Kafka divides in floating point; the cross
// products here compare the same ratios exactly.
func (g *group) topicOrder(subscribers [][]int) []int {
	order := make([]int, len(g.topics))
	for t := range order {
		order[t] = t
	}
	slices.SortFunc(order, func(a, b int) int {
		ratioA := int64(g.partitions[a]) * int64(len(subscribers[b]))
		ratioB := int64(g.partitions[b]) * int64(len(subscribers[a]))
		if c := cmp.Compare(ratioB, ratioA); c != 0 {
			return c
		}
		if c := cmp.Compare(len(subscribers[a]), len(subscribers[b])); c != 0 {
			return c
		}
		return g.topics[a].Compare(g.topics[b])
	})
	return order
}

// leastLoaded is the member of members with the fewest partitions, the
// first in member order among equals.
func (g *group) leastLoaded(members []int) int {
	best := members[0]
	for _, m := range members[1:] {
		if g.load[m] < g.load[best] {
			best = m
		}
	}
	return best
}

// balanceTopic moves partitions of topics[t] from its most loaded holder to
// its least loaded subscriber while their loads differ by two or more, the
// holder giving up its highest partition of the topic. It reports whether
// it moved any. held is scratch space, one entry per member.
func (g *group) balanceTopic(t int, subscribers []int, held []int) bool {
	for _, m := range subscribers {
		held[m] = 0 // partitions of t that m holds
	}
	for _, m := range g.owner[t] {
		if m >= 0 {
			held[m]++
		}
	}
	moved := false
	for {
		least := g.leastLoaded(subscribers)
		most := -1
		for _, m := range subscribers {
			if held[m] > 0 && (most < 0 || g.load[m] >= g.load[most]) {
				most = m
			}
		}
		if most < 0 || g.load[most]-g.load[least] <= 1 {
			return moved
		}
		p := g.highestOf(t, most)
		g.set(t, p, least)
		held[most]--
		held[least]++
		moved = true
	}
}

// highestOf is the highest partition of topics[t] that member m holds; m
// holds one.
func (g *group) highestOf(t, m int) int32 {
	owners := g.owner[t]
	for p := len(owners) - 1; p >= 0; p-- {
		if int(owners[p]) == m {
			return int32(p)
		}
	}
	invariants.Panicf("assign: member %q holds no partition of topic %s", g.members[m].ID, g.topics[t])
	return -1
}
