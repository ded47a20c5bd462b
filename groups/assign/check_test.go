package assign

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// topicN is a topic id for tests: N in the last byte, so ids order by N.
func topicN(n byte) TopicID { return TopicID{15: n} }

// tps builds an Assignment from topic, partitions... pairs.
func tps(pairs ...any) Assignment {
	var a Assignment
	for i := 0; i < len(pairs); i += 2 {
		a = append(a, TopicPartitions{Topic: pairs[i].(TopicID), Partitions: pairs[i+1].([]int32)})
	}
	return a
}

// ps is a shorthand for a partition list.
func ps(p ...int32) []int32 { return p }

// format writes an assignment as "a: t1[0 1] t2[3]; b: ..." with topic ids
// shown by their last byte, for readable test failures.
func format(g GroupAssignment) string {
	var b strings.Builder
	for i, m := range g.Members {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s:", m.MemberID)
		for _, tp := range m.Partitions {
			fmt.Fprintf(&b, " t%d%v", tp.Topic[15], tp.Partitions)
		}
	}
	return b.String()
}

// checkValid returns what is wrong with result as an assignment of spec:
// every member listed once, by id; every partition of a subscribed topic
// owned by exactly one member, which subscribes to its topic; nothing else
// owned; every assignment normalized (topics in order, partitions
// ascending, no empty entry).
func checkValid(spec GroupSpec, topics TopicCounts, result GroupAssignment) []string {
	var bad []string
	ids := make([]string, 0, len(spec.Members))
	subscribed := map[string]map[TopicID]bool{}
	for _, m := range spec.Members {
		ids = append(ids, m.ID)
		subscribed[m.ID] = map[TopicID]bool{}
		for _, t := range m.Topics {
			subscribed[m.ID][t] = true
		}
	}
	slices.Sort(ids)
	got := make([]string, 0, len(result.Members))
	for _, m := range result.Members {
		got = append(got, m.MemberID)
	}
	if !slices.Equal(ids, got) {
		bad = append(bad, fmt.Sprintf("members %v, want %v", got, ids))
	}
	owners := map[TopicID]map[int32][]string{}
	for _, m := range result.Members {
		for i, tp := range m.Partitions {
			if i > 0 && m.Partitions[i-1].Topic.Compare(tp.Topic) >= 0 {
				bad = append(bad, fmt.Sprintf("%s: topics out of order", m.MemberID))
			}
			if len(tp.Partitions) == 0 {
				bad = append(bad, fmt.Sprintf("%s: empty entry for topic %s", m.MemberID, tp.Topic))
			}
			if !slices.IsSorted(tp.Partitions) || len(slices.Compact(slices.Clone(tp.Partitions))) != len(tp.Partitions) {
				bad = append(bad, fmt.Sprintf("%s: partitions of %s not strictly ascending: %v", m.MemberID, tp.Topic, tp.Partitions))
			}
			if !subscribed[m.MemberID][tp.Topic] {
				bad = append(bad, fmt.Sprintf("%s owns partitions of %s, which it does not subscribe to", m.MemberID, tp.Topic))
			}
			for _, p := range tp.Partitions {
				if owners[tp.Topic] == nil {
					owners[tp.Topic] = map[int32][]string{}
				}
				owners[tp.Topic][p] = append(owners[tp.Topic][p], m.MemberID)
			}
		}
	}
	for _, t := range sortedTopics(topics) {
		anyone := false
		for _, m := range spec.Members {
			anyone = anyone || subscribed[m.ID][t]
		}
		if !anyone {
			if len(owners[t]) > 0 {
				bad = append(bad, fmt.Sprintf("topic %s has owners but no subscriber", t))
			}
			continue
		}
		for p := int32(0); p < topics[t]; p++ {
			if n := len(owners[t][p]); n != 1 {
				bad = append(bad, fmt.Sprintf("partition %d of %s has %d owners %v", p, t, n, owners[t][p]))
			}
		}
		for p := range owners[t] {
			if p < 0 || p >= topics[t] {
				bad = append(bad, fmt.Sprintf("partition %d of %s does not exist", p, t))
			}
		}
	}
	return bad
}

// checkHeterogeneousBalance returns the pairs that break the uniform
// assignor's balance: for each topic with two subscribers or more, a
// subscriber holding one of its partitions may have at most one partition
// more in all than any other subscriber. With one subscription for all,
// that is: loads differ by at most one.
func checkHeterogeneousBalance(spec GroupSpec, result GroupAssignment) []string {
	load := map[string]int{}
	holds := map[string]map[TopicID]bool{}
	for _, m := range result.Members {
		load[m.MemberID] = m.Partitions.Count()
		holds[m.MemberID] = map[TopicID]bool{}
		for _, tp := range m.Partitions {
			holds[m.MemberID][tp.Topic] = true
		}
	}
	subscribers := map[TopicID][]string{}
	for _, m := range spec.Members {
		for _, t := range dedupTopics(m.Topics) {
			subscribers[t] = append(subscribers[t], m.ID)
		}
	}
	var bad []string
	for _, t := range slices.SortedFunc(maps.Keys(subscribers), TopicID.Compare) {
		for _, a := range subscribers[t] {
			for _, b := range subscribers[t] {
				if holds[a][t] && load[a]-load[b] > 1 {
					bad = append(bad, fmt.Sprintf("topic %s: %s holds %d and could give one to %s, which holds %d", t, a, load[a], b, load[b]))
				}
			}
		}
	}
	return bad
}

// checkHomogeneousBalance: all loads within one of each other.
func checkHomogeneousBalance(result GroupAssignment) []string {
	if len(result.Members) == 0 {
		return nil
	}
	lo, hi := result.Members[0].Partitions.Count(), result.Members[0].Partitions.Count()
	for _, m := range result.Members {
		lo, hi = min(lo, m.Partitions.Count()), max(hi, m.Partitions.Count())
	}
	if hi-lo > 1 {
		return []string{fmt.Sprintf("loads range from %d to %d", lo, hi)}
	}
	return nil
}

func sortedTopics(c TopicCounts) []TopicID {
	return slices.SortedFunc(maps.Keys(c), TopicID.Compare)
}

func dedupTopics(ts []TopicID) []TopicID {
	out := slices.Clone(ts)
	slices.SortFunc(out, TopicID.Compare)
	return slices.Compact(out)
}

// owned is the set of "topic/partition" a member holds, for comparisons.
func owned(a Assignment) map[string]bool {
	out := map[string]bool{}
	for _, tp := range a {
		for _, p := range tp.Partitions {
			out[fmt.Sprintf("%s/%d", tp.Topic, p)] = true
		}
	}
	return out
}

// asCurrent feeds a result back as the members' current assignments.
func asCurrent(spec GroupSpec, result GroupAssignment) GroupSpec {
	out := GroupSpec{Members: slices.Clone(spec.Members)}
	for i := range out.Members {
		a, _ := result.Member(out.Members[i].ID)
		out.Members[i].Current = a
	}
	return out
}
