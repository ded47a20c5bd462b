package node

import (
	"errors"
	"fmt"
	"slices"
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
//   - Served by the active controller. Another controller's CONTROLLER
//     listener answers NOT_LEADER_OR_FOLLOWER, as Kafka's raft client does
//     (kafka-metadata-quorum --bootstrap-controller finds the leader with
//     DescribeQuorum and retries there); a broker listener forwards the
//     request to the active controller in an Envelope, as Kafka's brokers
//     do (--bootstrap-server), answering NOT_CONTROLLER when it cannot
//     (forward.go).
//   - A ClusterId that is not the cluster's: INCONSISTENT_CLUSTER_ID. A
//     negative voter id, or no listener named as controller.listener.names'
//     first, or one without host and port: INVALID_REQUEST. A node already
//     a voter: DUPLICATE_VOTER. Another voter change in flight (this
//     node's, or a joint configuration not yet left): REQUEST_TIMED_OUT, as
//     Kafka answers, and the client retries.
//   - The voter joins in two raft membership changes, as etcd advises and
//     as Kafka's rule that only a caught-up observer may be added intends:
//     first as a learner (unless it is one), which the leader catches up
//     from the log or a snapshot without counting it in the quorum; once it
//     has every entry committed when it was added, was heard from within
//     an election timeout, and this node's transport has dialed it at the
//     given address and been answered by that raft id, it is made a
//     voter. A node that cannot be reached there (a broker-only learner
//     has no CONTROLLER listener) is never made a voter, so it cannot
//     stall a quorum. Each change's Context is the voter's CONTROLLER
//     address host:port (and the other voters', for the new one), which
//     every node's transport learns when it applies the change and which
//     snapshots carry (metadata_voters.go).
//   - Answered once it is a voter here, whatever AckWhenCommitted (v1)
//     says (Kafka may answer once the change is in its log); by
//     REQUEST_TIMED_OUT when TimeoutMillis (30 s if not positive) passes
//     first (the change may still be made; a learner added stays one, and
//     a retry promotes it), and NOT_LEADER_OR_FOLLOWER when this node stops
//     leading first (its outcome unknown).
//   - Where Sluice differs: the directory id, which Kafka makes part of
//     the voter's key, is not checked.
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
	timeoutMs := req.TimeoutMillis
	if timeoutMs <= 0 {
		timeoutMs = int32(controllerRequestTimeout / time.Millisecond)
	}
	b.addVoter(id, addr, b.voterContext(addr, id), timeoutMs, answer)
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

// forVoterChanges wraps the handler of a voter change: the active
// controller runs it; another controller's CONTROLLER listener answers
// NOT_LEADER_OR_FOLLOWER; a broker listener forwards it.
func (b *Broker) forVoterChanges(handle func(*request)) func(*request) {
	forward := b.forControllers(handle)
	return func(r *request) {
		if b.meta.activeTerm == 0 && r.forwarded == nil && r.c != nil && r.c.controller {
			r.respond(errorResponse(r.body, kerr.NotLeaderForPartition))
			return
		}
		forward(r)
	}
}

// voterChangeRefused says why this node cannot take a voter change now, or
// nil: it is not the active controller (any more), or the cluster id is
// not its, or another change is in flight.
func (b *Broker) voterChangeRefused(r *request, clusterID *string) (*kerr.Error, string) {
	switch {
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

// voterOp is one AddRaftVoter or RemoveRaftVoter in flight: one at a
// time (metaPlane.voterChange), answered once.
type voterOp struct {
	b        *Broker
	answer   func(*kerr.Error, string)
	answered bool
	timer    env.Timer
	// onFailure, if set, undoes what the change did before it failed.
	onFailure func()
}

// beginVoterChange starts a voter change answered by answer, or by
// REQUEST_TIMED_OUT once timeoutMs (if positive) has passed.
func (b *Broker) beginVoterChange(timeoutMs int32, answer func(*kerr.Error, string)) *voterOp {
	op := &voterOp{b: b, answer: answer}
	b.meta.voterChange = true
	if timeoutMs > 0 {
		op.timer = b.env.Clock.AfterFunc(time.Duration(timeoutMs)*time.Millisecond, func() {
			op.finish(kerr.RequestTimedOut, fmt.Sprintf("the voter change was not done within %d ms; it may still be", timeoutMs))
		})
	}
	return op
}

// finish answers, once, and lets the next voter change start.
func (op *voterOp) finish(code *kerr.Error, msg string) {
	if op.answered {
		return
	}
	op.answered = true
	op.b.meta.voterChange = false
	if op.timer != nil {
		op.timer.Stop()
	}
	if code != nil && op.onFailure != nil {
		op.onFailure()
	}
	op.answer(code, msg)
}

// propose proposes cc, then calls next once it is applied here, or
// answers the error that stopped it.
func (op *voterOp) propose(cc *raftpb.ConfChangeV2, next func()) {
	op.b.meta.node.ChangeMembership(cc, func(err error) {
		if op.answered {
			return
		}
		switch {
		case err == nil:
			next()
		case errors.Is(err, quorum.ErrNotLeader), errors.Is(err, quorum.ErrLeadershipLost), errors.Is(err, quorum.ErrClosed):
			op.finish(kerr.NotLeaderForPartition, err.Error())
		case errors.Is(err, quorum.ErrMembershipChangePending), errors.Is(err, quorum.ErrMembershipChangeRefused):
			op.finish(kerr.RequestTimedOut, err.Error())
		default:
			op.finish(kerr.InvalidRequest, err.Error())
		}
	})
}

// done answers success.
func (op *voterOp) done() { op.finish(nil, "") }

// addVoter adds raft id, which listens at addr, as a learner (unless it
// is one), waits for it to catch up with the log as it was committed when
// it started to, then makes it a voter.
func (b *Broker) addVoter(id uint64, addr string, ctx []byte, timeoutMs int32, answer func(*kerr.Error, string)) {
	op := b.beginVoterChange(timeoutMs, answer)
	change := func(t raftpb.ConfChangeType) *raftpb.ConfChangeV2 {
		cc := &raftpb.ConfChangeV2{Context: ctx}
		cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: t.Enum(), NodeId: &id})
		return cc
	}
	promote := func() { op.propose(change(raftpb.ConfChangeType_ConfChangeAddNode), op.done) }
	catchUp := func() {
		b.dialLearner(op, id, addr)
		b.whenCaughtUp(op, id, b.meta.node.Status().Commit, promote)
	}
	if slices.Contains(b.meta.node.Status().Config.GetLearners(), id) {
		catchUp()
		return
	}
	op.propose(change(raftpb.ConfChangeType_ConfChangeAddLearnerNode), catchUp)
}

// dialLearner points this node's transport at the learner id's given
// CONTROLLER address for the catch-up check, which wants a connection
// dialed there. A learner added when it registered as a broker (a
// broker-only node, or a combined node removed from the quorum before it
// registered) has no address in any node's transport: without this, the
// check could never pass. If the change does not go through, the
// transport goes back to what it had, since the address is only the
// request's word until the promotion, whose context teaches it to every
// node, is applied (a wrong one would starve the learner of the leader's
// messages).
func (b *Broker) dialLearner(op *voterOp, id uint64, addr string) {
	t := b.meta.transport
	prev := t.PeerAddr(id)
	if prev == addr || id == b.meta.self {
		return
	}
	t.SetPeer(id, addr)
	op.onFailure = func() {
		if b.meta.transport == t && t.PeerAddr(id) == addr && b.meta.voterAddrs[id] != addr {
			t.SetPeer(id, prev)
		}
	}
}

// whenCaughtUp calls next once the learner id, heard from recently and
// answering as itself at its CONTROLLER address, has every entry up to
// target, checking every quorum tick; it stops when op
// is answered (timed out) and answers NOT_LEADER_OR_FOLLOWER when this
// node stops leading.
func (b *Broker) whenCaughtUp(op *voterOp, id, target uint64, next func()) {
	if op.answered {
		return
	}
	st := b.meta.node.Status()
	if st.Role != "leader" || b.meta.activeTerm == 0 {
		op.finish(kerr.NotLeaderForPartition, "this node stopped leading the quorum while the new voter caught up; its outcome is unknown")
		return
	}
	for _, pr := range st.Progress {
		if pr.ID == id && pr.Match >= target && pr.RecentActive && b.meta.transport.Reached(id) {
			next()
			return
		}
	}
	b.env.Clock.AfterFunc(quorumTick, func() { b.whenCaughtUp(op, id, target, next) })
}
