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
