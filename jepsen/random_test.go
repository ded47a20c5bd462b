package jepsen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A generator of histories that a correct broker could produce: clients
// call, a real log applies each call at one instant between call and
// return, and some answers are lost (info) or refused (fail). Every such
// history must pass; mutated ones must not.

type genConfig struct {
	clients    int
	ops        int
	partitions int
	// deletes mixes in DeleteRecords, some of whose answers are lost, and
	// crashes that bring back a log start not yet durable.
	deletes bool
}

type genOp struct {
	id       OpID
	typ      Type
	tp       TopicPartition
	values   []string
	from     int64
	max      int
	applied  bool
	offset   int64
	records  []Record
	outRange bool
}

// genStart is a partition's log start: in memory, and what a crash keeps;
// crashes counts the crashes, so that a DeleteRecords in flight across
// one loses its answer.
type genStart struct {
	start, durable int64
	crashes        int
}

type generator struct {
	r      *rand.Rand
	cfg    genConfig
	h      *History
	logs   map[TopicPartition][]string
	starts map[TopicPartition]*genStart
	limbo  []*genOp // info produces not applied yet: they may land later
	values int
}

func genHistory(seed uint64, cfg genConfig) *History {
	g := &generator{r: rand.New(rand.NewPCG(seed, 0x5eed)), cfg: cfg, h: NewHistory(),
		logs: make(map[TopicPartition][]string), starts: make(map[TopicPartition]*genStart)}
	busy := make([]*genOp, cfg.clients)
	invoked := 0
	for invoked < cfg.ops || slices.ContainsFunc(busy, func(o *genOp) bool { return o != nil }) {
		c := g.r.IntN(cfg.clients)
		switch {
		case busy[c] == nil && invoked < cfg.ops:
			busy[c] = g.invoke(c, TopicPartition{Topic: "t", Partition: int32(g.r.IntN(cfg.partitions))})
			invoked++
		case busy[c] != nil:
			if g.advance(busy[c]) {
				busy[c] = nil
			}
		}
		if len(g.limbo) > 0 && g.r.IntN(10) == 0 {
			g.land(g.r.IntN(len(g.limbo)))
		}
	}
	for len(g.limbo) > 0 {
		if g.r.IntN(2) == 0 {
			g.land(0)
		} else {
			g.limbo = g.limbo[1:]
		}
	}
	for p := range cfg.partitions {
		tp := TopicPartition{Topic: "t", Partition: int32(p)}
		start := g.start(tp).start
		id := g.h.InvokeFinalRead(cfg.clients, tp, start)
		g.h.FetchOk(id, log(start, g.logs[tp][start:]...))
	}
	return g.h
}

func (g *generator) start(tp TopicPartition) *genStart {
	if g.starts[tp] == nil {
		g.starts[tp] = &genStart{}
	}
	return g.starts[tp]
}

func (g *generator) invoke(client int, tp TopicPartition) *genOp {
	if g.cfg.deletes && g.r.IntN(8) == 0 {
		o := &genOp{typ: TypeDeleteRecords, tp: tp, from: int64(g.r.IntN(len(g.logs[tp])+2)) - 1}
		o.id = g.h.InvokeDeleteRecords(client, tp, o.from)
		return o
	}
	if g.r.IntN(10) < 6 {
		o := &genOp{typ: TypeProduce, tp: tp}
		for range 1 + g.r.IntN(2) {
			o.values = append(o.values, "v"+strconv.Itoa(g.values))
			g.values++
		}
		o.id = g.h.InvokeProduce(client, tp, true, o.values...)
		return o
	}
	o := &genOp{typ: TypeFetch, tp: tp, from: int64(g.r.IntN(len(g.logs[tp]) + 2)), max: g.r.IntN(4)}
	o.id = g.h.InvokeFetch(client, tp, o.from, o.max)
	return o
}

// advance moves a busy operation on one step; it reports whether the
// client is idle again.
func (g *generator) advance(o *genOp) bool {
	if !o.applied {
		switch n := g.r.IntN(20); {
		case o.typ == TypeProduce && n == 0:
			g.h.Complete(o.id, kerr.NotEnoughReplicas)
			return true
		case o.typ == TypeProduce && n == 1:
			g.h.Complete(o.id, kerr.RequestTimedOut)
			g.limbo = append(g.limbo, o)
			return true
		}
		g.apply(o)
		return false
	}
	if o.typ == TypeDeleteRecords {
		g.completeDelete(o)
		return true
	}
	switch {
	case o.typ == TypeProduce && g.r.IntN(10) == 0:
		g.h.Info(o.id, fmt.Errorf("connection reset"))
	case o.typ == TypeProduce:
		g.h.ProduceOk(o.id, o.offset)
	case o.outRange:
		g.h.Complete(o.id, kerr.OffsetOutOfRange)
	default:
		g.h.FetchOk(o.id, o.records)
	}
	return true
}

func (g *generator) apply(o *genOp) {
	o.applied = true
	l := g.logs[o.tp]
	st := g.start(o.tp)
	switch o.typ {
	case TypeProduce:
		o.offset = int64(len(l))
		g.logs[o.tp] = append(l, o.values...)
		return
	case TypeDeleteRecords:
		if upTo, ok := g.deleteUpTo(o); ok {
			st.start = max(st.start, upTo) // in memory: not durable yet
			o.offset, o.max = upTo, st.crashes
		} else {
			o.outRange = true
		}
		return
	}
	if o.from > int64(len(l)) || o.from < st.start {
		o.outRange = true
		return
	}
	n := g.r.IntN(len(l) - int(o.from) + 1)
	if o.max > 0 {
		n = min(n, o.max)
	}
	o.records = log(o.from, l[o.from:o.from+int64(n)]...)
}

// deleteUpTo is where a DeleteRecords moves the log start to, or false if
// it asks beyond the end (the broker refuses it).
func (g *generator) deleteUpTo(o *genOp) (int64, bool) {
	end := int64(len(g.logs[o.tp]))
	if o.from == DeleteToHighWatermark {
		return end, true
	}
	return o.from, o.from <= end
}

// completeDelete answers an applied DeleteRecords: most are acknowledged
// once their start is durable; some lose their answer, their start durable
// or not, and a crash then brings back the durable start.
func (g *generator) completeDelete(o *genOp) {
	st := g.start(o.tp)
	if o.outRange {
		g.h.Complete(o.id, kerr.OffsetOutOfRange)
		return
	}
	if o.max != st.crashes {
		g.h.Info(o.id, errors.New("broker crashed")) // and its effect with it
		return
	}
	switch n := g.r.IntN(10); {
	case n == 0:
		st.durable = st.start // durable, the answer lost
		g.h.Info(o.id, errors.New("connection reset"))
	case n == 1:
		st.start = st.durable // a crash: what was not durable is gone
		st.crashes++
		g.h.Info(o.id, errors.New("broker crashed"))
	default:
		st.durable = st.start
		g.h.DeleteRecordsOk(o.id, st.start)
	}
}

func (g *generator) land(i int) {
	o := g.limbo[i]
	g.limbo = slices.Delete(g.limbo, i, i+1)
	g.logs[o.tp] = append(g.logs[o.tp], o.values...)
}

func seeds(t testing.TB) int {
	n := 30
	if s := os.Getenv("SLUICE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SLUICE_SEEDS=%q: %v", s, err)
		}
		n = v
	}
	return n
}

var (
	genSmall   = genConfig{clients: 4, ops: 60, partitions: 2}
	genDeletes = genConfig{clients: 4, ops: 60, partitions: 2, deletes: true}
)

func TestSweepRandomLegalHistoriesPass(t *testing.T) {
	for _, cfg := range []genConfig{genSmall, genDeletes} {
		for seed := range uint64(seeds(t)) {
			h := genHistory(seed, cfg)
			if r := Check(h, checkConfig()); !r.OK() {
				t.Fatalf("seed %d, deletes %v: legal history rejected:\n%s", seed, cfg.deletes, r)
			}
		}
	}
}

// Mutations of legal histories that a correct broker could not produce.
func TestSweepRandomMutationsFail(t *testing.T) {
	mutations := []struct {
		name   string
		mutate func(r *rand.Rand, final []Record, acked map[string]bool) bool
	}{
		{"an acknowledged record dropped from the final read", func(r *rand.Rand, final []Record, acked map[string]bool) bool {
			i, ok := pickAcked(r, final, acked)
			if !ok {
				return false
			}
			copy(final[i:], final[i+1:])
			final[len(final)-1] = Record{Offset: -2} // marks the cut; trimmed below
			return true
		}},
		{"two records swapped in the final read", func(r *rand.Rand, final []Record, acked map[string]bool) bool {
			i, ok := pickAcked(r, final, acked)
			if !ok || len(final) < 2 {
				return false
			}
			j := (i + 1) % len(final)
			final[i].Value, final[j].Value = final[j].Value, final[i].Value
			return true
		}},
	}
	for _, cfg := range []genConfig{genSmall, genDeletes} {
		for _, m := range mutations {
			t.Run(fmt.Sprintf("%s, deletes %v", m.name, cfg.deletes), func(t *testing.T) {
				mutated := 0
				for seed := range uint64(seeds(t)) {
					h := genHistory(seed, cfg)
					events := cloneEvents(h.Events())
					r := rand.New(rand.NewPCG(seed, 1))
					e := &events[len(events)-1] // the last final read
					from := events[len(events)-2].From
					if !m.mutate(r, e.Records, ackedValues(events)) {
						continue
					}
					e.Records = slices.DeleteFunc(e.Records, func(x Record) bool { return x.Offset == -2 })
					for i := range e.Records {
						e.Records[i].Offset = from + int64(i)
					}
					mutated++
					if res := CheckEvents(events, checkConfig()); res.Verdict != Invalid {
						t.Fatalf("seed %d: mutated history accepted:\n%s", seed, res)
					}
				}
				if mutated == 0 {
					t.Fatal("no history could be mutated")
				}
			})
		}
	}
}

func cloneEvents(es []Event) []Event {
	out := slices.Clone(es)
	for i := range out {
		out[i].Records = slices.Clone(out[i].Records)
	}
	return out
}

func ackedValues(events []Event) map[string]bool {
	produces := make(map[int]Event)
	acked := make(map[string]bool)
	for _, e := range events {
		switch {
		case e.Kind == KindInvoke && e.Type == TypeProduce:
			produces[e.Op] = e
		case e.Kind == KindOk && e.Type == TypeProduce:
			for _, v := range produces[e.Op].Values {
				acked[v] = true
			}
		}
	}
	return acked
}

func pickAcked(r *rand.Rand, final []Record, acked map[string]bool) (int, bool) {
	var is []int
	for i, rec := range final {
		if acked[rec.Value] {
			is = append(is, i)
		}
	}
	if len(is) == 0 {
		return 0, false
	}
	return is[r.IntN(len(is))], true
}

func TestGeneratedHistoriesAreDeterministic(t *testing.T) {
	a, b := genHistory(7, genSmall), genHistory(7, genSmall)
	ra, rb := Check(a, checkConfig()), Check(b, checkConfig())
	if ra.String() != rb.String() || len(a.Events()) != len(b.Events()) {
		t.Fatal("same seed, different histories or results")
	}
}

// BenchmarkCheck measures a long single-partition history with much
// concurrency, the shape of a simulator run.
func BenchmarkCheck(b *testing.B) {
	for _, cfg := range []genConfig{{clients: 5, ops: 500, partitions: 1}, {clients: 5, ops: 2000, partitions: 1}, {clients: 10, ops: 2000, partitions: 1}} {
		h := genHistory(1, cfg)
		b.Run(fmt.Sprintf("clients=%d/ops=%d", cfg.clients, cfg.ops), func(b *testing.B) {
			for b.Loop() {
				if r := Check(h, Config{}); !r.OK() {
					b.Fatal(r)
				}
			}
		})
	}
}
