package node

import "github.com/twmb/franz-go/pkg/kmsg"

// JoinGroup, versions 0-9.
//
// Routed to the shard of the group's __consumer_offsets partition
// (coordinator.go), which decides everything else (groups/11_join_group.go:
// KIP-394's member id, the rebalance, static members, group.max.size).
//
//   - An empty group id is INVALID_GROUP_ID before any routing, as in Kafka.
//   - COORDINATOR_NOT_AVAILABLE before __consumer_offsets exists,
//     NOT_COORDINATOR where this broker does not lead the group's partition
//     (or the leadership goes while the join is parked),
//     COORDINATOR_LOAD_IN_PROGRESS while the shard replays.
//   - The answer waits for the rebalance (the connection's next request
//     waits behind it, as in Kafka) and for the high watermark to pass
//     what the join wrote.
func (b *Broker) handleJoinGroup(r *request) {
	req := r.body.(*kmsg.JoinGroupRequest)
	if emptyGroupID(r, req.Group) {
		return
	}
	b.toGroupShard(r, req.Group)
}
