package node

import "github.com/twmb/franz-go/pkg/kmsg"

// Heartbeat, versions 0-4.
//
// Routed to the group's shard (groups/12_heartbeat.go decides). An empty
// group id is INVALID_GROUP_ID; the coordinator errors are JoinGroup's
// (11_join_group.go): a member that gets NOT_COORDINATOR finds the
// coordinator again.
func (b *Broker) handleHeartbeat(r *request) {
	req := r.body.(*kmsg.HeartbeatRequest)
	if emptyGroupID(r, req.Group) {
		return
	}
	b.toGroupShard(r, req.Group)
}
