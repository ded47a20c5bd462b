package node

import (
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// Broker-only nodes follow the metadata log as raft learners (DESIGN.md
// section 5): they apply every entry but never vote. A learner has no
// CONTROLLER listener: it dials every voter (joinQuorum names them to its
// transport), and the leader's messages come back on those connections
// (the transport answers a peer it has no address for on the peer's
// inbound connection). The active controller adds a broker as a learner
// when it registers: until then the broker has no configuration and hears
// nothing, so it finds the controller by asking the voters in turn
// (controllerClient), as a KRaft broker reaches its controller through
// controller.quorum.voters.

// ensureLearner makes a registered broker a learner of the quorum if it is
// neither a voter nor a learner yet, and calls done once it is (or with
// the error that stopped the change: the broker registers again, and the
// change is retried then).
func (b *Broker) ensureLearner(brokerID int32, done func(error)) {
	id := raftIDOf(brokerID)
	st := b.meta.node.Status()
	if st.Config != nil && (slices.Contains(st.Config.GetVoters(), id) || slices.Contains(st.Config.GetLearners(), id) ||
		slices.Contains(st.Config.GetVotersOutgoing(), id) || slices.Contains(st.Config.GetLearnersNext(), id)) {
		b.env.Loop.Post(func() { done(nil) })
		return
	}
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{
		Type: raftpb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: &id,
	}}}
	b.env.Log.Info("adding a broker to the metadata quorum as a learner", "broker", brokerID)
	b.meta.node.ChangeMembership(cc, done)
}
