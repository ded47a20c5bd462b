package simrun

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/jepsen"
)

// Metamorphic runs (sluice sim compare): one seed's workload, with no
// faults, under configurations that must not change what its clients see:
// how fetches are served (sendfile, copied, every chunk from the file),
// how many produces a producer keeps in flight, segment and index sizes,
// how often the recovery checkpoint is written; for a cluster, the
// replication factor and the metadata snapshot schedule. Each variant must
// pass its own checks, and what its producers were told must agree with
// the base run's (sameAcknowledgements). A difference is a violation that
// no single run can show: a configuration that changes what clients see.

// A Variant is one configuration a seed is compared under: settings
// applied after the base run's.
type Variant struct {
	Name string
	Set  []string
}

// VariantResult is one variant's run and how it differed from the base.
type VariantResult struct {
	Variant
	// Config is the variant's run, for replaying it.
	Config      Config
	Summary     Summary
	Differences []string
	// Skipped says why the seed cannot take the variant, if it cannot.
	Skipped string
}

// Comparison is a seed run as a base and under each variant.
type Comparison struct {
	Base     Summary
	Variants []VariantResult
}

// OK says every variant agreed with the base, and every run passed.
func (c Comparison) OK() bool {
	if !c.Base.OK() {
		return false
	}
	for _, v := range c.Variants {
		if len(v.Differences) > 0 {
			return false
		}
	}
	return true
}

// Variants lists the configurations a seed of that shape is compared under.
func Variants(cluster bool) []Variant {
	if cluster {
		return []Variant{
			{"sendfile-all", []string{"fetchpath=sendfile-all"}},
			{"copy-small", []string{"fetchpath=sendfile"}},
			{"rf=1", []string{"rf=1"}},
			{"rf=3", []string{"rf=3"}},
			{"snapshots-often", []string{"snapshots=1024", "snapshotevery=1s"}},
			{"snapshots-rare", []string{"snapshots=1048576", "snapshotevery=1h"}},
		}
	}
	return []Variant{
		{"copy", []string{"fetchpath=copy"}},
		{"sendfile", []string{"fetchpath=sendfile"}},
		{"sendfile-all", []string{"fetchpath=sendfile-all"}},
		{"inflight=1", []string{"inflight=1"}},
		{"inflight=5", []string{"inflight=5"}},
		{"segment=1KiB", []string{"segment=1024"}},
		{"segment=1MiB", []string{"segment=1048576"}},
		{"index-every-batch", []string{"indexinterval=1"}},
		{"checkpoint=500ms", []string{"checkpoint=500ms"}},
	}
}

// Compare runs cfg's seed without faults as the base, then under each
// variant, and says how each differed.
func Compare(cfg Config, variants []Variant) Comparison {
	base := cfg
	base.Set = append(slices.Clone(cfg.Set), "faults=none")
	if c, err := Choose(cfg); err == nil && c.Shape.Nodes > 1 {
		// What moves a cluster's leaders without a fault (reassignments,
		// preferred-leader elections) refuses produces at moments that
		// depend on timing, and acks=1 answers are unknown outcomes:
		// both out, so every variant's producers are told the same.
		base.Set = append(base.Set, "moves=false", "rebalance=1h", "acks1=0")
	}
	c := Comparison{Base: Run(base)}
	for _, v := range variants {
		vc := base
		vc.Set = append(slices.Clone(base.Set), v.Set...)
		if _, err := Choose(vc); err != nil {
			// Not a configuration this seed can take (a page-cache seed
			// needs replicas): nothing to compare.
			c.Variants = append(c.Variants, VariantResult{Variant: v, Config: vc, Skipped: err.Error()})
			continue
		}
		s := Run(vc)
		res := VariantResult{Variant: v, Config: vc, Summary: s}
		if !s.OK() {
			res.Differences = append(res.Differences, "the variant fails its own checks: "+firstLine(s.Details()))
		}
		res.Differences = append(res.Differences, sameAcknowledgements(c.Base, s)...)
		c.Variants = append(c.Variants, res)
	}
	return c
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// acked is what one producer was told of one partition: the values
// acknowledged, in offset order, and their offsets.
type acked struct {
	values  []string
	offsets []int64
}

// ackKey names a producer's acknowledgements of one partition, or of all
// of them (byPartition false: tp is the zero value).
type ackKey struct {
	client int
	tp     jepsen.TopicPartition
}

func (k ackKey) String() string {
	if k.tp == (jepsen.TopicPartition{}) {
		return fmt.Sprintf("client %d on any partition", k.client)
	}
	return fmt.Sprintf("client %d on %s", k.client, k.tp)
}

func compareAckKeys(x, y ackKey) int {
	return cmp.Or(cmp.Compare(x.tp.Topic, y.tp.Topic), cmp.Compare(x.tp.Partition, y.tp.Partition), cmp.Compare(x.client, y.client))
}

// acknowledgements gathers the acknowledged produces of the history that
// were invoked before safetyEnd, by producer and partition: the liveness
// phase's produces draw fresh values wherever each run's producers got to.
//
// With byPartition false (a cluster run, whose data clients draw each
// produce's partition after however many metadata refreshes the run
// needed), a producer's values are gathered across partitions, in the
// order it invoked them.
func acknowledgements(events []jepsen.Event, safetyEnd time.Duration, byPartition bool) map[ackKey]*acked {
	invokes := map[int]jepsen.Event{}
	type ack struct {
		value  string
		offset int64
	}
	byKey := map[ackKey][]ack{}
	for _, e := range events {
		switch {
		case e.Type != jepsen.TypeProduce:
		case e.Kind == jepsen.KindInvoke:
			if time.Duration(e.Virtual) < safetyEnd {
				invokes[e.Op] = e
			}
		case e.Kind == jepsen.KindOk && e.Offset != jepsen.OffsetUnknown:
			inv, ok := invokes[e.Op]
			if !ok {
				continue
			}
			key, order := ackKey{inv.Client, inv.TopicPartition}, e.Offset
			if !byPartition {
				key, order = ackKey{client: inv.Client}, inv.Time
			}
			for i, v := range inv.Values {
				byKey[key] = append(byKey[key], ack{v, order + int64(i)})
			}
		}
	}
	out := map[ackKey]*acked{}
	for _, key := range slices.SortedFunc(maps.Keys(byKey), compareAckKeys) {
		acks := byKey[key]
		slices.SortFunc(acks, func(x, y ack) int { return cmp.Compare(x.offset, y.offset) })
		a := &acked{}
		for _, x := range acks {
			a.values, a.offsets = append(a.values, x.value), append(a.offsets, x.offset)
		}
		out[key] = a
	}
	return out
}

// sameAcknowledgements holds a variant to what the base run's producers
// were told in the safety phase. Their workload is the same draw for draw
// (think times, partitions, values), but timing differs, so one run may
// get further before the safety phase ends: for each producer and
// partition, one run's acknowledged values must be the beginning of the
// other's, in the same order; where a partition has one producer, at the
// same offsets. In a cluster run, each producer's values across
// partitions, in order.
func sameAcknowledgements(base, variant Summary) []string {
	byPartition := base.Nodes <= 1
	a, b := acknowledgements(base.History, base.Duration, byPartition), acknowledgements(variant.History, variant.Duration, byPartition)
	keys := map[ackKey]bool{}
	producers := map[jepsen.TopicPartition]int{} // partition -> clients that wrote it, in either run
	for _, m := range []map[ackKey]*acked{a, b} {
		for _, key := range slices.SortedFunc(maps.Keys(m), compareAckKeys) {
			if !keys[key] {
				keys[key] = true
				producers[key.tp]++
			}
		}
	}
	var diffs []string
	for _, key := range slices.SortedFunc(maps.Keys(keys), compareAckKeys) {
		x, y := a[key], b[key]
		if x == nil {
			x = &acked{}
		}
		if y == nil {
			y = &acked{}
		}
		n := min(len(x.values), len(y.values))
		if i := mismatch(x.values[:n], y.values[:n]); i >= 0 {
			diffs = append(diffs, fmt.Sprintf("%s: acknowledgement %d is %q in the base run, %q in the variant", key, i, x.values[i], y.values[i]))
			continue
		}
		if byPartition && producers[key.tp] == 1 {
			if i := mismatch(x.offsets[:n], y.offsets[:n]); i >= 0 {
				diffs = append(diffs, fmt.Sprintf("%s, its only producer: %q acknowledged at offset %d in the base run, %d in the variant", key, x.values[i], x.offsets[i], y.offsets[i]))
			}
		}
	}
	return diffs
}

func mismatch[T comparable](x, y []T) int {
	for i := range x {
		if x[i] != y[i] {
			return i
		}
	}
	return -1
}
