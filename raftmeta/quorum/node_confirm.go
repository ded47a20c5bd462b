package quorum

import (
	"encoding/binary"

	"go.etcd.io/raft/v3"
)

// Confirming leadership (raft's ReadIndex, ReadOnlySafe).
//
// A leader that answers from its own state, without writing, may answer
// for a term that is over: a leader paused past its followers' election
// timeout resumes still believing it leads (CheckQuorum steps it down only
// after its own election timeout, on ticks it has not had yet), and a
// change committed by its successor is missing from what it decides from.
// The simulator found it: a deposed controller, resumed, found a config
// its successor had set absent from its image, answered the deletion of
// that config as done without writing anything, and the config stayed.
// ConfirmLeadership closes it: once a quorum of voters has answered a
// heartbeat sent after the call, no other leader was elected before the
// call (a voter that acknowledges this term's heartbeat has not voted in a
// later term), so what the node had applied when it decided held every
// entry committed before the request arrived but its own, still pending,
// proposals.

// leaderRead is one ConfirmLeadership call raft has not answered yet.
type leaderRead struct {
	seq  uint64 // the read's context, as raft carries it
	term uint64 // the term the node led when the call was made
	// index is raft's read index once a quorum confirmed the term (0
	// until then); done runs once the node has applied up to it.
	index     uint64
	confirmed bool
	done      func(error)
}

// ConfirmLeadership calls done(nil) once a quorum of voters has confirmed
// that this node still leads the term it led at the call, and the node has
// applied every entry committed then. It fails with ErrNotLeader (on the
// next loop turn) on a node that does not lead, with
// ErrLeadershipUnconfirmed if the term ends first, and with ErrClosed or the node's error if it stops.
// It costs one heartbeat round, which raft shares among the calls made
// while one is in flight; a sole voter confirms at once.
func (n *Node) ConfirmLeadership(done func(error)) {
	switch n.state {
	case stateRunning, stateStarting:
	case stateFailed:
		n.refuse(done, n.err)
		return
	default:
		n.refuse(done, ErrClosed)
		return
	}
	bs := n.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		n.refuse(done, ErrNotLeader)
		return
	}
	n.readSeq++
	n.reads = append(n.reads, &leaderRead{seq: n.readSeq, term: bs.GetTerm(), done: done})
	n.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, n.readSeq))
	n.schedule()
}

// confirmReads takes raft's answers to ReadIndex from a Ready.
func (n *Node) confirmReads(states []raft.ReadState) {
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		seq := binary.BigEndian.Uint64(rs.RequestCtx)
		for _, r := range n.reads {
			if r.seq == seq {
				r.index, r.confirmed = rs.Index, true
			}
		}
	}
}

// completeReads answers the confirmed reads the node has applied up to,
// and fails every read once the term it was made in is over. raft drops
// a read when its leader steps down, so a read of an ended term is never
// answered.
func (n *Node) completeReads() {
	if len(n.reads) == 0 {
		return
	}
	bs := n.rn.BasicStatus()
	leads := bs.RaftState == raft.StateLeader
	kept := n.reads[:0]
	for _, r := range n.reads {
		switch {
		case !leads || bs.GetTerm() != r.term:
			n.completions = append(n.completions, completion{r.done, ErrLeadershipUnconfirmed})
		case r.confirmed && n.applied >= r.index:
			n.completions = append(n.completions, completion{r.done, nil})
		default:
			kept = append(kept, r)
		}
	}
	clear(n.reads[len(kept):])
	n.reads = kept
}

// failReads fails every read not yet answered with err.
func (n *Node) failReads(err error) {
	for _, r := range n.reads {
		n.completions = append(n.completions, completion{r.done, err})
	}
	n.reads = nil
}
