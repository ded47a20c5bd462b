package groups

// DeleteGroups (key 42), versions 0 to 2.
//
// Each group is answered on its own (the runtime splits the request across
// shards and merges the answers):
//   - the empty group id is a group like any other, as in Kafka (which
//     refuses only a null id);
//   - a group that does not exist: GROUP_ID_NOT_FOUND;
//   - a group with members (not Empty): NON_EMPTY_GROUP; member ids handed
//     out with MEMBER_ID_REQUIRED do not count (Kafka's check is the
//     state), and are forgotten with the group;
//   - a KIP-848 consumer group with members: NON_EMPTY_GROUP;
//   - otherwise every offset and the group's metadata (a consumer group's
//     epoch, subscription metadata and target epoch records) are
//     tombstoned, in one Write, and the group is gone.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) deleteGroups(now time.Time, id RequestID, r *kmsg.DeleteGroupsRequest) {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, gid := range r.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = gid
		g := s.groups[gid]
		switch {
		case g == nil:
			rg.ErrorCode = kerr.GroupIDNotFound.Code
		case g.consumer != nil && len(g.consumer.members) > 0 || g.state != stateEmpty:
			rg.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			s.deleteGroup(now, g)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	s.respond(id, resp)
}

// deleteGroup tombstones an Empty group's offsets and metadata.
func (s *Shard) deleteGroup(now time.Time, g *group) {
	var recs []Record
	for _, tp := range g.sortedOffsets() {
		recs = append(recs, Record{Key: offsetKey(g.id, tp.topic, tp.partition)})
	}
	if g.consumer != nil {
		recs = append(recs, deleteConsumerRecords(g.id)...)
	} else {
		recs = append(recs, Record{Key: groupKey(g.id)})
	}
	s.write(recs...)
	s.cancelGroupTimers(g)
	g.transition(stateDead, now)
	delete(s.groups, g.id)
}

func (s *Shard) cancelGroupTimers(g *group) {
	s.timers.cancel(timerKey{kind: timerJoin, group: g.id})
	s.timers.cancel(timerKey{kind: timerSync, group: g.id})
	for _, m := range g.members {
		s.timers.cancel(heartbeatKey(g, m.id))
	}
}
