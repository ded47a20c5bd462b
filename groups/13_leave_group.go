package groups

// LeaveGroup (key 13), versions 0 to 5.
//
// v0 to v2 name one member; v3 and up a batch (KIP-345), each member by
// member id, instance id, or both, each answered on its own:
//   - an empty group id: INVALID_GROUP_ID, at the top;
//   - no such group: UNKNOWN_MEMBER_ID for every member (Kafka's answer);
//   - without an instance id: an unknown member id gets UNKNOWN_MEMBER_ID;
//     a pending member id (handed out with MEMBER_ID_REQUIRED) is
//     forgotten;
//   - with an instance id: no member of that instance, UNKNOWN_MEMBER_ID;
//     a member id given that is not the instance's, FENCED_INSTANCE_ID; an
//     empty member id removes the instance's member (how an admin removes
//     a static member).
//   - Removing only a pending member id still rebalances a Stable group,
//     as Kafka's leave does.
//
// Removed members' parked JoinGroup or SyncGroup get UNKNOWN_MEMBER_ID;
// the group then rebalances (or, once empty, becomes Empty and is
// written). v0 to v2 answer the member's error at the top.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) leaveGroup(now time.Time, id RequestID, r *kmsg.LeaveGroupRequest) {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	if r.Group == "" || len(r.Group) > maxString {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		s.respond(id, resp)
		return
	}
	leaving := r.Members
	if r.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
	}
	g := s.groups[r.Group]
	removed := false
	for _, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		if g == nil {
			rm.ErrorCode = kerr.UnknownMemberID.Code
		} else {
			var ok bool
			rm.ErrorCode, ok = s.leaveOne(g, lm)
			removed = removed || ok
		}
		resp.Members = append(resp.Members, rm)
	}
	if removed {
		// As Kafka's leave does: a rebalance if the group may start one,
		// else the join phase ends if everyone left has rejoined (never
		// early during the initial delay).
		switch g.state {
		case stateStable, stateCompletingRebalance:
			s.prepareRebalance(now, g)
		case statePreparingRebalance:
			s.maybeCompleteJoinPhase(now, g)
		}
		s.maybeForget(g)
	}
	if r.Version < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	s.respond(id, resp)
}

// leaveOne removes one leaving member from g, without rebalancing yet; it
// returns the member's error code and whether anything was removed. The
// order of the checks is Kafka's: an empty member id names a static
// member by instance; a pending member id is forgotten whatever instance
// it names; any other is validated as every request's member is.
func (s *Shard) leaveOne(g *group, lm kmsg.LeaveGroupRequestMember) (int16, bool) {
	memberID := lm.MemberID
	switch {
	case memberID == "":
		if lm.InstanceID == nil || g.byInstance[*lm.InstanceID] == "" {
			return kerr.UnknownMemberID.Code, false
		}
		memberID = g.byInstance[*lm.InstanceID]
	case g.pending[memberID]:
		delete(g.pending, memberID)
		s.timers.cancel(heartbeatKey(g, memberID))
		return 0, true
	default:
		if code := g.validateMember(memberID, lm.InstanceID); code != 0 {
			return code, false
		}
	}
	m := g.byID[memberID]
	s.failJoin(m, kerr.UnknownMemberID.Code)
	s.failSync(m, kerr.UnknownMemberID.Code)
	s.timers.cancel(heartbeatKey(g, m.id))
	g.remove(m.id)
	return 0, true
}
