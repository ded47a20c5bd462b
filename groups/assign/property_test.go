package assign

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// propertyRuns is how many random groups each property test draws, from
// seeds 1 to propertyRuns, so a failure names its seed and replays.
const propertyRuns = 2000

type randomGroup struct {
	spec        GroupSpec
	topics      TopicCounts
	homogeneous bool
}

// newRandomGroup draws a group of 1 to 12 members over 1 to 6 topics of 0
// to 40 partitions: one subscription for all or one each (possibly empty),
// some static members, and current assignments that are either a previous
// result (perturbed by a change of membership) or junk: unsubscribed and
// unknown topics, partitions out of range, repeats, partitions two members
// claim.
func newRandomGroup(r *rand.Rand) randomGroup {
	g := randomGroup{topics: TopicCounts{}, homogeneous: r.IntN(2) == 0}
	var ids []TopicID
	for i := range 1 + r.IntN(6) {
		id := topicN(byte(i + 1))
		if r.IntN(3) == 0 {
			id[0] = 0x80 // a negative most significant half
		}
		g.topics[id] = int32(r.IntN(41))
		ids = append(ids, id)
	}
	subset := func() []TopicID {
		var s []TopicID
		for _, id := range ids {
			if r.IntN(2) == 0 {
				s = append(s, id)
			}
		}
		return s
	}
	shared := subset()
	for len(shared) == 0 {
		shared = subset()
	}
	for i := range 1 + r.IntN(12) {
		m := Member{ID: fmt.Sprintf("m%02d", r.IntN(100)*100+i)}
		if r.IntN(4) == 0 {
			m.InstanceID = fmt.Sprintf("i%02d", r.IntN(100))
		}
		if g.homogeneous {
			m.Topics = slices.Clone(shared)
		} else {
			m.Topics = subset()
		}
		g.spec.Members = append(g.spec.Members, m)
	}
	if r.IntN(2) == 0 {
		g.junkCurrent(r, ids)
	} else {
		g.previousCurrent(r)
	}
	return g
}

func (g *randomGroup) junkCurrent(r *rand.Rand, ids []TopicID) {
	for i := range g.spec.Members {
		for range r.IntN(4) {
			topic := topicN(99)
			if r.IntN(5) != 0 {
				topic = ids[r.IntN(len(ids))]
			}
			var parts []int32
			for range r.IntN(10) {
				parts = append(parts, int32(r.IntN(50))-2)
			}
			g.spec.Members[i].Current = append(g.spec.Members[i].Current, TopicPartitions{Topic: topic, Partitions: parts})
		}
	}
}

// previousCurrent assigns a group that differs from this one by a member
// or two and uses the result as the current assignment.
func (g *randomGroup) previousCurrent(r *rand.Rand) {
	prev := GroupSpec{Members: slices.Clone(g.spec.Members)}
	if len(prev.Members) > 1 && r.IntN(2) == 0 {
		prev.Members = slices.Delete(prev.Members, 0, 1) // the first joined since
	}
	if r.IntN(2) == 0 {
		prev.Members = append(prev.Members, Member{ID: "gone", Topics: slices.Clone(g.spec.Members[0].Topics)})
	}
	res, err := Uniform{}.Assign(prev, g.topics)
	if err != nil {
		panic(err)
	}
	for i := range g.spec.Members {
		g.spec.Members[i].Current, _ = res.Member(g.spec.Members[i].ID)
	}
}

// shuffled is spec with its members, their topics and their current
// partitions in a random order.
func shuffled(r *rand.Rand, spec GroupSpec) GroupSpec {
	out := GroupSpec{Members: slices.Clone(spec.Members)}
	r.Shuffle(len(out.Members), func(i, j int) { out.Members[i], out.Members[j] = out.Members[j], out.Members[i] })
	for i := range out.Members {
		m := &out.Members[i]
		m.Topics = slices.Clone(m.Topics)
		r.Shuffle(len(m.Topics), func(i, j int) { m.Topics[i], m.Topics[j] = m.Topics[j], m.Topics[i] })
		cur := slices.Clone(m.Current)
		for k := range cur {
			cur[k].Partitions = slices.Clone(cur[k].Partitions)
			r.Shuffle(len(cur[k].Partitions), func(i, j int) {
				cur[k].Partitions[i], cur[k].Partitions[j] = cur[k].Partitions[j], cur[k].Partitions[i]
			})
		}
		r.Shuffle(len(cur), func(i, j int) { cur[i], cur[j] = cur[j], cur[i] })
		m.Current = cur
	}
	return out
}

func forEachSeed(t *testing.T, f func(t *testing.T, r *rand.Rand, g randomGroup)) {
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		g := newRandomGroup(r)
		f(t, r, g)
		if t.Failed() {
			t.Fatalf("seed %d: members %+v topics %v", seed, g.spec.Members, g.topics)
		}
	}
}

func TestUniformProperties(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand, g randomGroup) {
		got, err := Uniform{}.Assign(g.spec, g.topics)
		if err != nil {
			t.Fatalf("Assign: %v", err)
		}
		for _, bad := range checkValid(g.spec, g.topics, got) {
			t.Error(bad)
		}
		if g.homogeneous {
			for _, bad := range checkHomogeneousBalance(got) {
				t.Error(bad)
			}
		}
		for _, bad := range checkHeterogeneousBalance(g.spec, got) {
			t.Error(bad)
		}
		if again, _ := (Uniform{}).Assign(shuffled(r, g.spec), g.topics); format(again) != format(got) {
			t.Errorf("the members' order changed the result:\n%s\n%s", format(got), format(again))
		}
		// A result fed back as the current assignment stands: nothing moves
		// when nothing changed.
		if again, _ := (Uniform{}).Assign(asCurrent(g.spec, got), g.topics); format(again) != format(got) {
			t.Errorf("a second round moved partitions:\n%s\n%s", format(got), format(again))
		}
	})
}

// TestUniformMovesOnlyWhatANewMemberNeeds adds a member to a balanced group
// of one subscription: every old member keeps a subset of what it had, and
// the newcomer gets exactly what they gave up. Removing a member then lets
// every other keep all it had.
func TestUniformMovesOnlyWhatANewMemberNeeds(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand, g randomGroup) {
		if !g.homogeneous {
			return
		}
		for i := range g.spec.Members {
			g.spec.Members[i].Current = nil
		}
		before, err := Uniform{}.Assign(g.spec, g.topics)
		if err != nil {
			t.Fatal(err)
		}
		joined := asCurrent(g.spec, before)
		// Its id sorts anywhere among the others'.
		newcomer := fmt.Sprintf("m%02d-new", r.IntN(100)*100)
		joined.Members = append(joined.Members, Member{ID: newcomer, Topics: slices.Clone(g.spec.Members[0].Topics)})
		after, _ := Uniform{}.Assign(joined, g.topics)
		given := 0
		for _, m := range before.Members {
			was, _ := before.Member(m.MemberID)
			now, _ := after.Member(m.MemberID)
			if !subset(now, was) {
				t.Errorf("%s went from %v to %v, taking partitions it did not have", m.MemberID, was, now)
			}
			given += was.Count() - now.Count()
		}
		if got, _ := after.Member(newcomer); got.Count() != given {
			t.Errorf("the newcomer got %d partitions, the others gave up %d", got.Count(), given)
		}
		// The fewest any balanced assignment can move: each old member above
		// the new minimum quota gives up its surplus, except that as many of
		// them as there are larger quotas keep one partition more.
		total := 0
		for _, m := range before.Members {
			total += m.Partitions.Count()
		}
		quotaMin, extra := total/len(joined.Members), total%len(joined.Members)
		fewest, above := 0, 0
		for _, m := range before.Members {
			if c := m.Partitions.Count(); c > quotaMin {
				fewest += c - quotaMin
				above++
			}
		}
		fewest -= min(extra, above)
		if given != fewest {
			t.Errorf("%d partitions moved to the newcomer; %d would do", given, fewest)
		}
		left := asCurrent(joined, after)
		gone := r.IntN(len(left.Members))
		leaver := left.Members[gone].ID
		left.Members = slices.Delete(left.Members, gone, gone+1)
		final, _ := Uniform{}.Assign(left, g.topics)
		for _, m := range left.Members {
			was, _ := after.Member(m.ID)
			now, _ := final.Member(m.ID)
			if !subset(was, now) {
				t.Errorf("after %s left, %s went from %v to %v, losing partitions", leaver, m.ID, was, now)
			}
		}
	})
}

func subset(a, b Assignment) bool {
	in := owned(b)
	for k := range owned(a) {
		if !in[k] {
			return false
		}
	}
	return true
}

func TestRangeProperties(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand, g randomGroup) {
		got, err := Range{}.Assign(g.spec, g.topics)
		if err != nil {
			t.Fatalf("Assign: %v", err)
		}
		for _, bad := range checkValid(g.spec, g.topics, got) {
			t.Error(bad)
		}
		for _, bad := range checkRanges(g.spec, g.topics, got) {
			t.Error(bad)
		}
		// Neither the order of the spec nor the current assignment counts.
		noCurrent := GroupSpec{Members: slices.Clone(g.spec.Members)}
		for i := range noCurrent.Members {
			noCurrent.Members[i].Current = nil
		}
		if again, _ := (Range{}).Assign(shuffled(r, noCurrent), g.topics); format(again) != format(got) {
			t.Errorf("order or current assignment changed the result:\n%s\n%s", format(got), format(again))
		}
	})
}

// checkRanges: for each topic, its subscribers in Kafka's order (static by
// instance id, then dynamic by member id; the random ids are ASCII, where
// Go's order is Java's) hold consecutive ranges from partition 0, each one
// no larger than the one before and at most one smaller than the first.
// With one subscription for all and equal partition counts, every member
// holds the same partition numbers of every topic.
func checkRanges(spec GroupSpec, topics TopicCounts, got GroupAssignment) []string {
	members := slices.Clone(spec.Members)
	slices.SortFunc(members, func(a, b Member) int {
		dynamic := func(m Member) int { return min(len(m.InstanceID), 1) ^ 1 }
		if c := cmp.Compare(dynamic(a), dynamic(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var bad []string
	for _, topic := range sortedTopics(topics) {
		next, first, prev := int32(0), -1, -1
		for _, m := range members {
			if !slices.Contains(m.Topics, topic) {
				continue
			}
			a, _ := got.Member(m.ID)
			var mine []int32
			for _, tp := range a {
				if tp.Topic == topic {
					mine = tp.Partitions
				}
			}
			for i, p := range mine {
				if p != next+int32(i) {
					bad = append(bad, fmt.Sprintf("topic %s: %s holds %v, not a range from %d", topic, m.ID, mine, next))
					break
				}
			}
			next += int32(len(mine))
			if first < 0 {
				first = len(mine)
			}
			if (prev >= 0 && len(mine) > prev) || first-len(mine) > 1 {
				bad = append(bad, fmt.Sprintf("topic %s: %s's range of %d after one of %d (first %d)", topic, m.ID, len(mine), prev, first))
			}
			prev = len(mine)
		}
	}
	return append(bad, checkCoPartitioned(spec, topics, got)...)
}

func checkCoPartitioned(spec GroupSpec, topics TopicCounts, got GroupAssignment) []string {
	sub := dedupTopics(spec.Members[0].Topics)
	for _, m := range spec.Members {
		if !slices.Equal(dedupTopics(m.Topics), sub) {
			return nil
		}
	}
	for _, id := range sub {
		if topics[id] != topics[sub[0]] {
			return nil
		}
	}
	var bad []string
	for _, m := range got.Members {
		for _, tp := range m.Partitions {
			if !slices.Equal(tp.Partitions, m.Partitions[0].Partitions) || len(m.Partitions) != len(sub) {
				bad = append(bad, fmt.Sprintf("%s is not co-partitioned: %v", m.MemberID, m.Partitions))
				break
			}
		}
	}
	return bad
}

// TestCheckersCatchBrokenAssignments breaks a good assignment in each way
// the checkers look for; each must be reported, or the property tests
// above could not fail.
func TestCheckersCatchBrokenAssignments(t *testing.T) {
	topics := TopicCounts{t1: 4, t2: 2}
	spec := GroupSpec{Members: []Member{
		{ID: "a", Topics: []TopicID{t1}},
		{ID: "b", Topics: []TopicID{t1, t2}},
		{ID: "c", Topics: []TopicID{t1, t2}},
	}}
	good := GroupAssignment{Members: []MemberAssignment{
		{MemberID: "a", Partitions: tps(t1, ps(0, 1))},
		{MemberID: "b", Partitions: tps(t1, ps(2), t2, ps(0))},
		{MemberID: "c", Partitions: tps(t1, ps(3), t2, ps(1))},
	}}
	if bad := append(checkValid(spec, topics, good), checkHeterogeneousBalance(spec, good)...); len(bad) > 0 {
		t.Fatalf("the good assignment is reported: %v", bad)
	}
	broken := map[string]GroupAssignment{
		"a partition unowned": {Members: []MemberAssignment{
			{MemberID: "a", Partitions: tps(t1, ps(0, 1))},
			{MemberID: "b", Partitions: tps(t1, ps(2), t2, ps(0))},
			{MemberID: "c", Partitions: tps(t2, ps(1))},
		}},
		"a partition owned twice": {Members: []MemberAssignment{
			{MemberID: "a", Partitions: tps(t1, ps(0, 1))},
			{MemberID: "b", Partitions: tps(t1, ps(1, 2), t2, ps(0))},
			{MemberID: "c", Partitions: tps(t1, ps(3), t2, ps(1))},
		}},
		"an unsubscribed topic": {Members: []MemberAssignment{
			{MemberID: "a", Partitions: tps(t1, ps(0, 1), t2, ps(0))},
			{MemberID: "b", Partitions: tps(t1, ps(2))},
			{MemberID: "c", Partitions: tps(t1, ps(3), t2, ps(1))},
		}},
		"unbalanced": {Members: []MemberAssignment{
			{MemberID: "a", Partitions: tps(t1, ps(0))},
			{MemberID: "b", Partitions: tps(t1, ps(1, 2), t2, ps(0))},
			{MemberID: "c", Partitions: tps(t1, ps(3), t2, ps(1))},
		}},
		"a member missing": {Members: []MemberAssignment{
			{MemberID: "a", Partitions: tps(t1, ps(0, 1))},
			{MemberID: "b", Partitions: tps(t1, ps(2, 3), t2, ps(0, 1))},
		}},
		"partitions out of order": {Members: []MemberAssignment{
			{MemberID: "a", Partitions: tps(t1, ps(1, 0))},
			{MemberID: "b", Partitions: tps(t1, ps(2), t2, ps(0))},
			{MemberID: "c", Partitions: tps(t1, ps(3), t2, ps(1))},
		}},
	}
	for name, g := range broken {
		if bad := append(checkValid(spec, topics, g), checkHeterogeneousBalance(spec, g)...); len(bad) == 0 {
			t.Errorf("%s: not reported", name)
		}
	}
	notRanges := GroupAssignment{Members: []MemberAssignment{
		{MemberID: "a", Partitions: tps(t1, ps(0, 2))},
		{MemberID: "b", Partitions: tps(t1, ps(1), t2, ps(0))},
		{MemberID: "c", Partitions: tps(t1, ps(3), t2, ps(1))},
	}}
	if len(checkRanges(spec, topics, notRanges)) == 0 {
		t.Error("split ranges: not reported")
	}
}
