package jepsen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// # What Sluice promises about metadata, as clients see it
//
// The cluster's metadata is one log, committed by the raft quorum; every
// node applies its committed prefix to its image, in order. Clients see
// three things: creates and deletes, which the node they sent them to
// forwards to the controller, and describes (Metadata requests), which the
// node answers from its own image, as Kafka's brokers answer from their
// metadata cache. The checker holds the cluster to four promises:
//
//  1. Changes are linearizable. Each acknowledged create or delete took
//     effect, once, at one instant between its call and its answer (its
//     record committed then); one of unknown outcome took effect at one
//     instant after its call, or never; a definite failure never did.
//     The order of those instants is the committed log's. A create takes
//     effect only on an absent name, a delete only on a present one, and
//     every create makes a new incarnation with an id no other
//     incarnation of the name has had.
//
//  2. Read your acknowledged writes, on the node that answered. A create
//     or delete answered by node N is applied on N before N answers, so
//     every describe that N answers after that (for any client) shows
//     that change or a later state. (Kafka itself promises less: its
//     brokers relay the controller's answer before their cache has
//     caught up; Sluice's nodes wait.) Changes sent to NodeUnknown carry
//     no such promise.
//
//  3. A node's image only moves forward, across its own restarts too. A
//     node replays its durable log up to its durable commit index before
//     it answers any Metadata request, as a KRaft broker catches up with
//     the metadata log before it serves, and etcd raft never applies an
//     entry the node has not persisted: so nothing it ever showed is lost
//     to a crash, and a restart never shows an older state. (The one
//     thing that would break this, a disk that loses synced data, is a
//     fault the simulator does not inject in the safe modes.)
//
//  4. Describes may lag, never invent. A describe on N shows the state of
//     some prefix of the committed log: at least as long as every prefix
//     N showed before and every change N acknowledged, at most what had
//     committed when N answered. Nodes lag by different amounts; they
//     never show a state that no prefix produces (a topic nobody created,
//     an id its creation did not get, a partition count it was not
//     created with).
//
// A refusal is a read too: a create answered TOPIC_ALREADY_EXISTS saw the
// name present, a delete answered UNKNOWN_TOPIC_OR_PARTITION saw it
// absent. Kafka's controller answers them from its own state, waiting for
// its pending records to commit first (QuorumController's read-only
// events), but a controller deposed without knowing it answers from a
// state that is stale by any amount. So by default a refusal must match
// some state of the committed log before its answer (no lower bound: for a
// delete's refusal that is always true of the state before the topic was
// created); MetaConfig.StrictRefusals makes it match the latest one, for
// a cluster whose controller confirms its leadership before it answers.
//
// # The model
//
// One porcupine state per topic name (porcupine's Partition splits the
// history by name), built to be sound: it never rejects a history that the
// promises above allow, whatever the lag, and rejects every history that
// breaks them on that name.
//
//   - versions: the name's states along the committed log, in order:
//     versions[0] is the state before the history (absent, or an existing
//     topic), and each change that took effect appends one (present with
//     an id and a partition count, or absent). A version's id and count
//     may be unknown (a create of unknown outcome, or an answer without
//     them) until a describe shows them: the describe then binds them.
//   - pos: for each node, the least version its image may be at: the last
//     version it showed, or the last change it acknowledged, whichever is
//     later. This is the per-node sequential consistency of promises 2-4;
//     versions are the global linearizable order of promise 1.
//   - sealed: a final describe has been placed. Changes of unknown outcome
//     placed after it have no effect (they never happened), so that every
//     final describe sees the same last version.
//
// A describe on N placed at some instant shows a version j with pos[N] <=
// j <= the last version then, and moves pos[N] to j (the model is
// nondeterministic where a describe could be binding one of several
// versions of unknown id, and porcupine explores each). Promise 2 needs
// the acknowledging node's pos to move at the answer, not at the commit
// (between the two, N may not have applied the change yet): each
// acknowledged change sent to a known node is followed by a zero-length
// "applied" operation just after its answer, which moves pos[N] to the
// change's version. Timestamps are doubled so that the marker fits
// between the answer and the next event.
//
// Why this can fail on real bugs and not on Kafka's staleness: a stale
// describe is a version below the last, which the model allows on any
// node whose pos is not yet past it. A lost acknowledged creation is a
// final describe (or any describe on the acknowledging node) that shows
// absent when the last version is present. A topic that reappears after
// an acknowledged deletion needs a version after the deletion that is
// present with the old id: ids are unique per version, so no such version
// exists. Two ids for one created name is a describe whose id matches
// neither the version's known id nor an unknown one. A node going
// backwards is a describe below its pos. The quorum checks (meta_quorum.go)
// and the explicit checks (meta_check.go) say the same things in plainer
// words; the model is what makes them complete.
//
// What it does not see: a state that is consistent per name but not
// across names (a node showing topic a after a change and topic b before
// an earlier one) is checked by the applied-log prefixes of the quorum
// checks, not here.
//
// # Adding partitions
//
// CreatePartitions grows a topic to a count: it takes effect, like a
// create, at one instant between call and answer, only on a present topic
// with fewer partitions, and appends a version of the same incarnation
// (same id, marked amended) with the new count. Its refusals are reads: an
// unknown topic saw the name absent, INVALID_PARTITIONS saw it present
// with at least the count (some version, or the latest with strict
// refusals). A describe that binds an unknown id binds it on every version
// of the incarnation, amended ones included, so that one incarnation never
// shows two ids. Describes then hold nodes to counts as they hold them to
// ids: a node may lag behind an add, never show a count no version had,
// and never go back to a smaller count it had moved past.
//
// # Config changes
//
// IncrementalAlterConfigs of one key is a change like an add: one instant
// between call and answer, only on a present topic, a new version of the
// same incarnation with the key set (or deleted: ""); an unknown topic is
// a read of absent. A change to what is in effect already writes nothing,
// and the controller answers it from its state at once, so it is a read
// too, as a refusal is: of some version where the key is so (the latest,
// with strict refusals); it makes no version (a deposed controller that
// had not applied a deletion acknowledged such a change of a deleted
// topic: swarm seed 719). A describe_config on N shows absent, or a value of the
// key, which must be the key's value in some version between pos[N] and
// the last (the last, if final), and moves pos[N] there, as a describe
// does. A created topic has no configs set; a topic that existed before
// the history has unknown ones, so a describe_config of it binds nothing
// and matches any value until a change sets the key.

// metaVersion is one state of a topic name along the committed log.
type metaVersion struct {
	present bool
	// id is the incarnation's id; "" until known.
	id string
	// partitions is the incarnation's partition count; 0 until known.
	partitions int32
	// op is the history operation that made the version; -1 for
	// versions[0].
	op int
	// amended: an add of partitions or a config change made it from
	// the version before it: the same incarnation.
	amended bool
	// configs are the configs set on the incarnation (configSet's form);
	// a version that existed before the history has them unknown.
	configs string
}

// unknownConfigs marks a version's configs as unknown (but for the keys
// listed after it).
const unknownConfigs = "?"

// configGet returns key's value in configs ("" none set), and whether it
// is known.
func configGet(configs, key string) (string, bool) {
	rest, unknown := strings.CutPrefix(configs, unknownConfigs)
	for kv := range strings.SplitSeq(rest, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", !unknown
}

// configSet returns configs with key set to value ("" deletes it): pairs
// "k=v" in key order joined by NUL, after unknownConfigs if unknown. A
// deleted key of unknown configs is kept as "k=", known to be unset.
func configSet(configs, key, value string) string {
	rest, unknown := strings.CutPrefix(configs, unknownConfigs)
	var pairs []string
	for kv := range strings.SplitSeq(rest, "\x00") {
		if k, _, ok := strings.Cut(kv, "="); ok && k != key {
			pairs = append(pairs, kv)
		}
	}
	if value != "" || unknown {
		pairs = append(pairs, key+"="+value)
	}
	slices.Sort(pairs)
	out := strings.Join(pairs, "\x00")
	if unknown {
		out = unknownConfigs + out
	}
	return out
}

// metaNodePos is the least version a node's image may be at.
type metaNodePos struct {
	node int32
	pos  int
}

// metaState is the model's state for one topic name. States are
// immutable: a step copies what it changes.
type metaState struct {
	versions []metaVersion
	// nodes is sorted by node; a node absent from it is at 0.
	nodes  []metaNodePos
	sealed bool
	// h is the state's hash, computed once it is made (hashed):
	// porcupine hashes every state it reaches, often many times.
	h uint64
}

var metaInitial = (&metaState{versions: []metaVersion{{op: -1}}}).hashed()

func (s *metaState) last() int { return len(s.versions) - 1 }

func (s *metaState) current() metaVersion { return s.versions[s.last()] }

// pos returns the least version node's image may be at.
func (s *metaState) pos(node int32) int {
	for _, n := range s.nodes {
		if n.node == node {
			return n.pos
		}
	}
	return 0
}

// at returns s with node's pos at least j (and sealed if seal).
func (s *metaState) at(node int32, j int, seal bool) *metaState {
	if s.pos(node) >= j && (s.sealed || !seal) {
		return s
	}
	next := &metaState{versions: s.versions, sealed: s.sealed || seal}
	defer next.hashed()
	next.nodes = make([]metaNodePos, 0, len(s.nodes)+1)
	placed := false
	for _, n := range s.nodes {
		switch {
		case n.node == node:
			n.pos = max(n.pos, j)
			placed = true
		case n.node > node && !placed:
			next.nodes = append(next.nodes, metaNodePos{node: node, pos: j})
			placed = true
		}
		next.nodes = append(next.nodes, n)
	}
	if !placed {
		next.nodes = append(next.nodes, metaNodePos{node: node, pos: j})
	}
	return next
}

// appended returns s with v as its last version.
func (s *metaState) appended(v metaVersion) *metaState {
	versions := make([]metaVersion, len(s.versions), len(s.versions)+1)
	copy(versions, s.versions)
	return (&metaState{versions: append(versions, v), nodes: s.nodes, sealed: s.sealed}).hashed()
}

// replaced returns s with versions[j] replaced by v.
func (s *metaState) replaced(j int, v metaVersion) *metaState {
	versions := append([]metaVersion(nil), s.versions...)
	versions[j] = v
	return (&metaState{versions: versions, nodes: s.nodes, sealed: s.sealed}).hashed()
}

// stepAlterConfig places a config change: on a present topic, the
// incarnation's next version with the key set; refused, it saw the name
// absent.
func (m metaModel) stepAlterConfig(s *metaState, in *metaInput, out *metaOutput) []any {
	cur := s.current()
	can := cur.present && !s.sealed
	altered := cur
	altered.op, altered.amended, altered.configs = in.op, true, configSet(cur.configs, in.key, in.value)
	switch out.outcome {
	case metaOk:
		if can && altered.configs != cur.configs {
			return []any{s.appended(altered)}
		}
		// A change to what is in effect writes nothing, and a
		// controller (Kafka's, and Sluice's) answers it from its
		// committed state at once, without confirming that it still
		// leads: that state may be stale by any amount, as a refusal's
		// is. So it is a read of some version where the topic has the
		// key so (the latest, with strict refusals), and makes no
		// version of its own.
		return m.refusalSaw(s, func(v metaVersion) bool { return v.present && configSet(v.configs, in.key, in.value) == v.configs })
	case metaUnknown:
		if !can || altered.configs == cur.configs || in.unseen {
			// Refused, never made, or made with nothing to show for
			// it: a version equal to the last adds no state a read
			// could see, and retries of one change (the same value,
			// several attempts of unknown outcome) would otherwise
			// multiply porcupine's states. A value no read shows may
			// as well never have been set: had it taken effect, every
			// read after it (up to the next change) and every final
			// read of its version would show it, and there are none;
			// dropping it leaves every other version as it was.
			return []any{s}
		}
		return []any{s, s.appended(altered)}
	case metaRefused:
		return m.refusal(s, false)
	}
	return nil
}

// stepDescribeConfig places a describe_config on in.node: absent as a
// describe shows it, or a version between the node's pos and the last (the
// last, if final) whose value of the key is the one shown (or unknown).
// The first such version is enough: it binds nothing, and a later one
// would only hold the node to more (its pos higher), so porcupine need not
// explore the others.
func stepDescribeConfig(s *metaState, in *metaInput, out *metaOutput) []any {
	from := s.pos(in.node)
	if in.final {
		from = s.last()
	}
	for j := from; j <= s.last(); j++ {
		v := s.versions[j]
		if out.absent != v.present {
			if value, known := configGet(v.configs, in.key); out.absent || !known || value == out.value {
				return []any{s.at(in.node, j, in.final)}
			}
		}
	}
	return nil
}

// rebound returns s with versions[j] replaced by v, which binds its id or
// partition count, and the id bound on every version of its incarnation
// (the versions adds of partitions made from it, and the one it grew
// from).
func (s *metaState) rebound(j int, v metaVersion) *metaState {
	t := s.replaced(j, v)
	if v.id == s.versions[j].id {
		return t
	}
	for k := j; k >= 0 && t.versions[k].present; k-- {
		t.versions[k].id = v.id
		if !t.versions[k].amended {
			break
		}
	}
	for k := j + 1; k < len(t.versions) && t.versions[k].amended; k++ {
		t.versions[k].id = v.id
	}
	return t.hashed()
}

// idUsed reports whether some version has id.
func (s *metaState) idUsed(id string) bool {
	for _, v := range s.versions {
		if v.id == id {
			return true
		}
	}
	return false
}

// versionOf returns the index of the version op made, or -1.
func (s *metaState) versionOf(op int) int {
	for j, v := range s.versions {
		if v.op == op && op >= 0 {
			return j
		}
	}
	return -1
}

func (s *metaState) equal(o *metaState) bool {
	if s == o {
		return true
	}
	if s.sealed != o.sealed || len(s.versions) != len(o.versions) || len(s.nodes) != len(o.nodes) {
		return false
	}
	for i := range s.versions {
		if s.versions[i] != o.versions[i] {
			return false
		}
	}
	for i := range s.nodes {
		if s.nodes[i] != o.nodes[i] {
			return false
		}
	}
	return true
}

func (s *metaState) hash() uint64 { return s.h }

// hashed sets s's hash from what it holds, and returns s: the last step of
// making a state (states are immutable after it).
func (s *metaState) hashed() *metaState {
	h := uint64(0x243f6a8885a308d3)
	for _, v := range s.versions {
		h = mix(h ^ hashString(v.id) ^ uint64(v.partitions)<<1 ^ uint64(int64(v.op))<<33)
		if v.present {
			h = mix(h + 1)
		}
		if v.amended {
			h = mix(h + 2)
		}
		h = mix(h ^ hashString(v.configs))
	}
	for _, n := range s.nodes {
		h = mix(h ^ uint64(uint32(n.node))<<32 ^ uint64(n.pos))
	}
	if s.sealed {
		h = mix(h ^ 0x5ea1ed)
	}
	s.h = h
	return s
}

// The model's operations. Pointers, so that porcupine copies nothing as
// it explores.
type (
	metaOpKind int

	metaInput struct {
		kind  metaOpKind
		topic string
		node  int32
		// op is the history's operation id (of the change, for an
		// applied marker).
		op int
		// partitions: a create's count asked for; an existing topic's.
		partitions int32
		// id: an existing topic's.
		id string
		// final: a final describe.
		final bool
		// key and value: a config change's, or the key a
		// describe_config reads. unseen: no read in the history shows
		// the change's value.
		key, value string
		unseen     bool
	}

	metaOutput struct {
		outcome metaOutcome
		// A describe's answer: absent, or the id and partition count
		// shown (either may be unknown: "" and 0). A create's ok: the id
		// and count answered.
		absent     bool
		id         string
		partitions int32
		// value: a describe_config's answer ("" none set).
		value string
	}

	metaOutcome int
)

const (
	metaOpCreate metaOpKind = iota
	metaOpDelete
	metaOpDescribe
	// metaOpApplied: node has applied the change op made (placed just
	// after the change's answer).
	metaOpApplied
	// metaOpExisting: the topic existed before the history (placed first).
	metaOpExisting
	// metaOpAddPartitions: grow the topic to in.partitions.
	metaOpAddPartitions
	// metaOpAlterConfig: set in.key to in.value ("" deletes it).
	metaOpAlterConfig
	// metaOpDescribeConfig: read in.key on in.node.
	metaOpDescribeConfig
)

const (
	metaOk metaOutcome = iota
	metaUnknown
	metaRefused
)

// metaModel is the sequential specification of one topic name.
type metaModel struct {
	strictRefusals bool
}

// step returns every state s may move to by in with out; none if out is
// not a possible answer.
func (m metaModel) step(s *metaState, in *metaInput, out *metaOutput) []any {
	switch in.kind {
	case metaOpCreate:
		return m.stepCreate(s, in, out)
	case metaOpDelete:
		return m.stepDelete(s, in, out)
	case metaOpDescribe:
		return stepDescribe(s, in, out)
	case metaOpAddPartitions:
		return m.stepAddPartitions(s, in, out)
	case metaOpAlterConfig:
		return m.stepAlterConfig(s, in, out)
	case metaOpDescribeConfig:
		return stepDescribeConfig(s, in, out)
	case metaOpApplied:
		j := s.versionOf(in.op)
		if j < 0 {
			// The marker comes after the change's answer, so the change
			// is placed: as a change that wrote nothing (above), which
			// says nothing of how far the node has applied.
			return []any{s}
		}
		return []any{s.at(in.node, j, false)}
	case metaOpExisting:
		if len(s.versions) != 1 || s.versions[0].present || s.versions[0].op != -1 {
			return nil
		}
		return []any{(&metaState{versions: []metaVersion{{present: true, id: in.id, partitions: in.partitions, op: -1, configs: unknownConfigs}}}).hashed()}
	}
	return nil
}

func (m metaModel) stepCreate(s *metaState, in *metaInput, out *metaOutput) []any {
	cur := s.current()
	switch out.outcome {
	case metaOk:
		partitions, ok := createdPartitions(in.partitions, out.partitions)
		if cur.present || s.sealed || !ok || out.id != "" && s.idUsed(out.id) {
			return nil
		}
		return []any{s.appended(metaVersion{present: true, id: out.id, partitions: partitions, op: in.op})}
	case metaUnknown:
		if _, valid := createdPartitions(in.partitions, 0); cur.present || s.sealed || !valid {
			return []any{s} // it would have been refused, or never happened
		}
		return []any{s.appended(metaVersion{present: true, partitions: max(in.partitions, 0), op: in.op})}
	case metaRefused:
		return m.refusal(s, true)
	}
	return nil
}

// createdPartitions returns the partition count of a topic created when
// asked for asked and answered answered (0: not said), and false if no
// broker may create it so: a count below 1 other than PartitionsDefault
// is INVALID_PARTITIONS, and a broker makes exactly what it was asked.
func createdPartitions(asked, answered int32) (int32, bool) {
	switch {
	case asked != PartitionsDefault && asked < 1:
		return 0, false
	case asked == PartitionsDefault:
		return answered, true
	case answered != 0 && answered != asked:
		return 0, false
	}
	return asked, true
}

func (m metaModel) stepDelete(s *metaState, in *metaInput, out *metaOutput) []any {
	cur := s.current()
	switch out.outcome {
	case metaOk:
		if !cur.present || s.sealed {
			return nil
		}
		return []any{s.appended(metaVersion{op: in.op})}
	case metaUnknown:
		if !cur.present || s.sealed {
			return []any{s}
		}
		return []any{s.appended(metaVersion{op: in.op})}
	case metaRefused:
		return m.refusal(s, false)
	}
	return nil
}

// refusal steps a refusal that saw the name present (or absent): the
// latest version must be so with strict refusals, some version otherwise.
func (m metaModel) refusal(s *metaState, present bool) []any {
	return m.refusalSaw(s, func(v metaVersion) bool { return v.present == present })
}

// refusalSaw steps a refusal that saw a version for which saw holds.
func (m metaModel) refusalSaw(s *metaState, saw func(metaVersion) bool) []any {
	if m.strictRefusals {
		if saw(s.current()) {
			return []any{s}
		}
		return nil
	}
	for _, v := range s.versions {
		if saw(v) {
			return []any{s}
		}
	}
	return nil
}

// stepAddPartitions places a grow of the topic to in.partitions: on a
// present topic with fewer (or an unknown number of) partitions, it appends
// the incarnation's next version; a refusal saw the name absent, or present
// with at least that many.
func (m metaModel) stepAddPartitions(s *metaState, in *metaInput, out *metaOutput) []any {
	cur := s.current()
	can := cur.present && !s.sealed && (cur.partitions == 0 || cur.partitions < in.partitions)
	grown := metaVersion{present: true, id: cur.id, partitions: in.partitions, op: in.op, amended: true, configs: cur.configs}
	switch out.outcome {
	case metaOk:
		if !can {
			return nil
		}
		return []any{s.appended(grown)}
	case metaUnknown:
		if !can {
			return []any{s}
		}
		return []any{s, s.appended(grown)}
	case metaRefused:
		if out.absent {
			return m.refusal(s, false)
		}
		return m.refusalSaw(s, func(v metaVersion) bool {
			return v.present && (v.partitions == 0 || v.partitions >= in.partitions)
		})
	}
	return nil
}

// stepDescribe places a describe on in.node: it shows a version between the
// node's pos and the last (the last, if final). Absent is shown by the
// first absent version at or above pos (a later one only constrains the
// future more); a topic with an id is shown by the first version that
// shows it as it is (for the same reason), or by binding a version whose
// id or count is not known yet, each a possible state.
func stepDescribe(s *metaState, in *metaInput, out *metaOutput) []any {
	from := s.pos(in.node)
	if in.final {
		from = s.last()
	}
	var next []any
	placed := false // at a version that binds nothing
	for j := from; j <= s.last(); j++ {
		v := s.versions[j]
		if out.absent {
			if !v.present {
				return []any{s.at(in.node, j, in.final)}
			}
			continue
		}
		bound, ok := bindVersion(s, v, out)
		switch {
		case !ok:
		case bound != v:
			next = append(next, s.rebound(j, bound).at(in.node, j, in.final))
		case !placed:
			// The first version that shows out as it is dominates
			// the later ones (config changes make runs of them):
			// the same versions, the node's pos lower.
			placed = true
			next = append(next, s.at(in.node, j, in.final))
		}
	}
	return next
}

// bindVersion returns v as a describe showing out would have it (its
// unknown id and partition count filled in), and whether it may show it.
func bindVersion(s *metaState, v metaVersion, out *metaOutput) (metaVersion, bool) {
	if !v.present {
		return v, false
	}
	switch {
	case out.id == "" || v.id == out.id:
	case v.id == "" && !s.idUsed(out.id):
		v.id = out.id
	default:
		return v, false
	}
	switch {
	case out.partitions == 0 || v.partitions == out.partitions:
	case v.partitions == 0:
		v.partitions = out.partitions
	default:
		return v, false
	}
	return v, true
}

// MetaModel is the porcupine model of topic names: the state is one name's
// versions and how far each node has been seen to apply them, and the
// partition functions split a history by topic name. strictRefusals holds
// refusals to the latest state (see the promises above). CheckMeta builds
// its operations; the model is exported for callers that want to drive
// porcupine themselves.
func MetaModel(strictRefusals bool) porcupine.Model {
	m := metaModel{strictRefusals: strictRefusals}
	nm := porcupine.NondeterministicModel{
		Partition:      partitionMetaOperations,
		PartitionEvent: partitionMetaEvents,
		Init:           func() []any { return []any{metaInitial} },
		Step: func(state, input, output any) []any {
			return m.step(state.(*metaState), input.(*metaInput), output.(*metaOutput))
		},
		Equal:             func(a, b any) bool { return a.(*metaState).equal(b.(*metaState)) },
		Hash:              func(s any) uint64 { return s.(*metaState).hash() },
		DescribeOperation: describeMetaOperation,
		DescribeState:     func(s any) string { return describeMetaState(s.(*metaState)) },
		DescribeOperationMetadata: func(md any) string {
			meta, ok := md.(opMeta)
			switch {
			case !ok:
				return ""
			case meta.info:
				return fmt.Sprintf("op %d, client %d, outcome unknown (open return)", meta.op, meta.client)
			}
			return fmt.Sprintf("op %d, client %d", meta.op, meta.client)
		},
	}
	return nm.ToModel()
}

func partitionMetaOperations(ops []porcupine.Operation) [][]porcupine.Operation {
	return groupByPartition(ops, func(o porcupine.Operation) TopicPartition {
		return TopicPartition{Topic: o.Input.(*metaInput).topic}
	})
}

func partitionMetaEvents(events []porcupine.Event) [][]porcupine.Event {
	topics := make(map[int]string)
	for _, e := range events {
		if e.Kind == porcupine.CallEvent {
			topics[e.Id] = e.Value.(*metaInput).topic
		}
	}
	return groupByPartition(events, func(e porcupine.Event) TopicPartition { return TopicPartition{Topic: topics[e.Id]} })
}

func describeMetaOperation(input, output any) string {
	in, out := input.(*metaInput), output.(*metaOutput)
	switch in.kind {
	case metaOpCreate:
		s := fmt.Sprintf("create on node %d, %s", in.node, describePartitions(in.partitions))
		switch out.outcome {
		case metaUnknown:
			return s + " -> ?"
		case metaRefused:
			return s + " -> " + kerr.TopicAlreadyExists.Message
		}
		return s + " -> " + describeTopicState(out.id, out.partitions)
	case metaOpDelete:
		s := fmt.Sprintf("delete on node %d", in.node)
		switch out.outcome {
		case metaUnknown:
			return s + " -> ?"
		case metaRefused:
			return s + " -> " + kerr.UnknownTopicOrPartition.Message
		}
		return s + " -> deleted"
	case metaOpDescribe:
		s := fmt.Sprintf("describe on node %d", in.node)
		if in.final {
			s = fmt.Sprintf("final describe on node %d", in.node)
		}
		if out.absent {
			return s + " -> absent"
		}
		return s + " -> " + describeTopicState(out.id, out.partitions)
	case metaOpAddPartitions:
		s := fmt.Sprintf("add partitions on node %d, to %s", in.node, describePartitions(in.partitions))
		switch {
		case out.outcome == metaUnknown:
			return s + " -> ?"
		case out.outcome == metaRefused && out.absent:
			return s + " -> " + kerr.UnknownTopicOrPartition.Message
		case out.outcome == metaRefused:
			return s + " -> " + kerr.InvalidPartitions.Message
		}
		return s + " -> grown"
	case metaOpAlterConfig:
		s := fmt.Sprintf("alter config on node %d, %s", in.node, describeConfig(in.key, in.value))
		switch out.outcome {
		case metaUnknown:
			return s + " -> ?"
		case metaRefused:
			return s + " -> " + kerr.UnknownTopicOrPartition.Message
		}
		return s + " -> altered"
	case metaOpDescribeConfig:
		s := fmt.Sprintf("describe config %s on node %d", in.key, in.node)
		if in.final {
			s = "final " + s
		}
		if out.absent {
			return s + " -> absent"
		}
		return s + " -> " + describeConfig(in.key, out.value)
	case metaOpApplied:
		return fmt.Sprintf("node %d has applied op %d (its answer)", in.node, in.op)
	case metaOpExisting:
		return "existed before the history: " + describeTopicState(in.id, in.partitions)
	}
	return fmt.Sprintf("%v -> %v", input, output)
}

// describeMetaState writes a state as its versions, then the nodes' least
// versions: "absent → 5f3c0d9e, 3 partitions → absent; node 1 at 1,
// node 2 at 2".
func describeMetaState(s *metaState) string {
	var b strings.Builder
	for j, v := range s.versions {
		if j > 0 {
			b.WriteString(" → ")
		}
		if v.present {
			b.WriteString(describeTopicState(v.id, v.partitions))
		} else {
			b.WriteString("absent")
		}
	}
	for i, n := range s.nodes {
		if i == 0 {
			b.WriteString("; ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString("node " + strconv.Itoa(int(n.node)) + " at " + strconv.Itoa(n.pos))
	}
	if s.sealed {
		b.WriteString("; final")
	}
	return b.String()
}
