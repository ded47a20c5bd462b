package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/raftmeta"
)

// Quorum safety and convergence, judged from what the simulator (or a
// real-process runner reading the nodes' state) observes: plain data in,
// violations out, so the recorder only records.
//
//   - CheckLeaders: at most one raft leader per term, and no node's term
//     going down, from samples of each node's (term, leader it knows of).
//   - CheckAppliedLogs: the applied logs of all nodes are prefixes of one
//     another, from samples of each node's (applied index, running hash).
//   - CheckConverged: at the end of the liveness phase, every node that is
//     up holds the same image, and that image reflects every acknowledged
//     change of the metadata history.

// NoLeader is the leader of a RaftSample whose node knows of none.
const NoLeader int32 = -1

// RaftSample is what one node's raft state said at one moment: its term
// and the leader it knows of in that term (itself when it leads). Record
// one whenever either changes, after the Ready that carried the change
// has been persisted (raft's HardState.Term and SoftState.Lead), so that
// a crash cannot take back a term the sample showed. Node ids are Kafka's
// node.id (raft's ids are not 0; map them back).
type RaftSample struct {
	Node   int32
	Term   uint64
	Leader int32
	// Time is when the sample was taken, on any clock the recorder likes
	// (the simulator's virtual nanoseconds): only quoted in messages.
	Time int64
}

// CheckLeaders judges raft samples, in the order they were taken: no two
// nodes are known as leader of one term (not by themselves, not by their
// followers: etcd raft learns a term's leader only from that leader's
// messages), and no node's term goes down, across its restarts too (the
// term is persisted before it is acted on).
func CheckLeaders(samples []RaftSample) []MetaViolation {
	var vs []MetaViolation
	leaders := make(map[uint64]RaftSample) // term -> the first sample naming a leader
	reported := make(map[uint64]bool)
	last := make(map[int32]RaftSample)
	for _, s := range samples {
		if prev, ok := last[s.Node]; ok && s.Term < prev.Term {
			vs = append(vs, MetaViolation{Check: CheckTermBackwards,
				Message: fmt.Sprintf("node %d's term went from %d (at %d) to %d (at %d)", s.Node, prev.Term, prev.Time, s.Term, s.Time)})
		}
		last[s.Node] = s
		if s.Leader == NoLeader {
			continue
		}
		first, ok := leaders[s.Term]
		switch {
		case !ok:
			leaders[s.Term] = s
		case first.Leader != s.Leader && !reported[s.Term]:
			reported[s.Term] = true
			vs = append(vs, MetaViolation{Check: CheckTwoLeaders,
				Message: fmt.Sprintf("term %d has two leaders: node %d (as node %d knew at %d) and node %d (as node %d knew at %d)",
					s.Term, first.Leader, first.Node, first.Time, s.Leader, s.Node, s.Time)})
		}
	}
	return vs
}

// AppliedSample is one node's applied position at one moment: the index
// of the last entry it applied to its image and a digest of everything
// applied up to there. Every node must compute the digest alike: a running
// hash of the applied entries (ChainHash, folding each entry's index and
// data in as it is applied), or a digest of the image, a pure function of
// the applied prefix. Incarnation counts the node's restarts: after one,
// a node applies again from its snapshot or the start of its log, so its
// index may go down once.
type AppliedSample struct {
	Node        int32
	Incarnation int
	Index       uint64
	Hash        uint64
	// Time is when the sample was taken (see RaftSample.Time).
	Time int64
}

// ChainHash folds one applied entry into a node's running hash: start
// from 0 and call it with every entry applied, in order, its raft index
// and its data. Two nodes agree on the hash at an index if and only if
// (but for a 2^-64 chance) they applied the same entries up to it.
func ChainHash(prev, index uint64, data []byte) uint64 {
	h := uint64(14695981039346656037) // FNV-1a over the data
	for _, c := range data {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return mix(mix(prev^0x9e3779b97f4a7c15) ^ mix(index) ^ h)
}

// CheckAppliedLogs judges applied samples, in the order they were taken:
// all the nodes' applied logs are prefixes of one another, so any two
// samples of one index carry one hash, whichever nodes and incarnations
// took them; and within one incarnation of a node the applied index never
// goes down. A divergence is reported once per pair of nodes, at the
// first index seen to differ (every later index differs too).
func CheckAppliedLogs(samples []AppliedSample) []MetaViolation {
	var vs []MetaViolation
	byIndex := make(map[uint64]AppliedSample) // index -> the first sample of it
	type pair struct{ a, b int32 }
	diverged := make(map[pair]bool)
	type life struct {
		node        int32
		incarnation int
	}
	last := make(map[life]AppliedSample)
	backwards := make(map[life]bool)
	for _, s := range samples {
		l := life{s.Node, s.Incarnation}
		if prev, ok := last[l]; ok && s.Index < prev.Index && !backwards[l] {
			backwards[l] = true
			vs = append(vs, MetaViolation{Check: CheckAppliedBackwards,
				Message: fmt.Sprintf("node %d (incarnation %d) had applied up to index %d (at %d), then only up to %d (at %d), without a restart",
					s.Node, s.Incarnation, prev.Index, prev.Time, s.Index, s.Time)})
		}
		last[l] = s
		ref, ok := byIndex[s.Index]
		if !ok {
			byIndex[s.Index] = s
			continue
		}
		p := pair{min(ref.Node, s.Node), max(ref.Node, s.Node)}
		if ref.Hash != s.Hash && !diverged[p] {
			diverged[p] = true
			vs = append(vs, MetaViolation{Check: CheckAppliedDiverged,
				Message: fmt.Sprintf("at applied index %d node %d (incarnation %d, at %d) has hash %016x, node %d (incarnation %d, at %d) %016x: their applied logs differ at or before it",
					s.Index, ref.Node, ref.Incarnation, ref.Time, ref.Hash, s.Node, s.Incarnation, s.Time, s.Hash)})
		}
	}
	return vs
}

// TopicSummary is what an image holds of one topic, for the final checks.
type TopicSummary struct {
	ID         raftmeta.TopicID
	Partitions int32
	// Configs are the configs set on the topic (not the defaults).
	Configs map[string]string
}

// FinalImage is one node's image at the end of the liveness phase, as far
// as the metadata history can judge it: its topics by name, and its
// applied position (0 if not recorded; else the same notion on every
// node, a raft index or the image's Applied count).
type FinalImage struct {
	Node    int32
	Applied uint64
	Topics  map[string]TopicSummary
}

// SummarizeImage returns what CheckConverged needs of a node's image.
func SummarizeImage(node int32, im *raftmeta.Image) FinalImage {
	f := FinalImage{Node: node, Applied: im.Applied, Topics: make(map[string]TopicSummary)}
	for _, name := range im.TopicNames() {
		t := im.TopicByName(name)
		f.Topics[name] = TopicSummary{ID: t.ID, Partitions: int32(len(t.Partitions)), Configs: maps.Clone(t.Configs)}
	}
	return f
}

func (f FinalImage) topicNames() []string {
	names := make([]string, 0, len(f.Topics))
	for name := range f.Topics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// finalState is one topic's state in a final image.
type finalState struct {
	present    bool
	id         string
	partitions int32
	// configs are the topic's configs, "k=v" joined by ", " in key order.
	configs string
}

func (f FinalImage) state(topic string) finalState {
	t, ok := f.Topics[topic]
	if !ok {
		return finalState{}
	}
	var configs []string
	for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
		configs = append(configs, k+"="+t.Configs[k])
	}
	return finalState{present: true, id: topicIDString(t.ID), partitions: t.Partitions, configs: strings.Join(configs, ", ")}
}

func (s finalState) String() string {
	if !s.present {
		return "no such topic"
	}
	if s.configs != "" {
		return describeTopicState(s.id, s.partitions) + ", " + s.configs
	}
	return describeTopicState(s.id, s.partitions)
}

// CheckConverged judges the final images of the nodes up at the end of the
// liveness phase against each other and against the metadata history
// (events as CheckMetaEvents takes them; the history is validated, and a
// malformed one is the error). The images must agree, topic by topic and
// in their applied position. And each topic's state in them must be what
// a last change of it can have left: one not followed, in real time, by
// an acknowledged change of that topic. So an acknowledged creation that
// nothing can have followed must be there with its id and partition count
// (lost-creation, topic-id-conflict, topic-shape), and after an
// acknowledged deletion that nothing can have followed the topic must be
// gone (resurrected-topic). Porcupine, given the same images as final
// describes (MetaHistory.FinalImage), judges the cases these rules leave
// open.
func CheckConverged(events []MetaEvent, finals []FinalImage) ([]MetaViolation, error) {
	a, err := analyzeMeta(events)
	if err != nil {
		return nil, fmt.Errorf("malformed metadata history: %w", err)
	}
	vs := checkAgreement(finals)
	names := slices.Clone(a.topics)
	for _, f := range finals {
		names = append(names, f.topicNames()...)
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		for _, g := range groupFinals(name, finals) {
			if v, bad := a.judgeFinal(name, g.state); bad {
				v.Message = fmt.Sprintf("%s: %s", describeNodes(g.nodes), v.Message)
				vs = append(vs, v)
			}
		}
	}
	return vs, nil
}

// finalGroup is the nodes whose final images agree on one topic.
type finalGroup struct {
	state finalState
	nodes []int32
}

func groupFinals(topic string, finals []FinalImage) []finalGroup {
	var groups []finalGroup
	for _, f := range finals {
		s := f.state(topic)
		i := slices.IndexFunc(groups, func(g finalGroup) bool { return g.state == s })
		if i < 0 {
			i = len(groups)
			groups = append(groups, finalGroup{state: s})
		}
		groups[i].nodes = append(groups[i].nodes, f.Node)
	}
	return groups
}

func describeNodes(nodes []int32) string {
	var b strings.Builder
	b.WriteString("node")
	if len(nodes) > 1 {
		b.WriteString("s")
	}
	for i, n := range nodes {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d", n)
	}
	return b.String()
}

// checkAgreement: the final images agree on every topic and, when every
// one records it, on the applied position.
func checkAgreement(finals []FinalImage) []MetaViolation {
	var vs []MetaViolation
	var names []string
	for _, f := range finals {
		names = append(names, f.topicNames()...)
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		groups := groupFinals(name, finals)
		if len(groups) < 2 {
			continue
		}
		var parts []string
		for _, g := range groups {
			parts = append(parts, fmt.Sprintf("%s: %s", describeNodes(g.nodes), g.state))
		}
		vs = append(vs, MetaViolation{Check: CheckNotConverged, Topic: name,
			Message: fmt.Sprintf("the nodes up at the end disagree on topic %q: %s", name, strings.Join(parts, "; "))})
	}
	if len(finals) > 1 && !slices.ContainsFunc(finals, func(f FinalImage) bool { return f.Applied == 0 }) {
		var parts []string
		differ := false
		for _, f := range finals {
			parts = append(parts, fmt.Sprintf("node %d at %d", f.Node, f.Applied))
			differ = differ || f.Applied != finals[0].Applied
		}
		if differ {
			vs = append(vs, MetaViolation{Check: CheckNotConverged,
				Message: "the nodes up at the end have applied different amounts: " + strings.Join(parts, ", ")})
		}
	}
	return vs
}

// lastCandidates returns topic's creates and deletes that may be the last
// to have taken effect (adds of partitions keep the incarnation, and
// judgeShape weighs them): those that did not fail and that no acknowledged change of
// the topic was invoked after the answer of. It also says whether the
// topic saw no acknowledged change at all (then its state before the
// history may still stand).
func (a *metaAnalysis) lastCandidates(topic string) ([]*metaOp, bool) {
	var changes []*metaOp
	untouched := true
	for i := range a.ops {
		o := &a.ops[i]
		if o.invoke.Topic == topic && o.mayHaveMadeOrUnmade() {
			changes = append(changes, o)
			untouched = untouched && o.outcome() != KindOk
		}
	}
	var out []*metaOp
	for _, c := range changes {
		followed := slices.ContainsFunc(changes, func(k *metaOp) bool {
			return k != c && k.outcome() == KindOk && k.invoke.Time > c.returned()
		})
		if !followed {
			out = append(out, c)
		}
	}
	return out, untouched
}

// judgeFinal says whether s, a topic's state in a final image, is one that
// a last change can have left, and if not, why.
func (a *metaAnalysis) judgeFinal(topic string, s finalState) (MetaViolation, bool) {
	candidates, untouched := a.lastCandidates(topic)
	existing, existed := a.existing[topic]
	if !s.present {
		if untouched && !existed || slices.ContainsFunc(candidates, func(c *metaOp) bool { return c.invoke.Type == MetaDelete }) {
			return MetaViolation{}, false
		}
		return a.lostCreation(topic, candidates, existing, existed), true
	}
	if untouched && existed && (existing.ID == "" || existing.ID == s.id) {
		return MetaViolation{}, false
	}
	var creates []*metaOp
	for _, c := range candidates {
		if c.invoke.Type != MetaCreate {
			continue
		}
		switch {
		case c.outcome() == KindOk && c.done.ID == s.id:
			return a.judgeShape(topic, s, c)
		case (c.outcome() != KindOk || c.done.ID == "") && !a.idCreated(topic, s.id):
			return MetaViolation{}, false // a creation whose id nobody was told
		}
		creates = append(creates, c)
	}
	return a.unexplained(topic, s, candidates, creates), true
}

// idCreated reports whether an acknowledged create of topic answered id.
func (a *metaAnalysis) idCreated(topic, id string) bool {
	return slices.ContainsFunc(a.ops, func(o metaOp) bool {
		return o.invoke.Type == MetaCreate && o.invoke.Topic == topic && o.outcome() == KindOk && o.done.ID == id
	})
}

// judgeShape checks that a topic made by c has the partitions c asked for
// (or answered), or the count of an add of partitions that may have
// followed c, and no fewer than an add acknowledged after c's answer asked
// for (adds grow a topic only: one to fewer than it has is refused).
func (a *metaAnalysis) judgeShape(topic string, s finalState, c *metaOp) (MetaViolation, bool) {
	want, ok := createdPartitions(c.invoke.Partitions, c.done.Partitions)
	if !ok || want == 0 || s.partitions == 0 {
		return MetaViolation{}, false
	}
	reachable := s.partitions == want
	var least *metaOp // the acknowledged add after c of the largest count
	for i := range a.ops {
		g := &a.ops[i]
		if g.invoke.Type != MetaAddPartitions || g.invoke.Topic != topic || !g.mayHaveChanged() || g.returned() < c.invoke.Time {
			continue
		}
		reachable = reachable || s.partitions == g.invoke.Partitions
		if g.outcome() == KindOk && g.invoke.Time > c.done.Time && (least == nil || g.invoke.Partitions > least.invoke.Partitions) {
			least = g
		}
	}
	switch {
	case least != nil && s.partitions < least.invoke.Partitions:
		return MetaViolation{Check: CheckTopicShape, Topic: topic, Events: append(c.evidence(), least.evidence()...),
			Message: fmt.Sprintf("topic %q (id %s) has %d partitions, but op %d grew it to %d after op %d created it", topic, shortTopicID(s.id), s.partitions, least.invoke.Op, least.invoke.Partitions, c.invoke.Op)}, true
	case !reachable:
		return MetaViolation{Check: CheckTopicShape, Topic: topic, Events: c.evidence(),
			Message: fmt.Sprintf("topic %q (id %s) has %d partitions, but op %d created it with %d and no add of partitions after it asked for %d", topic, shortTopicID(s.id), s.partitions, c.invoke.Op, want, s.partitions)}, true
	}
	return MetaViolation{}, false
}

func (a *metaAnalysis) lostCreation(topic string, candidates []*metaOp, existing MetaEvent, existed bool) MetaViolation {
	v := MetaViolation{Check: CheckLostCreation, Topic: topic}
	for _, c := range slices.Backward(candidates) {
		if c.invoke.Type == MetaCreate && c.outcome() == KindOk {
			v.Events = c.evidence()
			v.Message = fmt.Sprintf("topic %q is missing, though op %d created it (%s, acknowledged by node %d at #%d) and no deletion of it can have followed",
				topic, c.invoke.Op, describeTopicState(c.done.ID, c.done.Partitions), c.invoke.Node, c.done.Time)
			return v
		}
	}
	if existed {
		v.Events = []MetaEvent{existing}
		v.Message = fmt.Sprintf("topic %q is missing, though it existed before the history and no deletion of it can have taken effect", topic)
		return v
	}
	v.Message = fmt.Sprintf("topic %q is missing, and no deletion of it can have been the last change", topic)
	return v
}

// unexplained reports a present topic that no last change can have left:
// deleted for good, created with another id, or never created.
func (a *metaAnalysis) unexplained(topic string, s finalState, candidates, creates []*metaOp) MetaViolation {
	for _, c := range slices.Backward(creates) {
		if c.outcome() == KindOk {
			return MetaViolation{Check: CheckTopicIDConflict, Topic: topic, Events: c.evidence(),
				Message: fmt.Sprintf("topic %q has id %s, but op %d, a last creation of it, answered id %s",
					topic, shortTopicID(s.id), c.invoke.Op, shortTopicID(c.done.ID))}
		}
	}
	for _, c := range slices.Backward(candidates) {
		if c.invoke.Type == MetaDelete && c.outcome() == KindOk {
			return MetaViolation{Check: CheckResurrected, Topic: topic, Events: c.evidence(),
				Message: fmt.Sprintf("topic %q is there (%s), though op %d deleted it (acknowledged by node %d at #%d) and no creation of it can have followed",
					topic, s, c.invoke.Op, c.invoke.Node, c.done.Time)}
		}
	}
	return MetaViolation{Check: CheckPhantomTopic, Topic: topic,
		Message: fmt.Sprintf("topic %q is there (%s), and no creation of it can have made it", topic, s)}
}
