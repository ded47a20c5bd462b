package simrun

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A batch the producer builds is one franz-go reads back field for field,
// with a CRC that checks out.
func TestBuiltBatchDecodesWithKmsg(t *testing.T) {
	values := []string{"p1-0", "", "p1-2 with a longer value"}
	b := buildBatch(producerBatch{ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, TimestampMs: 1_700_000_000_000}, values)

	var rb kmsg.RecordBatch
	require.NoError(t, rb.ReadFrom(b))
	require.Equal(t, int8(2), rb.Magic)
	require.Equal(t, int32(len(b)-12), rb.Length)
	require.Equal(t, int32(-1), rb.PartitionLeaderEpoch)
	require.Equal(t, int32(len(values)-1), rb.LastOffsetDelta)
	require.Equal(t, int64(42), rb.ProducerID)
	require.Equal(t, int16(3), rb.ProducerEpoch)
	require.Equal(t, int32(7), rb.FirstSequence)
	require.Equal(t, int32(len(values)), rb.NumRecords)
	require.Equal(t, int64(1_700_000_000_000), rb.FirstTimestamp)
	require.Equal(t, crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)), uint32(rb.CRC))

	rest := rb.Records
	for i, v := range values {
		var rec kmsg.Record
		require.NoError(t, rec.ReadFrom(rest), "record %d", i)
		require.Equal(t, int32(i), rec.OffsetDelta)
		require.Nil(t, rec.Key)
		require.Equal(t, v, string(rec.Value))
		_, n := binary.Varint(rest)
		rest = rest[n+int(rec.Length):]
	}
	require.Empty(t, rest)
}

func TestReadBatchesFollowsOffsetsAndSkipsAPartialTail(t *testing.T) {
	first := buildBatch(producerBatch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, TimestampMs: 5000}, []string{"a", "b"})
	second := buildBatch(producerBatch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, TimestampMs: 4000}, []string{"c"})
	binary.BigEndian.PutUint64(first, 10) // the broker's base offsets
	binary.BigEndian.PutUint64(second, 12)
	stream := append(append(append([]byte{}, first...), second...), second[:20]...)
	got, refs, err := readBatches(stream, 11)
	require.NoError(t, err)
	require.Equal(t, []jepsen.Record{{Offset: 10, Value: "a", Timestamp: 5000}, {Offset: 11, Value: "b", Timestamp: 5000}, {Offset: 12, Value: "c", Timestamp: 4000}}, got)
	crc := func(b []byte) uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }
	require.Equal(t, []batchRef{{base: 10, last: 11, crc: crc(first)}, {base: 12, last: 12, crc: crc(second)}}, refs)
}

// TestReadBatchesRefusesOffsetsThatDoNotFollow: the base offset is outside
// the CRC, so a flipped one must be caught by where the batch sits: the
// first batch must hold the fetch offset and each next one follow it.
func TestReadBatchesRefusesOffsetsThatDoNotFollow(t *testing.T) {
	first := buildBatch(producerBatch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []string{"a", "b"})
	second := buildBatch(producerBatch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []string{"c"})
	binary.BigEndian.PutUint64(first, 10)
	binary.BigEndian.PutUint64(second, 12)
	for _, from := range []int64{9, 12} {
		_, _, err := readBatches(append(append([]byte{}, first...), second...), from)
		require.ErrorIs(t, err, errCorruptBatch, "fetch from %d", from)
	}
	binary.BigEndian.PutUint64(second, 12+1<<45) // seed 317: one bit flipped on the sendfile read
	_, _, err := readBatches(append(append([]byte{}, first...), second...), 10)
	require.ErrorIs(t, err, errCorruptBatch)
	_, _, err = readBatches(second, 12)
	require.ErrorIs(t, err, errCorruptBatch)
}

func TestReadBatchesRefusesACorruptBatch(t *testing.T) {
	b := buildBatch(producerBatch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []string{"value"})
	for _, at := range []int{16, 30, len(b) - 3} {
		bad := append([]byte(nil), b...)
		bad[at] ^= 0x10
		_, _, err := readBatches(bad, 0)
		require.True(t, errors.Is(err, errCorruptBatch), "flip at %d: %v", at, err)
	}
	short := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(short[8:], 3)
	_, _, err := readBatches(short, 0)
	require.ErrorIs(t, err, errCorruptBatch)
}
