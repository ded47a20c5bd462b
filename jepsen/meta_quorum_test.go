package jepsen

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// requireChecks checks that vs holds exactly the checks named, in order,
// and that each message mentions what it must.
func requireChecks(t *testing.T, vs []MetaViolation, want []string, mentions ...string) {
	t.Helper()
	var got []string
	var all strings.Builder
	for _, v := range vs {
		got = append(got, v.Check)
		all.WriteString(v.String() + "\n")
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("violations %v, want %v:\n%s", got, want, all.String())
	}
	for _, m := range mentions {
		if !strings.Contains(all.String(), m) {
			t.Fatalf("no mention of %q:\n%s", m, all.String())
		}
	}
	if len(vs) > 0 {
		t.Log(all.String())
	}
}

func TestCheckLeaders(t *testing.T) {
	cases := []struct {
		name     string
		samples  []RaftSample
		want     []string
		mentions []string
	}{
		{"one leader per term, followers agreeing", []RaftSample{
			{Node: 1, Term: 1, Leader: NoLeader}, {Node: 2, Term: 1, Leader: NoLeader},
			{Node: 1, Term: 2, Leader: 1}, {Node: 2, Term: 2, Leader: 1}, {Node: 3, Term: 2, Leader: 1},
			{Node: 2, Term: 3, Leader: NoLeader}, {Node: 2, Term: 3, Leader: 2}, {Node: 1, Term: 3, Leader: 2},
			{Node: 3, Term: 2, Leader: 1}, // a partitioned node still in term 2
		}, nil, nil},
		{"two nodes leading one term", []RaftSample{
			{Node: 1, Term: 4, Leader: 1, Time: 10}, {Node: 2, Term: 4, Leader: 2, Time: 11}, {Node: 3, Term: 4, Leader: 2, Time: 12},
		}, []string{CheckTwoLeaders}, []string{"term 4", "node 1", "node 2"}},
		{"a follower believing in another leader", []RaftSample{
			{Node: 1, Term: 4, Leader: 1}, {Node: 3, Term: 4, Leader: 2},
		}, []string{CheckTwoLeaders}, []string{"as node 3 knew"}},
		{"two leaders in two terms each", []RaftSample{
			{Node: 1, Term: 4, Leader: 1}, {Node: 2, Term: 4, Leader: 2}, {Node: 1, Term: 5, Leader: 1}, {Node: 3, Term: 5, Leader: 3},
		}, []string{CheckTwoLeaders, CheckTwoLeaders}, []string{"term 4", "term 5"}},
		{"a term going down across a restart", []RaftSample{
			{Node: 1, Term: 7, Leader: NoLeader, Time: 3}, {Node: 1, Term: 5, Leader: NoLeader, Time: 9},
		}, []string{CheckTermBackwards}, []string{"node 1's term went from 7 (at 3) to 5 (at 9)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireChecks(t, CheckLeaders(tc.samples), tc.want, tc.mentions...)
		})
	}
}

// appliedRun returns the samples of nodes applying entries of log, each
// node up to its own length, with hashes chained as ChainHash does.
func appliedRun(log []string, lengths map[int32]int) []AppliedSample {
	var out []AppliedSample
	for _, node := range []int32{1, 2, 3} {
		n, ok := lengths[node]
		if !ok {
			continue
		}
		h := uint64(0)
		for i := range n {
			h = ChainHash(h, uint64(i+1), []byte(log[i]))
			out = append(out, AppliedSample{Node: node, Index: uint64(i + 1), Hash: h})
		}
	}
	return out
}

func TestCheckAppliedLogs(t *testing.T) {
	log := []string{"a", "b", "c", "d"}
	t.Run("prefixes of one log, nodes lagging", func(t *testing.T) {
		requireChecks(t, CheckAppliedLogs(appliedRun(log, map[int32]int{1: 4, 2: 2, 3: 0})), nil)
	})
	t.Run("a restart applies again from the start", func(t *testing.T) {
		s := appliedRun(log, map[int32]int{1: 3})
		again := appliedRun(log, map[int32]int{1: 4})
		for i := range again {
			again[i].Incarnation = 1
		}
		requireChecks(t, CheckAppliedLogs(append(s, again...)), nil)
	})
	t.Run("a different entry at one index", func(t *testing.T) {
		s := appliedRun(log, map[int32]int{1: 4, 2: 4})
		other := appliedRun([]string{"a", "b", "X", "d"}, map[int32]int{3: 4})
		requireChecks(t, CheckAppliedLogs(append(s, other...)), []string{CheckAppliedDiverged},
			"at applied index 3 node 1", "node 3")
	})
	t.Run("a node diverging from itself across a restart", func(t *testing.T) {
		s := appliedRun(log, map[int32]int{1: 4})
		other := appliedRun([]string{"a", "X"}, map[int32]int{1: 2})
		for i := range other {
			other[i].Incarnation = 1
		}
		requireChecks(t, CheckAppliedLogs(append(s, other...)), []string{CheckAppliedDiverged}, "at applied index 2 node 1 (incarnation 0")
	})
	t.Run("an applied index going down without a restart", func(t *testing.T) {
		s := appliedRun(log, map[int32]int{1: 3})
		s = append(s, s[0])
		requireChecks(t, CheckAppliedLogs(s), []string{CheckAppliedBackwards}, "up to index 3", "only up to 1")
	})
	if ChainHash(0, 1, []byte("ab")) == ChainHash(0, 2, []byte("ab")) || ChainHash(0, 1, []byte("ab")) == ChainHash(1, 1, []byte("ab")) {
		t.Fatal("ChainHash ignores its index or its previous hash")
	}
}

func image(node int32, applied uint64, topics map[string]TopicSummary) FinalImage {
	return FinalImage{Node: node, Applied: applied, Topics: topics}
}

func TestCheckConverged(t *testing.T) {
	a3 := map[string]TopicSummary{"t": {ID: tid(1), Partitions: 3}}
	none := map[string]TopicSummary{}
	cases := []struct {
		name     string
		build    func(h *MetaHistory)
		finals   []FinalImage
		want     []string
		mentions []string
	}{
		{"every node holds the acknowledged creation", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
		}, []FinalImage{image(1, 9, a3), image(2, 9, a3)}, nil, nil},
		{"a lost acknowledged creation", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
		}, []FinalImage{image(1, 9, none), image(2, 9, none)}, []string{CheckLostCreation},
			[]string{"nodes 1, 2: topic \"t\" is missing, though op 0 created it"}},
		{"a creation lost on one node", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
		}, []FinalImage{image(1, 9, a3), image(2, 8, none)}, []string{CheckNotConverged, CheckNotConverged, CheckLostCreation},
			[]string{"node 1: id 01000000, 3 partitions; node 2: no such topic", "node 1 at 9, node 2 at 8", "node 2: topic"}},
		{"a topic back after an acknowledged deletion", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
			metaDeleted(h, 2, "t")
		}, []FinalImage{image(1, 0, a3)}, []string{CheckResurrected}, []string{"op 1 deleted it (acknowledged by node 2"}},
		{"a deletion of unknown outcome either way", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
			h.Complete(h.InvokeDelete(0, 2, "t"), kerr.NotController)
		}, []FinalImage{image(1, 0, a3), image(2, 0, a3)}, nil, nil},
		{"the deletion of unknown outcome took effect", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
			h.Complete(h.InvokeDelete(0, 2, "t"), kerr.NotController)
		}, []FinalImage{image(1, 0, none)}, nil, nil},
		{"another id than the creation's", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(2))
		}, []FinalImage{image(1, 0, a3)}, []string{CheckTopicIDConflict}, []string{"has id 01000000, but op 0"}},
		{"another partition count than the creation's", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 2, tid(1))
		}, []FinalImage{image(1, 0, a3)}, []string{CheckTopicShape}, []string{"has 3 partitions, but op 0 created it with 2"}},
		{"grown by an acknowledged add", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 1, tid(1))
			metaGrown(h, 2, "t", 3)
		}, []FinalImage{image(1, 0, a3)}, nil, nil},
		{"grown by an add of unknown outcome", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 1, tid(1))
			h.Complete(h.InvokeAddPartitions(0, 2, "t", 3), kerr.NotController)
		}, []FinalImage{image(1, 0, a3)}, nil, nil},
		{"an acknowledged add lost", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 3, tid(1))
			metaGrown(h, 2, "t", 5)
		}, []FinalImage{image(1, 0, a3)}, []string{CheckTopicShape}, []string{"has 3 partitions, but op 1 grew it to 5 after op 0 created it"}},
		{"a count neither the creation nor an add asked for", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 1, tid(1))
			metaGrown(h, 2, "t", 2)
		}, []FinalImage{image(1, 0, a3)}, []string{CheckTopicShape}, []string{"no add of partitions after it asked for 3"}},
		{"an add of an earlier incarnation does not count", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 1, tid(2))
			metaGrown(h, 2, "t", 3)
			metaDeleted(h, 2, "t")
			metaCreated(h, 3, "t", 2, tid(1))
		}, []FinalImage{image(1, 0, a3)}, []string{CheckTopicShape}, nil},
		{"a creation of unknown outcome with its id unknown", func(h *MetaHistory) {
			h.Complete(h.InvokeCreate(0, 1, "t", 3), kerr.RequestTimedOut)
		}, []FinalImage{image(1, 0, a3)}, nil, nil},
		{"a topic nobody created", func(h *MetaHistory) {}, []FinalImage{image(1, 0, a3)}, []string{CheckPhantomTopic}, []string{"no creation of it"}},
		{"recreated after a deletion", func(h *MetaHistory) {
			metaCreated(h, 1, "t", 1, tid(2))
			metaDeleted(h, 2, "t")
			metaCreated(h, 3, "t", 3, tid(1))
		}, []FinalImage{image(1, 0, a3), image(2, 0, a3)}, nil, nil},
		{"an existing topic kept", func(h *MetaHistory) {
			h.Existing("t", tid(1), 3)
		}, []FinalImage{image(1, 0, a3)}, nil, nil},
		{"an existing topic lost", func(h *MetaHistory) {
			h.Existing("t", tid(1), 3)
		}, []FinalImage{image(1, 0, none)}, []string{CheckLostCreation}, []string{"existed before the history"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := NewMetaHistory()
			tc.build(h)
			vs, err := CheckConverged(h.Events(), tc.finals)
			if err != nil {
				t.Fatal(err)
			}
			requireChecks(t, vs, tc.want, tc.mentions...)
			// The model, given the same images as final describes, agrees.
			for _, f := range tc.finals {
				h.FinalImage(9, f)
			}
			if r := CheckMeta(h, metaConfig()); r.OK() != (len(tc.want) == 0) {
				t.Fatalf("the model says %s", r)
			}
		})
	}
	if _, err := CheckConverged([]MetaEvent{{Time: 1, Kind: "maybe"}}, nil); err == nil {
		t.Fatal("a malformed history was judged")
	}
}

func TestSummarizeImage(t *testing.T) {
	im := raftmeta.NewImage()
	if err := im.Apply(raftmeta.CreateTopicRecord{Topic: raftmeta.Topic{Name: "t", ID: tid(1), Configs: map[string]string{"retention.ms": "60000"}, Partitions: []raftmeta.Partition{
		{Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, {Index: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}}); err != nil {
		t.Fatal(err)
	}
	f := SummarizeImage(2, im)
	want := TopicSummary{ID: tid(1), Partitions: 2, Configs: map[string]string{"retention.ms": "60000"}}
	if f.Node != 2 || f.Applied != 1 || len(f.Topics) != 1 || !reflect.DeepEqual(f.Topics["t"], want) {
		t.Fatalf("summary %+v", f)
	}
}
