package groups

// DescribeGroups (key 15), versions 0 to 6.
//
// Each group is answered on its own (the runtime merges shards):
//   - the empty group id is described like any other, as in Kafka;
//   - a group that does not exist is "Dead" with no protocol and no
//     members; before v6 with no error, from v6 (KIP-1043) with
//     GROUP_ID_NOT_FOUND and Kafka's message, "Group <id> not found.";
//   - members are listed in the order they joined; their protocol metadata
//     and assignment, and the group's protocol, only when Stable (Kafka
//     leaves them empty while a rebalance is under way);
//   - a KIP-848 consumer group, before v6, is described in classic terms
//     (Kafka answers such a group "Dead", as one it does not have):
//     protocol type "consumer", its assignor as the protocol, its state
//     (Empty, Assigning, Reconciling, Stable), each member (by member id)
//     with its subscription and assignment in ConsumerProtocol's encoding
//     (version 3). From v6, whose clients describe classic groups only
//     (Admin.describeClassicGroups) and read the error, it is Kafka's
//     answer: "Dead", GROUP_ID_NOT_FOUND, "Group <id> is not a classic
//     group.";
//   - AuthorizedOperations (v3+) is left at Kafka's "not asked"
//     (math.MinInt32); the runtime, which knows the ACLs, sets it when
//     IncludeAuthorizedOperations asks.
//
// The runtime's own errors (NOT_COORDINATOR and the like) carry no
// message, as Kafka's coordinator sends none with them.

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) describeGroups(id RequestID, r *kmsg.DescribeGroupsRequest) {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, gid := range r.Groups {
		resp.Groups = append(resp.Groups, s.describeAt(r.Version, gid))
	}
	s.respond(id, resp)
}

// describeAt describes gid as DescribeGroups of version answers.
func (s *Shard) describeAt(version int16, gid string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group, d.AuthorizedOperations = gid, math.MinInt32
	g := s.groups[gid]
	switch {
	case g == nil:
		return notDescribed(d, version, "Group %s not found.")
	case g.consumer != nil && version >= 6:
		return notDescribed(d, version, "Group %s is not a classic group.")
	}
	return s.describe(gid)
}

// describe is gid's description before v6, every group's kind in classic
// terms.
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

// notDescribed is d for a group DescribeGroups does not describe: Dead,
// and from v6 GROUP_ID_NOT_FOUND with Kafka's message (format names the
// group).
func notDescribed(d kmsg.DescribeGroupsResponseGroup, version int16, format string) kmsg.DescribeGroupsResponseGroup {
	d.State = stateDead.String()
	if version >= 6 {
		d.ErrorCode = kerr.GroupIDNotFound.Code
		d.ErrorMessage = kmsg.StringPtr(fmt.Sprintf(format, d.Group))
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
