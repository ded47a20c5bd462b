package node

import (
	"github.com/sluicemq/sluice/groups"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator, versions 0-6.
//
// v0-v3 ask for one key (v0 always a group), v4+ for a batch
// (CoordinatorKeys, KIP-699), each answered on its own.
//
//   - Key type 0 (group): the leader of the group's partition of
//     __consumer_offsets (groups.PartitionFor, Kafka's hash), if it is a
//     registered, unfenced broker; else COORDINATOR_NOT_AVAILABLE (no node:
//     id -1, port -1), which clients retry. The leader may still be loading
//     the shard: its group requests say COORDINATOR_LOAD_IN_PROGRESS.
//   - The first request for a group creates __consumer_offsets
//     (coordinator.go: offsets.topic.num.partitions partitions,
//     offsets.topic.replication.factor replicas capped at the brokers the
//     cluster is configured to have, cleanup.policy=compact) and is
//     answered COORDINATOR_NOT_AVAILABLE, as Kafka answers while its
//     auto-creation runs; so is every request while fewer brokers are
//     registered than the replication factor.
//   - Key type 1 (transaction): there is no transaction coordinator yet,
//     so COORDINATOR_NOT_AVAILABLE, the answer of a Kafka whose
//     __transaction_state has no leader.
//   - Key type 2 (share, KIP-932) in v6: share groups are not served, so
//     COORDINATOR_NOT_AVAILABLE, as Kafka answers on a node whose
//     group.coordinator.rebalance.protocols leaves share out; below v6 it
//     is INVALID_REQUEST, as in Kafka.
//   - Any other key type is INVALID_REQUEST, as Kafka's
//     CoordinatorType.forId throws for an unknown one: on every key of the
//     batch, or at the top level before v4.
func (b *Broker) handleFindCoordinator(r *request) {
	req := r.body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		c := b.findCoordinator(req.Version, req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		r.respond(resp)
		return
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, b.findCoordinator(req.Version, req.CoordinatorType, key))
	}
	r.respond(resp)
}

// Kafka's coordinator key types.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
	coordinatorShare       int8 = 2
)

// findCoordinator answers one key.
func (b *Broker) findCoordinator(version int16, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	fail := func(code *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = code.Code, kmsg.StringPtr(code.Description)
		return c
	}
	switch keyType {
	case coordinatorGroup:
	case coordinatorTransaction:
		return fail(kerr.CoordinatorNotAvailable)
	case coordinatorShare:
		if version < 6 {
			return fail(kerr.InvalidRequest)
		}
		return fail(kerr.CoordinatorNotAvailable)
	default:
		return fail(kerr.InvalidRequest)
	}
	t := b.image.TopicByName(offsetsTopic)
	if t == nil || len(t.Partitions) == 0 {
		b.createOffsetsTopic()
		return fail(kerr.CoordinatorNotAvailable)
	}
	mp := t.Partitions[groups.PartitionFor(key, int32(len(t.Partitions)))]
	br, ok := b.leaderEndpoint(mp.Leader)
	if !ok || br.Fenced {
		return fail(kerr.CoordinatorNotAvailable)
	}
	c.NodeID, c.Host, c.Port = br.ID, br.Host, br.Port
	return c
}
