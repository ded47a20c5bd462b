package node

import (
	"slices"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTopicPartitions, version 0 (KIP-966): the partitions of topics,
// a page at a time, as Kafka 3.8+ admin tools ask for them (kafka-topics
// --describe). Answered from this node's image, as Metadata is.
//
//   - Which topics: every topic when the request lists none, else the
//     listed ones (each once); either way sorted by name, from the cursor's
//     topic on. A listed topic that does not exist gets
//     UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid
//     name), with no id and no partitions, as Kafka answers; it takes no
//     room in the page.
//   - Paging: at most ResponsePartitionLimit partitions (capped at
//     describeTopicPartitionsMax, Kafka's max.request.partition.size.limit
//     default) from the cursor's partition of its topic on. When topics or
//     partitions are left, NextCursor names where to go on: the next
//     partition of the topic cut short, or partition 0 of the next topic
//     (which may not exist) when the page ended with a topic, as Kafka
//     does. A cursor past the end of its topic gives that topic with no
//     partitions. A limit of 0 or less means the cap (Kafka's would answer
//     nothing and point the cursor at the first topic, forever).
//   - A cursor naming a topic the request does not list is INVALID_REQUEST
//     for every listed topic (Kafka fails the whole request with an
//     InvalidRequestException; the response has no top-level error code).
//     So is a negative cursor partition (Kafka skips the indexes that do
//     not exist).
//   - Each partition, as Kafka's: leader (-1 when it is not a registered
//     broker), leader epoch, replicas, ISR, and offline replicas: those not
//     registered or fenced, and this node when the partition's log is
//     offline here, eligible leader replicas and last known ELR from the
//     image (raftmeta's KIP-966 rules; empty lists when there are none); no
//     partition error codes.
//   - Authorized operations: every operation (no ACLs yet). No topic is
//     internal.
func (b *Broker) handleDescribeTopicPartitions(r *request) {
	req := r.body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	names, listed := b.image.TopicNames(), len(req.Topics) > 0
	if listed {
		names = names[:0]
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	from, part := "", int32(0)
	if c := req.Cursor; c != nil {
		if c.Partition < 0 || (listed && !slices.Contains(names, c.Topic)) {
			for _, name := range names {
				resp.Topics = append(resp.Topics, describeTopicPartitionsError(name, kerr.InvalidRequest))
			}
			r.respond(resp)
			return
		}
		from, part = c.Topic, c.Partition
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > describeTopicPartitionsMax {
		limit = describeTopicPartitionsMax
	}
	for _, name := range names {
		if name < from {
			continue
		}
		first := int32(0)
		if name == from {
			first = part
		}
		if limit == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: first}
			break
		}
		t := b.image.TopicByName(name)
		if t == nil {
			code := kerr.UnknownTopicOrPartition
			if validateTopicName(name) != nil {
				code = kerr.InvalidTopicException
			}
			resp.Topics = append(resp.Topics, describeTopicPartitionsError(name, code))
			continue
		}
		rt, next := b.describeTopicPartitions(t, first, limit)
		resp.Topics = append(resp.Topics, rt)
		limit -= len(rt.Partitions)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
	}
	r.respond(resp)
}

// describeTopicPartitionsMax is the most partitions one response carries:
// Kafka's max.request.partition.size.limit, at its default.
const describeTopicPartitionsMax = 2000

// describeTopicPartitions describes t's partitions from index first on, at
// most limit of them, and returns the index of the first one left out (-1
// when none is).
func (b *Broker) describeTopicPartitions(t *raftmeta.Topic, first int32, limit int) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	name := t.Name
	rt.Topic, rt.TopicID, rt.AuthorizedOperations = &name, t.ID, topicOperationsAll
	rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	for _, p := range t.Partitions {
		if p.Index < first {
			continue
		}
		if len(rt.Partitions) == limit {
			return rt, p.Index
		}
		rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		rp.Partition, rp.LeaderID, rp.LeaderEpoch = p.Index, p.Leader, p.LeaderEpoch
		rp.Replicas = append([]int32{}, p.Replicas...)
		rp.ISR = append([]int32{}, p.ISR...)
		rp.EligibleLeaderReplicas = append([]int32{}, p.ELR...)
		rp.LastKnownELR = append([]int32{}, p.LastKnownELR...)
		rp.OfflineReplicas = []int32{}
		if _, ok := b.image.Brokers[p.Leader]; !ok {
			rp.LeaderID = -1
		}
		for _, id := range p.Replicas {
			br, ok := b.image.Brokers[id]
			here := id == b.cfg.NodeID && b.offline[partitionKey{t.ID, p.Index}] != nil
			if !ok || br.Fenced || here {
				rp.OfflineReplicas = append(rp.OfflineReplicas, id)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt, -1
}

func describeTopicPartitionsError(name string, code *kerr.Error) kmsg.DescribeTopicPartitionsResponseTopic {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic, rt.ErrorCode = &name, code.Code
	rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	return rt
}
