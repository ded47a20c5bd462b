package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestServeAnswersOffsetForLeaderEpochToFranzGo: records written before and
// after a restart (which raises the leader epoch) carry their epochs, and
// franz-go's OffsetForLeaderEpoch finds each epoch's end where the next
// one's records begin, the latest's at the log end.
func TestServeAnswersOffsetForLeaderEpochToFranzGo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	addr, dataDir := freePort(t), t.TempDir()
	b := startBroker(t, addr, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	created, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "epochs")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	admin.Close()

	produce := func(values ...string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("epochs"), kgo.RequiredAcks(kgo.AllISRAcks()))
		require.NoError(t, err)
		defer cl.Close()
		for _, v := range values {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr())
		}
	}
	produce("a", "b", "c")
	b.stop()
	startBroker(t, addr, dataDir)
	produce("d", "e")

	// The epoch of each record, as the consumer reads it.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("epochs"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	var epochs []int32
	for len(epochs) < 5 {
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fetches.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			require.Equal(t, int64(len(epochs)), r.Offset)
			epochs = append(epochs, r.LeaderEpoch)
		})
	}
	consumer.Close()
	before, after := epochs[0], epochs[3]
	require.Equal(t, []int32{before, before, before, after, after}, epochs)
	require.Greater(t, after, before, "the restart raised the leader epoch")

	admin, err = kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer admin.Close()
	t.Logf("epochs %d and %d", before, after)
	want := map[int32][2]int64{ // asked: answered epoch, end offset
		before:    {int64(before), 3},
		after:     {int64(after), 5},
		after + 1: {-1, -1},
	}
	if after > before+1 { // an epoch with no records: the one before it ends there
		want[before+1] = [2]int64{int64(before), 3}
	}
	for asked, w := range want {
		var req kadm.OffsetForLeaderEpochRequest
		req.Add("epochs", 0, asked)
		resp, err := kadm.NewClient(admin).OffsetForLeaderEpoch(ctx, req)
		require.NoError(t, err)
		got := resp["epochs"][0]
		require.NoError(t, got.Err, "epoch %d", asked)
		require.Equal(t, w, [2]int64{int64(got.LeaderEpoch), got.EndOffset}, "epoch %d", asked)
	}
}
