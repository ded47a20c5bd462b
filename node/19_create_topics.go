package node

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics, versions 0-7.
//
//   - The answer comes once the new topics are committed to the metadata
//     journal (a quick local sync), so a client that reads it can use the
//     topics at once. A TimeoutMillis of zero or less gets REQUEST_TIMED_OUT
//     for every topic and creates nothing, as Kafka's KRaft controller does
//     (the deadline has passed before the request runs).
//   - A name that appears more than once gets one INVALID_REQUEST result
//     ("Duplicate topic name."), and none of its occurrences is created, as
//     in Kafka; results otherwise follow the request's order.
//   - NumPartitions and ReplicationFactor of -1 take num.partitions and
//     default.replication.factor (KIP-464). Kafka accepts -1 in every
//     version, only its clients refuse to send it before v4, so this does
//     too. Other non-positive values get INVALID_PARTITIONS or
//     INVALID_REPLICATION_FACTOR.
//   - ReplicaAssignment requires both counts to be -1 (else INVALID_REQUEST)
//     and its partitions to be 0..n-1, each once, with equally many
//     distinct, registered brokers (else INVALID_REPLICA_ASSIGNMENT).
//   - Configs must be known topic configs with valid values (else
//     INVALID_CONFIG); a null value is INVALID_CONFIG, as in Kafka.
//   - ValidateOnly (v1+) runs every check and creates nothing; its results
//     carry no topic id.
//   - v5+ results describe the topic: partition count, replication factor,
//     and every config in force with its source. v7+ carries the topic id.
//   - Name rules, collisions ('.' and '_' alike) and TOPIC_ALREADY_EXISTS
//     come from createTopics (topics.go). ErrorMessage (v1+) says why.
func (b *Broker) handleCreateTopics(r *request) {
	req := r.body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	if req.TimeoutMillis <= 0 {
		for _, rt := range req.Topics {
			resp.Topics = append(resp.Topics, createTopicError(rt.Topic, kerr.RequestTimedOut,
				"The request's timeout passed before it ran: TimeoutMillis must be positive."))
		}
		r.respond(resp)
		return
	}
	counts := map[string]int{}
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	var specs []topicSpec
	var slots []int // slots[i] is the result of specs[i]
	answered := map[string]bool{}
	for _, rt := range req.Topics {
		if answered[rt.Topic] {
			continue
		}
		answered[rt.Topic] = true
		if counts[rt.Topic] > 1 {
			resp.Topics = append(resp.Topics, createTopicError(rt.Topic, kerr.InvalidRequest, "Duplicate topic name."))
			continue
		}
		spec, err, msg := b.createTopicSpec(rt)
		if err != nil {
			resp.Topics = append(resp.Topics, createTopicError(rt.Topic, err, msg))
			continue
		}
		slots = append(slots, len(resp.Topics))
		resp.Topics = append(resp.Topics, kmsg.NewCreateTopicsResponseTopic())
		specs = append(specs, spec)
	}
	b.createTopics(specs, req.ValidateOnly, func(results []topicResult) {
		for i, res := range results {
			resp.Topics[slots[i]] = b.createTopicResult(res, req.ValidateOnly)
		}
		r.respond(resp)
	})
}

// createTopicSpec turns a requested topic into a spec, checking what
// createTopics leaves to the request: null configs, the -1 defaults, and
// the shape of a manual assignment.
func (b *Broker) createTopicSpec(rt kmsg.CreateTopicsRequestTopic) (topicSpec, *kerr.Error, string) {
	spec := topicSpec{name: rt.Topic, partitions: rt.NumPartitions, replicationFactor: rt.ReplicationFactor}
	if why, err := topicNameProblem(rt.Topic); err != nil {
		return spec, err, why
	}
	var nulls []string
	for _, c := range rt.Configs {
		if c.Value == nil {
			nulls = append(nulls, c.Name)
			continue
		}
		if spec.configs == nil {
			spec.configs = map[string]string{}
		}
		spec.configs[c.Name] = *c.Value
	}
	if len(nulls) > 0 {
		return spec, kerr.InvalidConfig, "Null value not supported for topic configs: " + strings.Join(nulls, ",")
	}
	if len(rt.ReplicaAssignment) > 0 {
		return b.manualTopicSpec(spec, rt.ReplicaAssignment)
	}
	switch {
	case spec.replicationFactor < -1 || spec.replicationFactor == 0:
		return spec, kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."
	case spec.partitions < -1 || spec.partitions == 0:
		return spec, kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value."
	}
	if spec.partitions == -1 {
		spec.partitions = b.cfg.NumPartitions
	}
	if spec.replicationFactor == -1 {
		spec.replicationFactor = b.cfg.DefaultReplicationFactor
	}
	return spec, nil, ""
}

// manualTopicSpec orders a manual assignment by partition, refusing gaps and
// repeats; checkAssignment (topics.go) then checks the replicas.
func (b *Broker) manualTopicSpec(spec topicSpec, assignment []kmsg.CreateTopicsRequestTopicReplicaAssignment) (topicSpec, *kerr.Error, string) {
	if spec.replicationFactor != -1 {
		return spec, kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1."
	}
	if spec.partitions != -1 {
		return spec, kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1."
	}
	byPartition := map[int32][]int32{}
	for _, a := range assignment {
		if _, ok := byPartition[a.Partition]; ok {
			return spec, kerr.InvalidReplicaAssignment, fmt.Sprintf("Found multiple manual partition assignments for partition %d", a.Partition)
		}
		byPartition[a.Partition] = a.Replicas
	}
	spec.assignment = make([][]int32, len(assignment))
	for p := range spec.assignment {
		replicas, ok := byPartition[int32(p)]
		if !ok {
			return spec, kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence"
		}
		spec.assignment[p] = append([]int32{}, replicas...)
	}
	return spec, nil, ""
}

// createTopicResult is one topic's answer once createTopics is done.
func (b *Broker) createTopicResult(res topicResult, validateOnly bool) kmsg.CreateTopicsResponseTopic {
	if res.err != nil {
		return createTopicError(res.name, res.err, res.msg)
	}
	t := res.topic
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = t.Name
	if !validateOnly {
		rt.TopicID = t.ID
	}
	rt.NumPartitions = int32(len(t.Partitions))
	rt.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
	for _, e := range b.topicConfigEntries(t.Configs) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		value := e.value
		c.Name, c.Value, c.ReadOnly, c.Source = e.name, &value, e.readOnly, int8(e.source)
		rt.Configs = append(rt.Configs, c)
	}
	return rt
}

func createTopicError(name string, err *kerr.Error, msg string) kmsg.CreateTopicsResponseTopic {
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = name
	rt.ErrorCode = err.Code
	if msg == "" {
		msg = err.Description
	}
	rt.ErrorMessage = &msg
	return rt
}
