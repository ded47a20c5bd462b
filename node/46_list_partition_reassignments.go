package node

import (
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments, version 0 (KIP-455), on the active
// controller (any other broker forwards it), from the controller's view
// (what it has decided, committed or about to be):
//
//   - Null topics list every reassignment in progress, topics by name;
//     named ones list those of the partitions named.
//   - Unknown topics and partitions, and partitions not being
//     reassigned, are left out without an error, as in Kafka.
//   - Each partition shows its replicas (the target's first, then those
//     being removed), its adding and its removing replicas.
func (b *Broker) handleListPartitionReassignments(r *request) {
	req := r.body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var asked []raftmeta.TopicPartitions
	if req.Topics != nil {
		asked = []raftmeta.TopicPartitions{}
		for _, t := range req.Topics {
			asked = append(asked, raftmeta.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	byTopic := map[string]int{}
	for _, o := range b.ctl.ListPartitionReassignments(asked) {
		i, ok := byTopic[o.Topic]
		if !ok {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = o.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[o.Topic] = i
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = o.Partition
		rp.Replicas = append([]int32{}, o.Replicas...)
		rp.AddingReplicas = append([]int32{}, o.Adding...)
		rp.RemovingReplicas = append([]int32{}, o.Removing...)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	r.respond(resp)
}
