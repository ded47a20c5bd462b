package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic's compression.type is the codec its data is stored and served
// in, whatever the producer sent: a snappy producer's records come back to
// a consumer in zstd batches from a zstd topic (so a consumer without
// snappy, kafkajs's default build, can read them), and unchanged, in
// order; an AlterConfigs change applies to the next batches; producer
// keeps the producer's codec.
func TestTopicCompressionTypeRecompresses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	addr := freePort(t)
	startBroker(t, addr, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.ConsumeTopics("zstd-topic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	zstd := "zstd"
	created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": &zstd}, "zstd-topic")
	require.NoError(t, err)
	require.NoError(t, created.Err)

	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "zstd-topic", Value: fmt.Appendf(nil, "record %d %0200d", i, i)}).FirstErr())
		}
	}
	consume := func(n int) []*kgo.Record {
		var got []*kgo.Record
		for len(got) < n && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			require.NoError(t, fs.Err0())
			got = append(got, fs.Records()...)
		}
		require.Len(t, got, n)
		return got
	}
	produce(0, 10)
	for i, r := range consume(10) {
		require.Equal(t, fmt.Sprintf("record %d %0200d", i, i), string(r.Value))
		require.Equal(t, int64(i), r.Offset)
		require.Equal(t, uint8(4), r.Attrs.CompressionType(), "record %d is stored zstd (4), not as produced (snappy, 2)", i)
	}

	producer := "producer"
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "compression.type", Value: &producer}}, "zstd-topic")
	require.NoError(t, err)
	for _, a := range alter {
		require.NoError(t, a.Err)
	}
	produce(10, 5)
	for i, r := range consume(5) {
		require.Equal(t, fmt.Sprintf("record %d %0200d", 10+i, 10+i), string(r.Value))
		require.Equal(t, uint8(2), r.Attrs.CompressionType(), "with compression.type=producer the producer's snappy is kept")
	}
}
