package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// consumption is one record as a group member of another client (sarama,
// kafka-go) saw it.
type consumption struct {
	member     string
	generation int32 // -1 where the client does not say
	partition  int32
	offset     int64
	value      string
}

// consumedLog is every consumption of one group's members, in the order
// they happened, shared by the members' goroutines.
type consumedLog struct {
	mu     sync.Mutex
	events []consumption
}

func (l *consumedLog) add(c consumption) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, c)
}

func (l *consumedLog) snapshot() []consumption {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]consumption(nil), l.events...)
}

// missing is how many of values no member has consumed, and the first of
// them.
func (l *consumedLog) missing(values []string) (int, string) {
	seen := map[string]bool{}
	for _, c := range l.snapshot() {
		seen[c.value] = true
	}
	n, first := 0, ""
	for _, v := range values {
		if !seen[v] {
			if n == 0 {
				first = v
			}
			n++
		}
	}
	return n, first
}

// waitConsumed waits until every one of values was consumed by some member.
func (l *consumedLog) waitConsumed(ctx context.Context, t *testing.T, what string, values []string) {
	t.Helper()
	waitFor(t, ctx, what, func() bool {
		n, _ := l.missing(values)
		return n == 0
	})
}

// waitConsumedBy waits until every one of values was consumed by member.
func (l *consumedLog) waitConsumedBy(ctx context.Context, t *testing.T, member string, values []string) {
	t.Helper()
	waitFor(t, ctx, member+" to consume every later record", func() bool {
		seen := map[string]bool{}
		for _, c := range l.snapshot() {
			if c.member == member {
				seen[c.value] = true
			}
		}
		for _, v := range values {
			if !seen[v] {
				return false
			}
		}
		return true
	})
}

// requireOneOwnerPerGeneration fails if two members consumed from one
// partition in one generation: the coordinator gave a partition to two
// members at once. Consumptions without a generation are not checked.
func (l *consumedLog) requireOneOwnerPerGeneration(t checkT) {
	t.Helper()
	type key struct {
		generation int32
		partition  int32
	}
	owners := map[key]map[string]bool{}
	for _, c := range l.snapshot() {
		if c.generation < 0 {
			continue
		}
		k := key{c.generation, c.partition}
		if owners[k] == nil {
			owners[k] = map[string]bool{}
		}
		owners[k][c.member] = true
	}
	var bad []string
	for k, ms := range owners {
		if len(ms) > 1 {
			var names []string
			for m := range ms {
				names = append(names, m)
			}
			sort.Strings(names)
			bad = append(bad, fmt.Sprintf("generation %d partition %d: %s", k.generation, k.partition, strings.Join(names, ", ")))
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "partitions consumed by two members in one generation")
}

// requireOneValuePerOffset fails if one offset of a partition was seen
// with two values: the log or a fetch is corrupt.
func (l *consumedLog) requireOneValuePerOffset(t checkT) {
	t.Helper()
	type key struct {
		partition int32
		offset    int64
	}
	at := map[key]string{}
	for _, c := range l.snapshot() {
		k := key{c.partition, c.offset}
		if v, ok := at[k]; ok && v != c.value {
			require.Failf(t, "two values at one offset", "partition %d offset %d: %q and %q", c.partition, c.offset, v, c.value)
		}
		at[k] = c.value
	}
}

// positions is, per partition, one past the highest offset consumed.
func (l *consumedLog) positions() map[int32]int64 {
	pos := map[int32]int64{}
	for _, c := range l.snapshot() {
		if c.offset+1 > pos[c.partition] {
			pos[c.partition] = c.offset + 1
		}
	}
	return pos
}

// requireCommittedIsConsumed: group's committed offsets of topic
// (kadm.FetchOffsets) are, per partition, the members' consumed positions,
// and those are the partitions' log ends.
func requireCommittedIsConsumed(ctx context.Context, t *testing.T, adm *kadm.Client, log *consumedLog, group, topic string, partitions int32) {
	t.Helper()
	waitCommittedEnds(ctx, t, adm, group, topic, partitions)
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	offsets, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	pos := log.positions()
	for p := range partitions {
		end, _ := ends.Lookup(topic, p)
		got, ok := offsets.Lookup(topic, p)
		require.True(t, ok, "partition %d: nothing committed", p)
		require.Equal(t, end.Offset, got.At, "partition %d: committed offset is not the log end", p)
		require.Equal(t, pos[p], got.At, "partition %d: committed offset is not the consumed position", p)
	}
}

// assignedPartitions is, per member client id, how many partitions of
// topic the group's coordinator assigned it (DescribeGroups, the consumer
// protocol's assignment as the leader wrote it), and the group's state.
func assignedPartitions(ctx context.Context, adm *kadm.Client, group, topic string) (map[string]int, string, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, "", err
	}
	g := described[group]
	if g.Err != nil {
		return nil, "", g.Err
	}
	out := map[string]int{}
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, "", fmt.Errorf("member %s: not a consumer protocol assignment", m.ClientID)
		}
		for _, tp := range a.Topics {
			if tp.Topic == topic {
				out[m.ClientID] += len(tp.Partitions)
			}
		}
	}
	return out, g.State, nil
}

// The checks of consumedLog fail on what they exist to catch, so that the
// client tests relying on them can fail.
func TestConsumedLogChecksCatchTheirViolations(t *testing.T) {
	ok := &consumedLog{}
	ok.add(consumption{member: "a", generation: 1, partition: 0, offset: 0, value: "x"})
	ok.add(consumption{member: "b", generation: 2, partition: 0, offset: 0, value: "x"})
	ok.add(consumption{member: "b", generation: 2, partition: 1, offset: 0, value: "y"})
	ok.requireOneOwnerPerGeneration(t)
	ok.requireOneValuePerOffset(t)
	require.Equal(t, map[int32]int64{0: 1, 1: 1}, ok.positions())
	n, first := ok.missing([]string{"x", "y", "z", "w"})
	require.Equal(t, 2, n)
	require.Equal(t, "z", first)

	for name, tc := range map[string]struct {
		events []consumption
		check  func(checkT, *consumedLog)
	}{
		"two owners in one generation": {
			[]consumption{{member: "a", generation: 3, partition: 2, offset: 5, value: "v"}, {member: "b", generation: 3, partition: 2, offset: 6, value: "w"}},
			func(t checkT, l *consumedLog) { l.requireOneOwnerPerGeneration(t) },
		},
		"two values at one offset": {
			[]consumption{{member: "a", partition: 0, offset: 4, value: "v"}, {member: "b", partition: 0, offset: 4, value: "w"}},
			func(t checkT, l *consumedLog) { l.requireOneValuePerOffset(t) },
		},
		"a committed offset consumed again": {
			[]consumption{{member: "a", partition: 0, offset: 1, value: "v"}, {member: "b", partition: 0, offset: 1, value: "v"}},
			func(t checkT, l *consumedLog) {
				committed := kadm.OffsetResponses{}
				committed.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "t", Partition: 0, At: 2}})
				requireNoRedeliveryBelow(t, l, committed, "t")
			},
		},
		"a member that consumed nothing after": {
			[]consumption{{member: "a", partition: 0, offset: 1, value: "after-0"}},
			func(t checkT, l *consumedLog) { requireEachConsumed(t, l, []string{"after-0"}, "a", "b") },
		},
	} {
		l := &consumedLog{}
		for _, e := range tc.events {
			l.add(e)
		}
		require.True(t, fails(func(t checkT) { tc.check(t, l) }), "%s: not caught", name)
	}
}

// checkT is what the checks need of a *testing.T, so that a test can run
// them against a recorder.
type checkT interface {
	require.TestingT
	Helper()
}

// failRecorder is a checkT that remembers a failure; FailNow ends the
// goroutine as testing's does.
type failRecorder struct{ failed bool }

func (f *failRecorder) Errorf(string, ...any) { f.failed = true }
func (f *failRecorder) FailNow()              { f.failed = true; runtime.Goexit() }
func (f *failRecorder) Helper()               {}

// fails reports whether check fails, run on its own goroutine.
func fails(check func(checkT)) bool {
	f := &failRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(f)
	}()
	<-done
	return f.failed
}
