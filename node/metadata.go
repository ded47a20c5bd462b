package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/raftmeta/quorum"
	"go.etcd.io/raft/v3/raftpb"
)

// The node's part in the metadata quorum (DESIGN.md section 5).
//
// Every node, broker or controller, runs a member of the quorum
// (raftmeta/quorum): controllers as voters, broker-only nodes as learners.
// Each applies the same committed entries to its image, so every node
// answers Metadata from its own copy. One entry is one metadata change:
// a batch of records applied together (a CreateTopics of three topics is
// never seen half done). The raft leader is the active controller: once
// it has applied every entry of earlier terms (quorum's Activated), it
// alone proposes, and every other node forwards what changes metadata to it
// (forward.go).

// metaState is the quorum's view of the broker: the state machine it
// applies committed entries to. Its methods run on the loop.
type metaState struct{ b *Broker }

var _ quorum.StateMachine = metaState{}

// Apply applies one committed entry: a batch of records, a change of the
// quorum's membership, or a leader's empty entry.
func (m metaState) Apply(e quorum.Applied) error {
	b := m.b
	if e.ConfChange == nil && len(e.Data) == 0 {
		// A leader's empty entry: the image is as it was, but the applied
		// index moves, so that a wait for the commit index a restarted
		// node recovered ends even when its log ends in one.
		b.setApplied(e.Index)
		return nil
	}
	if e.ConfChange != nil {
		b.applyMembership(e)
	} else {
		start := b.env.Clock.Now()
		records, err := decodeEntry(e.Data)
		if err != nil {
			return fmt.Errorf("node: metadata entry %d: %w", e.Index, err)
		}
		// The controller validated the records against the image it
		// proposed them for; a node that refuses one has diverged from
		// the log, and must stop rather than serve a different image.
		if err := b.applyRecords(records); err != nil {
			return fmt.Errorf("node: metadata entry %d: %w", e.Index, err)
		}
		for _, r := range records {
			b.meta.recordsApplied += kafkaRecords(r)
		}
		b.meta.applyTime += b.env.Clock.Now().Sub(start)
	}
	b.setApplied(e.Index)
	b.noteCommitted()
	b.controllerApplied()
	return nil
}

// noteCommitted records when the image reached its offset.
func (b *Broker) noteCommitted() {
	if b.meta.commits == nil {
		b.meta.commits = raftmeta.NewCommitTimes(b.cfg.BrokerSessionTimeout)
	}
	b.meta.commits.Note(b.image.Applied, b.mono.now)
}

// Snapshot is the image, and the voters' addresses learned from the
// quorum (metadata_voters.go), for the quorum to write at the applied
// index.
func (m metaState) Snapshot() ([]byte, error) {
	m.b.meta.snapshots++
	return m.b.snapshotWithVoters(), nil
}

// Restore replaces the image by a snapshot's, then brings the partitions
// this node serves in line with it.
func (m metaState) Restore(index uint64, data []byte) error {
	b := m.b
	im, addrs, err := decodeSnapshotWithVoters(data)
	if err != nil {
		return fmt.Errorf("node: metadata snapshot at %d: %w", index, err)
	}
	b.image = im
	b.meta.restores++
	b.restoreVoterAddrs(addrs)
	b.setApplied(index)
	b.noteCommitted()
	b.controllerApplied()
	if b.state == stateRunning {
		b.reconcilePartitions()
	}
	return nil
}

// LeaderChanged hears who leads the quorum, so requests for the controller
// go to the right node. A controller that lost the lead stops deciding.
func (m metaState) LeaderChanged(leader, term uint64) {
	b := m.b
	b.meta.leader, b.meta.term = leader, term
	if b.meta.activeTerm != 0 && (leader != b.meta.self || term != b.meta.activeTerm) {
		b.deactivateController()
	}
	b.env.Log.Info("metadata quorum leader", "node", b.cfg.NodeID, "leader", nodeIDOfRaft(leader), "term", term)
	b.meta.leaderWaiters.wake(nil)
}

// Activated says this node is the active controller for term.
func (m metaState) Activated(term uint64) { m.b.activateController(term) }

// metaPlane is the broker's metadata quorum state.
type metaPlane struct {
	node      *quorum.Node
	transport *quorum.Transport
	self      uint64 // this node's raft id
	// applied is the index of the last entry applied to the image.
	applied uint64
	// snapshots and restores count the snapshots this process took and
	// installed (loaded at start or sent by the leader), for observers.
	snapshots, restores int
	// unconfirmed counts the answers this process gave as the active
	// controller's that a quorum then did not confirm (confirmController).
	unconfirmed int
	// commits says when the image reached each offset, for the
	// controller this node may become (raftmeta.CommitTimes); nil until
	// the first apply.
	commits *raftmeta.CommitTimes
	// recordsApplied counts the records this process applied from the
	// log (as Kafka counts them: kafkaRecords), applyTime the time it spent
	// decoding and applying them (and, once the broker runs, opening and
	// dropping the partitions they assign): logged when the broker starts,
	// the catch-up's rate.
	recordsApplied int
	applyTime      time.Duration
	// appliedWaiters wait for applied to reach an index (a forwarded
	// change is answered once this node has applied it).
	appliedWaiters []indexWaiter
	// leader and term are the quorum's, as last heard (leader 0: none).
	leader, term uint64
	// activeTerm is the term in which this node is the active controller,
	// 0 when it is not.
	activeTerm uint64
	// leaderWaiters are requests waiting for a controller to be known.
	leaderWaiters waiters
	// voterAddrs are the CONTROLLER addresses of voters learned from
	// committed membership changes (AddRaftVoter) and snapshots, by raft
	// id: where a voter named in no configuration listens
	// (metadata_voters.go).
	voterAddrs map[uint64]string
	// learnerQueue are brokers waiting to be added as learners, while
	// addingLearners says a change adding others is in flight (learners.go).
	learnerQueue   []learnerAdd
	addingLearners bool
	// voterChange is set while an AddRaftVoter or RemoveRaftVoter of this
	// node's is in flight: one change at a time, as in Kafka.
	voterChange bool
	// journal is a single-node journal of an older Sluice, read at start
	// and awaiting migration into the log (metadata_start.go).
	journal *oldJournal
}

// indexWaiter is a callback waiting for the image to apply index.
type indexWaiter struct {
	index uint64
	done  func(error)
}

// raftIDOf maps a Kafka node.id (which may be 0) to a raft id (never 0).
func raftIDOf(nodeID int32) uint64 { return uint64(nodeID) + 1 }

// nodeIDOfRaft is raftIDOf's inverse; -1 for raft's "no node" (0).
func nodeIDOfRaft(id uint64) int32 {
	if id == 0 {
		return -1
	}
	return int32(id - 1)
}

// setApplied records that the image reflects the log up to index, and
// wakes the callers waiting for it.
func (b *Broker) setApplied(index uint64) {
	m := &b.meta
	if index < m.applied {
		panic(fmt.Sprintf("node: metadata applied index went back from %d to %d", m.applied, index))
	}
	m.applied = index
	n := 0
	for n < len(m.appliedWaiters) && m.appliedWaiters[n].index <= index {
		n++
	}
	due := m.appliedWaiters[:n]
	m.appliedWaiters = append([]indexWaiter(nil), m.appliedWaiters[n:]...)
	for _, w := range due {
		w.done(nil)
	}
}

// whenApplied calls done once the image has applied index.
func (b *Broker) whenApplied(index uint64, done func(error)) {
	m := &b.meta
	if index <= m.applied {
		b.env.Loop.Post(func() { done(nil) })
		return
	}
	i := sort.Search(len(m.appliedWaiters), func(i int) bool { return m.appliedWaiters[i].index > index })
	m.appliedWaiters = append(m.appliedWaiters, indexWaiter{})
	copy(m.appliedWaiters[i+1:], m.appliedWaiters[i:])
	m.appliedWaiters[i] = indexWaiter{index, done}
}

// errNotController is a proposal on a node that is not the active
// controller (any more): the client's request gets NOT_CONTROLLER, which
// clients retry, and the outcome of a proposal in flight is unknown.
var errNotController = errors.New("node: not the active controller")

// commit proposes records as one metadata change and calls done once they
// are committed and applied here, or with the error that stopped them.
// Only the active controller commits; its callers validated the records
// against the image and the changes in flight.
func (b *Broker) commit(records []raftmeta.Record, done func(error)) {
	if b.meta.activeTerm == 0 {
		b.env.Loop.Post(func() { done(errNotController) })
		return
	}
	data, err := encodeEntry(records)
	if err != nil {
		b.env.Loop.Post(func() { done(fmt.Errorf("node: commit metadata: %w", err)) })
		return
	}
	b.meta.node.Propose(data, func(err error) {
		if err != nil {
			done(fmt.Errorf("node: commit metadata: %w", err))
			return
		}
		done(nil)
	})
}

// kafkaRecords is how many records Kafka's log would hold for r: a topic's
// creation is a TopicRecord and a PartitionRecord per partition there, as
// are new partitions; everything else is one.
func kafkaRecords(r raftmeta.Record) int {
	switch r := r.(type) {
	case raftmeta.CreateTopicRecord:
		return 1 + len(r.Topic.Partitions)
	case raftmeta.CreatePartitionsRecord:
		return len(r.Partitions)
	}
	return 1
}

// encodeEntry lays out a batch of records as one raft entry: a count, then
// each record's binary encoding (raftmeta/codec.go) behind its length, all
// as uvarints. (Entries of older versions hold JSON records, which
// decodeEntry still reads: DecodeRecord tells them apart.)
func encodeEntry(records []raftmeta.Record) ([]byte, error) {
	out := binary.AppendUvarint(nil, uint64(len(records)))
	var rec []byte
	for _, r := range records {
		var err error
		if rec, err = raftmeta.AppendBinaryRecord(rec[:0], r); err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(rec)))
		out = append(out, rec...)
	}
	return out, nil
}

// decodeEntry is encodeEntry's inverse.
func decodeEntry(p []byte) ([]raftmeta.Record, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return nil, errors.New("bad record count")
	}
	p = p[k:]
	records := make([]raftmeta.Record, 0, n)
	for i := uint64(0); i < n; i++ {
		size, k := binary.Uvarint(p)
		if k <= 0 || size > uint64(len(p)-k) {
			return nil, fmt.Errorf("record %d: bad length", i)
		}
		r, err := raftmeta.DecodeRecord(p[k : k+int(size)])
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		records = append(records, r)
		p = p[k+int(size):]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d bytes after the last record", len(p))
	}
	return records, nil
}

// applyMembership follows a committed change of the quorum's members: the
// transport learns the addresses of new voters (the change's Context, and
// the other voters' an AddRaftVoter context carries), and so does
// voterAddrs, which snapshots carry (metadata_voters.go).
func (b *Broker) applyMembership(e quorum.Applied) {
	for _, c := range e.ConfChange.Changes {
		id := c.GetNodeId()
		switch c.GetType() {
		case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
			addr, others := parseVoterContext(e.ConfChange.Context)
			if addr != "" {
				b.learnVoterAddr(id, addr)
			}
			for _, v := range others {
				if oid := raftIDOf(v.ID); oid != id {
					b.learnVoterAddr(oid, v.Addr())
				}
			}
		case raftpb.ConfChangeType_ConfChangeRemoveNode:
			b.forgetVoterAddr(id)
		}
	}
}

// waiters is a list of callbacks woken together.
type waiters []func(error)

func (w *waiters) add(f func(error)) { *w = append(*w, f) }

func (w *waiters) wake(err error) {
	due := *w
	*w = nil
	for _, f := range due {
		f(err)
	}
}
