package node

import "github.com/twmb/franz-go/pkg/kmsg"

// SyncGroup, versions 0-5.
//
// Routed to the group's shard (groups/14_sync_group.go decides). An empty
// group id is INVALID_GROUP_ID; the coordinator errors are JoinGroup's
// (11_join_group.go). The leader's answer waits for its assignment to be
// committed (the high watermark passes it), so an acknowledged assignment
// survives a coordinator failover.
func (b *Broker) handleSyncGroup(r *request) {
	req := r.body.(*kmsg.SyncGroupRequest)
	if emptyGroupID(r, req.Group) {
		return
	}
	b.toGroupShard(r, req.Group)
}
