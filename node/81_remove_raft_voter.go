package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
)

// RemoveRaftVoter, version 0 (KIP-853): take a voter out of the metadata
// quorum (kafka-metadata-quorum remove-controller).
//
//   - Served as AddRaftVoter is (80_add_raft_voter.go): by the active
//     controller, forwarded there from a broker listener, with its answers
//     for another controller, another cluster id and a change in flight.
//   - A node that is not a voter: VOTER_NOT_FOUND. The last voter:
//     INVALID_REQUEST, as Kafka answers (a quorum of none commits nothing).
//   - The change is a raft membership change, answered once committed and
//     applied here. A voter that is also a registered broker (a combined
//     node) is demoted to a learner, so that its broker goes on following
//     the metadata log, as a removed Kafka voter that still runs goes on
//     as an observer; a controller-only node is removed, and every node's
//     transport forgets its address. The active controller may remove
//     itself: it steps down once the change is applied (raft's
//     StepDownOnRemoval, which covers a demotion too) and the remaining
//     voters elect a new controller; the answer is still sent. The
//     request carries no timeout: a change that does not commit is
//     answered when this node stops leading (NOT_LEADER_OR_FOLLOWER).
//   - Where Sluice differs: the directory id is not checked (Kafka's voter
//     key is the id and the directory id).
func (b *Broker) handleRemoveRaftVoter(r *request) {
	req := r.body.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
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
	voters := currentVoters(b.meta.node.Status().Config)
	id, found := raftIDOf(req.VoterID), false
	for _, v := range voters {
		found = found || (req.VoterID >= 0 && v == id)
	}
	switch {
	case !found:
		answer(kerr.VoterNotFound, fmt.Sprintf("node %d is not a voter", req.VoterID))
		return
	case len(voters) == 1:
		answer(kerr.InvalidRequest, fmt.Sprintf("node %d is the only voter: a quorum needs one", req.VoterID))
		return
	}
	// A broker goes on following the log as a learner (Kafka's removed
	// voter, still running, is an observer); a controller-only node leaves.
	typ := raftpb.ConfChangeType_ConfChangeRemoveNode
	if _, broker := b.image.Brokers[req.VoterID]; broker {
		typ = raftpb.ConfChangeType_ConfChangeAddLearnerNode
	}
	cc := &raftpb.ConfChangeV2{}
	cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: typ.Enum(), NodeId: &id})
	op := b.beginVoterChange(0, answer)
	op.propose(cc, op.done)
}
