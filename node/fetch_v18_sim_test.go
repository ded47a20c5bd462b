package node

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchByID is a consumer's Fetch of one partition by topic id (v13+),
// without a session.
func fetchByID(version int16, id [16]byte, partition int32, offset int64, maxWaitMs int32) *kmsg.FetchRequest {
	req := fetchRequest("", partition, offset, maxWaitMs)
	req.Version = version
	req.Topics[0].TopicID = id
	return req
}

func TestApiVersionsAdvertisesFetch18(t *testing.T) {
	s := newSimBroker(t, 40, nil)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	resp := s.do(req).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 1 {
			require.Equal(t, [2]int16{4, 18}, [2]int16{k.MinVersion, k.MaxVersion})
			return
		}
	}
	t.Fatalf("ApiVersions does not list Fetch: %v", resp.ApiKeys)
}

// TestFetchV18RequestOfAConsumerIsV17s: a consumer leaves KIP-1166's
// HighWatermark at its default, which is not sent, so its v18 request is
// the v17 frame under another version number.
func TestFetchV18RequestOfAConsumerIsV17s(t *testing.T) {
	id := [16]byte{7, 1, 2}
	v17 := wire.AppendRequest(nil, 9, "c", fetchByID(17, id, 0, 5, 100))
	v18 := wire.AppendRequest(nil, 9, "c", fetchByID(18, id, 0, 5, 100))
	require.Equal(t, int16(18), int16(binary.BigEndian.Uint16(v18[6:])))
	binary.BigEndian.PutUint16(v18[6:], 17)
	require.Equal(t, v17, v18)

	// A follower's high watermark is a tagged field of the partition.
	follower := fetchByID(18, id, 0, 5, 100)
	follower.Topics[0].Partitions[0].HighWatermark = 3
	require.Greater(t, len(wire.AppendRequest(nil, 9, "c", follower)), len(v17))
}

// TestFetchV18ServesConsumers: v18 reads what v17 reads, with or without
// the HighWatermark tag, which a consumer's fetch ignores (a parked fetch
// is not answered early because the tag is behind the partition's high
// watermark).
func TestFetchV18ServesConsumers(t *testing.T) {
	s := newSimBroker(t, 41, nil)
	id := s.createTopic("t", 1)
	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "a", "b", "c")).ErrorCode)

	read := func(version int16, hw int64) (kmsg.FetchResponseTopicPartition, []string) {
		req := fetchByID(version, id, 0, 1, 0)
		req.Topics[0].Partitions[0].HighWatermark = hw
		resp := s.do(req).(*kmsg.FetchResponse)
		require.Zero(t, resp.ErrorCode)
		require.Len(t, resp.Topics, 1)
		require.Equal(t, id, resp.Topics[0].TopicID)
		p := resp.Topics[0].Partitions[0]
		recs, err := wire.DecodeBatches(p.RecordBatches)
		require.NoError(t, err)
		var values []string
		for _, r := range recs {
			if r.Offset >= 1 {
				values = append(values, string(r.Value))
			}
		}
		p.RecordBatches = nil
		return p, values
	}
	p17, want := read(17, math.MaxInt64)
	require.Equal(t, []string{"b", "c"}, want)
	require.Equal(t, int64(3), p17.HighWatermark)
	for _, hw := range []int64{math.MaxInt64, -1, 0, 3} {
		p, got := read(18, hw)
		require.Equal(t, want, got, "HighWatermark tag %d", hw)
		require.Equal(t, p17, p, "HighWatermark tag %d", hw)
	}

	// A v18 long poll at the end parks until data comes, whatever the tag.
	var resp *kmsg.FetchResponse
	s.world.Node("c1").Post(func() {
		req := fetchByID(18, id, 0, 3, 30_000)
		req.Topics[0].Partitions[0].HighWatermark = 0
		s.client.Request(req, func(r kmsg.Response, err error) {
			require.NoError(t, err)
			resp = r.(*kmsg.FetchResponse)
		})
	})
	s.world.Run(time.Second)
	require.Nil(t, resp, "a consumer's v18 fetch was answered before MinBytes or MaxWait")
	first := s.client
	s.connect()
	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 2, "d")).ErrorCode)
	require.True(t, s.world.RunUntil(func() bool { return resp != nil }, time.Minute))
	recs, err := wire.DecodeBatches(resp.Topics[0].Partitions[0].RecordBatches)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "d", string(recs[0].Value))
	first.Close()
}
