package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaGoReader is one kafka-go Reader in a group: it fetches, records
// what it consumed in a shared log and commits each message at once
// (CommitMessages with CommitInterval 0 is synchronous).
type kafkaGoReader struct {
	name string
	r    *kafka.Reader
	done chan struct{}
}

func startKafkaGoReader(ctx context.Context, t *testing.T, addrs []string, group, topic, name string, log *consumedLog) *kafkaGoReader {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           addrs,
		GroupID:           group,
		Topic:             topic,
		Dialer:            &kafka.Dialer{ClientID: name, Timeout: 5 * time.Second},
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           200 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		HeartbeatInterval: 300 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  250 * time.Millisecond,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
		MaxAttempts:       10,
	})
	m := &kafkaGoReader{name: name, r: r, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			msg, err := r.FetchMessage(ctx)
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return
			}
			if err != nil {
				// The reader carries on after an error (a dead
				// broker, a rebalance); so does an application.
				t.Logf("%s: fetch: %v", name, err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			log.add(consumption{member: name, generation: -1, partition: int32(msg.Partition), offset: msg.Offset, value: string(msg.Value)})
			if err := r.CommitMessages(ctx, msg); err != nil && ctx.Err() == nil {
				t.Logf("%s: commit: %v", name, err)
			}
		}
	}()
	return m
}

// close leaves the group (LeaveGroup v0) and waits for the fetch loop.
func (m *kafkaGoReader) close(t *testing.T) {
	require.NoError(t, m.r.Close(), "%s: close", m.name)
	<-m.done
}

// TestKafkaGoReadersShareATopicAndTheSurvivorTakesOver: two kafka-go
// Readers with a GroupID (JoinGroup v2, SyncGroup v0, Heartbeat v0,
// LeaveGroup v0, OffsetCommit v2, OffsetFetch v1, FindCoordinator v0,
// through kafka-go's Conn) consume a topic of four partitions,
// replication factor 3, produced before they start: every record is
// consumed, the coordinator (DescribeGroups) assigned two partitions to
// each, and the commits (kadm.FetchOffsets) are the consumed positions
// and the log ends. One reader closes; the other is assigned all four
// partitions and consumes everything produced after, and the commits
// reach the new ends.
func TestKafkaGoReadersShareATopicAndTheSurvivorTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := c.adminClient()
	addrs := c.addrs()
	const partitions = 4
	topic, group := "kafka-go-orders", "kafka-go-shop"
	createReplicatedTopic(ctx, t, adm, topic, partitions)

	first := produceTagged(ctx, t, addrs, topic, "first", 200)
	consumed := &consumedLog{}
	a := startKafkaGoReader(ctx, t, addrs, group, topic, "kafka-go-a", consumed)
	b := startKafkaGoReader(ctx, t, addrs, group, topic, "kafka-go-b", consumed)
	waitFor(t, ctx, "the coordinator to assign two partitions to each reader", func() bool {
		assigned, state, err := assignedPartitions(ctx, adm, group, topic)
		return err == nil && state == "Stable" && assigned["kafka-go-a"] == 2 && assigned["kafka-go-b"] == 2
	})
	consumed.waitConsumed(ctx, t, "the first records consumed", first)
	requireCommittedIsConsumed(ctx, t, adm, consumed, group, topic, partitions)

	a.close(t)
	waitFor(t, ctx, "the coordinator to assign every partition to the survivor", func() bool {
		assigned, state, err := assignedPartitions(ctx, adm, group, topic)
		return err == nil && state == "Stable" && len(assigned) == 1 && assigned["kafka-go-b"] == partitions
	})
	second := produceTagged(ctx, t, addrs, topic, "second", 100)
	consumed.waitConsumedBy(ctx, t, "kafka-go-b", second)
	for _, c := range consumed.snapshot() {
		if c.member == "kafka-go-a" {
			require.NotContains(t, second, c.value, "a reader that left consumed a later record")
		}
	}
	requireCommittedIsConsumed(ctx, t, adm, consumed, group, topic, partitions)
	consumed.requireOneValuePerOffset(t)
	b.close(t)
}

// TestKafkaGoGroupCarriesOnFromItsCommitsWhenTheCoordinatorIsKilled: two
// kafka-go Readers consume and commit a topic being produced to while the
// group's coordinator is kill -9'd. As with sarama: every acknowledged
// record is consumed, no offset below the commits read just before the
// kill is consumed twice, both readers are back in the group at its new
// coordinator, and the commits reach the new log ends.
func TestKafkaGoGroupCarriesOnFromItsCommitsWhenTheCoordinatorIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := c.adminClient()
	const partitions = 4
	topic, group := "kafka-go-payments", "kafka-go-ledger"
	createReplicatedTopic(ctx, t, adm, topic, partitions)
	addrs := c.addrs()

	before := produceTagged(ctx, t, addrs, topic, "before", 150)
	consumed := &consumedLog{}
	a := startKafkaGoReader(ctx, t, addrs, group, topic, "kafka-go-a", consumed)
	b := startKafkaGoReader(ctx, t, addrs, group, topic, "kafka-go-b", consumed)
	consumed.waitConsumed(ctx, t, "the first records consumed", before)
	waitCommittedEnds(ctx, t, adm, group, topic, partitions)

	during := newTrickle(ctx, t, addrs, topic, "during")
	waitFor(t, ctx, "records produced during the run consumed", func() bool {
		n, _ := consumed.missing(during.acked())
		return len(during.acked()) >= 20 && n == 0
	})
	co, committed, alive := killCoordinator(ctx, t, c, adm, group)
	after := produceTagged(ctx, t, alive, topic, "after", 150, kgo.DisableIdempotentWrite())
	acked := during.stop()

	consumed.waitConsumed(ctx, t, "the records produced before the kill consumed", acked)
	consumed.waitConsumed(ctx, t, "the records produced after the kill consumed", after)
	requireNoRedeliveryBelow(t, consumed, committed, topic)
	consumed.requireOneValuePerOffset(t)
	survivor := aliveAdmin(t, alive)
	waitFor(t, ctx, "both readers to rejoin the group at its new coordinator", func() bool {
		assigned, state, err := assignedPartitions(ctx, survivor, group, topic)
		return err == nil && state == "Stable" && assigned["kafka-go-a"] == 2 && assigned["kafka-go-b"] == 2
	})
	late := produceTagged(ctx, t, alive, topic, "late", 60, kgo.DisableIdempotentWrite())
	consumed.waitConsumed(ctx, t, "the records produced once the group was whole again consumed", late)
	requireEachConsumed(t, consumed, late, "kafka-go-a", "kafka-go-b")
	requireCommittedIsConsumed(ctx, t, survivor, consumed, group, topic, partitions)
	moved := survivor.FindGroupCoordinators(ctx, group)[group]
	require.NoError(t, moved.Err)
	require.NotEqual(t, co, moved.NodeID)
	a.close(t)
	b.close(t)
}
