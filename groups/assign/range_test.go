package assign

import (
	"slices"
	"testing"
)

func TestRangeAssignsAsSpecified(t *testing.T) {
	runAssignCases(t, Range{}, []assignCase{
		{name: "no members", topics: TopicCounts{t1: 3}, want: ""},
		{
			// The example of Kafka's RangeAssignor documentation: co-partitioned.
			name:   "co-partitioned topics",
			topics: TopicCounts{t1: 3, t2: 3},
			spec:   []Member{{ID: "M1", Topics: []TopicID{t1, t2}}, {ID: "M0", Topics: []TopicID{t2, t1}}},
			want:   "M0: t1[0 1] t2[0 1]; M1: t1[2] t2[2]",
		},
		{
			name:   "7 over 3",
			topics: TopicCounts{t1: 7},
			spec:   []Member{{ID: "a", Topics: []TopicID{t1}}, {ID: "b", Topics: []TopicID{t1}}, {ID: "c", Topics: []TopicID{t1}}},
			want:   "a: t1[0 1 2]; b: t1[3 4]; c: t1[5 6]",
		},
		{
			name:   "more members than partitions",
			topics: TopicCounts{t1: 2},
			spec:   []Member{{ID: "a", Topics: []TopicID{t1}}, {ID: "b", Topics: []TopicID{t1}}, {ID: "c", Topics: []TopicID{t1}}},
			want:   "a: t1[0]; b: t1[1]; c:",
		},
		{
			// Each topic over its own subscribers, in member order.
			name:   "heterogeneous subscriptions",
			topics: TopicCounts{t1: 4, t2: 3},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}},
				{ID: "b", Topics: []TopicID{t1, t2}},
				{ID: "c", Topics: []TopicID{t2}},
			},
			want: "a: t1[0 1]; b: t1[2 3] t2[0 1]; c: t2[2]",
		},
		{
			// Static members come first, by instance id; then dynamic ones by
			// member id. The current assignment plays no part.
			name:   "static members first, by instance id",
			topics: TopicCounts{t1: 4},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}, Current: tps(t1, ps(0, 1))},
				{ID: "z", InstanceID: "i2", Topics: []TopicID{t1}},
				{ID: "y", InstanceID: "i1", Topics: []TopicID{t1}},
				{ID: "b", Topics: []TopicID{t1}},
			},
			want: "a: t1[2]; b: t1[3]; y: t1[0]; z: t1[1]",
		},
	})
}

// TestRangeKeepsStaticMembersRangesAcrossNewMemberIDs is the stickiness
// Kafka's RangeAssignor documents: after a rolling bounce gives every static
// member a new member id, each keeps its ranges.
func TestRangeKeepsStaticMembersRangesAcrossNewMemberIDs(t *testing.T) {
	topics := TopicCounts{t1: 3, t2: 3}
	before := GroupSpec{Members: []Member{
		{ID: "M0", InstanceID: "I0", Topics: []TopicID{t1, t2}},
		{ID: "M1", InstanceID: "I1", Topics: []TopicID{t1, t2}},
	}}
	after := GroupSpec{Members: []Member{
		{ID: "M3", InstanceID: "I0", Topics: []TopicID{t1, t2}},
		{ID: "M2", InstanceID: "I1", Topics: []TopicID{t1, t2}},
	}}
	a, _ := Range{}.Assign(before, topics)
	b, _ := Range{}.Assign(after, topics)
	for _, pair := range [][2]string{{"M0", "M3"}, {"M1", "M2"}} {
		x, _ := a.Member(pair[0])
		y, _ := b.Member(pair[1])
		if format(GroupAssignment{Members: []MemberAssignment{{Partitions: x}}}) != format(GroupAssignment{Members: []MemberAssignment{{Partitions: y}}}) {
			t.Errorf("%s (was %s) got %v, want %v", pair[1], pair[0], y, x)
		}
	}
	// Without instance ids the order is the member ids', so the same bounce
	// swaps the ranges: the test above would fail.
	for i := range after.Members {
		after.Members[i].InstanceID = ""
	}
	c, _ := Range{}.Assign(after, topics)
	if x, _ := c.Member("M3"); x.Count() != 2 {
		t.Errorf("dynamic M3 got %v; expected the smaller range, after M2", x)
	}
}

// TestRangeOrdersStringsAsJava: U+1F600 is D83D DE00 in UTF-16, below
// U+FFFD, so Java sorts it first; Go's byte order puts it last.
func TestRangeOrdersStringsAsJava(t *testing.T) {
	emoji, replacement := "\U0001F600", "\uFFFD"
	if javaCompare(emoji, replacement) >= 0 {
		t.Fatalf("javaCompare(%q, %q) >= 0", emoji, replacement)
	}
	if emoji < replacement {
		t.Fatal("the case does not tell Java's order from Go's")
	}
	got, err := Range{}.Assign(GroupSpec{Members: []Member{
		{ID: replacement, Topics: []TopicID{t1}},
		{ID: emoji, Topics: []TopicID{t1}},
	}}, TopicCounts{t1: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := got.Member(emoji); !slices.Equal(a[0].Partitions, []int32{0, 1}) {
		t.Errorf("%q got %v, want the first range [0 1]", emoji, a)
	}
}
