package raftmeta

import (
	"fmt"
	"math"
	"strconv"

	"github.com/sluicemq/sluice/env"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicSpec is a topic to create, already validated by the caller (name,
// configs, defaults resolved): the controller checks only what depends on
// the metadata.
type TopicSpec struct {
	Name string
	// ID is the topic's id; zero draws one from the controller's source.
	ID                TopicID
	Partitions        int32
	ReplicationFactor int16
	// Assignment, when not nil, is each partition's replicas in order, and
	// Partitions and ReplicationFactor are ignored.
	Assignment [][]int32
	Configs    map[string]string
}

// CreateTopicResult answers one topic of CreateTopics.
type CreateTopicResult struct {
	Name              string
	ID                TopicID
	Err               *kerr.Error
	Message           string
	Partitions        int32
	ReplicationFactor int16
}

// CreateTopics creates each topic in one record, following Kafka's
// ReplicationControlManager.createTopic:
//
//   - A name the view already holds (committed, or proposed and in flight)
//     is TOPIC_ALREADY_EXISTS; so is the second of two specs of one name.
//   - Without an assignment, replicas are placed by the striped, rack-aware
//     placer (placement.go) over the brokers that may lead;
//     INVALID_PARTITIONS for a count below 1, INVALID_REPLICATION_FACTOR
//     for a factor below 1 or above those brokers.
//   - A manual assignment must name, for partitions 0..n-1, non-empty lists
//     of distinct registered brokers of one length (INVALID_REPLICA_ASSIGNMENT
//     otherwise, with Kafka's messages); its ISR is the replicas that may
//     lead, and must not be empty.
//   - Each partition's leader is the first member of its ISR, its epochs 0.
//
// Topics succeed or fail one by one; the records of those that succeed
// form the batch.
func (c *Controller) CreateTopics(specs []TopicSpec) ([]CreateTopicResult, []Record) {
	out := make([]CreateTopicResult, len(specs))
	b := c.batch()
	for i, spec := range specs {
		out[i] = c.createTopic(b, spec)
	}
	records := b.done()
	if c.failed != nil {
		for i := range out {
			out[i].Err, out[i].Message = c.failedErr()
		}
	}
	return out, records
}

func (c *Controller) createTopic(b *batch, spec TopicSpec) CreateTopicResult {
	res := CreateTopicResult{Name: spec.Name}
	if c.failed != nil {
		res.Err, res.Message = c.failedErr()
		return res
	}
	if spec.Name == "" {
		res.Err, res.Message = kerr.InvalidTopicException, "the topic name is empty"
		return res
	}
	if c.view.TopicByName(spec.Name) != nil {
		res.Err, res.Message = kerr.TopicAlreadyExists, fmt.Sprintf("Topic '%s' already exists.", spec.Name)
		return res
	}
	var partitions []Partition
	var err *kerr.Error
	var msg string
	if spec.Assignment != nil {
		partitions, err, msg = c.manualPartitions(spec.Assignment, 0, -1)
	} else {
		partitions, err, msg = c.placedPartitions(int(spec.Partitions), int(spec.ReplicationFactor), 0)
	}
	if err != nil {
		res.Err, res.Message = err, msg
		return res
	}
	id, err, msg := c.topicID(spec.ID)
	if err != nil {
		res.Err, res.Message = err, msg
		return res
	}
	b.add(CreateTopicRecord{Topic: Topic{Name: spec.Name, ID: id, Partitions: partitions, Configs: copyConfigs(spec.Configs)}})
	res.ID, res.Partitions, res.ReplicationFactor = id, int32(len(partitions)), int16(len(partitions[0].Replicas))
	return res
}

// topicID returns the spec's id if it is free, or draws a free one.
func (c *Controller) topicID(id TopicID) (TopicID, *kerr.Error, string) {
	if !id.IsZero() {
		if c.view.Topics[id] != nil {
			return TopicID{}, kerr.InvalidRequest, fmt.Sprintf("topic id %s is taken", id)
		}
		return id, nil, ""
	}
	for id.IsZero() || c.view.Topics[id] != nil {
		env.Fill(c.rand, id[:])
		// A version 4 UUID, as Kafka's Uuid.randomUuid.
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
	}
	return id, nil, ""
}

// leaders returns the brokers that may lead, by id.
func (c *Controller) leaders() []Broker {
	var out []Broker
	for _, id := range c.view.BrokerIDs() {
		if c.eligible(id) {
			out = append(out, c.view.Brokers[id])
		}
	}
	return out
}

// placedPartitions places count partitions of the replication factor,
// indexed from first.
func (c *Controller) placedPartitions(count, replicationFactor, first int) ([]Partition, *kerr.Error, string) {
	if count < 1 {
		return nil, kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value."
	}
	if replicationFactor < 1 {
		return nil, kerr.InvalidReplicationFactor, "Replication factor must be larger than 0."
	}
	if first+count > math.MaxInt32 {
		return nil, kerr.InvalidPartitions, fmt.Sprintf("%d partitions after %d are more than a topic can hold", count, first)
	}
	p := newPlacer(c.leaders(), c.rand)
	out := make([]Partition, count)
	for i := range out {
		replicas, err := p.place(replicationFactor)
		if err != nil {
			return nil, kerr.InvalidReplicationFactor, fmt.Sprintf("Unable to replicate the partition %d time(s): %v", replicationFactor, err)
		}
		out[i] = Partition{Index: int32(first + i), Replicas: replicas, ISR: replicas, Leader: replicas[0]}
	}
	return out, nil, ""
}

// manualPartitions checks a manual assignment (Kafka's
// validateManualPartitionAssignment) and builds its partitions, indexed
// from first; replicationFactor -1 takes the first list's length.
func (c *Controller) manualPartitions(assignment [][]int32, first, replicationFactor int) ([]Partition, *kerr.Error, string) {
	if len(assignment) == 0 {
		return nil, kerr.InvalidReplicaAssignment, "The manual partition assignment is empty."
	}
	if first+len(assignment) > math.MaxInt32 {
		return nil, kerr.InvalidPartitions, fmt.Sprintf("%d partitions after %d are more than a topic can hold", len(assignment), first)
	}
	out := make([]Partition, len(assignment))
	for i, replicas := range assignment {
		index := first + i
		if why := c.assignmentProblem(replicas, replicationFactor); why != "" {
			return nil, kerr.InvalidReplicaAssignment, why
		}
		replicationFactor = len(replicas)
		var isr []int32
		for _, r := range replicas {
			if c.eligible(r) {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", index)
		}
		out[i] = Partition{Index: int32(index), Replicas: append([]int32(nil), replicas...), ISR: isr, Leader: isr[0]}
	}
	return out, nil, ""
}

func (c *Controller) assignmentProblem(replicas []int32, replicationFactor int) string {
	if len(replicas) == 0 {
		return "The manual partition assignment includes an empty replica list."
	}
	for i, r := range replicas {
		if _, ok := c.view.Brokers[r]; !ok {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", r)
		}
		if indexOf(replicas[:i], r) >= 0 {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", r)
		}
	}
	if replicationFactor >= 0 && len(replicas) != replicationFactor {
		return fmt.Sprintf("The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), replicationFactor)
	}
	return ""
}

// DeleteTopicResult answers one topic of DeleteTopics.
type DeleteTopicResult struct {
	ID   TopicID
	Name string
	Err  *kerr.Error
}

// DeleteTopics deletes topics by id (the node resolves names), one record
// each; an id the view does not hold is UNKNOWN_TOPIC_ID, as in Kafka's
// controller, which also deletes by id.
func (c *Controller) DeleteTopics(ids []TopicID) ([]DeleteTopicResult, []Record) {
	out := make([]DeleteTopicResult, len(ids))
	b := c.batch()
	for i, id := range ids {
		out[i].ID = id
		t := c.view.Topics[id]
		switch {
		case c.failed != nil:
			out[i].Err, _ = c.failedErr()
		case t == nil:
			out[i].Err = kerr.UnknownTopicID
		default:
			out[i].Name = t.Name
			b.add(DeleteTopicRecord{ID: id})
		}
	}
	records := b.done()
	if c.failed != nil {
		for i := range out {
			out[i].Err, _ = c.failedErr()
		}
	}
	return out, records
}

// PartitionsSpec asks for a topic to grow to Count partitions, with the new
// partitions' replicas given (Assignment, one list per new partition) or
// placed.
type PartitionsSpec struct {
	Topic      string
	Count      int32
	Assignment [][]int32
}

// CreatePartitionsResult answers one topic of CreatePartitions.
type CreatePartitionsResult struct {
	Topic   string
	Err     *kerr.Error
	Message string
}

// CreatePartitions adds partitions to existing topics, one record per
// topic, following Kafka's ReplicationControlManager.createPartitions: an
// unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a count not above the
// current one INVALID_PARTITIONS; an assignment of the wrong number of
// lists, or one that fails the checks of CreateTopics,
// INVALID_REPLICA_ASSIGNMENT. New partitions take the replication factor of
// the topic's first partition.
func (c *Controller) CreatePartitions(specs []PartitionsSpec) ([]CreatePartitionsResult, []Record) {
	out := make([]CreatePartitionsResult, len(specs))
	b := c.batch()
	for i, spec := range specs {
		out[i] = CreatePartitionsResult{Topic: spec.Topic}
		if c.failed != nil {
			out[i].Err, out[i].Message = c.failedErr()
			continue
		}
		out[i].Err, out[i].Message = c.createPartitions(b, spec)
	}
	records := b.done()
	if c.failed != nil {
		for i := range out {
			out[i].Err, out[i].Message = c.failedErr()
		}
	}
	return out, records
}

func (c *Controller) createPartitions(b *batch, spec PartitionsSpec) (*kerr.Error, string) {
	t := c.view.TopicByName(spec.Topic)
	if t == nil {
		return kerr.UnknownTopicOrPartition, fmt.Sprintf("no topic %q", spec.Topic)
	}
	have := len(t.Partitions)
	switch {
	case int(spec.Count) == have:
		return kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partition(s).", have)
	case int(spec.Count) < have:
		return kerr.InvalidPartitions, fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", spec.Topic, have, spec.Count)
	}
	additional := int(spec.Count) - have
	replicationFactor := len(t.Partitions[0].Replicas)
	var partitions []Partition
	var err *kerr.Error
	var msg string
	if spec.Assignment != nil {
		if len(spec.Assignment) != additional {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(spec.Assignment))
		}
		partitions, err, msg = c.manualPartitions(spec.Assignment, have, replicationFactor)
	} else {
		partitions, err, msg = c.placedPartitions(additional, replicationFactor, have)
	}
	if err != nil {
		return err, msg
	}
	b.add(CreatePartitionsRecord{Topic: t.ID, Partitions: partitions})
	return nil, ""
}

// ConfigEntry sets a config (Value non-nil) or removes it (Value nil).
type ConfigEntry struct {
	Key   string
	Value *string
}

// ConfigAlteration is the config changes of one resource: a topic by name,
// or a broker by decimal id ("" for the cluster-wide default).
type ConfigAlteration struct {
	Resource ConfigResource
	Name     string
	Changes  []ConfigEntry
}

// AlterConfigs writes config changes (keys and values already validated by
// the caller), each resource all or nothing as Kafka's
// ConfigurationControlManager does: an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION, a broker name that is not a broker id
// INVALID_REQUEST (Kafka allows configs of brokers not registered, and so
// does this), an empty key INVALID_REQUEST. A change that leaves the value
// as it is writes no record. A change that allows unclean election elects
// the leaderless partitions it concerns in the same batch. The answer has
// one error (nil for success) per alteration.
func (c *Controller) AlterConfigs(alts []ConfigAlteration) ([]*kerr.Error, []Record) {
	out := make([]*kerr.Error, len(alts))
	b := c.batch()
	for i, alt := range alts {
		if c.failed != nil {
			out[i], _ = c.failedErr()
			continue
		}
		current, err := c.currentConfigs(alt)
		if err != nil {
			out[i] = err
			continue
		}
		// Apply to a copy first, so that a later bad entry of the same
		// resource leaves no record of the earlier ones.
		scratch := copyConfigs(current)
		var records []Record
		for _, ch := range alt.Changes {
			if ch.Key == "" {
				out[i] = kerr.InvalidRequest
				break
			}
			old, had := scratch[ch.Key]
			if (ch.Value == nil && !had) || (ch.Value != nil && had && old == *ch.Value) {
				continue
			}
			scratch = setConfig(scratch, ch.Key, ch.Value)
			records = append(records, ConfigRecord{Resource: alt.Resource, Name: alt.Name, Key: ch.Key, Value: ch.Value})
		}
		if out[i] != nil {
			continue
		}
		for _, r := range records {
			b.add(r)
		}
		if len(records) > 0 {
			c.electIfUncleanAllowed(b, alt)
		}
	}
	records := b.done()
	if c.failed != nil {
		for i := range out {
			out[i], _ = c.failedErr()
		}
	}
	return out, records
}

// electIfUncleanAllowed holds an election in every partition without a
// leader of the topics whose unclean election alt has just turned on (the
// topic's, or every topic's for the cluster default), as Kafka's
// controller does when unclean.leader.election.enable is enabled
// dynamically, so turning it on brings such a partition back at once.
func (c *Controller) electIfUncleanAllowed(b *batch, alt ConfigAlteration) {
	touched := false
	for _, ch := range alt.Changes {
		touched = touched || ch.Key == UncleanLeaderElectionConfig
	}
	if !touched {
		return
	}
	var names []string
	switch {
	case alt.Resource == ConfigTopic:
		names = []string{alt.Name}
	case alt.Resource == ConfigBroker && alt.Name == "":
		names = c.view.TopicNames()
	}
	for _, name := range names {
		t := c.view.TopicByName(name)
		if t == nil || !c.uncleanAllowed(t) {
			continue
		}
		for i := range t.Partitions {
			if t.Partitions[i].Leader == NoLeader {
				b.applyChange(t, i, partitionChange{elect: true, exclude: NoLeader, uncleanShutdown: NoLeader})
			}
		}
	}
}

// currentConfigs returns the resource's configs, or why it cannot have any.
func (c *Controller) currentConfigs(alt ConfigAlteration) (map[string]string, *kerr.Error) {
	switch alt.Resource {
	case ConfigTopic:
		t := c.view.TopicByName(alt.Name)
		if t == nil {
			return nil, kerr.UnknownTopicOrPartition
		}
		return t.Configs, nil
	case ConfigBroker:
		if alt.Name != "" {
			if id, err := strconv.ParseInt(alt.Name, 10, 32); err != nil || id < 0 || strconv.FormatInt(id, 10) != alt.Name {
				return nil, kerr.InvalidRequest
			}
		}
		return c.view.BrokerConfigs[alt.Name], nil
	}
	return nil, kerr.InvalidRequest
}

// ProducerIDsReply answers AllocateProducerIds.
type ProducerIDsReply struct {
	Err   *kerr.Error
	First int64
	Count int64
}

// AllocateProducerIDs hands a broker the next block of producer ids, as
// Kafka's ProducerIdControlManager: the broker must be registered
// (BROKER_ID_NOT_REGISTERED) with this epoch (STALE_BROKER_EPOCH), and the
// block's record makes sure no id is handed out twice, even across
// controllers.
func (c *Controller) AllocateProducerIDs(brokerID int32, brokerEpoch int64) (ProducerIDsReply, []Record) {
	if c.failed != nil {
		err, _ := c.failedErr()
		return ProducerIDsReply{Err: err}, nil
	}
	br, ok := c.view.Brokers[brokerID]
	switch {
	case !ok:
		return ProducerIDsReply{Err: kerr.BrokerIDNotRegistered}, nil
	case br.Epoch != brokerEpoch:
		return ProducerIDsReply{Err: kerr.StaleBrokerEpoch}, nil
	case c.view.NextProducerID > math.MaxInt64-c.cfg.ProducerIDBlock:
		return ProducerIDsReply{Err: kerr.UnknownServerError}, nil
	}
	r := ProducerIDsRecord{First: c.view.NextProducerID, Count: c.cfg.ProducerIDBlock}
	b := c.batch()
	b.add(r)
	records := b.done()
	if c.failed != nil {
		err, _ := c.failedErr()
		return ProducerIDsReply{Err: err}, nil
	}
	return ProducerIDsReply{First: r.First, Count: r.Count}, records
}
