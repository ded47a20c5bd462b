package groups

// ConsumerGroupDescribe (key 69), versions 0 and 1.
//
// Each group is answered on its own (the runtime splits a batch across
// shards and merges the answers):
//   - an empty group id: INVALID_GROUP_ID;
//   - no such group, or a classic group: GROUP_ID_NOT_FOUND, as Kafka
//     answers ("Group g is not a consumer group.");
//   - otherwise its state (Empty, Assigning, Reconciling, Stable), group
//     and assignment epochs, the assignor the group uses, and each member
//     in member id order with its epoch, subscription, assignment and
//     target (topics named from the group's subscription metadata, a topic
//     no longer in it by the cluster's, else ""), and from v1 its type
//     (1, the consumer protocol: Sluice serves no classic members inside a
//     consumer group).
//   - AuthorizedOperations is left at Kafka's "not asked"; the runtime,
//     which knows the ACLs, sets it when asked.

import (
	"math"

	"github.com/sluicemq/sluice/groups/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const memberTypeConsumer = 1

func (s *Shard) consumerGroupDescribe(id RequestID, r *kmsg.ConsumerGroupDescribeRequest) {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, gid := range r.Groups {
		resp.Groups = append(resp.Groups, s.describeConsumer(gid))
	}
	s.respond(id, resp)
}

func (s *Shard) describeConsumer(gid string) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group, d.AuthorizedOperations = gid, math.MinInt32
	g := s.groups[gid]
	switch {
	case gid == "":
		d.ErrorCode = kerr.InvalidGroupID.Code
		return d
	case g == nil:
		d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+gid+" not found.")
		return d
	case g.consumer == nil:
		d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group "+gid+" is not a consumer group.")
		return d
	}
	cg := g.consumer
	d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName = cg.state(), cg.epoch, cg.assignmentEpoch, s.preferredAssignor(cg)
	names := s.topicNames(cg)
	for _, mid := range cg.sortedMemberIDs() {
		m := cg.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = append([]string{}, m.topicNames...)
		dm.SubscribedTopicRegex = m.regex
		dm.Assignment = describedAssignment(m.assigned, names)
		dm.TargetAssignment = describedAssignment(cg.target[mid], names)
		dm.MemberType = memberTypeConsumer
		d.Members = append(d.Members, dm)
	}
	return d
}

// topicNames names topic ids: the group's subscription metadata first,
// then the cluster's topics.
func (s *Shard) topicNames(cg *consumerGroup) map[assign.TopicID]string {
	names := map[assign.TopicID]string{}
	for _, t := range s.topics() {
		names[t.ID] = t.Name
	}
	for _, t := range cg.topics {
		names[t.id] = t.name
	}
	return names
}

func describedAssignment(a assign.Assignment, names map[assign.TopicID]string) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, tp := range a {
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{
			TopicID: tp.Topic, Topic: names[tp.Topic], Partitions: append([]int32{}, tp.Partitions...)})
	}
	return out
}
