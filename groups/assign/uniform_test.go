package assign

import (
	"errors"
	"testing"
)

var (
	t1 = topicN(1)
	t2 = topicN(2)
	t3 = topicN(3)
)

type assignCase struct {
	name   string
	topics TopicCounts
	spec   []Member
	want   string // format of the result
}

func runAssignCases(t *testing.T, a Assignor, cases []assignCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := GroupSpec{Members: c.spec}
			got, err := a.Assign(spec, c.topics)
			if err != nil {
				t.Fatalf("Assign: %v", err)
			}
			if s := format(got); s != c.want {
				t.Errorf("got  %s\nwant %s", s, c.want)
			}
			for _, bad := range checkValid(spec, c.topics, got) {
				t.Error(bad)
			}
		})
	}
}

func TestUniformAssignsAsSpecified(t *testing.T) {
	runAssignCases(t, Uniform{}, []assignCase{
		{name: "no members", topics: TopicCounts{t1: 3}, want: ""},
		{
			name:   "no subscriptions",
			topics: TopicCounts{t1: 3},
			spec:   []Member{{ID: "a"}, {ID: "b"}},
			want:   "a:; b:",
		},
		{
			name:   "one member takes everything",
			topics: TopicCounts{t1: 3, t2: 2},
			spec:   []Member{{ID: "a", Topics: []TopicID{t2, t1}}},
			want:   "a: t1[0 1 2] t2[0 1]",
		},
		{
			// 7 over 3: quotas 3, 2, 2; runs in member order.
			name:   "fresh homogeneous group",
			topics: TopicCounts{t1: 7},
			spec:   []Member{{ID: "c", Topics: []TopicID{t1}}, {ID: "a", Topics: []TopicID{t1}}, {ID: "b", Topics: []TopicID{t1}}},
			want:   "a: t1[0 1 2]; b: t1[3 4]; c: t1[5 6]",
		},
		{
			name:   "more members than partitions",
			topics: TopicCounts{t1: 2},
			spec:   []Member{{ID: "a", Topics: []TopicID{t1}}, {ID: "b", Topics: []TopicID{t1}}, {ID: "c", Topics: []TopicID{t1}}},
			want:   "a: t1[0]; b: t1[1]; c:",
		},
		{
			// a keeps 3 of its 4, b 2 of its 3; c gets what they gave up.
			name:   "a member joins",
			topics: TopicCounts{t1: 7},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}, Current: tps(t1, ps(0, 1, 2, 3))},
				{ID: "b", Topics: []TopicID{t1}, Current: tps(t1, ps(4, 5, 6))},
				{ID: "c", Topics: []TopicID{t1}},
			},
			want: "a: t1[0 1 2]; b: t1[4 5]; c: t1[3 6]",
		},
		{
			// Kafka gives the one larger quota to a, the first member, so b
			// would lose partition 2 and a gain it; here b, which holds two,
			// keeps the larger quota and nothing moves.
			name:   "the larger quota goes to the member holding more",
			topics: TopicCounts{t1: 3},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}, Current: tps(t1, ps(0))},
				{ID: "b", Topics: []TopicID{t1}, Current: tps(t1, ps(2, 1))},
			},
			want: "a: t1[0]; b: t1[1 2]",
		},
		{
			name:   "a member leaves: the others only gain",
			topics: TopicCounts{t1: 6},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}, Current: tps(t1, ps(0, 1))},
				{ID: "c", Topics: []TopicID{t1}, Current: tps(t1, ps(4, 5))},
			},
			want: "a: t1[0 1 2]; c: t1[3 4 5]",
		},
		{
			// Partitions of an unsubscribed topic, out of range, negative,
			// repeated, or held by an earlier member are dropped.
			name:   "a current assignment that cannot stand",
			topics: TopicCounts{t1: 4, t2: 2},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}, Current: tps(t2, ps(0, 1), t1, ps(0, 0, 9, -1))},
				{ID: "b", Topics: []TopicID{t1}, Current: tps(t1, ps(0, 1), topicN(9), ps(0))},
			},
			want: "a: t1[0 2]; b: t1[1 3]",
		},
		{
			// t2 (3 partitions, 1 subscriber) goes first, all to b; t1's
			// partitions then go to the least loaded, a.
			name:   "fresh heterogeneous group",
			topics: TopicCounts{t1: 3, t2: 3},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}},
				{ID: "b", Topics: []TopicID{t1, t2}},
			},
			want: "a: t1[0 1 2]; b: t2[0 1 2]",
		},
		{
			// b keeps all six; balancing t1 moves its highest partitions to
			// a until the loads are equal.
			name:   "heterogeneous balancing moves the fewest partitions",
			topics: TopicCounts{t1: 3, t2: 3},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}},
				{ID: "b", Topics: []TopicID{t1, t2}, Current: tps(t1, ps(0, 1, 2), t2, ps(0, 1, 2))},
			},
			want: "a: t1[0 1 2]; b: t2[0 1 2]",
		},
		{
			// b unsubscribes from t1: its t1 partitions go to a and c.
			name:   "a subscription shrinks",
			topics: TopicCounts{t1: 4, t2: 2},
			spec: []Member{
				{ID: "a", Topics: []TopicID{t1}, Current: tps(t1, ps(0))},
				{ID: "b", Topics: []TopicID{t2}, Current: tps(t1, ps(1, 2), t2, ps(0, 1))},
				{ID: "c", Topics: []TopicID{t1, t2}, Current: tps(t1, ps(3))},
			},
			want: "a: t1[0 1]; b: t2[0 1]; c: t1[2 3]",
		},
		{
			name:   "a topic with no partitions",
			topics: TopicCounts{t1: 0, t2: 1},
			spec:   []Member{{ID: "a", Topics: []TopicID{t1, t2}}, {ID: "b", Topics: []TopicID{t1}}},
			want:   "a: t2[0]; b:",
		},
	})
}

func TestAssignorsRefuseBadSpecs(t *testing.T) {
	for _, a := range All() {
		t.Run(a.Name(), func(t *testing.T) {
			_, err := a.Assign(GroupSpec{Members: []Member{{ID: "a", Topics: []TopicID{t1, t3}}}}, TopicCounts{t1: 1})
			var unknown *UnknownTopicError
			if !errors.As(err, &unknown) || unknown.Topic != t3 || unknown.Member != "a" {
				t.Errorf("unknown topic: err = %v, want an UnknownTopicError for %s and member a", err, t3)
			}
			_, err = a.Assign(GroupSpec{Members: []Member{{ID: "a"}, {ID: "a"}}}, TopicCounts{})
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("duplicate member id: err = %v, want ErrInvalidSpec", err)
			}
			_, err = a.Assign(GroupSpec{Members: []Member{{ID: ""}}}, TopicCounts{})
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("empty member id: err = %v, want ErrInvalidSpec", err)
			}
		})
	}
}

func TestAssignorNames(t *testing.T) {
	all := All()
	if len(all) != 2 || all[0].Name() != "uniform" || all[1].Name() != "range" {
		t.Fatalf("All() = %v, want uniform then range (Kafka's default group.consumer.assignors)", all)
	}
	for _, name := range []string{"uniform", "range"} {
		if a, ok := ByName(name); !ok || a.Name() != name {
			t.Errorf("ByName(%q) = %v, %v", name, a, ok)
		}
	}
	if _, ok := ByName("sticky"); ok {
		t.Error("ByName(sticky) found an assignor")
	}
}

func TestTopicIDCompareIsKafkasSignedOrder(t *testing.T) {
	high := TopicID{0: 0x80} // most significant half negative as int64
	low := TopicID{15: 1}
	if high.Compare(low) >= 0 {
		t.Errorf("%s should order before %s: Kafka compares the halves as signed longs", high, low)
	}
	lowHalf := TopicID{8: 0x80}
	if lowHalf.Compare(TopicID{}) >= 0 {
		t.Errorf("a negative least significant half should order before zero")
	}
	if low.Compare(low) != 0 {
		t.Error("an id does not equal itself")
	}
}

// TestResultListsAreIndependent: the result's lists share backing arrays,
// so appending to one must not write over the next.
func TestResultListsAreIndependent(t *testing.T) {
	for _, a := range All() {
		got, err := a.Assign(GroupSpec{Members: []Member{{ID: "a", Topics: []TopicID{t1, t2}}, {ID: "b", Topics: []TopicID{t1, t2}}}}, TopicCounts{t1: 4, t2: 4})
		if err != nil {
			t.Fatal(err)
		}
		before := format(got)
		for _, m := range got.Members {
			_ = append(m.Partitions, TopicPartitions{Topic: t3})
			for _, tp := range m.Partitions {
				_ = append(tp.Partitions, 99)
			}
		}
		if after := format(got); after != before {
			t.Errorf("%s: appending to the result changed it:\n%s\n%s", a.Name(), before, after)
		}
	}
}
