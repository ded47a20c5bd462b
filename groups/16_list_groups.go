package groups

// ListGroups (key 16), versions 0 to 5.
//
// The shard lists its own groups, sorted by id; the runtime asks every
// shard it leads and concatenates. StatesFilter (v4+, KIP-518) and
// TypesFilter (v5+, KIP-848) match case-insensitively, as Kafka compares
// them; an empty filter matches everything. A KIP-848 group is "consumer",
// with protocol type "consumer" and its own states (Empty, Assigning,
// Reconciling, Stable); every other group is "classic", and one that only
// holds offsets is Empty with an empty protocol type.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	groupTypeClassic  = "classic"
	groupTypeConsumer = "consumer"
)

func (s *Shard) listGroups(id RequestID, r *kmsg.ListGroupsRequest) {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, gid := range s.sortedGroupIDs() {
		g := s.groups[gid]
		state, protocolType, groupType := g.state.String(), g.protocolType, groupTypeClassic
		if g.consumer != nil {
			state, protocolType, groupType = g.consumer.state(), "consumer", groupTypeConsumer
		}
		if !matchesFilter(r.StatesFilter, state) || !matchesFilter(r.TypesFilter, groupType) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = gid, protocolType, state, groupType
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
