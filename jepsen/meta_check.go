package jepsen

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The names of the metadata checks, as they appear in MetaViolation.Check.
const (
	CheckMetaLinearizable = "meta-linearizable" // porcupine, per topic name (meta_model.go)
	CheckTopicIDConflict  = "topic-id-conflict" // one id for two topics or two creations, or two ids for one creation
	CheckPhantomTopic     = "phantom-topic"     // a topic or id shown that no creation can have made
	CheckNodeBackwards    = "node-backwards"    // a node showed an older state than one it had shown
	CheckLostCreation     = "lost-creation"     // an acknowledged creation missing at the end
	CheckResurrected      = "resurrected-topic" // a topic back after an acknowledged deletion
	CheckTopicShape       = "topic-shape"       // a topic's partition count is not what its creation asked
	CheckNotConverged     = "not-converged"     // nodes up at the end hold different images
	CheckTwoLeaders       = "two-leaders"       // two raft leaders in one term
	CheckTermBackwards    = "term-backwards"    // a node's raft term went down
	CheckAppliedDiverged  = "applied-diverged"  // two nodes applied different entries at one index
	CheckAppliedBackwards = "applied-backwards" // a node's applied index went down without a restart
)

// MetaConfig tunes CheckMeta. The zero value is ready to use.
type MetaConfig struct {
	// Config bounds porcupine's search and the violations kept, as for
	// the data path.
	Config
	// StrictRefusals holds a create's TOPIC_ALREADY_EXISTS and a delete's
	// UNKNOWN_TOPIC_OR_PARTITION to the latest committed state, not just
	// some earlier one: right only for a controller that confirms it still
	// leads (a raft ReadIndex) before it answers from its state. Kafka's
	// does not (see MetaModel).
	StrictRefusals bool
}

// MetaViolation is one broken rule of the metadata or the quorum, with the
// events that show it (none for the quorum checks, whose observations are
// named in the message).
type MetaViolation struct {
	Check string
	// Topic is the topic concerned, if one is.
	Topic   string
	Message string
	Events  []MetaEvent
}

func (v MetaViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Check, v.Message)
	for _, e := range v.Events {
		fmt.Fprintf(&b, "\n    %s", e)
	}
	return b.String()
}

// MetaResult is the judgement of a metadata history.
type MetaResult struct {
	Verdict    Verdict
	Violations []MetaViolation
	// Topics has porcupine's answer for each topic name, in name order.
	Topics []TopicResult
	// Notes are things a reader should know: violations beyond the cap,
	// searches that ran out of time.
	Notes []string
	// Err is set when the history is malformed; nothing else was checked.
	Err error
}

// TopicResult is porcupine's answer for one topic name.
type TopicResult struct {
	Topic string
	// Operations is the number of operations given to porcupine, applied
	// markers included, definite failures that say nothing left out.
	Operations   int
	Linearizable porcupine.CheckResult
}

// OK reports whether every check passed.
func (r MetaResult) OK() bool { return r.Verdict == Valid }

// String is a human-readable report: the verdict, then each violation with
// its events, then the notes.
func (r MetaResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "result=%s", r.Verdict)
	for _, t := range r.Topics {
		fmt.Fprintf(&b, " %q=%s(%d ops)", t.Topic, t.Linearizable, t.Operations)
	}
	if r.Err != nil {
		fmt.Fprintf(&b, "\nmalformed metadata history: %v", r.Err)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n%s", v)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s", n)
	}
	return b.String()
}

// CheckMeta judges a metadata history: porcupine on each topic name (the
// promises of MetaModel), then the explicit checks, which say in plain
// words what they find (ids, phantoms, nodes going backwards). Operations
// still pending count as info. CheckMeta does not modify h.
func CheckMeta(h *MetaHistory, cfg MetaConfig) MetaResult {
	if err := h.Err(); err != nil {
		return MetaResult{Verdict: Undecided, Err: fmt.Errorf("recording: %w", err)}
	}
	return CheckMetaEvents(h.Events(), cfg)
}

// CheckMetaEvents judges a metadata history given as its events (as
// ReadMetaHistory returns them).
func CheckMetaEvents(events []MetaEvent, cfg MetaConfig) MetaResult {
	cfg.Config = cfg.Config.withDefaults()
	a, err := analyzeMeta(events)
	if err != nil {
		return MetaResult{Verdict: Undecided, Err: err}
	}
	var r MetaResult
	var found []MetaViolation
	for _, vs := range [][]MetaViolation{checkTopicIDs(a), checkPhantomTopics(a), checkNodeBackwards(a)} {
		if len(vs) > cfg.ViolationsMax {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d more violations not shown", vs[0].Check, len(vs)-cfg.ViolationsMax))
			vs = vs[:cfg.ViolationsMax]
		}
		found = append(found, vs...)
	}
	timeout := cfg.Timeout
	if len(found) > 0 {
		timeout = min(timeout, cfg.TimeoutOnceInvalid)
	}
	model := MetaModel(cfg.StrictRefusals)
	for _, topic := range a.topics {
		ops := a.porcupineOps(topic)
		res := checkMetaTopic(model, ops, timeout)
		r.Topics = append(r.Topics, TopicResult{Topic: topic, Operations: len(ops), Linearizable: res})
		switch res {
		case porcupine.Illegal:
			r.Violations = append(r.Violations, explainMetaIllegal(model, topic, ops, timeout))
		case porcupine.Unknown:
			r.Notes = append(r.Notes, fmt.Sprintf("topic %q: porcupine ran out of time after %s on %d operations", topic, timeout, len(ops)))
		}
	}
	r.Violations = append(r.Violations, found...)
	r.Verdict = Valid
	switch {
	case len(r.Violations) > 0:
		r.Verdict = Invalid
	case slices.ContainsFunc(r.Topics, func(t TopicResult) bool { return t.Linearizable != porcupine.Ok }):
		r.Verdict = Undecided
	}
	return r
}

// metaOp is one operation of a metadata history: its invoke and, unless
// it is still pending, its completion.
type metaOp struct {
	invoke MetaEvent
	done   *MetaEvent
}

// outcome is how the operation ended; a pending operation is info.
func (o *metaOp) outcome() Kind {
	if o.done == nil {
		return KindInfo
	}
	return o.done.Kind
}

// returned is when the operation's answer came, or never (the largest
// time) if it has none.
func (o *metaOp) returned() int64 {
	if o.done == nil || o.done.Kind == KindInfo {
		return maxTime
	}
	return o.done.Time
}

const maxTime = int64(^uint64(0) >> 1)

func (o *metaOp) evidence() []MetaEvent {
	if o.done == nil {
		return []MetaEvent{o.invoke}
	}
	return []MetaEvent{o.invoke, *o.done}
}

// refused reports whether o is a refusal that read the metadata.
func (o *metaOp) refused() bool {
	if o.outcome() != KindFail || !refusalCode(o.invoke.Type, o.done.Code) {
		return false
	}
	return o.invoke.Type != MetaAddPartitions || o.done.Code != kerr.InvalidPartitions.Code || o.invoke.Partitions <= maxReadPartitions
}

// mayHaveChanged reports whether o is a change (a create, delete, add of
// partitions or config change) that may have taken effect: acknowledged, or of unknown
// outcome.
func (o *metaOp) mayHaveChanged() bool {
	return !isMetaRead(o.invoke.Type) && o.outcome() != KindFail
}

// mayHaveMadeOrUnmade reports whether o is a create or delete that may
// have taken effect: a change of which incarnation the name has (adds of
// partitions and config changes keep it).
func (o *metaOp) mayHaveMadeOrUnmade() bool {
	return (o.invoke.Type == MetaCreate || o.invoke.Type == MetaDelete) && o.mayHaveChanged()
}

// shown returns what a successful describe showed: "" for absent, else the
// id ("?" when the answer carried none).
func (o *metaOp) shown() string {
	switch {
	case o.done.Absent:
		return ""
	case o.done.ID == "":
		return "?"
	}
	return o.done.ID
}

// metaAnalysis is a validated metadata history, indexed for the checkers.
type metaAnalysis struct {
	ops []metaOp
	// existing maps a topic to its existing note.
	existing map[string]MetaEvent
	// topics lists every topic named, sorted.
	topics   []string
	timeLast int64
	// finalFrom is the time of the first final describe, 0 if none.
	finalFrom int64
}

// analyzeMeta validates events and indexes them. Any malformation is an
// error: a history the recorder got wrong cannot be judged.
func analyzeMeta(events []MetaEvent) (*metaAnalysis, error) {
	a := &metaAnalysis{existing: make(map[string]MetaEvent)}
	open := make(map[int]int) // op id -> index into a.ops
	seenOp := make(map[int]bool)
	for i, e := range events {
		if i > 0 && e.Time <= events[i-1].Time {
			return nil, fmt.Errorf("event %d (%s): time %d does not follow %d", i, e, e.Time, events[i-1].Time)
		}
		a.timeLast = e.Time
		var err error
		switch e.Kind {
		case KindInvoke:
			if seenOp[e.Op] {
				return nil, fmt.Errorf("event %d (%s): op %d used twice", i, e, e.Op)
			}
			seenOp[e.Op] = true
			err = a.addInvoke(e, open)
		case KindOk, KindFail, KindInfo:
			err = a.addCompletion(e, open)
		case KindNote:
			if seenOp[e.Op] {
				return nil, fmt.Errorf("event %d (%s): op %d used twice", i, e, e.Op)
			}
			seenOp[e.Op] = true
			err = a.addExisting(e)
		default:
			err = fmt.Errorf("unknown kind %q", e.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", i, e, err)
		}
		if !slices.Contains(a.topics, e.Topic) {
			a.topics = append(a.topics, e.Topic)
		}
	}
	slices.Sort(a.topics)
	return a, nil
}

func (a *metaAnalysis) addInvoke(e MetaEvent, open map[int]int) error {
	switch {
	case e.Topic == "":
		return fmt.Errorf("no topic named")
	case !slices.Contains([]MetaType{MetaCreate, MetaDelete, MetaDescribe, MetaAddPartitions, MetaAlterConfig, MetaDescribeConfig}, e.Type):
		return fmt.Errorf("invoke of type %q", e.Type)
	case isMetaRead(e.Type) && e.Node < 0:
		return fmt.Errorf("%s on node %d: a read reads one node's image", e.Type, e.Node)
	case e.Node < NodeUnknown:
		return fmt.Errorf("node %d", e.Node)
	case e.Final && !isMetaRead(e.Type):
		return fmt.Errorf("a final %s: only describes are final reads", e.Type)
	case (e.Key != "") != (e.Type == MetaAlterConfig || e.Type == MetaDescribeConfig):
		return fmt.Errorf("a %s with config key %q: config operations, and only they, name one", e.Type, e.Key)
	case e.ID != "" || e.Absent || e.Type != MetaCreate && e.Type != MetaAddPartitions && e.Partitions != 0 || e.Value != "" && e.Type != MetaAlterConfig:
		return fmt.Errorf("an invoke carries a result")
	case a.finalFrom > 0 && !e.Final:
		return fmt.Errorf("invoked after the final reads began (at #%d): they come last", a.finalFrom)
	}
	if e.Final && a.finalFrom == 0 {
		a.finalFrom = e.Time
	}
	open[e.Op] = len(a.ops)
	a.ops = append(a.ops, metaOp{invoke: e})
	return nil
}

func (a *metaAnalysis) addCompletion(e MetaEvent, open map[int]int) error {
	at, ok := open[e.Op]
	if !ok {
		return fmt.Errorf("completes op %d, which is not open", e.Op)
	}
	delete(open, e.Op)
	o := &a.ops[at]
	inv := o.invoke
	if e.Type != inv.Type || e.Topic != inv.Topic || e.Client != inv.Client || e.Node != inv.Node || e.Key != "" && e.Key != inv.Key {
		return fmt.Errorf("does not match its invoke (%s)", inv)
	}
	if err := validateMetaResult(e); err != nil {
		return err
	}
	done := e
	o.done = &done
	return nil
}

// validateMetaResult checks what a completion carries.
func validateMetaResult(e MetaEvent) error {
	if e.Kind != KindOk {
		if e.ID != "" || e.Absent || e.Partitions != 0 || e.Value != "" {
			return fmt.Errorf("a %s carries a result", e.Kind)
		}
		return nil
	}
	switch {
	case e.Value != "" && (e.Type != MetaDescribeConfig || e.Absent):
		return fmt.Errorf("a %s's ok carries a config value", e.Type)
	case e.Type == MetaAlterConfig && (e.ID != "" || e.Absent || e.Partitions != 0):
		return fmt.Errorf("a %s's ok carries a result", e.Type)
	case e.Type == MetaDescribeConfig && (e.ID != "" || e.Partitions != 0):
		return fmt.Errorf("a %s's ok carries an id or partitions", e.Type)
	case e.Partitions < 0:
		return fmt.Errorf("%d partitions", e.Partitions)
	case (e.Type == MetaDelete || e.Type == MetaAddPartitions) && (e.ID != "" || e.Absent || e.Partitions != 0):
		return fmt.Errorf("a %s's ok carries a result", e.Type)
	case e.Type == MetaCreate && e.Absent:
		return fmt.Errorf("a create's ok says absent")
	case e.Absent && (e.ID != "" || e.Partitions != 0):
		return fmt.Errorf("absent, with an id or partitions")
	}
	return validateTopicID(e.ID)
}

// validateTopicID accepts "" and canonical UUIDs, so that one id always
// reads the same (raftmeta.TopicID.String's form).
func validateTopicID(id string) error {
	if id == "" {
		return nil
	}
	parsed, err := raftmeta.ParseTopicID(id)
	if err != nil {
		return err
	}
	if parsed.IsZero() {
		return fmt.Errorf("the zero topic id is written as no id")
	}
	if parsed.String() != id {
		return fmt.Errorf("topic id %q is not in canonical form %q", id, parsed.String())
	}
	return nil
}

func (a *metaAnalysis) addExisting(e MetaEvent) error {
	switch {
	case e.Type != MetaExisting:
		return fmt.Errorf("note of type %q", e.Type)
	case e.Topic == "":
		return fmt.Errorf("no topic named")
	case slices.Contains(a.topics, e.Topic):
		return fmt.Errorf("topic %q noted as existing after operations on it", e.Topic)
	case e.Partitions < 0 || e.Absent || e.Final:
		return fmt.Errorf("malformed existing note")
	}
	a.existing[e.Topic] = e
	return validateTopicID(e.ID)
}

// porcupineOps builds topic's operations for the model. Times are doubled,
// so that each acknowledged change's applied marker sits just after its
// answer, before any later event. Definite failures that say nothing of
// the metadata are left out, as are describes that got no answer. Changes
// of unknown outcome get an open return time after every event, each its
// own so that none tie.
func (a *metaAnalysis) porcupineOps(topic string) []porcupine.Operation {
	var ops []porcupine.Operation
	if e, ok := a.existing[topic]; ok {
		ops = append(ops, porcupine.Operation{ClientId: 0, Call: 0, Return: 0, Metadata: opMeta{op: e.Op, client: e.Client},
			Input:  &metaInput{kind: metaOpExisting, topic: topic, op: e.Op, id: e.ID, partitions: e.Partitions},
			Output: &metaOutput{}})
	}
	openReturn := 2*a.timeLast + 2
	// The config values some read showed: a config change of unknown
	// outcome whose value nobody saw is placed as one that never took
	// effect (stepAlterConfig).
	seen := make(map[[2]string]bool)
	for i := range a.ops {
		if o := &a.ops[i]; o.invoke.Topic == topic && o.invoke.Type == MetaDescribeConfig && o.outcome() == KindOk && !o.done.Absent {
			seen[[2]string{o.invoke.Key, o.done.Value}] = true
		}
	}
	for i := range a.ops {
		o := &a.ops[i]
		inv := o.invoke
		if inv.Topic != topic {
			continue
		}
		in := &metaInput{topic: topic, node: inv.Node, op: inv.Op, partitions: inv.Partitions, final: inv.Final, key: inv.Key, value: inv.Value}
		meta := opMeta{op: inv.Op, client: inv.Client}
		pop := porcupine.Operation{ClientId: inv.Client, Call: 2 * inv.Time, Input: in, Metadata: meta}
		switch inv.Type {
		case MetaCreate:
			in.kind = metaOpCreate
		case MetaDelete:
			in.kind = metaOpDelete
		case MetaAddPartitions:
			in.kind = metaOpAddPartitions
		case MetaAlterConfig:
			in.kind = metaOpAlterConfig
			in.unseen = !seen[[2]string{inv.Key, inv.Value}]
		case MetaDescribeConfig:
			in.kind = metaOpDescribeConfig
			if o.outcome() != KindOk {
				continue
			}
			pop.Output, pop.Return = &metaOutput{absent: o.done.Absent, value: o.done.Value}, 2*o.done.Time
			ops = append(ops, pop)
			continue
		default:
			in.kind = metaOpDescribe
			if o.outcome() != KindOk {
				continue // a read that got no answer
			}
			pop.Output, pop.Return = &metaOutput{absent: o.done.Absent, id: o.done.ID, partitions: o.done.Partitions}, 2*o.done.Time
			ops = append(ops, pop)
			continue
		}
		switch {
		case o.outcome() == KindOk:
			pop.Output, pop.Return = &metaOutput{outcome: metaOk, id: o.done.ID, partitions: o.done.Partitions}, 2*o.done.Time
			ops = append(ops, pop)
			if inv.Node != NodeUnknown {
				ops = append(ops, appliedMarker(inv, 2*o.done.Time+1))
			}
		case o.outcome() == KindInfo:
			openReturn += 2
			meta.info = true
			pop.Output, pop.Return, pop.Metadata = &metaOutput{outcome: metaUnknown}, openReturn, meta
			ops = append(ops, pop)
		case o.refused():
			// An add's refusal says absent, or at least the count.
			absent := o.done.Code == kerr.UnknownTopicOrPartition.Code
			pop.Output, pop.Return = &metaOutput{outcome: metaRefused, absent: absent}, 2*o.done.Time
			ops = append(ops, pop)
		}
	}
	return ops
}

// checkMetaTopic runs porcupine on one topic's operations. Each operation
// of unknown outcome may or may not have taken effect, at any moment after
// it was asked, and a dozen of them on one topic (clients timing out
// through kills and power losses: swarm seed 15700) took porcupine's
// search past 4 GB. So the history without them is checked first: placing
// none of them is one of the orders the full search tries, so an order
// found without them is one for the whole history; only when there is
// none does the full search run.
func checkMetaTopic(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	known := slices.DeleteFunc(slices.Clone(ops), func(o porcupine.Operation) bool { return o.Metadata.(opMeta).info })
	if len(known) < len(ops) && porcupine.CheckOperationsTimeout(model, known, timeout) == porcupine.Ok {
		return porcupine.Ok
	}
	return porcupine.CheckOperationsTimeout(model, ops, timeout)
}

// appliedMarker is the zero-length operation at t that says inv's node has
// applied inv's change.
func appliedMarker(inv MetaEvent, t int64) porcupine.Operation {
	return porcupine.Operation{ClientId: inv.Client, Call: t, Return: t, Metadata: opMeta{op: inv.Op, client: inv.Client},
		Input:  &metaInput{kind: metaOpApplied, topic: inv.Topic, node: inv.Node, op: inv.Op},
		Output: &metaOutput{}}
}

// explainMetaIllegal reruns porcupine with the details kept and says how
// far a legal order gets: the longest prefix it can place, the states it
// reaches, and the earliest-called operation it cannot place next.
func explainMetaIllegal(model porcupine.Model, topic string, ops []porcupine.Operation, timeout time.Duration) MetaViolation {
	v := MetaViolation{Check: CheckMetaLinearizable, Topic: topic}
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	longest := longestPartial(info)
	placed := make(map[int64]bool) // by call time, unique: events at even times, markers at odd
	state := model.Init()
	for _, o := range longest {
		placed[o.Call] = true
		_, state = model.Step(state, o.Input, o.Output)
	}
	var stuck *porcupine.Operation
	for i := range ops {
		if !placed[ops[i].Call] && (stuck == nil || ops[i].Call < stuck.Call) {
			stuck = &ops[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "topic %q: no order of its %d operations keeps the promises (meta_model.go); a legal order places at most %d, reaching %s",
		topic, len(ops), len(longest), model.DescribeState(state))
	if stuck != nil {
		fmt.Fprintf(&b, "; the earliest operation that cannot follow is %s (%s)",
			model.DescribeOperation(stuck.Input, stuck.Output), model.DescribeOperationMetadata(stuck.Metadata))
	}
	if len(longest) > 0 {
		last := longest[len(longest)-1]
		fmt.Fprintf(&b, "; the last placed is %s (%s)", model.DescribeOperation(last.Input, last.Output), model.DescribeOperationMetadata(last.Metadata))
	}
	v.Message = b.String()
	return v
}

// topicSighting is one place a topic id was seen.
type topicSighting struct {
	topic string
	id    string
	// op indexes a.ops, or is -1 for an existing note.
	op     int
	event  MetaEvent
	create bool // an acknowledged create's answer (or an existing note)
}

// sightings returns every topic id the history shows, in event order.
func (a *metaAnalysis) sightings() []topicSighting {
	var out []topicSighting
	for _, e := range a.existing {
		if e.ID != "" {
			out = append(out, topicSighting{topic: e.Topic, id: e.ID, op: -1, event: e, create: true})
		}
	}
	for i := range a.ops {
		o := &a.ops[i]
		if o.outcome() == KindOk && o.done.ID != "" {
			out = append(out, topicSighting{topic: o.invoke.Topic, id: o.done.ID, op: i, event: *o.done, create: o.invoke.Type == MetaCreate})
		}
	}
	slices.SortFunc(out, func(x, y topicSighting) int { return cmp.Compare(x.event.Time, y.event.Time) })
	return out
}

// checkTopicIDs: an id names one topic, and one creation: no id under two
// names, none answered to two creates.
func checkTopicIDs(a *metaAnalysis) []MetaViolation {
	var vs []MetaViolation
	first := make(map[string]topicSighting)
	created := make(map[string]topicSighting)
	reported := make(map[string]bool)
	for _, s := range a.sightings() {
		if f, ok := first[s.id]; ok && f.topic != s.topic && !reported[s.id] {
			reported[s.id] = true
			vs = append(vs, MetaViolation{Check: CheckTopicIDConflict, Topic: s.topic, Events: []MetaEvent{f.event, s.event},
				Message: fmt.Sprintf("topic id %s names topic %q and topic %q", s.id, f.topic, s.topic)})
		}
		if _, ok := first[s.id]; !ok {
			first[s.id] = s
		}
		if !s.create {
			continue
		}
		if c, ok := created[s.id]; ok {
			vs = append(vs, MetaViolation{Check: CheckTopicIDConflict, Topic: s.topic, Events: []MetaEvent{c.event, s.event},
				Message: fmt.Sprintf("topic id %s was given to two creations, of %q and of %q", s.id, c.topic, s.topic)})
			continue
		}
		created[s.id] = s
	}
	return vs
}

// checkPhantomTopics: a describe that shows a topic, and a create refused
// because the name exists, need a creation that can have made it: an
// existing note, or a create of the name invoked before the answer that
// did not fail and, when the answer shows an id, returned that id or
// none.
func checkPhantomTopics(a *metaAnalysis) []MetaViolation {
	var vs []MetaViolation
	for i := range a.ops {
		o := &a.ops[i]
		var id string
		switch {
		case o.invoke.Type == MetaDescribe && o.outcome() == KindOk && !o.done.Absent:
			id = o.done.ID
		case o.invoke.Type == MetaCreate && o.refused():
		default:
			continue
		}
		if a.canHaveMade(o.invoke.Topic, id, o.done.Time, i) {
			continue
		}
		what := fmt.Sprintf("topic %q with id %s", o.invoke.Topic, id)
		if id == "" {
			what = fmt.Sprintf("topic %q", o.invoke.Topic)
		}
		vs = append(vs, MetaViolation{Check: CheckPhantomTopic, Topic: o.invoke.Topic, Events: o.evidence(),
			Message: fmt.Sprintf("node %d showed %s, which no creation invoked before its answer can have made", o.invoke.Node, what)})
	}
	return vs
}

// canHaveMade reports whether some creation can have made topic with id
// ("" any) before time t, other than the operation at skip.
func (a *metaAnalysis) canHaveMade(topic, id string, t int64, skip int) bool {
	if e, ok := a.existing[topic]; ok && (id == "" || e.ID == "" || e.ID == id) {
		return true
	}
	for j := range a.ops {
		c := &a.ops[j]
		if j == skip || c.invoke.Type != MetaCreate || c.invoke.Topic != topic || c.invoke.Time > t || !c.mayHaveChanged() {
			continue
		}
		if id == "" || c.outcome() != KindOk || c.done.ID == "" || c.done.ID == id {
			return true
		}
	}
	return false
}

// checkNodeBackwards: a node's image only moves forward, so what it shows
// of a topic never returns to an incarnation it had moved past. Two signs
// that need no model: a node showing id A, later something else (absent,
// or another id), later A again; and the order of two ids contradicted
// (one node showed A then B, or A's create was answered before B's was
// invoked, while a node showed B then A).
func checkNodeBackwards(a *metaAnalysis) []MetaViolation {
	var vs []MetaViolation
	byNode := make(map[string]map[int32][]*metaOp)
	for i := range a.ops {
		o := &a.ops[i]
		if o.invoke.Type != MetaDescribe || o.outcome() != KindOk {
			continue
		}
		t := o.invoke.Topic
		if byNode[t] == nil {
			byNode[t] = make(map[int32][]*metaOp)
		}
		byNode[t][o.invoke.Node] = append(byNode[t][o.invoke.Node], o)
	}
	for _, topic := range a.topics {
		nodes := byNode[topic]
		order := newIDOrder()
		order.addCreates(a, topic)
		for _, node := range sortedNodes(nodes) {
			ds := nodes[node]
			if v, ok := returnedTo(topic, node, ds); ok {
				vs = append(vs, v)
			}
			order.addNode(node, ds)
		}
		vs = append(vs, order.conflicts(topic)...)
	}
	return vs
}

func sortedNodes(m map[int32][]*metaOp) []int32 {
	nodes := make([]int32, 0, len(m))
	for n := range m {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes
}

// returnedTo finds, among one node's describes of topic, one that shows an
// id the node had shown, then moved past: the first such, if any.
func returnedTo(topic string, node int32, ds []*metaOp) (MetaViolation, bool) {
	firstShown := make(map[string]*metaOp) // id -> the describe that first showed it, by return
	for _, d := range ds {
		if id := d.shown(); id != "" && id != "?" && (firstShown[id] == nil || d.done.Time < firstShown[id].done.Time) {
			firstShown[id] = d
		}
	}
	for _, later := range ds {
		id := later.shown()
		first := firstShown[id]
		if first == nil {
			continue
		}
		for _, mid := range ds {
			if mid.shown() != id && mid.shown() != "?" && first.done.Time < mid.invoke.Time && mid.done.Time < later.invoke.Time {
				return MetaViolation{Check: CheckNodeBackwards, Topic: topic,
					Events: append(append(first.evidence(), mid.evidence()...), later.evidence()...),
					Message: fmt.Sprintf("node %d showed topic %q as id %s, then %s, then id %s again: its image went back",
						node, topic, shortTopicID(id), describeShown(mid.shown()), shortTopicID(id))}, true
			}
		}
	}
	return MetaViolation{}, false
}

func describeShown(shown string) string {
	if shown == "" {
		return "absent"
	}
	return "id " + shortTopicID(shown)
}

// idFact says that id before precedes id after in a topic's log, and what
// shows it.
type idFact struct {
	before, after string
	why           string
	events        []MetaEvent
}

// createOrder adds the order of topic's acknowledged creations that real
// time fixes: one answered before the other was invoked.
func (o *idOrder) addCreates(a *metaAnalysis, topic string) {
	var creates []*metaOp
	for i := range a.ops {
		c := &a.ops[i]
		if c.invoke.Type == MetaCreate && c.invoke.Topic == topic && c.outcome() == KindOk && c.done.ID != "" {
			creates = append(creates, c)
		}
	}
	for _, x := range creates {
		for _, y := range creates {
			if x.done.Time < y.invoke.Time && x.done.ID != y.done.ID {
				o.add(idFact{before: x.done.ID, after: y.done.ID, events: append(x.evidence(), y.evidence()...),
					why: fmt.Sprintf("the creation of id %s was answered before that of id %s was invoked", shortTopicID(x.done.ID), shortTopicID(y.done.ID))})
			}
		}
	}
}

// idOrder collects the facts about the order of one topic's ids, the
// first found for each ordered pair.
type idOrder struct {
	facts []idFact
	known map[[2]string]int // (before, after) -> index into facts
}

func newIDOrder() *idOrder { return &idOrder{known: make(map[[2]string]int)} }

func (o *idOrder) add(f idFact) {
	key := [2]string{f.before, f.after}
	if _, ok := o.known[key]; !ok {
		o.known[key] = len(o.facts)
		o.facts = append(o.facts, f)
	}
}

// addNode adds what one node's describes (in invoke order) show of the
// order: an id shown by a describe answered before another showing a
// different id was invoked precedes that id.
func (o *idOrder) addNode(node int32, ds []*metaOp) {
	byReturn := slices.Clone(ds)
	slices.SortFunc(byReturn, func(x, y *metaOp) int { return cmp.Compare(x.done.Time, y.done.Time) })
	shownBy := make(map[string]*metaOp) // id -> the first describe to show it, among those answered so far
	var shown []string
	k := 0
	for _, y := range ds {
		for ; k < len(byReturn) && byReturn[k].done.Time < y.invoke.Time; k++ {
			if id := byReturn[k].shown(); id != "" && id != "?" && shownBy[id] == nil {
				shownBy[id] = byReturn[k]
				shown = append(shown, id)
			}
		}
		after := y.shown()
		if after == "" || after == "?" {
			continue
		}
		for _, before := range shown {
			if before != after {
				x := shownBy[before]
				o.add(idFact{before: before, after: after, events: append(x.evidence(), y.evidence()...),
					why: fmt.Sprintf("node %d showed id %s, then id %s", node, shortTopicID(before), shortTopicID(after))})
			}
		}
	}
}

// conflicts returns a violation for each pair of ids ordered both ways.
func (o *idOrder) conflicts(topic string) []MetaViolation {
	var vs []MetaViolation
	for i, f := range o.facts {
		j, ok := o.known[[2]string{f.after, f.before}]
		if !ok || j > i {
			continue
		}
		g := o.facts[j]
		vs = append(vs, MetaViolation{Check: CheckNodeBackwards, Topic: topic, Events: uniqueMetaEvents(append(slices.Clone(g.events), f.events...)),
			Message: fmt.Sprintf("topic %q: %s, but %s: some node's image went back", topic, g.why, f.why)})
	}
	return vs
}

// uniqueMetaEvents returns es without repeats, in time order.
func uniqueMetaEvents(es []MetaEvent) []MetaEvent {
	out := slices.Clone(es)
	slices.SortFunc(out, func(x, y MetaEvent) int { return cmp.Compare(x.Time, y.Time) })
	return slices.CompactFunc(out, func(x, y MetaEvent) bool { return x.Time == y.Time })
}
