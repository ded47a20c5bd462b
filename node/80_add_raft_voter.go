package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta/quorum"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
)

// AddRaftVoter, versions 0-1 (KIP-853): make a node a voter of the
// metadata quorum (kafka-metadata-quorum add-controller).
//
//   - Served on the active controller's CONTROLLER listener. Another
//     controller answers NOT_LEADER_OR_FOLLOWER (the admin client finds the
//     leader with DescribeQuorum and retries there), and a broker listener
//     NOT_CONTROLLER, as Kafka answers.
//   - A ClusterId that is not the cluster's: INCONSISTENT_CLUSTER_ID. A
//     negative voter id, or no listener named as controller.listener.names'
//     first, or one without host and port: INVALID_REQUEST. A node already
//     a voter: DUPLICATE_VOTER. Another voter change in flight (this
//     node's, or a joint configuration not yet left): REQUEST_TIMED_OUT, as
//     Kafka answers, and the client retries.
//   - The change is a raft membership change adding the voter, its Context
//     the voter's CONTROLLER address host:port (and the other voters', for
//     the new one), which every node's transport learns when it applies the
//     change and which snapshots carry (metadata_voters.go). It is answered once committed and applied here,
//     whatever AckWhenCommitted (v1) says (Kafka may answer once the change
//     is in its log); by REQUEST_TIMED_OUT when TimeoutMillis passes first
//     (the change may still be made), and NOT_LEADER_OR_FOLLOWER when this
//     node stops leading first (its outcome unknown).
//   - Where Sluice differs: Kafka adds only an observer that has caught up
//     with the leader (its fetches tell it), and the directory id is the
//     voter's key. Raft adds the voter at once and catches it up from the
//     log or a snapshot, so a voter that cannot be reached counts against
//     the quorum until it is: add one voter at a time, to a quorum that
//     keeps a majority without it. The directory id is not checked.
func (b *Broker) handleAddRaftVoter(r *request) {
	req := r.body.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	answer := func(code *kerr.Error, msg string) {
		if code != nil {
			resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		}
		r.respond(resp)
	}
	if code, msg := b.voterChangeRefused(r, req.ClusterID); code != nil {
		answer(code, msg)
		return
	}
	addr, err := b.newVoterAddr(req)
	if err != nil {
		answer(kerr.InvalidRequest, err.Error())
		return
	}
	id := raftIDOf(req.VoterID)
	for _, v := range currentVoters(b.meta.node.Status().Config) {
		if v == id {
			answer(kerr.DuplicateVoter, fmt.Sprintf("node %d is already a voter", req.VoterID))
			return
		}
	}
	cc := &raftpb.ConfChangeV2{Context: b.voterContext(addr, id)}
	cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: &id})
	b.changeVoters(cc, req.TimeoutMillis, answer)
}

// newVoterAddr is the CONTROLLER address of the voter req adds.
func (b *Broker) newVoterAddr(req *kmsg.AddRaftVoterRequest) (string, error) {
	if req.VoterID < 0 {
		return "", fmt.Errorf("voter id %d is not a node id", req.VoterID)
	}
	name := b.cfg.ControllerListenerName()
	for _, l := range req.Listeners {
		if l.Name != name {
			continue
		}
		if l.Host == "" || l.Port == 0 {
			return "", fmt.Errorf("the voter's %s listener has no host and port (%q:%d)", name, l.Host, l.Port)
		}
		return joinHostPort(l.Host, int32(l.Port)), nil
	}
	return "", fmt.Errorf("the voter has no listener named %s (controller.listener.names), which the quorum reaches it on", name)
}

// voterChangeRefused says why this node cannot take a voter change now, or
// nil: it is not the active controller, or the cluster id is not its, or
// another change is in flight.
func (b *Broker) voterChangeRefused(r *request, clusterID *string) (*kerr.Error, string) {
	switch {
	case r.c == nil || !r.c.controller:
		return kerr.NotController, "voter changes are served on the active controller's controller listener"
	case b.meta.activeTerm == 0:
		return kerr.NotLeaderForPartition, fmt.Sprintf("node %d is not the active controller; the quorum's leader is %d",
			b.cfg.NodeID, nodeIDOfRaft(b.meta.leader))
	case clusterID != nil && *clusterID != b.image.ClusterID:
		return kerr.InconsistentClusterID, fmt.Sprintf("cluster id %q is not this cluster's, %q", *clusterID, b.image.ClusterID)
	case b.meta.voterChange || len(b.meta.node.Status().Config.GetVotersOutgoing()) > 0:
		return kerr.RequestTimedOut, "another voter change is in progress; retry once it is done"
	}
	return nil, ""
}

// changeVoters proposes cc and answers once it is applied here, or on the
// timeout, or with the error that stopped it.
func (b *Broker) changeVoters(cc *raftpb.ConfChangeV2, timeoutMs int32, answer func(*kerr.Error, string)) {
	answered := false
	once := func(code *kerr.Error, msg string) {
		if !answered {
			answered = true
			answer(code, msg)
		}
	}
	var timer env.Timer
	if timeoutMs > 0 {
		timer = b.env.Clock.AfterFunc(time.Duration(timeoutMs)*time.Millisecond, func() {
			once(kerr.RequestTimedOut, fmt.Sprintf("the voter change was not committed within %d ms; it may still be", timeoutMs))
		})
	}
	b.meta.voterChange = true
	b.meta.node.ChangeMembership(cc, func(err error) {
		b.meta.voterChange = false
		if timer != nil {
			timer.Stop()
		}
		switch {
		case err == nil:
			once(nil, "")
		case errors.Is(err, quorum.ErrNotLeader), errors.Is(err, quorum.ErrLeadershipLost), errors.Is(err, quorum.ErrClosed):
			once(kerr.NotLeaderForPartition, err.Error())
		case errors.Is(err, quorum.ErrMembershipChangePending), errors.Is(err, quorum.ErrMembershipChangeRefused):
			once(kerr.RequestTimedOut, err.Error())
		default:
			once(kerr.InvalidRequest, err.Error())
		}
	})
}
