package raftmeta

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// everyRecord holds one record of each type, with every field set.
func everyRecord() []Record {
	v := "v"
	return []Record{
		ClusterIDRecord{ClusterID: "c"},
		RegisterBrokerRecord{Broker: Broker{ID: 3, Host: "h", Port: 9092, Epoch: 12, IncarnationID: IncarnationID{1, 2, 3}, Rack: "r",
			Listeners: []Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}, {Name: "CONTROLLER", Host: "h2", Port: 9093}},
			Fenced:    true}},
		RegisterBrokerRecord{Broker: Broker{ID: 4, Host: "h", Port: 1, Epoch: 2, Listeners: []Listener{{Host: "h", Port: 1}}, InControlledShutdown: true}},
		BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 12, Change: BrokerBeginControlledShutdown},
		UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 12},
		CreateTopicRecord{Topic: Topic{Name: "t", ID: TopicID{7}, Configs: map[string]string{"a": "1", "b": ""},
			Partitions: []Partition{
				{Index: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 9},
				{Index: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: NoLeader},
			}}},
		DeleteTopicRecord{ID: TopicID{7, 1}},
		CreatePartitionsRecord{Topic: TopicID{7}, Partitions: []Partition{{Index: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 1, Leader: 2, ISR: []int32{2, 1}, Replicas: []int32{2, 1, 3}, LeaderEpoch: 1, PartitionEpoch: 1},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 0, Leader: NoLeader, LeaderEpoch: 4, PartitionEpoch: 10},
		CreateTopicRecord{Topic: Topic{Name: "e", ID: TopicID{8}, Partitions: []Partition{
			{Index: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{}, Leader: NoLeader, LeaderEpoch: 2, PartitionEpoch: 5,
				ELR: []int32{1, 3}, LastKnownELR: []int32{3}},
			{Index: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
		}}},
		CreatePartitionsRecord{Topic: TopicID{8}, Partitions: []Partition{{Index: 2, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, ELR: []int32{2}}}},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 0, Leader: NoLeader, ISR: []int32{}, ELR: []int32{2, 1}, LastKnownELR: []int32{2},
			LeaderEpoch: 4, PartitionEpoch: 10},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 0, Leader: 1, ISR: []int32{1}, ELR: []int32{}, LastKnownELR: []int32{},
			LeaderEpoch: 5, PartitionEpoch: 11},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 0, Leader: 1, LastKnownELR: []int32{}, LeaderEpoch: 5, PartitionEpoch: 12},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 0, Leader: 1, Replicas: []int32{1, 4, 2}, AddingReplicas: []int32{4},
			RemovingReplicas: []int32{2}, LeaderEpoch: 5, PartitionEpoch: 13},
		PartitionChangeRecord{Topic: TopicID{7}, Partition: 0, Leader: 1, Replicas: []int32{1, 4}, ISR: []int32{1, 4},
			AddingReplicas: []int32{}, RemovingReplicas: []int32{}, ELR: []int32{}, LeaderEpoch: 6, PartitionEpoch: 14},
		CreateTopicRecord{Topic: Topic{Name: "r", ID: TopicID{9}, Partitions: []Partition{
			{Index: 0, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2}, Leader: 1, AddingReplicas: []int32{3}, RemovingReplicas: []int32{2}},
			{Index: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2, ELR: []int32{1}},
		}}},
		ConfigRecord{Resource: ConfigBroker, Name: "", Key: "k", Value: &v},
		ConfigRecord{Resource: ConfigTopic, Name: "t", Key: "k"},
		ProducerIDsRecord{First: 1000, Count: 1000},
	}
}

func TestEveryRecordRoundTripsBothEncodings(t *testing.T) {
	for _, r := range everyRecord() {
		p, err := EncodeRecord(r)
		require.NoError(t, err)
		require.Equal(t, byte('{'), p[0], "the journal's scan relies on JSON objects")
		back, err := DecodeRecord(p)
		require.NoError(t, err)
		require.Equal(t, r, back, "JSON")

		b, err := EncodeBinaryRecord(r)
		require.NoError(t, err)
		back, err = DecodeRecord(b)
		require.NoError(t, err)
		require.Equal(t, r, back, "binary")
		require.Less(t, len(b), len(p), "binary is the smaller encoding")

		// A pointer encodes as its record.
		ptr, err := EncodeBinaryRecord(pointerTo(r))
		require.NoError(t, err)
		require.Equal(t, b, ptr)
	}
}

func pointerTo(r Record) Record {
	switch r := r.(type) {
	case ClusterIDRecord:
		return &r
	case RegisterBrokerRecord:
		return &r
	case BrokerChangeRecord:
		return &r
	case UnregisterBrokerRecord:
		return &r
	case CreateTopicRecord:
		return &r
	case DeleteTopicRecord:
		return &r
	case CreatePartitionsRecord:
		return &r
	case PartitionChangeRecord:
		return &r
	case ConfigRecord:
		return &r
	case ProducerIDsRecord:
		return &r
	}
	panic("unknown record")
}

// The journal's records of before listeners, incarnations and the new
// record types, byte for byte as it wrote them, still decode.
func TestJournalRecordsOfBeforeStillDecode(t *testing.T) {
	for _, tc := range []struct {
		json string
		want Record
	}{
		{`{"type":"cluster_id","body":{"cluster_id":"abc"}}`, ClusterIDRecord{ClusterID: "abc"}},
		{`{"type":"register_broker","body":{"broker":{"id":1,"host":"n1","port":9092,"epoch":2}}}`,
			RegisterBrokerRecord{Broker: Broker{ID: 1, Host: "n1", Port: 9092, Epoch: 2}}},
		{`{"type":"create_topic","body":{"topic":{"name":"t","id":"01000000-0000-0000-0000-000000000000","partitions":[{"index":0,"replicas":[1],"isr":[1],"leader":1,"leader_epoch":0,"partition_epoch":0}],"configs":{"retention.ms":"5"}}}}`,
			CreateTopicRecord{Topic: Topic{Name: "t", ID: TopicID{1}, Configs: map[string]string{"retention.ms": "5"},
				Partitions: []Partition{{Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}}},
		{`{"type":"delete_topic","body":{"id":"01000000-0000-0000-0000-000000000000"}}`, DeleteTopicRecord{ID: TopicID{1}}},
		{`{"type":"partition_change","body":{"topic":"01000000-0000-0000-0000-000000000000","partition":0,"leader":2,"isr":[2],"leader_epoch":1,"partition_epoch":1}}`,
			PartitionChangeRecord{Topic: TopicID{1}, Leader: 2, ISR: []int32{2}, LeaderEpoch: 1, PartitionEpoch: 1}},
		{`{"type":"partition_change","body":{"topic":"01000000-0000-0000-0000-000000000000","partition":0,"leader":-1,"leader_epoch":1,"partition_epoch":1}}`,
			PartitionChangeRecord{Topic: TopicID{1}, Leader: NoLeader, LeaderEpoch: 1, PartitionEpoch: 1}},
		{`{"type":"config","body":{"resource":"topic","name":"t","key":"k","value":null}}`, ConfigRecord{Resource: ConfigTopic, Name: "t", Key: "k"}},
		{`{"type":"producer_ids","body":{"first":0,"count":1000}}`, ProducerIDsRecord{First: 0, Count: 1000}},
	} {
		got, err := DecodeRecord([]byte(tc.json))
		require.NoError(t, err, tc.json)
		require.Equal(t, tc.want, got)
	}
}

// Records without ELR fields keep the binary layout they had before ELR
// existed, byte for byte, so the quorum's entries and snapshots written
// then still decode, and those bytes decode to the records they were.
func TestBinaryLayoutOfBeforeELRIsUnchanged(t *testing.T) {
	topic := TopicID{0xaa, 0xbb}
	uuid := "aabb0000000000000000000000000000"
	for _, tc := range []struct {
		r   Record
		hex string
	}{
		// format, type 10, topic, partition 3, leader 2, isr [2 1], no
		// replicas, leader epoch 4, partition epoch 9 (zigzag varints).
		{PartitionChangeRecord{Topic: topic, Partition: 3, Leader: 2, ISR: []int32{2, 1}, LeaderEpoch: 4, PartitionEpoch: 9},
			"010a" + uuid + "06" + "04" + "030402" + "00" + "08" + "12"},
		// format, type 9, topic, one partition: index 1, replicas [1],
		// isr [1], leader 1, epochs 0/0.
		{CreatePartitionsRecord{Topic: topic, Partitions: []Partition{{Index: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}},
			"0109" + uuid + "01" + "02" + "0202" + "0202" + "02" + "00" + "00"},
	} {
		b, err := EncodeBinaryRecord(tc.r)
		require.NoError(t, err)
		require.Equal(t, tc.hex, hex.EncodeToString(b), "%T", tc.r)
		back, err := DecodeRecord(b)
		require.NoError(t, err)
		require.Equal(t, tc.r, back)
	}
	// With ELR fields the record takes its own type code, so a reader of
	// before refuses it instead of dropping them.
	b, err := EncodeBinaryRecord(PartitionChangeRecord{Topic: topic, Partition: 3, Leader: 2, ELR: []int32{1}, LeaderEpoch: 4, PartitionEpoch: 9})
	require.NoError(t, err)
	require.Equal(t, byte(codePartitionChangeELR), b[1])
	// The ELR layouts with no ELR in them are not canonical: refused.
	b, err = EncodeBinaryRecord(PartitionChangeRecord{Topic: topic, Partition: 3, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 9})
	require.NoError(t, err)
	b[1] = codePartitionChangeELR
	_, err = DecodeRecord(append(b, 0, 0))
	require.ErrorContains(t, err, "without ELR fields")
	b, err = EncodeBinaryRecord(CreatePartitionsRecord{Topic: topic, Partitions: []Partition{{Index: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}})
	require.NoError(t, err)
	b[1] = codeCreatePartitionsELR
	_, err = DecodeRecord(append(b, 0, 0))
	require.ErrorContains(t, err, "without an ELR")
}

// Reassignment fields take type codes of their own, and a reassignment
// layout without them is refused as not canonical.
func TestBinaryLayoutOfReassignment(t *testing.T) {
	topic := TopicID{1}
	b, err := EncodeBinaryRecord(PartitionChangeRecord{Topic: topic, Partition: 3, Leader: 2, AddingReplicas: []int32{1}, LeaderEpoch: 4, PartitionEpoch: 9})
	require.NoError(t, err)
	require.Equal(t, byte(codePartitionChangeReassign), b[1])
	b, err = EncodeBinaryRecord(PartitionChangeRecord{Topic: topic, Partition: 3, Leader: 2, ELR: []int32{1}, LeaderEpoch: 4, PartitionEpoch: 9})
	require.NoError(t, err)
	b[1] = codePartitionChangeReassign
	_, err = DecodeRecord(append(b, 0, 0))
	require.ErrorContains(t, err, "without reassignment fields")
	b, err = EncodeBinaryRecord(CreatePartitionsRecord{Topic: topic, Partitions: []Partition{{Index: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, ELR: []int32{}}}})
	require.NoError(t, err)
	require.Equal(t, byte(codeCreatePartitions), b[1])
	b[1] = codeCreatePartitionsReassign
	_, err = DecodeRecord(append(b, 0, 0, 0, 0))
	require.ErrorContains(t, err, "without a reassignment")
}

// A reassignment in progress survives a snapshot and changes the digest.
func TestSnapshotKeepsReassignment(t *testing.T) {
	im := clusterImage(t)
	p := im.Topics[TopicID{1}].Partitions[0]
	change := PartitionChangeRecord{Topic: TopicID{1}, Partition: 0, Leader: p.Leader,
		Replicas: append([]int32{9}, p.Replicas...), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
	other := im.Clone()
	require.NoError(t, other.Apply(change))
	change.AddingReplicas = []int32{9}
	require.NoError(t, im.Apply(change))
	loaded, err := DecodeSnapshot(im.EncodeSnapshot())
	require.NoError(t, err)
	require.True(t, im.Equal(loaded))
	require.Equal(t, []int32{9}, loaded.Topics[TopicID{1}].Partitions[0].AddingReplicas)
	require.Equal(t, im.Digest(), loaded.Digest())
	require.False(t, im.Equal(other))
	require.NotEqual(t, other.Digest(), loaded.Digest())
}

// A leadership taken from a broker survives a snapshot (no record rebuilds
// it), and a snapshot of version 1, written before demotions were kept,
// still loads, knowing none.
func TestSnapshotKeepsDemotions(t *testing.T) {
	im := clusterImage(t)
	p := im.Topics[TopicID{1}].Partitions[0]
	var next int32 = -1
	for _, r := range p.ISR {
		if r != p.Leader {
			next = r
		}
	}
	require.NotEqual(t, int32(-1), next)
	require.NoError(t, im.Apply(PartitionChangeRecord{Topic: TopicID{1}, Partition: 0, Leader: next, Replicas: p.Replicas,
		ISR: p.ISR, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1}))
	require.Equal(t, im.Applied, im.DemotedAt(p.Leader))
	loaded, err := DecodeSnapshot(im.EncodeSnapshot())
	require.NoError(t, err)
	require.Equal(t, im.Applied, loaded.DemotedAt(p.Leader))
	require.True(t, im.Equal(loaded))
	require.Equal(t, im.Digest(), loaded.Digest())

	// Version 1: the same records, no demotions after them.
	v2 := clusterImage(t).EncodeSnapshot()
	body := v2[:len(v2)-4]
	require.Equal(t, byte(0), body[len(body)-1], "an image with no demotions ends its body with a zero count")
	v1 := append([]byte(nil), body[:len(body)-1]...)
	v1[len(snapshotMagic)] = 1
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	old, err := DecodeSnapshot(v1)
	require.NoError(t, err)
	require.True(t, old.Equal(clusterImage(t)))
}

// An image with ELRs survives a snapshot, and its digest tells ELRs apart.
func TestSnapshotKeepsELR(t *testing.T) {
	im := clusterImage(t)
	require.NoError(t, im.Apply(PartitionChangeRecord{Topic: TopicID{1}, Partition: 0, Leader: NoLeader, ISR: []int32{},
		ELR: []int32{1, 2}, LastKnownELR: []int32{1}, LeaderEpoch: 1, PartitionEpoch: 1}))
	loaded, err := DecodeSnapshot(im.EncodeSnapshot())
	require.NoError(t, err)
	require.True(t, im.Equal(loaded))
	require.Equal(t, []int32{1, 2}, loaded.Topics[TopicID{1}].Partitions[0].ELR)
	require.Equal(t, []int32{1}, loaded.Topics[TopicID{1}].Partitions[0].LastKnownELR)
	require.Equal(t, im.Digest(), loaded.Digest())

	other := im.Clone()
	require.NoError(t, other.Apply(PartitionChangeRecord{Topic: TopicID{1}, Partition: 0, Leader: NoLeader, ELR: []int32{2},
		LeaderEpoch: 1, PartitionEpoch: 2}))
	other.Applied = im.Applied
	require.False(t, im.Equal(other))
	require.NotEqual(t, im.Digest(), other.Digest())
}

// Every prefix, every record with a byte changed and bytes appended is
// an error or a record, never a panic; prefixes and appended bytes are
// always errors.
func TestBinaryDecodeRefusesDamage(t *testing.T) {
	for _, r := range everyRecord() {
		b, err := EncodeBinaryRecord(r)
		require.NoError(t, err)
		for n := 0; n < len(b); n++ {
			_, err := DecodeRecord(b[:n])
			require.Error(t, err, "%T cut to %d of %d bytes", r, n, len(b))
		}
		_, err = DecodeRecord(append(append([]byte(nil), b...), 0))
		require.Error(t, err, "a byte after the record")
		for i := range b {
			for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
				damaged := append([]byte(nil), b...)
				damaged[i] = v
				_, _ = DecodeRecord(damaged)
			}
		}
	}
	// A count far above what the bytes could hold does not allocate it.
	huge := []byte{binaryFormat, codeCreateTopic, 1, 't'}
	huge = append(huge, make([]byte, 16)...)
	huge = binary.AppendUvarint(huge, 1<<40)
	_, err := DecodeRecord(huge)
	require.ErrorContains(t, err, "could hold")
	_, err = DecodeRecord([]byte{binaryFormat, 99})
	require.ErrorContains(t, err, "unknown type")
}

func TestSnapshotRefusesDamage(t *testing.T) {
	im := clusterImage(t)
	p := im.EncodeSnapshot()
	loaded, err := DecodeSnapshot(p)
	require.NoError(t, err)
	require.True(t, im.Equal(loaded))
	for n := 0; n < len(p); n++ {
		_, err := DecodeSnapshot(p[:n])
		require.Error(t, err, "cut to %d of %d bytes", n, len(p))
	}
	for i := range p {
		flipped := bytes.Clone(p)
		flipped[i] ^= 0x10
		_, err := DecodeSnapshot(flipped)
		require.Error(t, err, "bit flipped at %d", i)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range everyRecord() {
		b, err := EncodeBinaryRecord(r)
		require.NoError(f, err)
		f.Add(b)
		j, err := EncodeRecord(r)
		require.NoError(f, err)
		f.Add(j)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := DecodeRecord(p)
		if err != nil {
			return
		}
		// What decodes encodes again, and applying it to an image either
		// fits or is refused with the image unchanged.
		b, err := EncodeBinaryRecord(r)
		require.NoError(t, err)
		again, err := DecodeRecord(b)
		require.NoError(t, err)
		b2, err := EncodeBinaryRecord(again)
		require.NoError(t, err)
		require.Equal(t, b, b2)
		im := clusterImage(t)
		before := im.Digest()
		if err := im.Apply(r); err != nil {
			require.Equal(t, before, im.Digest())
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(clusterImage(f).EncodeSnapshot())
	f.Add(NewImage().EncodeSnapshot())
	f.Fuzz(func(t *testing.T, p []byte) {
		im, err := DecodeSnapshot(p)
		if err != nil {
			return
		}
		require.NoError(t, im.Validate())
		again, err := DecodeSnapshot(im.EncodeSnapshot())
		require.NoError(t, err)
		require.True(t, im.Equal(again))
	})
}
