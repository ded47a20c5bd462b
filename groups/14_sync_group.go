package groups

// SyncGroup (key 14), versions 0 to 5.
//
//   - An empty group id: INVALID_GROUP_ID. No such group, or no such
//     member: UNKNOWN_MEMBER_ID; an instance id mapped to another member:
//     FENCED_INSTANCE_ID; another generation: ILLEGAL_GENERATION; a
//     protocol type or name (v5+) that is not the group's:
//     INCONSISTENT_GROUP_PROTOCOL.
//   - PreparingRebalance: REBALANCE_IN_PROGRESS (the member must rejoin).
//   - CompletingRebalance: the request is parked. The leader's request
//     carries the assignment (members it leaves out get an empty one,
//     unknown member ids are ignored); the group's metadata is written with
//     it, the group becomes Stable, and every parked member is answered
//     after the Write (the effect rule), so no member acts on an
//     assignment that a coordinator failover could lose. A new rebalance
//     before the leader's sync wakes parked members with
//     REBALANCE_IN_PROGRESS.
//   - Stable: the member's assignment, at once.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) syncGroup(now time.Time, id RequestID, r *kmsg.SyncGroupRequest) {
	if code := s.validateSync(r); code != 0 {
		s.respond(id, syncResponse(r.Version, code))
		return
	}
	g := s.groups[r.Group]
	m := g.byID[r.MemberID]
	switch g.state {
	case stateCompletingRebalance:
		s.failSync(m, kerr.RebalanceInProgress.Code) // a retry supersedes the first
		m.sync = &parked{id: id, version: r.Version}
		delete(g.pendingSync, m.id)
		if m.id != g.leader {
			return
		}
		assigned := make(map[string][]byte, len(r.GroupAssignment))
		for _, a := range r.GroupAssignment {
			assigned[a.MemberID] = a.MemberAssignment
		}
		for _, x := range g.members {
			x.assignment = nonNil(append([]byte(nil), assigned[x.id]...))
		}
		g.transition(stateStable, now)
		s.writeGroup(g)
		for _, x := range g.members {
			s.answerSync(g, x)
			s.rescheduleHeartbeat(now, g, x)
		}
	case stateStable:
		delete(g.pendingSync, m.id)
		m.sync = &parked{id: id, version: r.Version}
		s.answerSync(g, m)
	default:
		s.respond(id, syncResponse(r.Version, kerr.RebalanceInProgress.Code))
	}
}

func (s *Shard) validateSync(r *kmsg.SyncGroupRequest) int16 {
	if r.Group == "" || len(r.Group) > maxString {
		return kerr.InvalidGroupID.Code
	}
	g := s.groups[r.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
		return code
	}
	if r.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if inconsistent(r.ProtocolType, g.protocolType) || inconsistent(r.Protocol, g.protocol) {
		return kerr.InconsistentGroupProtocol.Code
	}
	return 0
}

// inconsistent is Kafka's isProtocolInconsistent: both named, and not the
// same.
func inconsistent(asked *string, have string) bool {
	return asked != nil && have != "" && *asked != have
}

func (s *Shard) answerSync(g *group, m *member) {
	if m.sync == nil {
		return
	}
	resp := syncResponse(m.sync.version, 0)
	if m.sync.version >= 5 {
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
	}
	resp.MemberAssignment = nonNil(m.assignment)
	s.respond(m.sync.id, resp)
	m.sync = nil
}
