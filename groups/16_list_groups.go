package groups

// ListGroups (key 16), versions 0 to 5.
//
// The shard lists its own groups, sorted by id; the runtime asks every
// shard it leads and concatenates. StatesFilter (v4+, KIP-518) and
// TypesFilter (v5+, KIP-848) match case-insensitively, as Kafka compares
// them; an empty filter matches everything. Every group here is "classic";
// one that only holds offsets is Empty with an empty protocol type.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const groupTypeClassic = "classic"

func (s *Shard) listGroups(id RequestID, r *kmsg.ListGroupsRequest) {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, gid := range s.sortedGroupIDs() {
		g := s.groups[gid]
		if !matchesFilter(r.StatesFilter, g.state.String()) || !matchesFilter(r.TypesFilter, groupTypeClassic) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = gid, g.protocolType, g.state.String(), groupTypeClassic
		resp.Groups = append(resp.Groups, lg)
	}
	s.respond(id, resp)
}

func matchesFilter(filter []string, value string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, value) {
			return true
		}
	}
	return false
}
