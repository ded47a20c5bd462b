package quorum

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Every proposal's data (a membership change's context) opens with a
// header naming who proposed it, so that the proposer can tell its entry
// when it is applied:
//
//	+-----------+-------------+----------+--------+---------------+
//	| magic u8  | proposer u64| nonce u64| seq u64| data ...      |
//	+-----------+-------------+----------+--------+---------------+
//
// The nonce, drawn from env.Rand at Open, tells this incarnation's entries
// from those of the node's earlier lives, whose seq counted from 0 too.
const (
	headerMagic = 0x51 // 'Q'
	headerBytes = 1 + 3*8
)

type header struct{ proposer, nonce, seq uint64 }

func (h header) prepend(data []byte) []byte {
	out := make([]byte, 0, headerBytes+len(data))
	out = append(out, headerMagic)
	out = binary.BigEndian.AppendUint64(out, h.proposer)
	out = binary.BigEndian.AppendUint64(out, h.nonce)
	out = binary.BigEndian.AppendUint64(out, h.seq)
	return append(out, data...)
}

func parseHeader(data []byte) (header, []byte, error) {
	if len(data) < headerBytes || data[0] != headerMagic {
		return header{}, nil, fmt.Errorf("%d bytes with no proposal header", len(data))
	}
	return header{
		proposer: binary.BigEndian.Uint64(data[1:9]),
		nonce:    binary.BigEndian.Uint64(data[9:17]),
		seq:      binary.BigEndian.Uint64(data[17:25]),
	}, data[headerBytes:], nil
}

// Propose proposes data for the log; done(nil) runs once the entry is
// applied here. On a node that does not lead it fails at once (on the next
// loop turn) with ErrNotLeader; later with ErrLeadershipLost or ErrClosed
// (outcome unknown) or raft's ErrProposalDropped (not made).
func (n *Node) Propose(data []byte, done func(error)) {
	if len(data) > MaxEntryBytes {
		n.refuse(done, fmt.Errorf("%w: %d bytes, the limit is %d", ErrEntryTooLarge, len(data), MaxEntryBytes))
		return
	}
	h, ok := n.beginProposal(done)
	if !ok {
		return
	}
	if err := n.rn.Propose(h.prepend(data)); err != nil {
		n.refuse(done, err)
		return
	}
	n.addPending(h.seq, false, done)
}

// ChangeMembership proposes a membership change: one change, or several
// at once by joint consensus (raft leaves the joint configuration by itself
// unless cc asks for an explicit transition). done(nil) runs once the change
// is applied here; errors as for Propose, plus ErrMembershipChangePending,
// ErrMembershipChangeRefused, and an error for a change the configuration
// cannot take (such as removing every voter). cc is not modified.
func (n *Node) ChangeMembership(cc *pb.ConfChangeV2, done func(error)) {
	if cc == nil {
		n.refuse(done, fmt.Errorf("metadata quorum: nil membership change"))
		return
	}
	if n.confPending {
		n.refuse(done, ErrMembershipChangePending)
		return
	}
	if err := validateConfChange(n.confState, cc); err != nil {
		n.refuse(done, fmt.Errorf("metadata quorum: membership change %s refused: %w", confchange.Describe(cc.GetChanges()...), err))
		return
	}
	h, ok := n.beginProposal(done)
	if !ok {
		return
	}
	cc = proto.Clone(cc).(*pb.ConfChangeV2)
	cc.Context = h.prepend(cc.Context)
	if err := n.rn.ProposeConfChange(cc); err != nil {
		n.refuse(done, err)
		return
	}
	n.confPending = true
	n.addPending(h.seq, true, done)
}

// validateConfChange applies cc to a copy of the configuration cs, as raft
// will when the change is applied (raft panics there on a change it cannot
// make, so such a change must never reach the log).
func validateConfChange(cs *pb.ConfState, cc *pb.ConfChangeV2) error {
	chg := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: 1}
	cfg, trk, err := confchange.Restore(chg, cs)
	if err != nil {
		return err
	}
	chg.Tracker.Config, chg.Tracker.Progress = cfg, trk
	switch autoLeave, joint := cc.EnterJoint(); {
	case cc.LeaveJoint():
		_, _, err = chg.LeaveJoint()
	case joint:
		_, _, err = chg.EnterJoint(autoLeave, cc.GetChanges()...)
	default:
		_, _, err = chg.Simple(cc.GetChanges()...)
	}
	return err
}

// beginProposal checks that the node may propose and numbers the proposal.
func (n *Node) beginProposal(done func(error)) (header, bool) {
	switch n.state {
	case stateRunning, stateStarting:
	case stateFailed:
		n.refuse(done, n.err)
		return header{}, false
	default:
		n.refuse(done, ErrClosed)
		return header{}, false
	}
	bs := n.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		n.refuse(done, ErrNotLeader)
		return header{}, false
	}
	if term := bs.GetTerm(); term != n.pendingTerm {
		// Proposals of an earlier term were failed when it ended; the
		// next Ready would do it, but the new term's list starts empty.
		n.failPending(ErrLeadershipLost)
		n.pendingTerm = term
	}
	n.seq++
	return header{proposer: n.cfg.ID, nonce: n.nonce, seq: n.seq}, true
}

func (n *Node) addPending(seq uint64, conf bool, done func(error)) {
	n.pending = append(n.pending, &proposal{seq: seq, conf: conf, done: done})
	n.schedule()
}

// refuse fails a proposal on the next loop turn.
func (n *Node) refuse(done func(error), err error) { n.e.Loop.Post(func() { done(err) }) }

// failPending fails every pending proposal with err.
func (n *Node) failPending(err error) {
	for _, p := range n.pending {
		n.completions = append(n.completions, completion{p.done, err})
	}
	n.pending = nil
	n.confPending = false
}

// dropLostProposals fails the pending proposals once their term's
// leadership is over.
func (n *Node) dropLostProposals() {
	if len(n.pending) == 0 {
		return
	}
	bs := n.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || bs.GetTerm() != n.pendingTerm {
		n.failPending(ErrLeadershipLost)
	}
}

// flushCompletions calls the done functions collected while applying, once
// raft has been advanced, so that a done that proposes again finds the node
// between Readys.
func (n *Node) flushCompletions() {
	for len(n.completions) > 0 {
		c := n.completions[0]
		n.completions = n.completions[1:]
		c.done(c.err)
	}
	n.completions = nil
}

// applyEntries applies committed entries in order. It returns false if the
// node failed.
func (n *Node) applyEntries(ents []*pb.Entry) bool {
	for _, e := range ents {
		if n.state != stateRunning {
			return false
		}
		n.assertf(e.GetIndex() == n.applied+1, "applying entry %d after %d", e.GetIndex(), n.applied)
		if err := n.applyEntry(e); err != nil {
			n.fail(fmt.Errorf("apply entry %d (term %d): %w", e.GetIndex(), e.GetTerm(), err))
			return false
		}
		n.applied, n.appliedTerm = e.GetIndex(), e.GetTerm()
		n.bytesSinceSnap += int64(len(e.GetData()))
		n.maybeActivate()
	}
	return n.state == stateRunning
}

func (n *Node) applyEntry(e *pb.Entry) error {
	switch e.GetType() {
	case pb.EntryNormal:
		if len(e.GetData()) == 0 {
			n.emptyEntry(e)
			return n.sm.Apply(Applied{Index: e.GetIndex(), Term: e.GetTerm()})
		}
		h, data, err := parseHeader(e.GetData())
		if err != nil {
			return err
		}
		if err := n.sm.Apply(Applied{Index: e.GetIndex(), Term: e.GetTerm(), Data: data}); err != nil {
			return err
		}
		n.matched(h, e)
		return nil
	case pb.EntryConfChange, pb.EntryConfChangeV2:
		return n.applyConfChange(e)
	}
	return fmt.Errorf("unknown entry type %v", e.GetType())
}

// emptyEntry accounts for an entry with no data: the first of its term
// (its leader's empty entry), or, later in the term, a membership change
// raft refused as it reached the leader's log and replaced by an empty one.
func (n *Node) emptyEntry(e *pb.Entry) {
	if e.GetTerm() != n.appliedTerm || e.GetTerm() != n.pendingTerm || len(n.pending) == 0 {
		return
	}
	p := n.pending[0]
	n.assertf(p.conf, "an empty entry %d mid-term %d where proposal %d, not a membership change, was due", e.GetIndex(), e.GetTerm(), p.seq)
	n.pending = n.pending[1:]
	n.confPending = n.confPending && !p.conf
	n.completions = append(n.completions, completion{p.done, ErrMembershipChangeRefused})
}

func (n *Node) applyConfChange(e *pb.Entry) error {
	var cc *pb.ConfChangeV2
	if e.GetType() == pb.EntryConfChange {
		v1 := &pb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), v1); err != nil {
			return fmt.Errorf("membership change does not decode: %w", err)
		}
		cc = v1.AsV2()
	} else {
		cc = &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("membership change does not decode: %w", err)
		}
	}
	// The entries raft writes itself (bootstrap, leaving a joint
	// configuration) carry no header.
	h, ctx, herr := parseHeader(cc.GetContext())
	if herr == nil {
		cc.Context = ctx
	}
	if err := validateConfChange(n.confState, cc); err != nil {
		return fmt.Errorf("committed membership change %s cannot be applied to %v: %w", confchange.Describe(cc.GetChanges()...), n.confState, err)
	}
	n.confState = n.rn.ApplyConfChange(cc)
	if err := n.sm.Apply(Applied{Index: e.GetIndex(), Term: e.GetTerm(), ConfChange: cc, ConfState: proto.Clone(n.confState).(*pb.ConfState)}); err != nil {
		return err
	}
	if herr == nil {
		n.matched(h, e)
	}
	return nil
}

// matched completes the proposal an applied entry came from, if it is
// pending here. Entries of one term are in the order they were proposed,
// so a proposal still pending before it never made it into the log.
func (n *Node) matched(h header, e *pb.Entry) {
	if h.proposer != n.cfg.ID || h.nonce != n.nonce || e.GetTerm() != n.pendingTerm {
		return
	}
	for len(n.pending) > 0 && n.pending[0].seq <= h.seq {
		p := n.pending[0]
		n.pending = n.pending[1:]
		if p.conf {
			n.confPending = false
		}
		err := error(nil)
		if p.seq < h.seq {
			n.assertf(false, "proposal %d still pending when proposal %d was applied at %d", p.seq, h.seq, e.GetIndex())
			err = raft.ErrProposalDropped
		}
		n.completions = append(n.completions, completion{p.done, err})
	}
}
