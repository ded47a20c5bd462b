package jepsen

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A generator of metadata histories that a correct cluster could produce:
// one committed log of changes, decided by a controller against its
// latest state at one instant between call and answer; nodes applying its
// prefix, each at its own pace; a change answered only once the node that
// took it has applied it; describes answered from the node's prefix; some
// answers lost (info) before or after the change committed, and changes
// whose answer was lost before they committed landing later, or never.
// Every such history must pass; mutated ones must not.

type metaGenConfig struct {
	clients, ops, topics, nodes int
}

var metaGenSmall = metaGenConfig{clients: 4, ops: 60, topics: 2, nodes: 3}

// metaGenChange is one committed change: the state it leaves its topic in.
type metaGenChange struct {
	topic      string
	present    bool
	id         raftmeta.TopicID
	partitions int32
	// retention is the topic's retention.ms ("" none set).
	retention string
}

// metaGenKey is the config key the generator changes and reads.
const metaGenKey = "retention.ms"

type metaGenOp struct {
	id         OpID
	typ        MetaType
	topic      string
	node       int32
	partitions int32
	value      string // a config change's
	decided    bool
	refused    bool
	// at is the log's length once its change committed.
	at      int
	topicID raftmeta.TopicID
}

type metaGen struct {
	r   *rand.Rand
	cfg metaGenConfig
	h   *MetaHistory
	log []metaGenChange
	// applied is each node's applied prefix of log (node n at n-1).
	applied []int
	limbo   []*metaGenOp
	ids     int
}

// genMetaHistory generates a history and the final images of its nodes.
func genMetaHistory(seed uint64, cfg metaGenConfig) (*MetaHistory, []FinalImage) {
	g := &metaGen{r: rand.New(rand.NewPCG(seed, 0x3e7a)), cfg: cfg, h: NewMetaHistory(), applied: make([]int, cfg.nodes)}
	busy := make([]*metaGenOp, cfg.clients)
	invoked := 0
	for invoked < cfg.ops || slices.ContainsFunc(busy, func(o *metaGenOp) bool { return o != nil }) {
		c := g.r.IntN(cfg.clients)
		switch {
		case busy[c] == nil && invoked < cfg.ops:
			busy[c] = g.invoke(c)
			invoked++
		case busy[c] != nil:
			if g.advance(busy[c]) {
				busy[c] = nil
			}
		}
		if g.r.IntN(3) == 0 {
			g.catchUp(int32(1+g.r.IntN(cfg.nodes)), g.r.IntN(len(g.log)+1))
		}
		if len(g.limbo) > 0 && g.r.IntN(8) == 0 {
			g.resolve(g.r.IntN(len(g.limbo)))
		}
	}
	for len(g.limbo) > 0 {
		g.resolve(0)
	}
	var finals []FinalImage
	for n := range cfg.nodes {
		node := int32(n + 1)
		g.catchUp(node, len(g.log))
		f := FinalImage{Node: node, Applied: uint64(len(g.log)), Topics: make(map[string]TopicSummary)}
		for t := range cfg.topics {
			if s, _ := g.state(topicName(t), len(g.log)); s.present {
				sum := TopicSummary{ID: s.id, Partitions: s.partitions}
				if s.retention != "" {
					sum.Configs = map[string]string{metaGenKey: s.retention}
				}
				f.Topics[s.topic] = sum
			}
		}
		finals = append(finals, f)
		g.h.FinalImage(cfg.clients, f)
	}
	return g.h, finals
}

func topicName(i int) string { return fmt.Sprintf("t%d", i) }

// state returns topic's state in the log's prefix of length k, and its
// version there (the number of changes of topic in the prefix).
func (g *metaGen) state(topic string, k int) (metaGenChange, int) {
	s, version := metaGenChange{topic: topic}, 0
	for _, c := range g.log[:k] {
		if c.topic == topic {
			s = c
			version++
		}
	}
	return s, version
}

func (g *metaGen) catchUp(node int32, k int) {
	g.applied[node-1] = max(g.applied[node-1], k)
}

func (g *metaGen) invoke(client int) *metaGenOp {
	o := &metaGenOp{topic: topicName(g.r.IntN(g.cfg.topics)), node: int32(1 + g.r.IntN(g.cfg.nodes))}
	switch n := g.r.IntN(20); {
	case n < 7:
		o.typ, o.partitions = MetaCreate, int32(1+g.r.IntN(3))
		if g.r.IntN(15) == 0 {
			o.partitions = 0
		}
		o.id = g.h.InvokeCreate(client, o.node, o.topic, o.partitions)
	case n < 11:
		o.typ = MetaDelete
		o.id = g.h.InvokeDelete(client, o.node, o.topic)
	case n < 14:
		o.typ, o.partitions = MetaAddPartitions, int32(2+g.r.IntN(4))
		o.id = g.h.InvokeAddPartitions(client, o.node, o.topic, o.partitions)
	case n < 16:
		o.typ = MetaAlterConfig
		if g.r.IntN(4) > 0 {
			o.value = fmt.Sprint(60000 * (1 + g.r.IntN(4)))
		}
		o.id = g.h.InvokeAlterConfig(client, o.node, o.topic, metaGenKey, o.value)
	case n < 17:
		o.typ = MetaDescribeConfig
		o.id = g.h.InvokeDescribeConfig(client, o.node, o.topic, metaGenKey)
	default:
		o.typ = MetaDescribe
		o.id = g.h.InvokeDescribe(client, o.node, o.topic)
	}
	return o
}

// advance moves a busy operation on one step; it reports whether the
// client is idle again.
func (g *metaGen) advance(o *metaGenOp) bool {
	if o.typ == MetaDescribe || o.typ == MetaDescribeConfig {
		if g.r.IntN(3) == 0 {
			g.catchUp(o.node, g.r.IntN(len(g.log)+1))
		}
		s, _ := g.state(o.topic, g.applied[o.node-1])
		switch {
		case s.present && o.typ == MetaDescribeConfig:
			g.h.DescribeConfigValue(o.id, s.retention)
		case s.present:
			g.h.DescribeExists(o.id, s.id, s.partitions)
		default:
			g.h.DescribeAbsent(o.id)
		}
		return true
	}
	if !o.decided {
		switch {
		case o.partitions == 0 && o.typ == MetaCreate:
			g.h.Complete(o.id, kerr.InvalidPartitions)
			return true
		case g.r.IntN(15) == 0:
			g.h.Complete(o.id, [2]error{kerr.NotController, kerr.RequestTimedOut}[g.r.IntN(2)])
			g.limbo = append(g.limbo, o) // it may commit later, or never
			return true
		}
		g.decide(o)
		return false
	}
	switch {
	case o.refused && o.typ == MetaCreate:
		g.h.Complete(o.id, kerr.TopicAlreadyExists)
	case o.refused && o.typ == MetaAddPartitions && o.topicID != (raftmeta.TopicID{}):
		g.h.Complete(o.id, kerr.InvalidPartitions) // it has that many
	case o.refused:
		g.h.Complete(o.id, kerr.UnknownTopicOrPartition)
	case g.r.IntN(10) == 0:
		g.h.Info(o.id, errors.New("connection reset")) // committed, the answer lost
	case o.typ == MetaCreate:
		g.catchUp(o.node, o.at)
		g.h.CreateOk(o.id, o.topicID, o.partitions)
	case o.typ == MetaAddPartitions:
		g.catchUp(o.node, o.at)
		g.h.AddPartitionsOk(o.id)
	case o.typ == MetaAlterConfig:
		g.catchUp(o.node, o.at)
		g.h.AlterConfigOk(o.id)
	default:
		g.catchUp(o.node, o.at)
		g.h.DeleteOk(o.id)
	}
	return true
}

// decide is the controller's decision on o, against the latest state:
// commit its change, or refuse it.
func (g *metaGen) decide(o *metaGenOp) {
	o.decided = true
	s, _ := g.state(o.topic, len(g.log))
	if o.typ == MetaAlterConfig {
		if !s.present {
			o.refused = true
			return
		}
		c := s
		c.retention = o.value
		g.log = append(g.log, c)
		o.at = len(g.log)
		return
	}
	if o.typ == MetaAddPartitions {
		// Refused if absent, or if it has that many already (topicID
		// then says it was present).
		if !s.present || s.partitions >= o.partitions {
			o.refused, o.topicID = true, s.id
			return
		}
		c := s
		c.partitions = o.partitions
		g.log = append(g.log, c)
		o.at = len(g.log)
		return
	}
	if s.present == (o.typ == MetaCreate) {
		o.refused = true
		return
	}
	c := metaGenChange{topic: o.topic}
	if o.typ == MetaCreate {
		g.ids++
		c.present, c.partitions = true, o.partitions
		binary.BigEndian.PutUint32(c.id[:], uint32(g.ids))
		c.id[6], c.id[8] = 0x40, 0x80
		o.topicID = c.id
	}
	g.log = append(g.log, c)
	o.at = len(g.log)
}

// resolve lands or drops the change of unknown outcome at limbo[i].
func (g *metaGen) resolve(i int) {
	o := g.limbo[i]
	g.limbo = slices.Delete(g.limbo, i, i+1)
	if g.r.IntN(2) == 0 {
		g.decide(o) // a refusal now answers nobody
	}
}

func metaSeeds(t testing.TB) int { return seeds(t) }

func TestSweepRandomLegalMetaHistoriesPass(t *testing.T) {
	strict := metaConfig()
	strict.StrictRefusals = true
	for seed := range uint64(metaSeeds(t)) {
		h, finals := genMetaHistory(seed, metaGenSmall)
		for _, cfg := range []MetaConfig{metaConfig(), strict} {
			if r := CheckMeta(h, cfg); !r.OK() {
				t.Fatalf("seed %d, strict %v: legal history rejected:\n%s", seed, cfg.StrictRefusals, r)
			}
		}
		if vs, err := CheckConverged(h.Events(), finals); err != nil || len(vs) > 0 {
			t.Fatalf("seed %d: converged check: %v %v", seed, err, vs)
		}
	}
}

func TestGeneratedMetaHistoriesAreVaried(t *testing.T) {
	kinds := make(map[string]int)
	for seed := range uint64(10) {
		h, _ := genMetaHistory(seed, metaGenSmall)
		for _, e := range h.Events() {
			k := fmt.Sprintf("%s %s", e.Type, e.Kind)
			switch {
			case e.Kind == KindOk && e.Absent:
				k += " absent"
			case e.Code != 0:
				k += " " + kerr.ErrorForCode(e.Code).(*kerr.Error).Message
			}
			kinds[k]++
		}
	}
	for _, want := range []string{"create_topic ok", "create_topic info", "create_topic fail TOPIC_ALREADY_EXISTS", "create_topic fail INVALID_PARTITIONS",
		"delete_topic ok", "delete_topic info", "delete_topic fail UNKNOWN_TOPIC_OR_PARTITION", "describe_topic ok", "describe_topic ok absent",
		"add_partitions ok", "add_partitions info", "add_partitions fail INVALID_PARTITIONS", "add_partitions fail UNKNOWN_TOPIC_OR_PARTITION",
		"alter_config ok", "alter_config info", "alter_config fail UNKNOWN_TOPIC_OR_PARTITION", "describe_config ok", "describe_config ok absent"} {
		if kinds[want] == 0 {
			t.Errorf("no %q in ten histories: %v", want, kinds)
		}
	}
}

// metaFacts indexes a generated history for the mutations: what each
// acknowledged create made, and each topic's incarnations in order.
type metaFacts struct {
	events []MetaEvent
	// invokes maps an op to its invoke's index.
	invokes map[int]int
	// created maps an acknowledged create's id to its ok's index.
	created map[string]int
}

func newMetaFacts(events []MetaEvent) *metaFacts {
	f := &metaFacts{events: slices.Clone(events), invokes: make(map[int]int), created: make(map[string]int)}
	for i, e := range f.events {
		switch {
		case e.Kind == KindInvoke:
			f.invokes[e.Op] = i
		case e.Kind == KindOk && e.Type == MetaCreate:
			f.created[e.ID] = i
		}
	}
	return f
}

func (f *metaFacts) invoke(i int) MetaEvent { return f.events[f.invokes[f.events[i].Op]] }

// okDescribes returns the indexes of successful describes, final or not.
func (f *metaFacts) okDescribes(final bool) []int {
	var is []int
	for i, e := range f.events {
		if e.Kind == KindOk && e.Type == MetaDescribe && f.invoke(i).Final == final {
			is = append(is, i)
		}
	}
	return is
}

// olderCreated returns the acknowledged creations of topic answered
// before the one that made id was invoked: incarnations older than id's.
func (f *metaFacts) olderCreated(topic, id string) []int {
	made, ok := f.created[id]
	if !ok {
		return nil
	}
	var out []int
	for _, i := range f.created {
		if e := f.events[i]; e.Topic == topic && e.Time < f.invoke(made).Time {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

func showCreated(e *MetaEvent, created MetaEvent) {
	e.Absent, e.ID, e.Partitions = false, created.ID, created.Partitions
}

func fresh(r *rand.Rand) string {
	var id raftmeta.TopicID
	binary.BigEndian.PutUint64(id[8:], r.Uint64()|1)
	id[0], id[6], id[8] = 0xff, 0x40, 0x80
	return id.String()
}

// Mutations of one event that no correct cluster could produce: each
// must be rejected whenever it applies.
func TestSweepRandomMetaMutationsFail(t *testing.T) {
	mutations := []struct {
		name   string
		mutate func(r *rand.Rand, f *metaFacts) bool
		// cfg, if set, generates other histories (with seeds times as
		// many of them, of which a tenth must be mutable), for a
		// mutation that needs a rarer pattern.
		cfg   *metaGenConfig
		seeds int
	}{
		{"a present topic missing from one final describe", func(r *rand.Rand, f *metaFacts) bool {
			is := slices.DeleteFunc(f.okDescribes(true), func(i int) bool { return f.events[i].Absent })
			if len(is) == 0 {
				return false
			}
			e := &f.events[is[r.IntN(len(is))]]
			e.Absent, e.ID, e.Partitions = true, "", 0
			return true
		}, nil, 1},
		{"a final describe with an id nobody was given", func(r *rand.Rand, f *metaFacts) bool {
			is := slices.DeleteFunc(f.okDescribes(true), func(i int) bool { return f.events[i].Absent })
			if len(is) == 0 {
				return false
			}
			f.events[is[r.IntN(len(is))]].ID = fresh(r)
			return true
		}, nil, 1},
		{"a deleted topic back in one final describe", func(r *rand.Rand, f *metaFacts) bool {
			var is []int
			for _, i := range f.okDescribes(true) {
				if f.events[i].Absent && len(f.olderCreatedThan(f.events[i].Topic, f.events[i].Time)) > 0 {
					is = append(is, i)
				}
			}
			if len(is) == 0 {
				return false
			}
			e := &f.events[is[r.IntN(len(is))]]
			older := f.olderCreatedThan(e.Topic, e.Time)
			showCreated(e, f.events[older[r.IntN(len(older))]])
			return true
		}, nil, 1},
		{"a node showing an incarnation older than one it had shown", func(r *rand.Rand, f *metaFacts) bool {
			var pairs [][2]int // (describe to mutate, the older creation to show)
			for _, later := range f.okDescribes(false) {
				for _, earlier := range f.okDescribes(false) {
					e, l := f.events[earlier], f.events[later]
					if e.Node != l.Node || e.Topic != l.Topic || e.Time >= f.invoke(later).Time || e.Absent {
						continue
					}
					for _, old := range f.olderCreated(e.Topic, e.ID) {
						pairs = append(pairs, [2]int{later, old})
					}
				}
			}
			if len(pairs) == 0 {
				return false
			}
			p := pairs[r.IntN(len(pairs))]
			showCreated(&f.events[p[0]], f.events[p[1]])
			return true
		}, nil, 1},
		{"a describe showing an incarnation created after it", func(r *rand.Rand, f *metaFacts) bool {
			var pairs [][2]int
			for _, d := range f.okDescribes(false) {
				for _, c := range f.created {
					if e := f.events[c]; e.Topic == f.events[d].Topic && f.invoke(c).Time > f.events[d].Time {
						pairs = append(pairs, [2]int{d, c})
					}
				}
			}
			if len(pairs) == 0 {
				return false
			}
			slices.SortFunc(pairs, func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
			p := pairs[r.IntN(len(pairs))]
			showCreated(&f.events[p[0]], f.events[p[1]])
			return true
		}, nil, 1},
		{"a node showing fewer partitions than an add it acknowledged", func(r *rand.Rand, f *metaFacts) bool {
			var is []int
			var below []int32
			for _, d := range f.okDescribes(false) {
				if n, ok := f.shrinkable(d); ok {
					is, below = append(is, d), append(below, n)
				}
			}
			if len(is) == 0 {
				return false
			}
			k := r.IntN(len(is))
			f.events[is[k]].Partitions = below[k]
			return true
		}, &metaGenConfig{clients: 4, ops: 120, topics: 2, nodes: 2}, 3},
		{"a creation answered with another partition count", func(r *rand.Rand, f *metaFacts) bool {
			if len(f.created) == 0 {
				return false
			}
			is := sortedValues(f.created)
			f.events[is[r.IntN(len(is))]].Partitions++
			return true
		}, nil, 1},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			mutated := 0
			seeds, least := metaSeeds(t), metaSeeds(t)/3
			if m.cfg != nil {
				seeds, least = m.seeds*metaSeeds(t), m.seeds*metaSeeds(t)/10
			}
			for seed := range uint64(seeds) {
				cfg := metaGenSmall
				if m.cfg != nil {
					cfg = *m.cfg
				}
				h, _ := genMetaHistory(seed, cfg)
				f := newMetaFacts(h.Events())
				if !m.mutate(rand.New(rand.NewPCG(seed, 2)), f) {
					continue
				}
				mutated++
				if r := CheckMetaEvents(f.events, metaConfig()); r.Verdict != Invalid {
					t.Fatalf("seed %d: mutated history accepted:\n%s", seed, r)
				}
			}
			if mutated < least {
				t.Fatalf("only %d of %d histories could be mutated", mutated, seeds)
			}
		})
	}
}

// shrinkable reports whether describe d shows a topic with at least the
// count of an add that its node acknowledged before d was invoked, with no
// create of the topic invoked in between (so d shows that add's
// incarnation), and returns one fewer than that add's count: a count its
// node had moved past.
func (f *metaFacts) shrinkable(d int) (int32, bool) {
	e, inv := f.events[d], f.invoke(d)
	for i, g := range f.events {
		if g.Type != MetaAddPartitions || g.Kind != KindOk || g.Topic != e.Topic || g.Node != e.Node || g.Time >= inv.Time {
			continue
		}
		ginv := f.invoke(i)
		if e.Absent || ginv.Partitions > e.Partitions {
			continue
		}
		// A new incarnation (with fewer partitions) needs a deletion that
		// may have taken effect after the add: one invoked before d and
		// not definitely failed, answered after the add's invoke or of
		// unknown outcome (it may land at any time).
		recreated := slices.ContainsFunc(f.events, func(c MetaEvent) bool {
			return c.Type == MetaDelete && c.Topic == e.Topic && f.invoke(f.completion(c)).Time < e.Time &&
				(c.Kind == KindOk && c.Time > ginv.Time || c.Kind == KindInfo)
		})
		if !recreated {
			return ginv.Partitions - 1, true
		}
	}
	return 0, false
}

// completion returns the index of event c (a completion).
func (f *metaFacts) completion(c MetaEvent) int {
	return slices.IndexFunc(f.events, func(e MetaEvent) bool { return e.Op == c.Op && e.Kind == c.Kind })
}

// olderCreatedThan returns the acknowledged creations of topic answered
// before time t.
func (f *metaFacts) olderCreatedThan(topic string, t int64) []int {
	var out []int
	for _, i := range sortedValues(f.created) {
		if e := f.events[i]; e.Topic == topic && e.Time < t {
			out = append(out, i)
		}
	}
	return out
}

func sortedValues(m map[string]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// Mutations of one event chosen at random, some of which a correct
// cluster could have produced (a stale describe made staler, say): the
// checker must catch most, and the figure is logged.
func TestSweepRandomMetaEventMutationsMostlyFail(t *testing.T) {
	caught, mutated := 0, 0
	kinds := make(map[string][2]int)
	for seed := range uint64(metaSeeds(t)) {
		h, _ := genMetaHistory(seed, metaGenSmall)
		for k := range uint64(10) {
			f := newMetaFacts(h.Events())
			r := rand.New(rand.NewPCG(seed, 100+k))
			kind, ok := mutateOneEvent(r, f)
			if !ok {
				continue
			}
			mutated++
			res := CheckMetaEvents(f.events, metaConfig())
			if res.Err != nil {
				t.Fatalf("seed %d: the mutation %q made a malformed history: %v", seed, kind, res.Err)
			}
			c := kinds[kind]
			c[1]++
			if res.Verdict == Invalid {
				caught++
				c[0]++
			}
			kinds[kind] = c
		}
	}
	t.Logf("caught %d of %d random one-event mutations (%.0f%%)", caught, mutated, 100*float64(caught)/float64(mutated))
	for _, k := range sortedKeys(kinds) {
		t.Logf("  %-40s %d of %d", k, kinds[k][0], kinds[k][1])
	}
	if mutated < 100 || caught*10 < mutated*7 {
		t.Fatalf("caught %d of %d mutations, want at least 70%%", caught, mutated)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// mutateOneEvent changes one completion of f at random, keeping the
// history well formed, and says how.
func mutateOneEvent(r *rand.Rand, f *metaFacts) (string, bool) {
	var is []int
	for i, e := range f.events {
		if e.Kind == KindOk || e.Kind == KindFail && (e.Code != kerr.InvalidPartitions.Code || e.Type == MetaAddPartitions) {
			is = append(is, i)
		}
	}
	if len(is) == 0 {
		return "", false
	}
	i := is[r.IntN(len(is))]
	e := &f.events[i]
	ids := sortedKeys(f.created)
	switch {
	case e.Type == MetaDescribe && e.Absent && len(ids) > 0 && r.IntN(2) == 0:
		showCreated(e, f.events[f.created[ids[r.IntN(len(ids))]]])
		return "describe: absent to some incarnation", true
	case e.Type == MetaDescribe && e.Absent:
		e.Absent, e.ID, e.Partitions = false, fresh(r), 1
		return "describe: absent to a fresh id", true
	case e.Type == MetaDescribe && r.IntN(3) == 0:
		e.Absent, e.ID, e.Partitions = true, "", 0
		return "describe: present to absent", true
	case e.Type == MetaDescribe && r.IntN(2) == 0:
		e.Partitions++
		return "describe: another partition count", true
	case e.Type == MetaDescribe:
		e.ID = fresh(r)
		return "describe: a fresh id", true
	case e.Type == MetaCreate && e.Kind == KindOk && r.IntN(2) == 0:
		e.ID = fresh(r)
		return "create ok: a fresh id", true
	case e.Type == MetaCreate && e.Kind == KindOk:
		e.Kind, e.ID, e.Partitions, e.Code, e.Error = KindFail, "", 0, kerr.TopicAlreadyExists.Code, kerr.TopicAlreadyExists.Error()
		return "create ok: refused", true
	case e.Type == MetaCreate:
		e.Kind, e.ID, e.Partitions, e.Code, e.Error = KindOk, fresh(r), f.invoke(i).Partitions, 0, ""
		return "create refused: ok", true
	case e.Type == MetaDescribeConfig && e.Absent:
		e.Absent, e.Value = false, fmt.Sprint(60000*(1+r.IntN(4)))
		return "describe_config: absent to a value", true
	case e.Type == MetaDescribeConfig && r.IntN(3) == 0:
		e.Absent, e.Value = true, ""
		return "describe_config: present to absent", true
	case e.Type == MetaDescribeConfig:
		e.Value = "7"
		return "describe_config: a value nobody set", true
	case e.Type == MetaAlterConfig && e.Kind == KindOk:
		e.Kind, e.Code, e.Error = KindFail, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Error()
		return "alter_config ok: refused as unknown", true
	case e.Type == MetaAlterConfig:
		e.Kind, e.Code, e.Error = KindOk, 0, ""
		return "alter_config refused: ok", true
	case e.Type == MetaAddPartitions && e.Kind == KindOk:
		e.Kind, e.Code, e.Error = KindFail, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Error()
		return "add partitions ok: refused as unknown", true
	case e.Type == MetaAddPartitions:
		e.Kind, e.Code, e.Error = KindOk, 0, ""
		return "add partitions refused: ok", true
	case e.Type == MetaDelete && e.Kind == KindOk:
		e.Kind, e.Code, e.Error = KindFail, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Error()
		return "delete ok: refused", true
	}
	e.Kind, e.Code, e.Error = KindOk, 0, ""
	return "delete refused: ok", true
}

func TestGeneratedMetaHistoriesAreDeterministic(t *testing.T) {
	a, fa := genMetaHistory(7, metaGenSmall)
	b, fb := genMetaHistory(7, metaGenSmall)
	if !slices.Equal(a.Events(), b.Events()) || len(fa) != len(fb) {
		t.Fatal("same seed, different histories")
	}
	if ra, rb := CheckMeta(a, metaConfig()), CheckMeta(b, metaConfig()); ra.String() != rb.String() {
		t.Fatal("same history, different results")
	}
}

// BenchmarkCheckMeta measures histories of the size a simulator run
// records: many operations on few topics, much concurrency.
func BenchmarkCheckMeta(b *testing.B) {
	for _, cfg := range []metaGenConfig{{clients: 5, ops: 200, topics: 2, nodes: 3}, {clients: 8, ops: 1000, topics: 4, nodes: 5}} {
		h, _ := genMetaHistory(1, cfg)
		b.Run(fmt.Sprintf("clients=%d/ops=%d/topics=%d", cfg.clients, cfg.ops, cfg.topics), func(b *testing.B) {
			for b.Loop() {
				if r := CheckMeta(h, MetaConfig{}); !r.OK() {
					b.Fatal(r)
				}
			}
		})
	}
}
