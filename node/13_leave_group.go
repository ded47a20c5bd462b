package node

import "github.com/twmb/franz-go/pkg/kmsg"

// LeaveGroup, versions 0-5.
//
// Routed to the group's shard (groups/13_leave_group.go decides, batched
// members of v3+ included). An empty group id is INVALID_GROUP_ID; the
// coordinator errors are JoinGroup's (11_join_group.go), at the top level.
func (b *Broker) handleLeaveGroup(r *request) {
	req := r.body.(*kmsg.LeaveGroupRequest)
	if emptyGroupID(r, req.Group) {
		return
	}
	b.toGroupShard(r, req.Group)
}
