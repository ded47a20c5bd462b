package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// servedBy records which broker each batch a consumer read came from.
type servedBy struct {
	mu    sync.Mutex
	nodes map[int32]int
}

func (s *servedBy) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[meta.NodeID] += m.NumRecords
}

// TestServeSendsARackAwareFranzGoConsumerToItsRacksFollower: three real
// processes, each in its own rack, with Kafka's RackAwareReplicaSelector;
// a franz-go consumer in a follower's rack (kgo.Rack) is sent there by the
// leader's PreferredReadReplica and reads every record from that follower.
func TestServeSendsARackAwareFranzGoConsumerToItsRacksFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newClusterOf(t, 3, 0, func(id int32) []string { return []string{fmt.Sprintf("broker.rack=rack-%d", id)} },
		"replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := c.adminClient()
	createReplicatedTopic(ctx, t, adm, "near", 1)
	var leader int32 = -1
	require.Eventually(t, func() bool {
		topics, merr := adm.ListTopics(ctx, "near")
		if merr != nil || topics["near"].Err != nil || len(topics["near"].Partitions) != 1 {
			return false
		}
		p := topics["near"].Partitions[0]
		leader = p.Leader
		return leader > 0 && len(p.ISR) == 3
	}, 60*time.Second, 200*time.Millisecond, "the topic never had a leader and a full ISR")

	pr, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.DefaultProduceTopic("near"),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	require.NoError(t, err)
	defer pr.Close()
	const n = 50
	for i := range n {
		require.NoError(t, pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%d", i))}).FirstErr())
	}

	follower := leader%3 + 1
	served := &servedBy{nodes: map[int32]int{}}
	co, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ConsumeTopics("near"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack(fmt.Sprintf("rack-%d", follower)), kgo.WithHooks(served))
	require.NoError(t, err)
	defer co.Close()
	got := 0
	for got < n {
		fs := co.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", got, n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, fmt.Sprintf("v-%d", got), string(r.Value))
			got++
		})
	}
	served.mu.Lock()
	defer served.mu.Unlock()
	require.Equal(t, map[int32]int{follower: n}, served.nodes, "leader %d, follower %d", leader, follower)
}
