package node

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetDelete, version 0 (the newest kmsg knows; the shard serves v1 too).
//
// Routed to the group's shard (groups/47_offset_delete.go decides:
// GROUP_SUBSCRIBED_TO_TOPIC, GROUP_ID_NOT_FOUND). An empty group id is
// INVALID_GROUP_ID; the coordinator errors (11_join_group.go) are at the
// top level.
func (b *Broker) handleOffsetDelete(r *request) {
	req := r.body.(*kmsg.OffsetDeleteRequest)
	if emptyGroupID(r, req.Group) {
		return
	}
	b.toGroupShard(r, req.Group)
}
