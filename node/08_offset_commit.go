package node

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetCommit, versions 0-9.
//
// Routed to the group's shard (groups/08_offset_commit.go decides: member
// and generation checks, offset.metadata.max.bytes, unknown topics). An
// empty group id is INVALID_GROUP_ID on every partition, as in Kafka; the
// coordinator errors (11_join_group.go) go on every partition too, as
// Kafka's getErrorResponse puts them. The answer waits for the commit's
// records to be committed: an acknowledged commit survives a coordinator
// failover.
func (b *Broker) handleOffsetCommit(r *request) {
	req := r.body.(*kmsg.OffsetCommitRequest)
	if emptyGroupID(r, req.Group) {
		return
	}
	b.toGroupShard(r, req.Group)
}
