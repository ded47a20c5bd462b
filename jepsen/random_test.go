package jepsen

import (
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

type generator struct {
	r      *rand.Rand
	h      *History
	logs   map[TopicPartition][]string
	limbo  []*genOp // info produces not applied yet: they may land later
	values int
}

func genHistory(seed uint64, cfg genConfig) *History {
	g := &generator{r: rand.New(rand.NewPCG(seed, 0x5eed)), h: NewHistory(), logs: make(map[TopicPartition][]string)}
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
		id := g.h.InvokeFinalRead(cfg.clients, tp)
		g.h.FetchOk(id, log(0, g.logs[tp]...))
	}
	return g.h
}

func (g *generator) invoke(client int, tp TopicPartition) *genOp {
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
	if o.typ == TypeProduce {
		o.offset = int64(len(l))
		g.logs[o.tp] = append(l, o.values...)
		return
	}
	if o.from > int64(len(l)) {
		o.outRange = true
		return
	}
	n := g.r.IntN(len(l) - int(o.from) + 1)
	if o.max > 0 {
		n = min(n, o.max)
	}
	o.records = log(o.from, l[o.from:o.from+int64(n)]...)
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

var genSmall = genConfig{clients: 4, ops: 60, partitions: 2}

func TestSweepRandomLegalHistoriesPass(t *testing.T) {
	for seed := range uint64(seeds(t)) {
		h := genHistory(seed, genSmall)
		if r := Check(h, checkConfig()); !r.OK() {
			t.Fatalf("seed %d: legal history rejected:\n%s", seed, r)
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
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			mutated := 0
			for seed := range uint64(seeds(t)) {
				h := genHistory(seed, genSmall)
				events := cloneEvents(h.Events())
				r := rand.New(rand.NewPCG(seed, 1))
				e := &events[len(events)-1] // the last final read
				if !m.mutate(r, e.Records, ackedValues(events)) {
					continue
				}
				e.Records = slices.DeleteFunc(e.Records, func(x Record) bool { return x.Offset == -2 })
				for i := range e.Records {
					e.Records[i].Offset = int64(i)
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
