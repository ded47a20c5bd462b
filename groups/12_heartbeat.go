package groups

// Heartbeat (key 12), versions 0 to 4.
//
//   - An empty group id: INVALID_GROUP_ID. No such group or member:
//     UNKNOWN_MEMBER_ID (a member id still pending after MEMBER_ID_REQUIRED
//     is not a member yet); an instance id mapped to another member:
//     FENCED_INSTANCE_ID; another generation: ILLEGAL_GENERATION.
//   - PreparingRebalance: REBALANCE_IN_PROGRESS, which tells the member to
//     rejoin; the session is still renewed.
//   - CompletingRebalance and Stable: no error, the session renewed
//     (a member may heartbeat between its JoinGroup and SyncGroup).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) heartbeat(now time.Time, id RequestID, r *kmsg.HeartbeatRequest) {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = s.heartbeatCode(now, r)
	s.respond(id, resp)
}

func (s *Shard) heartbeatCode(now time.Time, r *kmsg.HeartbeatRequest) int16 {
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
	s.rescheduleHeartbeat(now, g, g.byID[r.MemberID])
	if g.state == statePreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
