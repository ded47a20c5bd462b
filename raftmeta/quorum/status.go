package quorum

import (
	"maps"
	"slices"

	"go.etcd.io/raft/v3"
	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Status is a node's view of the quorum, for DescribeQuorum and operators.
type Status struct {
	ID, Leader, Term, Vote uint64
	// Role is "leader", "follower", "candidate" or "pre-candidate".
	Role string
	// Commit is the last entry known committed, Applied the last one the
	// state machine applied; Snapshot is the latest snapshot's index;
	// FirstIndex and LastIndex bound the log held durably here.
	Commit, Applied, Snapshot, FirstIndex, LastIndex uint64
	// Activated says this node leads and has applied its own term's first
	// entry (StateMachine.Activated was called for Term).
	Activated bool
	// Config is the configuration applied here.
	Config *pb.ConfState
	// Progress is, on the leader only, each voter's and learner's
	// replication, by id.
	Progress []Progress
}

// Progress is a member's replication as the leader tracks it.
type Progress struct {
	ID uint64
	// Match is the last entry known to match the leader's log; Next the
	// next one to send.
	Match, Next uint64
	Learner     bool
	// State is raft's: "StateProbe", "StateReplicate" or "StateSnapshot".
	State string
	// RecentActive says the leader heard from it within an election
	// timeout.
	RecentActive bool
}

func role(st raft.StateType) string {
	switch st {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}

// Status returns the node's view of the quorum.
func (n *Node) Status() Status {
	rs := n.rn.Status()
	s := Status{
		ID: n.cfg.ID, Leader: rs.Lead, Term: rs.GetTerm(), Vote: rs.GetVote(), Role: role(rs.RaftState),
		Commit: rs.GetCommit(), Applied: n.applied, Snapshot: n.st.snap.GetMetadata().GetIndex(),
		FirstIndex: n.st.firstIndex(), LastIndex: n.st.lastIndex(),
		Activated: n.activated == rs.GetTerm() && rs.RaftState == raft.StateLeader,
		Config:    proto.Clone(n.confState).(*pb.ConfState),
	}
	for _, id := range slices.Sorted(maps.Keys(rs.Progress)) {
		pr := rs.Progress[id]
		s.Progress = append(s.Progress, Progress{ID: id, Match: pr.Match, Next: pr.Next, Learner: pr.IsLearner, State: pr.State.String(), RecentActive: pr.RecentActive})
	}
	return s
}
