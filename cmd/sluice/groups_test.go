package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupMember is one franz-go group consumer: what it consumed and the
// partitions it owns, as its callbacks report them.
type groupMember struct {
	name string
	cl   *kgo.Client

	mu       sync.Mutex
	consumed map[string]int
	owned    map[int32]bool
	done     chan struct{}
}

// startMember starts a group consumer of topic in group that commits what
// it consumed after each poll (autocommit off), until ctx ends or it is
// closed.
func startMember(ctx context.Context, t *testing.T, addrs []string, group, topic, name string, opts ...kgo.Opt) *groupMember {
	m := &groupMember{name: name, consumed: map[string]int{}, owned: map[int32]bool{}, done: make(chan struct{})}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ClientID(name), kgo.RetryTimeout(30 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				m.owned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			// Commit what was consumed before giving partitions up, as a
			// careful consumer does.
			cl.CommitUncommittedOffsets(ctx)
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				delete(m.owned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				delete(m.owned, p)
			}
		})}, opts...)...)
	require.NoError(t, err)
	m.cl = cl
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				m.mu.Lock()
				m.consumed[string(r.Value)]++
				m.mu.Unlock()
			})
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Logf("%s: commit: %v", name, err)
			}
		}
	}()
	return m
}

func (m *groupMember) ownedCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

func (m *groupMember) has(value string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumed[value] > 0
}

// times is how often the member consumed value.
func (m *groupMember) times(value string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumed[value]
}

// close leaves the group (franz-go sends LeaveGroup) after committing.
func (m *groupMember) close() {
	m.cl.Close()
	<-m.done
}

// produceTagged produces n records tagged tag, round-robin over the
// topic's partitions, acks=all, and returns their values.
func produceTagged(ctx context.Context, t *testing.T, addrs []string, topic, tag string, n int, opts ...kgo.Opt) []string {
	pr, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
	require.NoError(t, err)
	defer pr.Close()
	var recs []*kgo.Record
	var values []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", tag, i)
		values = append(values, v)
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	require.NoError(t, pr.ProduceSync(ctx, recs...).FirstErr())
	return values
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		require.NoError(t, ctx.Err(), "waiting for %s", what)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGroupConsumersShareATopicAndOneTakesOverWhenTheOtherLeaves: two
// franz-go group members split a topic's four partitions, consume and
// commit; one leaves, the other takes its partitions over and consumes
// what comes next on them, and the committed offsets (kadm.FetchOffsets)
// are the partitions' ends. Once with the classic protocol
// (cooperative-sticky, franz-go's default; DescribeGroups shows one Stable
// member at the end), once with franz-go's KIP-848 consumer
// (kgo.ServerSideBalancer: ConsumerGroupHeartbeat, the broker's uniform
// assignor, revoke before assign; DescribeConsumerGroups shows it).
func TestGroupConsumersShareATopicAndOneTakesOverWhenTheOtherLeaves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0")
	adm := c.adminClient()
	addrs := c.addrs()
	for _, tc := range []struct {
		protocol string
		opts     []kgo.Opt
		// members checks the group's description: how many members, and
		// if one, that it is member-b.
		members func(ctx context.Context, group string, want int)
	}{
		{"classic", nil, func(ctx context.Context, group string, want int) {
			described, err := adm.DescribeGroups(ctx, group)
			require.NoError(t, err)
			g := described[group]
			require.NoError(t, g.Err)
			require.Equal(t, "Stable", g.State)
			require.Len(t, g.Members, want)
			if want == 1 {
				require.Equal(t, "member-b", g.Members[0].ClientID)
			}
		}},
		{"consumer", []kgo.Opt{kgo.ServerSideBalancer()}, func(ctx context.Context, group string, want int) {
			described, err := adm.DescribeConsumerGroups(ctx, group)
			require.NoError(t, err)
			g := described[group]
			require.NoError(t, g.Err)
			require.Equal(t, "uniform", g.AssignorName)
			require.Len(t, g.Members, want)
			if want == 1 {
				require.Equal(t, "member-b", g.Members[0].ClientID)
			}
		}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			topic, group := "orders-"+tc.protocol, "shop-"+tc.protocol
			createReplicatedTopic(ctx, t, adm, topic, 4)

			first := produceTagged(ctx, t, addrs, topic, "first", 200)
			a := startMember(ctx, t, addrs, group, topic, "member-a", tc.opts...)
			b := startMember(ctx, t, addrs, group, topic, "member-b", tc.opts...)
			waitFor(t, ctx, "both members to own partitions", func() bool { return a.ownedCount() == 2 && b.ownedCount() == 2 })
			waitFor(t, ctx, "the first records consumed", func() bool {
				for _, v := range first {
					if !a.has(v) && !b.has(v) {
						return false
					}
				}
				return true
			})
			if tc.protocol == "classic" {
				topics, err := adm.ListTopics(ctx, "__consumer_offsets")
				require.NoError(t, err)
				detail := topics["__consumer_offsets"]
				require.True(t, detail.IsInternal)
				require.Len(t, detail.Partitions, 5)
				for _, p := range detail.Partitions {
					require.Len(t, p.Replicas, 3)
				}
			}
			tc.members(ctx, group, 2)

			a.close()
			waitFor(t, ctx, "member-b to own every partition", func() bool { return b.ownedCount() == 4 })
			second := produceTagged(ctx, t, addrs, topic, "second", 100)
			waitFor(t, ctx, "member-b to consume every later record", func() bool {
				for _, v := range second {
					if !b.has(v) {
						return false
					}
				}
				return true
			})
			waitCommittedEnds(ctx, t, adm, group, topic, 4)
			tc.members(ctx, group, 1)
			b.close()
		})
	}
}

// TestKcatGroupConsumerCommits: kcat -G (librdkafka's balanced consumer)
// against a single node, whose __consumer_offsets gets one replica,
// consumes five records and commits them on exit.
func TestKcatGroupConsumerCommits(t *testing.T) {
	kcat := kcatPath(t)
	addr := freePort(t)
	startBroker(t, addr, t.TempDir())
	runKcat(t, kcat, "a\nb\nc\nd\ne\nf\ng\n", "-b", addr, "-P", "-t", "kcat-group-topic", "-X", "topic.request.required.acks=-1")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", addr, "-G", "kcat-group", "-c", "5", "-q", "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", "kcat-group-topic")
	out, err := cmd.Output()
	require.NoError(t, err, "kcat -G")
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, strings.Fields(string(out)))

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, "kcat-group")
	require.NoError(t, err)
	got, ok := offsets.Lookup("kcat-group-topic", 0)
	require.True(t, ok, "kcat committed nothing")
	require.Equal(t, int64(5), got.At)
}

// waitCommittedEnds waits until group's committed offsets of topic are
// its partitions' ends.
func waitCommittedEnds(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, partitions int32) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	waitFor(t, ctx, "the commits to reach the partitions' ends", func() bool {
		offsets, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p := int32(0); p < partitions; p++ {
			end, _ := ends.Lookup(topic, p)
			got, ok := offsets.Lookup(topic, p)
			if !ok || got.At != end.Offset {
				return false
			}
		}
		return true
	})
}

// TestGroupCarriesOnFromItsCommitsWhenTheCoordinatorIsKilled: a franz-go
// group consumer commits everything it consumed; the group's coordinator
// is kill -9'd; records produced afterwards are consumed, none of those
// committed before is consumed again (the group resumed at its commits,
// which the new coordinator replayed), and the commits reach the new ends.
func TestGroupCarriesOnFromItsCommitsWhenTheCoordinatorIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := c.adminClient()
	createReplicatedTopic(ctx, t, adm, "payments", 3)
	addrs := c.addrs()

	before := produceTagged(ctx, t, addrs, "payments", "before", 150)
	m := startMember(ctx, t, addrs, "ledger", "payments", "member")
	defer m.close()
	waitFor(t, ctx, "the first records consumed", func() bool {
		for _, v := range before {
			if !m.has(v) {
				return false
			}
		}
		return true
	})
	waitCommittedEnds(ctx, t, adm, "ledger", "payments", 3)

	found := adm.FindGroupCoordinators(ctx, "ledger")
	co, ok := found["ledger"]
	require.True(t, ok)
	require.NoError(t, co.Err)
	coordinator := c.nodes[co.NodeID-1]
	c.kill(coordinator)
	var alive []string
	for _, nd := range c.nodes {
		if nd != coordinator {
			alive = append(alive, nd.addr)
		}
	}

	// Not idempotent: the killed node may have been the active controller,
	// and InitProducerId fails (UNKNOWN_SERVER_ERROR, not retried) until
	// its successor is known.
	after := produceTagged(ctx, t, alive, "payments", "after", 150, kgo.DisableIdempotentWrite())
	waitFor(t, ctx, "the records produced after the kill consumed", func() bool {
		for _, v := range after {
			if !m.has(v) {
				return false
			}
		}
		return true
	})
	for _, v := range before {
		require.Equal(t, 1, m.times(v), "%s was consumed again: the group did not resume at its commits", v)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(alive...), kgo.RetryTimeout(30*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	waitCommittedEnds(ctx, t, kadm.NewClient(cl), "ledger", "payments", 3)
	moved := kadm.NewClient(cl).FindGroupCoordinators(ctx, "ledger")["ledger"]
	require.NoError(t, moved.Err)
	require.NotEqual(t, co.NodeID, moved.NodeID)
}
