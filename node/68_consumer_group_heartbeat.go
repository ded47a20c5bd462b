package node

import "github.com/twmb/franz-go/pkg/kmsg"

// ConsumerGroupHeartbeat (KIP-848), versions 0-1.
//
// Routed to the shard of the group's __consumer_offsets partition, as
// JoinGroup is (11_join_group.go: COORDINATOR_NOT_AVAILABLE,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), which decides everything
// else (groups/68_consumer_group_heartbeat.go: epochs, the assignors,
// revoke before assign, static members, the protocol of the group). An
// empty group id is the shard's INVALID_REQUEST, as Kafka's validation
// answers it, not INVALID_GROUP_ID: it is routed like any other id.
func (b *Broker) handleConsumerGroupHeartbeat(r *request) {
	b.toGroupShard(r, r.body.(*kmsg.ConsumerGroupHeartbeatRequest).Group)
}
