package node

import (
	"encoding/binary"
	"testing"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/stretchr/testify/require"
)

// Entries hold records in the binary encoding, and entries an older
// version wrote with JSON records still decode.
func TestEntriesAreBinaryAndReadJSONToo(t *testing.T) {
	records := []raftmeta.Record{
		raftmeta.DeleteTopicRecord{ID: raftmeta.TopicID{1, 2, 3}},
		raftmeta.PartitionChangeRecord{Topic: raftmeta.TopicID{4}, Partition: 7, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 4},
	}
	p, err := encodeEntry(records)
	require.NoError(t, err)
	got, err := decodeEntry(p)
	require.NoError(t, err)
	require.Equal(t, records, got)
	// The first record's first byte: JSON would open with '{'.
	_, k := binary.Uvarint(p)
	_, k2 := binary.Uvarint(p[k:])
	require.NotEqual(t, byte('{'), p[k+k2], "a record of the entry is JSON")

	old := binary.AppendUvarint(nil, uint64(len(records)))
	for _, r := range records {
		j, err := raftmeta.EncodeRecord(r)
		require.NoError(t, err)
		old = binary.AppendUvarint(old, uint64(len(j)))
		old = append(old, j...)
	}
	require.Greater(t, len(old), len(p))
	got, err = decodeEntry(old)
	require.NoError(t, err)
	require.Equal(t, records, got)
}
