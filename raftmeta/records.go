package raftmeta

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicemq/sluice/internal/invariants"
)

// Record is one change to the image. The set of records is closed: each type
// below, encoded by EncodeRecord (JSON) or AppendBinaryRecord and decoded by
// DecodeRecord.
type Record interface {
	recordType() string
	applyTo(im *Image) error
}

// ClusterIDRecord names the cluster; it is the first record of every log.
type ClusterIDRecord struct {
	ClusterID string `json:"cluster_id"`
}

// RegisterBrokerRecord adds a broker or records its new incarnation (Kafka's
// RegisterBrokerRecord). Its epoch must be above the registration it
// replaces, or equal to it with the same non-zero incarnation id (the same
// process amending its listeners or rack). A fenced registration may not
// replace one that still leads partitions: the controller moves them first.
//
// The journal's records from before listeners carry Host and Port only; they
// become the broker's one listener, with an empty name.
type RegisterBrokerRecord struct {
	Broker Broker `json:"broker"`
}

// BrokerChange is what a BrokerChangeRecord does to a broker.
type BrokerChange int8

const (
	// BrokerFence fences an unfenced broker (it must lead nothing by then)
	// and ends its controlled shutdown, if any.
	BrokerFence BrokerChange = 1
	// BrokerUnfence unfences a fenced broker.
	BrokerUnfence BrokerChange = 2
	// BrokerBeginControlledShutdown marks an unfenced broker as shutting
	// down.
	BrokerBeginControlledShutdown BrokerChange = 3
)

// BrokerChangeRecord changes one registered broker's state (Kafka's
// BrokerRegistrationChangeRecord, one change at a time). BrokerEpoch must be
// the broker's current epoch: a change decided for an older registration is
// refused.
type BrokerChangeRecord struct {
	BrokerID    int32        `json:"broker_id"`
	BrokerEpoch int64        `json:"broker_epoch"`
	Change      BrokerChange `json:"change"`
}

// UnregisterBrokerRecord removes a broker (Kafka's UnregisterBrokerRecord).
// The broker must lead nothing; it stays in the replica lists, and in the
// ISRs and ELRs that still hold it (the controller takes it out of the
// ISRs first), as in KRaft.
type UnregisterBrokerRecord struct {
	BrokerID    int32 `json:"broker_id"`
	BrokerEpoch int64 `json:"broker_epoch"`
}

// CreateTopicRecord creates a topic with all its partitions at once, so a
// topic is never seen half-made.
type CreateTopicRecord struct {
	Topic Topic `json:"topic"`
}

// DeleteTopicRecord removes a topic.
type DeleteTopicRecord struct {
	ID TopicID `json:"id"`
}

// CreatePartitionsRecord appends partitions to an existing topic (Kafka's
// CreatePartitions: partitions are only ever added). Their indexes continue
// the topic's, and each new leader is a registered, unfenced broker.
type CreatePartitionsRecord struct {
	Topic      TopicID     `json:"topic"`
	Partitions []Partition `json:"partitions"`
}

// PartitionChangeRecord changes one partition's leader, ISR, ELR, last
// known ELR, replicas or reassignment (Kafka's PartitionChangeRecord). Leader is the new
// leader (NoLeader for none; the old one when it stays). ISR, ELR,
// LastKnownELR and Replicas are the new lists, or nil when they stay (an
// empty, non-nil list empties one; JSON keeps the difference). The record carries the epochs the partition takes, so
// that every replay checks them: the partition epoch grows by exactly one
// at every change; the leader epoch by exactly one when the leader changes
// or a replica leaves the replica list (as in KRaft, so a removed replica is
// fenced), and not otherwise. A record that changes nothing is refused, and
// a new leader must be a registered, unfenced broker.
type PartitionChangeRecord struct {
	Topic          TopicID `json:"topic"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	ISR            []int32 `json:"isr,omitzero"`
	Replicas       []int32 `json:"replicas,omitempty"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	ELR            []int32 `json:"elr,omitzero"`
	LastKnownELR   []int32 `json:"last_known_elr,omitzero"`
	// AddingReplicas and RemovingReplicas are the reassignment's new
	// lists (nil: they stay; empty: the reassignment ends).
	AddingReplicas   []int32 `json:"adding_replicas,omitzero"`
	RemovingReplicas []int32 `json:"removing_replicas,omitzero"`
}

// ConfigRecord sets (Value non-nil) or removes (Value nil) one config of a
// topic or a broker.
type ConfigRecord struct {
	Resource ConfigResource `json:"resource"`
	Name     string         `json:"name"`
	Key      string         `json:"key"`
	Value    *string        `json:"value"`
}

// ConfigResource is what a ConfigRecord applies to.
type ConfigResource string

const (
	ConfigTopic ConfigResource = "topic"
	// ConfigBroker is a broker's dynamic configs, by the broker id in
	// decimal; the name "" is the cluster-wide default, as in Kafka.
	ConfigBroker ConfigResource = "broker"
)

// ProducerIDsRecord allocates the block [First, First+Count) of producer IDs.
type ProducerIDsRecord struct {
	First int64 `json:"first"`
	Count int64 `json:"count"`
}

func (ClusterIDRecord) recordType() string        { return "cluster_id" }
func (RegisterBrokerRecord) recordType() string   { return "register_broker" }
func (BrokerChangeRecord) recordType() string     { return "broker_change" }
func (UnregisterBrokerRecord) recordType() string { return "unregister_broker" }
func (CreateTopicRecord) recordType() string      { return "create_topic" }
func (DeleteTopicRecord) recordType() string      { return "delete_topic" }
func (CreatePartitionsRecord) recordType() string { return "create_partitions" }
func (PartitionChangeRecord) recordType() string  { return "partition_change" }
func (ConfigRecord) recordType() string           { return "config" }
func (ProducerIDsRecord) recordType() string      { return "producer_ids" }

func (r ClusterIDRecord) applyTo(im *Image) error {
	if r.ClusterID == "" {
		return errors.New("empty cluster id")
	}
	if im.ClusterID != "" && im.ClusterID != r.ClusterID {
		return fmt.Errorf("cluster id %q already set to %q", r.ClusterID, im.ClusterID)
	}
	im.ClusterID = r.ClusterID
	return nil
}

// normalizeBroker turns the journal's Host and Port into the one listener,
// and sets Host and Port from the first listener.
func normalizeBroker(b Broker) Broker {
	if len(b.Listeners) == 0 && (b.Host != "" || b.Port != 0) {
		b.Listeners = []Listener{{Host: b.Host, Port: b.Port}}
	}
	if len(b.Listeners) > 0 {
		b.Host, b.Port = b.Listeners[0].Host, b.Listeners[0].Port
	}
	return b
}

// checkBroker checks one registration's shape. (The journal's records may
// name no listener at all: its tests register brokers without addresses.)
func checkBroker(b Broker) error {
	switch {
	case b.ID < 0:
		return fmt.Errorf("negative broker id %d", b.ID)
	case b.Epoch < 0:
		return fmt.Errorf("negative epoch %d", b.Epoch)
	case b.Fenced && b.InControlledShutdown:
		return errors.New("fenced and in controlled shutdown at once")
	case len(b.Listeners) == 0 && (b.Host != "" || b.Port != 0):
		return fmt.Errorf("host %s:%d but no listeners", b.Host, b.Port)
	case len(b.Listeners) > 0 && (b.Host != b.Listeners[0].Host || b.Port != b.Listeners[0].Port):
		return fmt.Errorf("host %s:%d is not its first listener's %s:%d", b.Host, b.Port, b.Listeners[0].Host, b.Listeners[0].Port)
	}
	for i, l := range b.Listeners {
		if l.Port < 0 || l.Port > math.MaxUint16 {
			return fmt.Errorf("listener %q has address %q port %d", l.Name, l.Host, l.Port)
		}
		for _, m := range b.Listeners[:i] {
			if m.Name == l.Name {
				return fmt.Errorf("listener name %q twice", l.Name)
			}
		}
	}
	return nil
}

func (r RegisterBrokerRecord) applyTo(im *Image) error {
	b := normalizeBroker(r.Broker)
	if err := checkBroker(b); err != nil {
		return fmt.Errorf("broker %d: %w", b.ID, err)
	}
	if old, ok := im.Brokers[b.ID]; ok {
		amend := b.Epoch == old.Epoch && !b.IncarnationID.IsZero() && b.IncarnationID == old.IncarnationID
		if b.Epoch < old.Epoch || (b.Epoch == old.Epoch && !amend) {
			return fmt.Errorf("broker %d epoch %d is not after %d", b.ID, b.Epoch, old.Epoch)
		}
	}
	if n := im.leaders[b.ID]; n > 0 && b.Fenced {
		return fmt.Errorf("broker %d still leads %d partitions and may not become fenced", b.ID, n)
	}
	im.Brokers[b.ID] = b
	return nil
}

func (c BrokerChange) String() string {
	switch c {
	case BrokerFence:
		return "fence"
	case BrokerUnfence:
		return "unfence"
	case BrokerBeginControlledShutdown:
		return "controlled_shutdown"
	}
	return fmt.Sprintf("BrokerChange(%d)", int8(c))
}

// MarshalText writes the change's name, so journals stay readable.
func (c BrokerChange) MarshalText() ([]byte, error) {
	switch c {
	case BrokerFence, BrokerUnfence, BrokerBeginControlledShutdown:
		return []byte(c.String()), nil
	}
	return nil, fmt.Errorf("unknown broker change %d", int8(c))
}

// UnmarshalText parses a change's name.
func (c *BrokerChange) UnmarshalText(p []byte) error {
	for _, v := range []BrokerChange{BrokerFence, BrokerUnfence, BrokerBeginControlledShutdown} {
		if string(p) == v.String() {
			*c = v
			return nil
		}
	}
	return fmt.Errorf("unknown broker change %q", p)
}

// registered returns the broker a record about (id, epoch) refers to.
func (im *Image) registered(id int32, epoch int64) (Broker, error) {
	b, ok := im.Brokers[id]
	if !ok {
		return Broker{}, fmt.Errorf("broker %d is not registered", id)
	}
	if b.Epoch != epoch {
		return Broker{}, fmt.Errorf("broker %d epoch %d is stale: the registration has epoch %d", id, epoch, b.Epoch)
	}
	return b, nil
}

func (r BrokerChangeRecord) applyTo(im *Image) error {
	b, err := im.registered(r.BrokerID, r.BrokerEpoch)
	if err != nil {
		return err
	}
	switch r.Change {
	case BrokerFence:
		if b.Fenced {
			return fmt.Errorf("broker %d is fenced already", b.ID)
		}
		if n := im.leaders[b.ID]; n > 0 {
			return fmt.Errorf("broker %d still leads %d partitions and may not be fenced", b.ID, n)
		}
		b.Fenced, b.InControlledShutdown = true, false
	case BrokerUnfence:
		if !b.Fenced {
			return fmt.Errorf("broker %d is not fenced", b.ID)
		}
		b.Fenced = false
	case BrokerBeginControlledShutdown:
		if b.Fenced || b.InControlledShutdown {
			return fmt.Errorf("broker %d cannot begin a controlled shutdown (fenced %t, shutting down %t)", b.ID, b.Fenced, b.InControlledShutdown)
		}
		b.InControlledShutdown = true
	default:
		return fmt.Errorf("unknown broker change %d", int8(r.Change))
	}
	im.Brokers[b.ID] = b
	return nil
}

func (r UnregisterBrokerRecord) applyTo(im *Image) error {
	b, err := im.registered(r.BrokerID, r.BrokerEpoch)
	if err != nil {
		return err
	}
	if n := im.leaders[b.ID]; n > 0 {
		return fmt.Errorf("broker %d still leads %d partitions and may not be unregistered", b.ID, n)
	}
	delete(im.Brokers, b.ID)
	return nil
}

// checkPartition checks one partition's shape: distinct, non-negative
// replicas; an ISR of distinct replicas, empty only when there is no
// leader; a leader in the ISR or none; an ELR and a last known ELR of
// distinct replicas outside the ISR; adding and removing replicas,
// distinct replicas, none in both; non-negative epochs.
func checkPartition(p *Partition) error {
	switch {
	case len(p.Replicas) == 0:
		return errors.New("no replicas")
	case len(p.ISR) == 0 && p.Leader != NoLeader:
		return fmt.Errorf("an empty ISR with leader %d", p.Leader)
	case p.LeaderEpoch < 0 || p.PartitionEpoch < 0:
		return fmt.Errorf("negative epochs: leader epoch %d, partition epoch %d", p.LeaderEpoch, p.PartitionEpoch)
	}
	for i, r := range p.Replicas {
		if r < 0 {
			return fmt.Errorf("replica %d is not a broker id", r)
		}
		if indexOf(p.Replicas[:i], r) >= 0 {
			return fmt.Errorf("replica %d twice in %v", r, p.Replicas)
		}
	}
	if err := checkReplicaSet("ISR", p.ISR, p.Replicas, nil); err != nil {
		return err
	}
	if p.Leader != NoLeader && indexOf(p.ISR, p.Leader) < 0 {
		return fmt.Errorf("leader %d is not in the ISR %v", p.Leader, p.ISR)
	}
	if err := checkReplicaSet("ELR", p.ELR, p.Replicas, p.ISR); err != nil {
		return err
	}
	if err := checkReplicaSet("last known ELR", p.LastKnownELR, p.Replicas, p.ISR); err != nil {
		return err
	}
	if err := checkReplicaSet("adding replicas", p.AddingReplicas, p.Replicas, nil); err != nil {
		return err
	}
	for _, r := range p.RemovingReplicas {
		if indexOf(p.AddingReplicas, r) >= 0 {
			return fmt.Errorf("replica %d is both adding and removing", r)
		}
	}
	return checkReplicaSet("removing replicas", p.RemovingReplicas, p.Replicas, nil)
}

// checkReplicaSet checks that ids are distinct replicas, none in outside.
func checkReplicaSet(what string, ids, replicas, outside []int32) error {
	for i, r := range ids {
		if indexOf(replicas, r) < 0 {
			return fmt.Errorf("%s member %d is not a replica of %v", what, r, replicas)
		}
		if indexOf(ids[:i], r) >= 0 {
			return fmt.Errorf("%s member %d twice in %v", what, r, ids)
		}
		if indexOf(outside, r) >= 0 {
			return fmt.Errorf("%s member %d is in the ISR %v", what, r, outside)
		}
	}
	return nil
}

// nilIfEmpty returns ids, or nil when it is empty: an image holds no empty
// ELR, so equal images encode equally.
func nilIfEmpty(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

func indexOf(ids []int32, id int32) int {
	for i, v := range ids {
		if v == id {
			return i
		}
	}
	return -1
}

// checkLeaderEligible refuses a new leader that is not a registered,
// unfenced broker.
func (im *Image) checkLeaderEligible(leader int32) error {
	if leader == NoLeader {
		return nil
	}
	b, ok := im.Brokers[leader]
	if !ok {
		return fmt.Errorf("leader %d is not a registered broker", leader)
	}
	if b.Fenced {
		return fmt.Errorf("leader %d is fenced", leader)
	}
	return nil
}

func (r CreateTopicRecord) applyTo(im *Image) error {
	t := r.Topic
	switch {
	case t.Name == "":
		return errors.New("empty topic name")
	case t.ID.IsZero():
		return fmt.Errorf("topic %q has the zero id", t.Name)
	case im.TopicByName(t.Name) != nil:
		return fmt.Errorf("topic %q exists", t.Name)
	case im.Topics[t.ID] != nil:
		return fmt.Errorf("topic id %s is taken", t.ID)
	case len(t.Partitions) == 0:
		return fmt.Errorf("topic %q has no partitions", t.Name)
	}
	// The leaders of a new topic are not checked against the brokers: the
	// single-node journal's records (and its tests) create topics whose
	// broker was registered by a record the replay may not hold.
	if err := checkNewPartitions(t.Name, t.Partitions, 0, nil); err != nil {
		return err
	}
	copied := t
	copied.Partitions = append([]Partition(nil), t.Partitions...)
	copied.Configs = copyConfigs(t.Configs)
	im.Topics[t.ID] = &copied
	im.topicNames[t.Name] = t.ID
	im.countNewPartitions(copied.Partitions)
	return nil
}

// checkNewPartitions checks partitions about to be added at index first; a
// non-nil im also checks their leaders against its brokers.
func checkNewPartitions(topic string, ps []Partition, first int, im *Image) error {
	for i := range ps {
		p := &ps[i]
		if int(p.Index) != first+i {
			return fmt.Errorf("topic %q partition at position %d has index %d", topic, first+i, p.Index)
		}
		if err := checkPartition(p); err != nil {
			return fmt.Errorf("partition %s-%d: %w", topic, p.Index, err)
		}
		if im != nil {
			if err := im.checkLeaderEligible(p.Leader); err != nil {
				return fmt.Errorf("partition %s-%d: %w", topic, p.Index, err)
			}
		}
	}
	return nil
}

func (im *Image) countNewPartitions(ps []Partition) {
	for i := range ps {
		im.addLeader(ps[i].Leader, 1)
	}
	im.partitions += len(ps)
}

func (r DeleteTopicRecord) applyTo(im *Image) error {
	t := im.Topics[r.ID]
	if t == nil {
		return fmt.Errorf("no topic with id %s", r.ID)
	}
	for i := range t.Partitions {
		im.addLeader(t.Partitions[i].Leader, -1)
		im.demote(t.Partitions[i].Leader)
	}
	im.partitions -= len(t.Partitions)
	delete(im.Topics, r.ID)
	delete(im.topicNames, t.Name)
	return nil
}

func (r CreatePartitionsRecord) applyTo(im *Image) error {
	t := im.Topics[r.Topic]
	if t == nil {
		return fmt.Errorf("no topic with id %s", r.Topic)
	}
	if len(r.Partitions) == 0 {
		return fmt.Errorf("no partitions to add to topic %q", t.Name)
	}
	if len(t.Partitions)+len(r.Partitions) > math.MaxInt32 {
		return fmt.Errorf("topic %q cannot hold %d more partitions", t.Name, len(r.Partitions))
	}
	if err := checkNewPartitions(t.Name, r.Partitions, len(t.Partitions), im); err != nil {
		return err
	}
	// A fresh array, so an image cloned from this one before never sees
	// the new partitions through a shared one.
	grown := make([]Partition, 0, len(t.Partitions)+len(r.Partitions))
	grown = append(append(grown, t.Partitions...), r.Partitions...)
	t.Partitions = grown
	im.countNewPartitions(r.Partitions)
	return nil
}

func (r PartitionChangeRecord) applyTo(im *Image) error {
	t := im.Topics[r.Topic]
	if t == nil {
		return fmt.Errorf("no topic with id %s", r.Topic)
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("topic %q has no partition %d", t.Name, r.Partition)
	}
	old := &t.Partitions[r.Partition]
	next, err := r.changed(old)
	if err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.Name, r.Partition, err)
	}
	if next.Leader != old.Leader {
		if err := im.checkLeaderEligible(next.Leader); err != nil {
			return fmt.Errorf("partition %s-%d: %w", t.Name, r.Partition, err)
		}
		im.addLeader(old.Leader, -1)
		im.addLeader(next.Leader, 1)
		im.demote(old.Leader)
	}
	prevLeader, prevLeaderEpoch, prevPartitionEpoch := old.Leader, old.LeaderEpoch, old.PartitionEpoch
	*old = next
	if invariants.Enabled {
		// Fencing compares these epochs: assert what the change checked.
		if old.PartitionEpoch != prevPartitionEpoch+1 || old.LeaderEpoch < prevLeaderEpoch ||
			(old.Leader != prevLeader && old.LeaderEpoch != prevLeaderEpoch+1) {
			invariants.Panicf("image: partition %s-%d moved from leader %d epochs %d/%d to leader %d epochs %d/%d",
				t.Name, r.Partition, prevLeader, prevLeaderEpoch, prevPartitionEpoch, old.Leader, old.LeaderEpoch, old.PartitionEpoch)
		}
	}
	return nil
}

// changed returns the partition old becomes, checking the record's epochs.
func (r PartitionChangeRecord) changed(old *Partition) (Partition, error) {
	next := *old
	next.Leader = r.Leader
	if r.ISR != nil {
		next.ISR = r.ISR
	}
	if r.Replicas != nil {
		next.Replicas = r.Replicas
	}
	if r.ELR != nil {
		next.ELR = nilIfEmpty(r.ELR)
	}
	if r.LastKnownELR != nil {
		next.LastKnownELR = nilIfEmpty(r.LastKnownELR)
	}
	if r.AddingReplicas != nil {
		next.AddingReplicas = nilIfEmpty(r.AddingReplicas)
	}
	if r.RemovingReplicas != nil {
		next.RemovingReplicas = nilIfEmpty(r.RemovingReplicas)
	}
	if err := checkPartition(&next); err != nil {
		return Partition{}, err
	}
	leaderMoved := next.Leader != old.Leader
	replicaLeft := false
	for _, id := range old.Replicas {
		replicaLeft = replicaLeft || indexOf(next.Replicas, id) < 0
	}
	if !leaderMoved && int32sEqual(next.ISR, old.ISR) && int32sEqual(next.Replicas, old.Replicas) &&
		int32sEqual(next.ELR, old.ELR) && int32sEqual(next.LastKnownELR, old.LastKnownELR) &&
		int32sEqual(next.AddingReplicas, old.AddingReplicas) && int32sEqual(next.RemovingReplicas, old.RemovingReplicas) {
		return Partition{}, errors.New("the change changes nothing")
	}
	if old.PartitionEpoch == math.MaxInt32 || r.PartitionEpoch != old.PartitionEpoch+1 {
		return Partition{}, fmt.Errorf("partition epoch %d does not follow %d", r.PartitionEpoch, old.PartitionEpoch)
	}
	wantLeaderEpoch := old.LeaderEpoch
	if leaderMoved || replicaLeft {
		if old.LeaderEpoch == math.MaxInt32 {
			return Partition{}, errors.New("the leader epoch is at its maximum")
		}
		wantLeaderEpoch++
	}
	if r.LeaderEpoch != wantLeaderEpoch {
		return Partition{}, fmt.Errorf("leader epoch %d, but the change makes it %d (from %d)", r.LeaderEpoch, wantLeaderEpoch, old.LeaderEpoch)
	}
	next.LeaderEpoch, next.PartitionEpoch = r.LeaderEpoch, r.PartitionEpoch
	return next, nil
}

func (r ConfigRecord) applyTo(im *Image) error {
	if r.Key == "" {
		return errors.New("empty config key")
	}
	switch r.Resource {
	case ConfigTopic:
		t := im.TopicByName(r.Name)
		if t == nil {
			return fmt.Errorf("no topic %q", r.Name)
		}
		t.Configs = setConfig(t.Configs, r.Key, r.Value)
	case ConfigBroker:
		if c := setConfig(im.BrokerConfigs[r.Name], r.Key, r.Value); c != nil {
			im.BrokerConfigs[r.Name] = c
		} else {
			delete(im.BrokerConfigs, r.Name)
		}
	default:
		return fmt.Errorf("unknown config resource %q", r.Resource)
	}
	return nil
}

// setConfig sets or removes key in configs and returns the map, nil once it
// is empty (so that an image holds no empty config map).
func setConfig(configs map[string]string, key string, value *string) map[string]string {
	if value == nil {
		delete(configs, key)
		if len(configs) == 0 {
			return nil
		}
		return configs
	}
	if configs == nil {
		configs = map[string]string{}
	}
	configs[key] = *value
	return configs
}

func (r ProducerIDsRecord) applyTo(im *Image) error {
	if r.Count <= 0 || r.First != im.NextProducerID || r.First > math.MaxInt64-r.Count {
		return fmt.Errorf("producer id block [%d, +%d) does not follow %d", r.First, r.Count, im.NextProducerID)
	}
	im.NextProducerID = r.First + r.Count
	return nil
}
