package raftmeta

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// clusterImage is an image with brokers 1..3 registered and unfenced and a
// topic t (id 1) of two partitions on [1 2] and [2 3].
func clusterImage(t testing.TB) *Image {
	im := NewImage()
	for id := int32(1); id <= 3; id++ {
		require.NoError(t, im.Apply(RegisterBrokerRecord{Broker: Broker{ID: id, Epoch: int64(id), IncarnationID: IncarnationID{byte(id)},
			Listeners: []Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}}}))
	}
	require.NoError(t, im.Apply(CreateTopicRecord{Topic: Topic{Name: "t", ID: TopicID{1}, Partitions: []Partition{
		{Index: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		{Index: 1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2},
	}}}))
	return im
}

// requireRefused asserts that r does not apply and leaves im as it was.
func requireRefused(t *testing.T, im *Image, r Record, why string) {
	t.Helper()
	before := im.Digest()
	require.Error(t, im.Apply(r), why)
	require.Equal(t, before, im.Digest(), "a refused %s record changed the image", r.recordType())
	require.NoError(t, im.Validate())
}

func TestRegistrationFromTheJournalBecomesOneListener(t *testing.T) {
	r, err := DecodeRecord([]byte(`{"type":"register_broker","body":{"broker":{"id":1,"host":"n1","port":9092,"epoch":3}}}`))
	require.NoError(t, err)
	im := NewImage()
	require.NoError(t, im.Apply(r))
	b := im.Brokers[1]
	require.Equal(t, []Listener{{Host: "n1", Port: 9092}}, b.Listeners)
	require.Equal(t, "n1", b.Host)
	require.Equal(t, int32(9092), b.Port)
	require.False(t, b.Fenced, "the single node's registrations are unfenced")
	// The listener form keeps Host and Port as its first listener's.
	require.NoError(t, im.Apply(RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 4,
		Listeners: []Listener{{Name: "A", Host: "x", Port: 1}, {Name: "B", Host: "y", Port: 2}}}}))
	require.Equal(t, "x", im.Brokers[1].Host)
	require.Equal(t, int32(1), im.Brokers[1].Port)
}

func TestRegistrationRules(t *testing.T) {
	im := clusterImage(t)
	inc := IncarnationID{1}
	listeners := []Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 0, Listeners: listeners}}, "epoch goes back")
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 1, IncarnationID: IncarnationID{9}, Listeners: listeners}}, "same epoch, another incarnation")
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 7, Listeners: listeners, Fenced: true}}, "fenced while leading")
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: 4, Epoch: 7, Listeners: listeners, Fenced: true, InControlledShutdown: true}}, "fenced and shutting down")
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: -1, Epoch: 7, Listeners: listeners}}, "negative id")
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: 4, Epoch: 7, Listeners: []Listener{{Name: "A", Host: "h", Port: 1}, {Name: "A", Host: "h", Port: 2}}}}, "listener name twice")
	requireRefused(t, im, RegisterBrokerRecord{Broker: Broker{ID: 4, Epoch: 7, Listeners: []Listener{{Name: "A", Host: "h", Port: 70000}}}}, "port out of range")
	// The same incarnation at the same epoch amends.
	require.NoError(t, im.Apply(RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 1, IncarnationID: inc, Rack: "r", Listeners: listeners}}))
	require.Equal(t, "r", im.Brokers[1].Rack)
}

func TestBrokerChangeRules(t *testing.T) {
	im := clusterImage(t)
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 2, Change: BrokerFence}, "stale epoch")
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 9, BrokerEpoch: 1, Change: BrokerFence}, "unknown broker")
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 2, BrokerEpoch: 2, Change: BrokerFence}, "fenced while leading")
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerUnfence}, "not fenced")
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: 9}, "unknown change")
	require.NoError(t, im.Apply(BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerBeginControlledShutdown}))
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerBeginControlledShutdown}, "already shutting down")
	require.NoError(t, im.Apply(BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerFence}))
	require.True(t, im.Brokers[3].Fenced)
	require.False(t, im.Brokers[3].InControlledShutdown, "fencing ends a controlled shutdown")
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerFence}, "fenced twice")
	requireRefused(t, im, BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerBeginControlledShutdown}, "fenced brokers do not shut down")
	require.NoError(t, im.Apply(BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerUnfence}))
	requireRefused(t, im, UnregisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1}, "unregistered while leading")
	requireRefused(t, im, UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 1}, "stale epoch")
	require.NoError(t, im.Apply(UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 3}))
	require.NotContains(t, im.Brokers, int32(3))
}

func TestPartitionChangeEpochs(t *testing.T) {
	id := TopicID{1}
	for _, tc := range []struct {
		name   string
		change PartitionChangeRecord
		ok     bool
	}{
		{"leader change bumps both", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}, true},
		{"leader change without a leader epoch bump", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 2, LeaderEpoch: 0, PartitionEpoch: 1}, false},
		{"leader epoch bumped by two", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 1}, false},
		{"ISR change bumps the partition epoch only", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 0, PartitionEpoch: 1}, true},
		{"ISR change with a leader epoch bump", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 1, PartitionEpoch: 1}, false},
		{"partition epoch not bumped", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, PartitionEpoch: 0}, false},
		{"partition epoch bumped by two", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, PartitionEpoch: 2}, false},
		{"no change", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, PartitionEpoch: 1}, false},
		{"no leader", PartitionChangeRecord{Topic: id, Partition: 0, Leader: NoLeader, LeaderEpoch: 1, PartitionEpoch: 1}, true},
		{"leader outside the ISR", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 2, ISR: []int32{1}, LeaderEpoch: 1, PartitionEpoch: 1}, false},
		{"leader not registered", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 7, ISR: []int32{7}, Replicas: []int32{1, 7}, LeaderEpoch: 1, PartitionEpoch: 1}, false},
		{"ISR outside the replicas", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1, 3}, PartitionEpoch: 1}, false},
		{"empty ISR with a leader", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{}, PartitionEpoch: 1}, false},
		{"empty ISR without a leader", PartitionChangeRecord{Topic: id, Partition: 0, Leader: NoLeader, ISR: []int32{}, ELR: []int32{1, 2}, LeaderEpoch: 1, PartitionEpoch: 1}, true},
		{"ELR change bumps the partition epoch only", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, ELR: []int32{2}, PartitionEpoch: 1}, true},
		{"ELR alone changes", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, LastKnownELR: []int32{}, PartitionEpoch: 1}, false},
		{"ELR in the ISR", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ELR: []int32{2}, PartitionEpoch: 1}, false},
		{"ELR outside the replicas", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, ELR: []int32{3}, PartitionEpoch: 1}, false},
		{"ELR member twice", PartitionChangeRecord{Topic: id, Partition: 0, Leader: NoLeader, ISR: []int32{}, ELR: []int32{2, 2}, LeaderEpoch: 1, PartitionEpoch: 1}, false},
		{"last known ELR in the ISR", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, LastKnownELR: []int32{1}, PartitionEpoch: 1}, false},
		{"last known ELR outside the replicas", PartitionChangeRecord{Topic: id, Partition: 0, Leader: NoLeader, ISR: []int32{}, LastKnownELR: []int32{3}, LeaderEpoch: 1, PartitionEpoch: 1}, false},
		{"duplicate replicas", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, Replicas: []int32{1, 2, 2}, PartitionEpoch: 1}, false},
		{"replica added keeps the leader epoch", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, PartitionEpoch: 1}, true},
		{"replica removed bumps the leader epoch", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}, LeaderEpoch: 1, PartitionEpoch: 1}, true},
		{"replica removed without a bump", PartitionChangeRecord{Topic: id, Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}, PartitionEpoch: 1}, false},
		{"unknown partition", PartitionChangeRecord{Topic: id, Partition: 5, Leader: 1, PartitionEpoch: 1}, false},
		{"unknown topic", PartitionChangeRecord{Topic: TopicID{9}, Partition: 0, Leader: 1, PartitionEpoch: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := clusterImage(t)
			if !tc.ok {
				requireRefused(t, im, tc.change, tc.name)
				return
			}
			require.NoError(t, im.Apply(tc.change))
			p := im.Topics[id].Partitions[0]
			require.Equal(t, tc.change.LeaderEpoch, p.LeaderEpoch)
			require.Equal(t, tc.change.PartitionEpoch, p.PartitionEpoch)
			require.Equal(t, tc.change.Leader, p.Leader)
			if tc.change.ELR != nil {
				require.Equal(t, nilIfEmpty(tc.change.ELR), p.ELR)
			}
		})
	}
}

// TestValidateChecksELRShape breaks one ELR rule at a time in an image and
// expects Validate to name it.
func TestValidateChecksELRShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Partition)
		want string
	}{
		{"ELR member in the ISR", func(p *Partition) { p.ELR = []int32{2} }, "ELR member 2 is in the ISR"},
		{"ELR member not a replica", func(p *Partition) { p.ISR = []int32{1}; p.ELR = []int32{3} }, "ELR member 3 is not a replica"},
		{"ELR member twice", func(p *Partition) { p.ISR = []int32{1}; p.ELR = []int32{2, 2} }, "ELR member 2 twice"},
		{"last known ELR in the ISR", func(p *Partition) { p.LastKnownELR = []int32{1} }, "last known ELR member 1 is in the ISR"},
		{"empty ISR with a leader", func(p *Partition) { p.ISR = []int32{} }, "an empty ISR with leader 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := clusterImage(t)
			require.NoError(t, im.Validate())
			tc.edit(&im.Topics[TopicID{1}].Partitions[0])
			err := im.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLeaderCountsFollowEveryRecord(t *testing.T) {
	im := clusterImage(t)
	require.Equal(t, 1, im.LeaderCount(1))
	require.Equal(t, 1, im.LeaderCount(2))
	require.NoError(t, im.Apply(PartitionChangeRecord{Topic: TopicID{1}, Partition: 0, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}))
	require.Equal(t, 0, im.LeaderCount(1))
	require.Equal(t, 2, im.LeaderCount(2))
	require.NoError(t, im.Apply(CreatePartitionsRecord{Topic: TopicID{1}, Partitions: []Partition{{Index: 2, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3}}}))
	require.Equal(t, 1, im.LeaderCount(3))
	require.Equal(t, 3, im.PartitionCount())
	require.NoError(t, im.Apply(DeleteTopicRecord{ID: TopicID{1}}))
	require.Equal(t, 0, im.LeaderCount(2))
	require.Equal(t, 0, im.PartitionCount())
	require.NoError(t, im.Validate())
}

func TestCreatePartitionsRules(t *testing.T) {
	im := clusterImage(t)
	p := func(index, leader int32) Partition {
		return Partition{Index: index, Replicas: []int32{leader}, ISR: []int32{leader}, Leader: leader}
	}
	requireRefused(t, im, CreatePartitionsRecord{Topic: TopicID{9}, Partitions: []Partition{p(2, 1)}}, "unknown topic")
	requireRefused(t, im, CreatePartitionsRecord{Topic: TopicID{1}}, "nothing to add")
	requireRefused(t, im, CreatePartitionsRecord{Topic: TopicID{1}, Partitions: []Partition{p(3, 1)}}, "index gap")
	requireRefused(t, im, CreatePartitionsRecord{Topic: TopicID{1}, Partitions: []Partition{p(2, 8)}}, "unregistered leader")
	require.NoError(t, im.Apply(BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerFence}))
	requireRefused(t, im, CreatePartitionsRecord{Topic: TopicID{1}, Partitions: []Partition{p(2, 3)}}, "fenced leader")
	// A clone taken before sees none of the new partitions.
	before := im.Clone()
	require.NoError(t, im.Apply(CreatePartitionsRecord{Topic: TopicID{1}, Partitions: []Partition{p(2, 1), p(3, 2)}}))
	require.Len(t, im.Topics[TopicID{1}].Partitions, 4)
	require.Len(t, before.Topics[TopicID{1}].Partitions, 2)
}

func TestCloneSharesNothingMutable(t *testing.T) {
	im := clusterImage(t)
	v := "1"
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigTopic, Name: "t", Key: "k", Value: &v}))
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigBroker, Name: "1", Key: "k", Value: &v}))
	c := im.Clone()
	require.True(t, c.Equal(im))
	w := "2"
	require.NoError(t, c.Apply(ConfigRecord{Resource: ConfigTopic, Name: "t", Key: "k", Value: &w}))
	require.NoError(t, c.Apply(ConfigRecord{Resource: ConfigBroker, Name: "1", Key: "k", Value: &w}))
	require.NoError(t, c.Apply(PartitionChangeRecord{Topic: TopicID{1}, Partition: 0, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}))
	require.NoError(t, c.Apply(BrokerChangeRecord{BrokerID: 3, BrokerEpoch: 3, Change: BrokerFence}))
	require.Equal(t, "1", im.TopicByName("t").Configs["k"])
	require.Equal(t, "1", im.BrokerConfigs["1"]["k"])
	require.Equal(t, int32(1), im.Topics[TopicID{1}].Partitions[0].Leader)
	require.False(t, im.Brokers[3].Fenced)
	require.NoError(t, im.Validate())
	require.NoError(t, c.Validate())
}

func TestEmptyConfigMapsDisappear(t *testing.T) {
	im := clusterImage(t)
	v := "1"
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigBroker, Name: "", Key: "k", Value: &v}))
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigBroker, Name: "", Key: "k"}))
	require.NotContains(t, im.BrokerConfigs, "")
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigBroker, Name: "5", Key: "never-set"}))
	require.NotContains(t, im.BrokerConfigs, "5")
	requireRefused(t, im, ConfigRecord{Resource: ConfigBroker, Name: "", Key: ""}, "empty key")
	requireRefused(t, im, ConfigRecord{Resource: "group", Name: "g", Key: "k", Value: &v}, "unknown resource")
}
