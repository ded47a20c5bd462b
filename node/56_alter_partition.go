package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartition, versions 0-3, served on the active controller as
// BrokerHeartbeat is (on any listener; brokers send it to the CONTROLLER
// one): a partition leader asks to change its ISR, at the leader and
// partition epochs it knows. v1 adds LeaderRecoveryState, v2 names topics
// by id instead of by name, v3 gives each new ISR member's broker epoch
// (KIP-903). The decision is raftmeta.Controller.AlterPartitions (Kafka's
// ReplicationControlManager.alterPartition); all the partitions of one
// request are decided in order and proposed as one batch, and the answer
// waits until it has committed and been applied here. Each partition is
// answered with its state after the change: leader, leader epoch, ISR,
// partition epoch, leader recovery state 0 (Sluice never elects
// uncleanly).
//
// Edge cases, with Kafka's codes:
//   - Not the active controller: top-level NOT_CONTROLLER, as is a
//     proposal lost to a change of raft leader; the broker finds the new
//     controller and retries.
//   - Requester not registered, or at another epoch: top-level
//     BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH, no topics.
//   - Unknown topic: UNKNOWN_TOPIC_OR_PARTITION for a name (v0-v1),
//     UNKNOWN_TOPIC_ID for an id (v2+), for each of its partitions;
//     unknown partition UNKNOWN_TOPIC_OR_PARTITION.
//   - Epochs ahead of the controller's: NOT_CONTROLLER; leader epoch
//     behind: FENCED_LEADER_EPOCH; requester not the leader, an ISR that is
//     not distinct replicas holding the leader, or leader recovery state 1:
//     INVALID_REQUEST; partition epoch behind: INVALID_UPDATE_VERSION.
//   - A member that is not registered, fenced, shutting down or (v3) at
//     another broker epoch than given: INELIGIBLE_REPLICA (v2+),
//     OPERATION_NOT_ATTEMPTED (v0-v1, as Kafka answers them).
//   - A partition named twice is decided after its first mention (Kafka
//     decides both against the state before the request): with the same
//     epochs, the second is INVALID_UPDATE_VERSION if the first changed it.
//   - An ISR the partition already has writes nothing and is answered at
//     once. The view it was checked against is committed state for that
//     partition: a change in flight would have moved its partition epoch
//     past the one the request names.
func (b *Broker) handleAlterPartition(r *request) {
	req := r.body.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if b.meta.activeTerm == 0 || b.ctl == nil {
		resp.ErrorCode = kerr.NotController.Code
		r.respond(resp)
		return
	}
	parts, alters := b.alterPartitionsOf(req, resp)
	b.alterPartitionsLocally(req.BrokerID, req.BrokerEpoch, alters, func(top *kerr.Error, replies []raftmeta.AlterPartitionReply, err error) {
		switch {
		case err != nil:
			resp.ErrorCode, resp.Topics = commitErrorCode(err).Code, nil
		case top != nil:
			resp.ErrorCode, resp.Topics = top.Code, nil
		default:
			fillAlterPartitionResponse(resp, parts, replies)
		}
		r.respond(resp)
	})
}

// alterPart is one partition of a request, located in its answer; alter
// indexes its decision, -1 when the handler answered it already.
type alterPart struct {
	topic, partition int
	alter            int
}

// alterPartitionsOf lays out the answer's topics and partitions as the
// request names them, answers those of unknown topic names (v0-v1), and
// returns the rest as decisions to make.
func (b *Broker) alterPartitionsOf(req *kmsg.AlterPartitionRequest, resp *kmsg.AlterPartitionResponse) ([]alterPart, []raftmeta.AlterPartition) {
	var parts []alterPart
	var alters []raftmeta.AlterPartition
	for ti, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID
		id := raftmeta.TopicID(rt.TopicID)
		known := true
		if req.Version < 2 {
			t := b.ctl.View().TopicByName(rt.Topic)
			known = t != nil
			if known {
				id = t.ID
			}
		}
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			part := alterPart{topic: ti, partition: pi, alter: -1}
			if known {
				part.alter = len(alters)
				alters = append(alters, alterOfRequest(req, id, &rp))
			} else {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			st.Partitions = append(st.Partitions, sp)
			parts = append(parts, part)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return parts, alters
}

// alterOfRequest is one partition of the request as the controller
// decides it.
func alterOfRequest(req *kmsg.AlterPartitionRequest, id raftmeta.TopicID, rp *kmsg.AlterPartitionRequestTopicPartition) raftmeta.AlterPartition {
	a := raftmeta.AlterPartition{
		BrokerID:            req.BrokerID,
		BrokerEpoch:         req.BrokerEpoch,
		Topic:               id,
		Partition:           rp.Partition,
		LeaderEpoch:         rp.LeaderEpoch,
		PartitionEpoch:      rp.PartitionEpoch,
		LeaderRecoveryState: rp.LeaderRecoveryState,
		ISR:                 append([]int32{}, rp.NewISR...),
	}
	if req.Version >= 3 {
		a.ISR = make([]int32, 0, len(rp.NewEpochISR))
		a.ISREpochs = make([]int64, 0, len(rp.NewEpochISR))
		for _, m := range rp.NewEpochISR {
			a.ISR = append(a.ISR, m.BrokerID)
			a.ISREpochs = append(a.ISREpochs, m.BrokerEpoch)
		}
	}
	return a
}

// fillAlterPartitionResponse writes each decided partition's answer.
func fillAlterPartitionResponse(resp *kmsg.AlterPartitionResponse, parts []alterPart, replies []raftmeta.AlterPartitionReply) {
	for _, part := range parts {
		if part.alter < 0 {
			continue
		}
		sp := &resp.Topics[part.topic].Partitions[part.partition]
		reply := replies[part.alter]
		if reply.Err != nil {
			sp.ErrorCode = reply.Err.Code
			if reply.Err == kerr.IneligibleReplica && resp.Version < 2 {
				sp.ErrorCode = kerr.OperationNotAttempted.Code
			}
			continue
		}
		p := reply.Partition
		sp.LeaderID, sp.LeaderEpoch, sp.PartitionEpoch = p.Leader, p.LeaderEpoch, p.PartitionEpoch
		sp.ISR = append([]int32(nil), p.ISR...)
	}
}

// alterPartitionsLocally decides alters, broker brokerID's at brokerEpoch,
// on this node's controller and calls done once their records have
// committed and been applied here: top is a request-level refusal (then
// there are no replies), err a proposal that failed (this node is not, or
// no longer, the controller).
func (b *Broker) alterPartitionsLocally(brokerID int32, brokerEpoch int64, alters []raftmeta.AlterPartition, done func(top *kerr.Error, replies []raftmeta.AlterPartitionReply, err error)) {
	if b.ctl == nil {
		b.env.Loop.Post(func() { done(nil, nil, errNotController) })
		return
	}
	top, msg, replies, records := b.ctl.AlterPartitions(brokerID, brokerEpoch, alters)
	if top != nil {
		b.env.Log.Debug("AlterPartition refused", "err", top.Message, "why", msg)
	}
	b.propose(records, func(err error) { done(top, replies, err) })
}

// alterPartitionTimeout bounds a broker's wait for the controller's answer
// to its AlterPartition. A commit takes a quorum round trip and a sync,
// milliseconds; no answer in 5 s means the controller is gone or cut off.
// The replication code retries, and toController sends each retry to the
// controller the quorum names by then (it redials after a timeout), so a
// short bound gets the ISR change through soon after a failover rather
// than after controllerRequestTimeout's 30 s, while produce with acks=all
// waits on the old ISR. It is still long enough not to give up on a live
// controller through a slow sync.
const alterPartitionTimeout = 5 * time.Second

// alterPartition asks the controller to change a partition's ISR, for the
// replication code: decided here on the active controller, else sent as
// AlterPartition v3 to it. done is called once, with the partition's state
// after the change (the controller's answer; Replicas from this node's
// image) or the controller's refusal in Err, or with err when no answer
// came (errControllerTimeout after alterPartitionTimeout, or the
// connection's failure): the caller retries.
func (b *Broker) alterPartition(req raftmeta.AlterPartition, done func(raftmeta.AlterPartitionReply, error)) {
	if b.meta.activeTerm != 0 && b.ctl != nil {
		b.alterPartitionsLocally(req.BrokerID, req.BrokerEpoch, []raftmeta.AlterPartition{req}, func(top *kerr.Error, replies []raftmeta.AlterPartitionReply, err error) {
			switch {
			case err != nil:
				done(raftmeta.AlterPartitionReply{}, err)
			case top != nil:
				done(raftmeta.AlterPartitionReply{Err: top}, nil)
			default:
				done(replies[0], nil)
			}
		})
		return
	}
	b.toController(alterPartitionRequest(req), alterPartitionTimeout, func(resp kmsg.Response, err error) {
		if errors.Is(err, errBecameController) {
			b.alterPartition(req, done)
			return
		}
		if err != nil {
			done(raftmeta.AlterPartitionReply{}, err)
			return
		}
		reply, err := b.alterPartitionReplyOf(req, resp.(*kmsg.AlterPartitionResponse))
		done(reply, err)
	})
}

// alterPartitionRequest is req as AlterPartition v3; a member without an
// epoch given is sent with -1, which skips its check.
func alterPartitionRequest(req raftmeta.AlterPartition) *kmsg.AlterPartitionRequest {
	kreq := kmsg.NewPtrAlterPartitionRequest()
	kreq.Version = 3
	kreq.BrokerID, kreq.BrokerEpoch = req.BrokerID, req.BrokerEpoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = req.Topic
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = req.Partition, req.LeaderEpoch, req.PartitionEpoch
	rp.LeaderRecoveryState = req.LeaderRecoveryState
	for i, id := range req.ISR {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID = id
		if req.ISREpochs != nil && i < len(req.ISREpochs) {
			m.BrokerEpoch = req.ISREpochs[i]
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	kreq.Topics = append(kreq.Topics, rt)
	return kreq
}

// alterPartitionReplyOf reads the controller's answer to
// alterPartitionRequest(req).
func (b *Broker) alterPartitionReplyOf(req raftmeta.AlterPartition, resp *kmsg.AlterPartitionResponse) (raftmeta.AlterPartitionReply, error) {
	if resp.ErrorCode != 0 {
		return raftmeta.AlterPartitionReply{Err: kerrOf(resp.ErrorCode)}, nil
	}
	for _, rt := range resp.Topics {
		if raftmeta.TopicID(rt.TopidID) != req.Topic {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition != req.Partition {
				continue
			}
			if rp.ErrorCode != 0 {
				return raftmeta.AlterPartitionReply{Err: kerrOf(rp.ErrorCode)}, nil
			}
			p := raftmeta.Partition{Index: rp.Partition, ISR: rp.ISR, Leader: rp.LeaderID,
				LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch}
			if t := b.image.Topics[req.Topic]; t != nil && int(req.Partition) < len(t.Partitions) && req.Partition >= 0 {
				p.Replicas = t.Partitions[req.Partition].Replicas
			}
			return raftmeta.AlterPartitionReply{Partition: p}, nil
		}
	}
	return raftmeta.AlterPartitionReply{}, fmt.Errorf("node: the controller's AlterPartition answer has no partition %s-%d", req.Topic, req.Partition)
}

// kerrOf is the Kafka error of a code; UNKNOWN_SERVER_ERROR for one kerr
// does not know.
func kerrOf(code int16) *kerr.Error {
	if err, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return err
	}
	return kerr.UnknownServerError
}
