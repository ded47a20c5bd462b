package node

import (
	"fmt"
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
// change is retried then). Raft makes one membership change at a time, so
// brokers that register while one is in flight are added together by the
// next (a cluster's brokers all register at once when it starts).
func (b *Broker) ensureLearner(brokerID int32, done func(error)) {
	if b.inQuorumConfig(raftIDOf(brokerID)) {
		b.env.Loop.Post(func() { done(nil) })
		return
	}
	b.meta.learnerQueue = append(b.meta.learnerQueue, learnerAdd{brokerID, done})
	b.addQueuedLearners()
}

// learnerAdd is a broker waiting to be added as a learner.
type learnerAdd struct {
	brokerID int32
	done     func(error)
}

// inQuorumConfig says raft id is a voter or learner, or is becoming one.
func (b *Broker) inQuorumConfig(id uint64) bool {
	st := b.meta.node.Status()
	return st.Config != nil && (slices.Contains(st.Config.GetVoters(), id) || slices.Contains(st.Config.GetLearners(), id) ||
		slices.Contains(st.Config.GetVotersOutgoing(), id) || slices.Contains(st.Config.GetLearnersNext(), id))
}

// removedFromQuorum says this node's configuration has voters and names
// this node in no role: a voter removed by RemoveRaftVoter before it
// registered as a broker, whom no leader sends anything.
func (b *Broker) removedFromQuorum() bool {
	st := b.meta.node.Status()
	return st.Config != nil && len(st.Config.GetVoters()) > 0 && !b.inQuorumConfig(b.meta.self)
}

// addQueuedLearners adds every queued broker in one membership change,
// unless one of ours is in flight (its end starts the next).
func (b *Broker) addQueuedLearners() {
	if b.meta.addingLearners || len(b.meta.learnerQueue) == 0 {
		return
	}
	queue := b.meta.learnerQueue
	b.meta.learnerQueue = nil
	var changes []*raftpb.ConfChangeSingle
	var added []int32
	for _, q := range queue {
		id := raftIDOf(q.brokerID)
		if slices.Contains(added, q.brokerID) || b.inQuorumConfig(id) {
			continue
		}
		added = append(added, q.brokerID)
		changes = append(changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: &id})
	}
	finish := func(err error) {
		for _, q := range queue {
			q.done(err)
		}
	}
	if len(changes) == 0 {
		b.env.Loop.Post(func() { finish(nil) })
		return
	}
	b.env.Log.Info("adding brokers to the metadata quorum as learners", "brokers", fmt.Sprint(added))
	b.meta.addingLearners = true
	b.meta.node.ChangeMembership(&raftpb.ConfChangeV2{Changes: changes}, func(err error) {
		b.meta.addingLearners = false
		finish(err)
		b.addQueuedLearners()
	})
}
