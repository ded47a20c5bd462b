package assign

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestTranscripts runs testdata/*.txt: rebalances of one group as a
// script. Every assign feeds its result back as the members' current
// assignment, as a coordinator does with a target it reached. go test
// -rewrite regenerates the expected output.
//
// Commands:
//
//	topics t1=3 t2=6                     partition counts (topic tN is id N)
//	join id=a topics=(t1,t2) [instance=i1]  a member joins or changes its subscription
//	leave id=a
//	assign uniform|range                 prints each member's partitions, then
//	                                     +gained and -lost against its current ones
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &transcript{topics: TopicCounts{}}
		datadriven.RunTest(t, path, h.run)
	})
}

type transcript struct {
	topics  TopicCounts
	members []Member
}

func (h *transcript) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "topics":
		for _, arg := range td.CmdArgs {
			n, err := strconv.Atoi(arg.Vals[0])
			if err != nil {
				t.Fatalf("%s: %v", td.Pos, err)
			}
			h.topics[parseTopic(t, arg.Key)] = int32(n)
		}
		return ""
	case "join":
		h.join(t, td)
		return ""
	case "leave":
		var id string
		td.ScanArgs(t, "id", &id)
		h.members = slices.DeleteFunc(h.members, func(m Member) bool { return m.ID == id })
		return ""
	case "assign":
		a, ok := ByName(td.CmdArgs[0].Key)
		if !ok {
			t.Fatalf("%s: no assignor %q", td.Pos, td.CmdArgs[0].Key)
		}
		return h.assign(t, a)
	}
	t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	return ""
}

func (h *transcript) join(t *testing.T, td *datadriven.TestData) {
	var m Member
	td.ScanArgs(t, "id", &m.ID)
	td.MaybeScanArgs(t, "instance", &m.InstanceID)
	for _, arg := range td.CmdArgs {
		if arg.Key == "topics" {
			for _, v := range arg.Vals {
				m.Topics = append(m.Topics, parseTopic(t, v))
			}
		}
	}
	for i := range h.members {
		if h.members[i].ID == m.ID {
			m.Current = h.members[i].Current
			h.members[i] = m
			return
		}
	}
	h.members = append(h.members, m)
}

func (h *transcript) assign(t *testing.T, a Assignor) string {
	spec := GroupSpec{Members: h.members}
	got, err := a.Assign(spec, h.topics)
	if err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	for _, bad := range checkValid(spec, h.topics, got) {
		t.Errorf("invalid: %s", bad)
	}
	var b strings.Builder
	for _, m := range got.Members {
		fmt.Fprintf(&b, "%s:%s", m.MemberID, formatAssignment(m.Partitions))
		i := slices.IndexFunc(h.members, func(x Member) bool { return x.ID == m.MemberID })
		was := partitionSet(h.members[i].Current)
		now := partitionSet(m.Partitions)
		gained, lost := diff(now, was), diff(was, now)
		if len(gained)+len(lost) > 0 {
			b.WriteString("  ")
		}
		for _, p := range gained {
			fmt.Fprintf(&b, " +%s", p)
		}
		for _, p := range lost {
			fmt.Fprintf(&b, " -%s", p)
		}
		b.WriteString("\n")
		h.members[i].Current = m.Partitions
	}
	return b.String()
}

func parseTopic(t *testing.T, s string) TopicID {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "t"))
	if err != nil || !strings.HasPrefix(s, "t") || n < 0 || n > 255 {
		t.Fatalf("topic %q: want t0 to t255", s)
	}
	return topicN(byte(n))
}

func formatAssignment(a Assignment) string {
	var b strings.Builder
	for _, tp := range a {
		fmt.Fprintf(&b, " t%d%v", tp.Topic[15], tp.Partitions)
	}
	return b.String()
}

// partitionSet is an assignment as (topic number, partition) pairs.
func partitionSet(a Assignment) map[[2]int32]bool {
	out := map[[2]int32]bool{}
	for _, tp := range a {
		for _, p := range tp.Partitions {
			out[[2]int32{int32(tp.Topic[15]), p}] = true
		}
	}
	return out
}

// diff lists the partitions of a missing from b, as tN/P, in topic and
// partition order.
func diff(a, b map[[2]int32]bool) []string {
	var keys [][2]int32
	for k := range a {
		if !b[k] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y [2]int32) int { return slices.Compare(x[:], y[:]) })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("t%d/%d", k[0], k[1])
	}
	return out
}
