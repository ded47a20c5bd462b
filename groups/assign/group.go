package assign

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/internal/invariants"
)

// group is a GroupSpec checked and indexed for the assignors. Members are
// numbered by ascending id and topics by TopicID.Compare; every later step
// walks those numbers in order, so nothing depends on the spec's order or on
// a map's.
type group struct {
	members []Member // ascending ID
	// subs[m] are the topics member m subscribes to, as ascending indexes
	// into topics, without duplicates.
	subs [][]int
	// topics are every topic some member subscribes to, in Compare order;
	// partitions[t] is the partition count of topics[t].
	topics     []TopicID
	partitions []int32
	index      map[TopicID]int // topics[index[id]] == id
	// owner[t][p] is the member that partition p of topics[t] goes to in
	// the assignment being built, or -1.
	owner [][]int32
	// load[m] is how many partitions member m has in owner.
	load []int
}

// newGroup checks spec against the describer and indexes it. A member's
// current assignment is not read here (see keepCurrent).
func newGroup(spec GroupSpec, topics TopicDescriber) (*group, error) {
	g := &group{members: slices.Clone(spec.Members)}
	slices.SortFunc(g.members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	for i, m := range g.members {
		if m.ID == "" {
			return nil, fmt.Errorf("%w: a member has an empty id", ErrInvalidSpec)
		}
		if i > 0 && g.members[i-1].ID == m.ID {
			return nil, fmt.Errorf("%w: member id %q appears twice", ErrInvalidSpec, m.ID)
		}
	}
	if err := g.indexTopics(topics); err != nil {
		return nil, err
	}
	g.indexSubscriptions()
	g.load = make([]int, len(g.members))
	return g, nil
}

// sameTopics reports whether member m lists the topics of the member before
// it. Members mostly share one subscription, and indexing it once is most
// of an assignment's cost.
func (g *group) sameTopics(m int) bool {
	return m > 0 && slices.Equal(g.members[m].Topics, g.members[m-1].Topics)
}

// indexTopics numbers the subscribed topics and sizes owner.
func (g *group) indexTopics(topics TopicDescriber) error {
	g.index = map[TopicID]int{}
	for m, mem := range g.members {
		if g.sameTopics(m) {
			continue
		}
		for _, id := range mem.Topics {
			g.index[id] = 0
		}
	}
	ids := make([]TopicID, 0, len(g.index))
	for id := range g.index {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, TopicID.Compare)
	g.topics = ids
	g.partitions = make([]int32, len(g.topics))
	g.owner = make([][]int32, len(g.topics))
	for t, id := range g.topics {
		g.index[id] = t
		n := topics.Partitions(id)
		if n < 0 {
			return &UnknownTopicError{Member: g.subscriberOf(id), Topic: id}
		}
		g.partitions[t] = n
		g.owner[t] = make([]int32, n)
		for p := range g.owner[t] {
			g.owner[t][p] = -1
		}
	}
	return nil
}

// indexSubscriptions fills subs from the members' topics.
func (g *group) indexSubscriptions() {
	g.subs = make([][]int, len(g.members))
	for m, mem := range g.members {
		if g.sameTopics(m) {
			g.subs[m] = g.subs[m-1] // shared, never written
			continue
		}
		subs := make([]int, 0, len(mem.Topics))
		for _, id := range mem.Topics {
			subs = append(subs, g.index[id])
		}
		slices.Sort(subs)
		g.subs[m] = slices.Compact(subs)
	}
}

// subscriberOf is the first member (by id) subscribed to topic, for errors.
func (g *group) subscriberOf(topic TopicID) string {
	for _, m := range g.members {
		if slices.Contains(m.Topics, topic) {
			return m.ID
		}
	}
	return ""
}

// topicIndex is the index of id in g.topics, or -1.
func (g *group) topicIndex(id TopicID) int {
	if t, ok := g.index[id]; ok {
		return t
	}
	return -1
}

// subscribes reports whether member m subscribes to topics[t].
func (g *group) subscribes(m, t int) bool {
	_, ok := slices.BinarySearch(g.subs[m], t)
	return ok
}

// keepCurrent gives every member the partitions of its current assignment
// that it may keep: of a topic it subscribes to, within the topic's
// partitions, and not kept already. A partition two members claim (which a
// coordinator never produces) stays with the first by member id.
func (g *group) keepCurrent() {
	for m, mem := range g.members {
		for _, tp := range mem.Current {
			t := g.topicIndex(tp.Topic)
			if t < 0 || !g.subscribes(m, t) {
				continue
			}
			for _, p := range tp.Partitions {
				if p >= 0 && p < g.partitions[t] && g.owner[t][p] < 0 {
					g.set(t, p, m)
				}
			}
		}
	}
}

// set makes member m the owner of partition p of topics[t].
func (g *group) set(t int, p int32, m int) {
	if old := g.owner[t][p]; old >= 0 {
		g.load[old]--
	}
	g.owner[t][p] = int32(m)
	g.load[m]++
}

// clear leaves partition p of topics[t] without an owner.
func (g *group) clear(t int, p int32) {
	if old := g.owner[t][p]; old >= 0 {
		g.load[old]--
	}
	g.owner[t][p] = -1
}

// result turns owner into a GroupAssignment. Walking topics in order and
// partitions ascending leaves every member's assignment normalized.
func (g *group) result() GroupAssignment {
	out, free := g.emptyResult()
	for t, owners := range g.owner {
		for p, m := range owners {
			if m < 0 {
				if invariants.Enabled {
					invariants.Panicf("assign: partition %d of topic %s is left without an owner", p, g.topics[t])
				}
				continue
			}
			if invariants.Enabled && !g.subscribes(int(m), t) {
				invariants.Panicf("assign: partition %d of topic %s goes to member %q, which does not subscribe to it", p, g.topics[t], g.members[m].ID)
			}
			a := &out.Members[m].Partitions
			if n := len(*a); n == 0 || (*a)[n-1].Topic != g.topics[t] {
				*a = append(*a, TopicPartitions{Topic: g.topics[t], Partitions: free[m][:0]})
			}
			last := &(*a)[len(*a)-1]
			last.Partitions = append(last.Partitions, int32(p)) // into free[m], in place
			free[m] = free[m][1:]
		}
	}
	// Clip every list, so that a caller's append cannot write over the
	// list that follows it in the shared array.
	for _, m := range out.Members {
		for i := range m.Partitions {
			m.Partitions[i].Partitions = slices.Clip(m.Partitions[i].Partitions)
		}
	}
	return out
}

// emptyResult sizes a result from load and owner: each member's partition
// lists share its part of one array (free[m], load[m] long), and its topic
// entries its part of another, so filling it allocates nothing more.
func (g *group) emptyResult() (out GroupAssignment, free [][]int32) {
	entries, lastTopic := make([]int, len(g.members)), make([]int, len(g.members))
	for m := range lastTopic {
		lastTopic[m] = -1
	}
	for t, owners := range g.owner {
		for _, m := range owners {
			if m >= 0 && lastTopic[m] != t {
				entries[m]++
				lastTopic[m] = t
			}
		}
	}
	out.Members = make([]MemberAssignment, len(g.members))
	free = make([][]int32, len(g.members))
	partitions, topics := make([]int32, sum(g.load)), make([]TopicPartitions, sum(entries))
	for m, mem := range g.members {
		out.Members[m].MemberID = mem.ID
		free[m], partitions = partitions[:g.load[m]:g.load[m]], partitions[g.load[m]:]
		if entries[m] > 0 {
			out.Members[m].Partitions = topics[:0:entries[m]]
		}
		topics = topics[entries[m]:]
	}
	return out, free
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
