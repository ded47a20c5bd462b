package groups

// DescribeGroups (key 15), versions 0 to 5.
//
// Each group is answered on its own (the runtime merges shards):
//   - the empty group id is described like any other, as in Kafka;
//   - a group that does not exist is "Dead" with no error, no protocol and
//     no members (GROUP_ID_NOT_FOUND is v6's answer, not served);
//   - members are listed in the order they joined; their protocol metadata
//     and assignment, and the group's protocol, only when Stable (Kafka
//     leaves them empty while a rebalance is under way);
//   - a KIP-848 consumer group is described as Kafka 4's
//     ConsumerGroup.asDescribedGroup does: protocol type "consumer", its
//     assignor as the protocol, its state (Empty, Assigning, Reconciling,
//     Stable), each member (by member id) with its subscription and
//     assignment in ConsumerProtocol's encoding (version 3);
//   - AuthorizedOperations (v3+) is left at Kafka's "not asked"
//     (math.MinInt32); the runtime, which knows the ACLs, sets it when
//     IncludeAuthorizedOperations asks.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) describeGroups(id RequestID, r *kmsg.DescribeGroupsRequest) {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, gid := range r.Groups {
		resp.Groups = append(resp.Groups, s.describe(gid))
	}
	s.respond(id, resp)
}

func (s *Shard) describe(gid string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group, d.AuthorizedOperations = gid, math.MinInt32
	g := s.groups[gid]
	if g == nil {
		d.State = stateDead.String()
		return d
	}
	if g.consumer != nil {
		return s.describeConsumerClassic(g)
	}
	d.State, d.ProtocolType = g.state.String(), g.protocolType
	stable := g.state == stateStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			dm.ProtocolMetadata = nonNil(m.metadataFor(g.protocol))
			dm.MemberAssignment = nonNil(m.assignment)
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// describeConsumerClassic describes a KIP-848 group in DescribeGroups'
// terms.
func (s *Shard) describeConsumerClassic(g *group) kmsg.DescribeGroupsResponseGroup {
	cg := g.consumer
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group, d.AuthorizedOperations = g.id, math.MinInt32
	d.State, d.ProtocolType, d.Protocol = cg.state(), groupTypeConsumer, s.preferredAssignor(cg)
	names := s.topicNames(cg)
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version, meta.Topics = 3, append([]string{}, m.topicNames...)
		if m.rackID != nil {
			meta.Rack = m.rackID
		}
		dm.ProtocolMetadata = meta.AppendTo(nil)
		as := kmsg.NewConsumerMemberAssignment()
		as.Version = 3
		for _, tp := range m.assigned {
			as.Topics = append(as.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: names[tp.Topic], Partitions: append([]int32{}, tp.Partitions...)})
		}
		dm.MemberAssignment = as.AppendTo(nil)
		d.Members = append(d.Members, dm)
	}
	return d
}
