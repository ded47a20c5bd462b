package main

import (
	"context"
	"errors"
	"log"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// saramaMember is one member of a sarama ConsumerGroup: it records what
// it consumes in a shared log, marks every message (sarama's offset
// manager commits the marks every 100 ms and on close), and knows which
// partitions it is consuming now (a ConsumeClaim is running for them).
type saramaMember struct {
	name string
	cg   sarama.ConsumerGroup
	log  *consumedLog

	mu    sync.Mutex
	owned map[int32]bool
	done  chan struct{}
}

func saramaConfig(name string, version sarama.KafkaVersion, strategy sarama.BalanceStrategy) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = name
	cfg.Version = version
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	cfg.Consumer.Group.Rebalance.Retry.Max = 20
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 250 * time.Millisecond
	cfg.Metadata.Retry.Max = 20
	cfg.Metadata.Retry.Backoff = 250 * time.Millisecond
	cfg.Net.DialTimeout = 2 * time.Second
	return cfg
}

// startSaramaMember starts a member of group consuming topic until ctx
// ends or it is closed. newStrategy makes its balance strategy (the
// cooperative one is stateful: one per member).
func startSaramaMember(ctx context.Context, t *testing.T, addrs []string, group, topic, name string, version sarama.KafkaVersion,
	newStrategy func() sarama.BalanceStrategy, log *consumedLog) *saramaMember {
	cg, err := sarama.NewConsumerGroup(addrs, group, saramaConfig(name, version, newStrategy()))
	require.NoError(t, err)
	m := &saramaMember{name: name, cg: cg, log: log, owned: map[int32]bool{}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			err := cg.Consume(ctx, []string{topic}, m)
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
			if err != nil && ctx.Err() == nil {
				t.Logf("%s: consume: %v", name, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return m
}

func (m *saramaMember) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	m.setOwned(claim.Partition(), true)
	defer m.setOwned(claim.Partition(), false)
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.log.add(consumption{member: m.name, generation: sess.GenerationID(), partition: msg.Partition,
				offset: msg.Offset, value: string(msg.Value)})
			sess.MarkMessage(msg, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (m *saramaMember) setOwned(p int32, owned bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if owned {
		m.owned[p] = true
	} else {
		delete(m.owned, p)
	}
}

func (m *saramaMember) ownedCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

// close leaves the group (LeaveGroup) after committing what was marked.
func (m *saramaMember) close(t *testing.T) {
	require.NoError(t, m.cg.Close(), "%s: close", m.name)
	<-m.done
}

func init() {
	if os.Getenv("SLUICE_SARAMA_LOG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
}

// TestSaramaConsumerGroupSharesATopicAndSurvivorsTakeOver: a sarama
// ConsumerGroup of three members consumes a topic of six partitions
// (replication factor 3) produced before they start; every record is
// consumed, no partition is consumed by two members in one generation,
// and the commits (kadm.FetchOffsets) are the consumed positions and the
// log ends. One member leaves; the two others take its partitions over
// and consume what is produced next. Sarama decides the request versions
// from Config.Version: V4_0_0_0 sends JoinGroup v8, SyncGroup v5,
// Heartbeat v4, OffsetCommit v8, OffsetFetch v8 and LeaveGroup v5 (run with
// the eager range strategy and with cooperative-sticky, which revokes
// before it is assigned); V1_0_0_0 sends JoinGroup v2, SyncGroup v1,
// Heartbeat v1, OffsetCommit v3, OffsetFetch v3 and LeaveGroup v1 (with
// the eager sticky strategy). Older sarama versions (V0_10_2_0: JoinGroup
// v1, OffsetCommit v2) fetch with Fetch v3, which Sluice does not serve
// (Kafka 4 removed Fetch 0-3), so they cannot consume here.
func TestSaramaConsumerGroupSharesATopicAndSurvivorsTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0")
	adm := c.adminClient()
	addrs := c.addrs()
	for _, tc := range []struct {
		name     string
		version  sarama.KafkaVersion
		strategy func() sarama.BalanceStrategy
	}{
		{"v4.0-range", sarama.V4_0_0_0, sarama.NewBalanceStrategyRange},
		{"v4.0-cooperative-sticky", sarama.V4_0_0_0, sarama.NewBalanceStrategyCooperativeSticky},
		{"v1.0-sticky", sarama.V1_0_0_0, sarama.NewBalanceStrategySticky},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const partitions = 6
			topic, group := "sarama-"+tc.name, "sarama-group-"+tc.name
			createReplicatedTopic(ctx, t, adm, topic, partitions)

			first := produceTagged(ctx, t, addrs, topic, "first", 300)
			consumed := &consumedLog{}
			var members []*saramaMember
			for _, name := range []string{"sarama-a", "sarama-b", "sarama-c"} {
				members = append(members, startSaramaMember(ctx, t, addrs, group, topic, name, tc.version, tc.strategy, consumed))
			}
			a, b, cc := members[0], members[1], members[2]
			waitFor(t, ctx, "three members to own two partitions each", func() bool {
				return a.ownedCount() == 2 && b.ownedCount() == 2 && cc.ownedCount() == 2
			})
			consumed.waitConsumed(ctx, t, "the first records consumed", first)
			requireCommittedIsConsumed(ctx, t, adm, consumed, group, topic, partitions)
			assigned, state, err := assignedPartitions(ctx, adm, group, topic)
			require.NoError(t, err)
			require.Equal(t, "Stable", state)
			require.Equal(t, map[string]int{"sarama-a": 2, "sarama-b": 2, "sarama-c": 2}, assigned)

			a.close(t)
			waitFor(t, ctx, "the survivors to own every partition", func() bool {
				return b.ownedCount()+cc.ownedCount() == partitions && b.ownedCount() > 0 && cc.ownedCount() > 0
			})
			waitFor(t, ctx, "the coordinator to assign every partition to the survivors", func() bool {
				assigned, state, err := assignedPartitions(ctx, adm, group, topic)
				return err == nil && state == "Stable" && len(assigned) == 2 && assigned["sarama-b"]+assigned["sarama-c"] == partitions
			})
			second := produceTagged(ctx, t, addrs, topic, "second", 120)
			consumed.waitConsumed(ctx, t, "the later records consumed", second)
			for _, c := range consumed.snapshot() {
				if c.member == "sarama-a" {
					require.NotContains(t, second, c.value, "a member that left consumed a later record")
				}
			}
			requireCommittedIsConsumed(ctx, t, adm, consumed, group, topic, partitions)
			consumed.requireOneOwnerPerGeneration(t)
			consumed.requireOneValuePerOffset(t)
			b.close(t)
			cc.close(t)
		})
	}
}

// TestSaramaGroupCarriesOnFromItsCommitsWhenTheCoordinatorIsKilled: two
// sarama members (V4_0_0_0, range) consume and commit a topic that is
// being produced to while the group's coordinator (kadm's
// FindGroupCoordinators) is kill -9'd, and a third member joins right
// after the kill, while FindCoordinator still names the dead node. The
// group carries on: every record acknowledged before, during or after the
// kill is consumed; nothing committed is lost (no offset below the commits
// read just before the kill is consumed twice: duplicates only after the
// last commit); all three members end up in the group at the new
// coordinator, each consuming records produced once it is whole; the
// commits reach the new log ends. Before Metadata left fenced brokers out
// (node/03_metadata.go), sarama kept the dead coordinator by id and the
// late member never joined.
func TestSaramaGroupCarriesOnFromItsCommitsWhenTheCoordinatorIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := c.adminClient()
	const partitions = 3
	topic, group := "sarama-payments", "sarama-ledger"
	createReplicatedTopic(ctx, t, adm, topic, partitions)
	addrs := c.addrs()

	before := produceTagged(ctx, t, addrs, topic, "before", 150)
	consumed := &consumedLog{}
	a := startSaramaMember(ctx, t, addrs, group, topic, "sarama-a", sarama.V4_0_0_0, sarama.NewBalanceStrategyRange, consumed)
	b := startSaramaMember(ctx, t, addrs, group, topic, "sarama-b", sarama.V4_0_0_0, sarama.NewBalanceStrategyRange, consumed)
	consumed.waitConsumed(ctx, t, "the first records consumed", before)
	waitCommittedEnds(ctx, t, adm, group, topic, partitions)

	// A producer keeps writing while the coordinator dies; what it had
	// acknowledged must all be consumed. Not idempotent: the killed node
	// may be the active controller, and InitProducerId fails until its
	// successor is known.
	during := newTrickle(ctx, t, addrs, topic, "during")
	waitFor(t, ctx, "records produced during the run consumed", func() bool {
		n, _ := consumed.missing(during.acked())
		return len(during.acked()) >= 20 && n == 0
	})

	co, committed, alive := killCoordinator(ctx, t, c, adm, group)
	// A member that joins at once is told the dead node is the
	// coordinator (the partition's leader moves only when the controller
	// fences it), so it must find the new one later: the armed moment.
	cm := startSaramaMember(ctx, t, alive, group, topic, "sarama-c", sarama.V4_0_0_0, sarama.NewBalanceStrategyRange, consumed)
	after := produceTagged(ctx, t, alive, topic, "after", 150, kgo.DisableIdempotentWrite())
	acked := during.stop()

	consumed.waitConsumed(ctx, t, "the records produced before the kill consumed", acked)
	consumed.waitConsumed(ctx, t, "the records produced after the kill consumed", after)
	requireNoRedeliveryBelow(t, consumed, committed, topic)
	consumed.requireOneOwnerPerGeneration(t)
	consumed.requireOneValuePerOffset(t)

	survivor := aliveAdmin(t, alive)
	waitFor(t, ctx, "every member to join the group at its new coordinator", func() bool {
		assigned, state, err := assignedPartitions(ctx, survivor, group, topic)
		return err == nil && state == "Stable" && assigned["sarama-a"] == 1 && assigned["sarama-b"] == 1 && assigned["sarama-c"] == 1
	})
	late := produceTagged(ctx, t, alive, topic, "late", 60, kgo.DisableIdempotentWrite())
	consumed.waitConsumed(ctx, t, "the records produced once the group was whole again consumed", late)
	requireEachConsumed(t, consumed, late, "sarama-a", "sarama-b", "sarama-c")
	requireCommittedIsConsumed(ctx, t, survivor, consumed, group, topic, partitions)
	moved := survivor.FindGroupCoordinators(ctx, group)[group]
	require.NoError(t, moved.Err)
	require.NotEqual(t, co, moved.NodeID)
	a.close(t)
	b.close(t)
	cm.close(t)
}

// killCoordinator kill -9s the node of group's coordinator (kadm's
// FindGroupCoordinators), reading the group's commits just before, and
// returns the node's id, those commits and the addresses of the others.
func killCoordinator(ctx context.Context, t *testing.T, c *testCluster, adm *kadm.Client, group string) (int32, kadm.OffsetResponses, []string) {
	t.Helper()
	found := adm.FindGroupCoordinators(ctx, group)
	co, ok := found[group]
	require.True(t, ok)
	require.NoError(t, co.Err)
	committed, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	coordinator := c.nodes[co.NodeID-1]
	c.kill(coordinator)
	var alive []string
	for _, nd := range c.nodes {
		if nd != coordinator {
			alive = append(alive, nd.addr)
		}
	}
	return co.NodeID, committed, alive
}

// aliveAdmin is an admin client of the nodes at addrs, closed with the
// test.
func aliveAdmin(t *testing.T, addrs []string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(30*time.Second))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// requireEachConsumed fails unless each member consumed some of values:
// all carried on past the fault, not only the ones the group kept. (The
// new coordinator's replayed group lists a member that cannot reach it
// until its session runs out, so the group's description alone does not
// show it.)
func requireEachConsumed(t checkT, consumed *consumedLog, values []string, members ...string) {
	t.Helper()
	later := map[string]bool{}
	for _, v := range values {
		later[v] = true
	}
	n := map[string]int{}
	for _, c := range consumed.snapshot() {
		if later[c.value] {
			n[c.member]++
		}
	}
	for _, m := range members {
		require.Positive(t, n[m], "%s consumed none of the records it was to (each consumed: %v)", m, n)
	}
}

// requireNoRedeliveryBelow fails if an offset below the group's commit
// (as read before a fault) was consumed twice: the group resumed below a
// commit, so the commit was lost.
func requireNoRedeliveryBelow(t checkT, consumed *consumedLog, committed kadm.OffsetResponses, topic string) {
	t.Helper()
	type key struct {
		partition int32
		offset    int64
	}
	times := map[key]int{}
	for _, c := range consumed.snapshot() {
		times[key{c.partition, c.offset}]++
	}
	for k, n := range times {
		at, ok := committed.Lookup(topic, k.partition)
		if ok && k.offset < at.At && n > 1 {
			require.Failf(t, "a committed offset was consumed again",
				"partition %d offset %d (committed %d before the kill) consumed %d times", k.partition, k.offset, at.At, n)
		}
	}
}

// trickle produces records tagged tag one after another (acks=all, not
// idempotent) until stopped, and keeps the values acknowledged.
type trickle struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	values []string
}

func newTrickle(ctx context.Context, t *testing.T, addrs []string, topic, tag string) *trickle {
	pr, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RecordDeliveryTimeout(20*time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctx)
	tr := &trickle{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		defer pr.Close()
		for i := 0; ctx.Err() == nil; i++ {
			v := tag + "-" + strconv.Itoa(i)
			if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				continue // unknown outcome: not required
			}
			tr.mu.Lock()
			tr.values = append(tr.values, v)
			tr.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return tr
}

func (tr *trickle) acked() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.values...)
}

// stop stops producing and returns every value acknowledged.
func (tr *trickle) stop() []string {
	tr.cancel()
	<-tr.done
	return tr.acked()
}
