package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBatchRoundTripsAndKmsgAgrees(t *testing.T) {
	records := []Record{
		{Key: []byte("k1"), Value: []byte("v1"), Timestamp: 1000, Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Key: nil, Value: []byte("v2"), Timestamp: 1005},
		{Key: []byte("k3"), Value: nil, Timestamp: 999},
	}
	batch := AppendBatch(nil, BatchProducer{ID: 7, Epoch: 1, BaseSequence: 42}, records)

	var kb kmsg.RecordBatch
	require.NoError(t, kb.ReadFrom(batch))
	require.Equal(t, int32(2), kb.LastOffsetDelta)
	require.Equal(t, int64(999), kb.FirstTimestamp)
	require.Equal(t, int64(1005), kb.MaxTimestamp)
	require.Equal(t, int64(7), kb.ProducerID)
	require.Equal(t, int32(42), kb.FirstSequence)
	require.Equal(t, int32(len(batch)-12), kb.Length)

	// Two batches back to back, then a partial one: the partial is ignored.
	stream := append(append([]byte{}, batch...), batch...)
	stream = append(stream, batch[:30]...)
	got, err := DecodeBatches(stream)
	require.NoError(t, err)
	require.Len(t, got, 6)
	require.Equal(t, []byte("k1"), got[0].Key)
	require.Equal(t, "h", got[0].Headers[0].Key)
	require.Nil(t, got[1].Key)
	require.Nil(t, got[2].Value)
	require.Equal(t, int64(999), got[2].Timestamp)
	require.Equal(t, int64(2), got[2].Offset)

	batch[70] ^= 1
	_, err = DecodeBatches(batch)
	require.ErrorContains(t, err, "CRC")
}
