package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/internal/invariants"
)

// Config configures a Node. Zero fields take their defaults.
type Config struct {
	// ID is this node's raft id, never 0 (the broker maps Kafka's node.id n
	// to n+1). An id must never be reused for another node, even after its
	// removal.
	ID uint64
	// Dir is the directory of the raft log, snapshots and hard state in
	// env.FS, e.g. "__cluster_metadata-0".
	Dir string
	// Voters are the initial voters, used only to bootstrap an empty
	// directory; every voter of a new quorum must be given the same set
	// (the order does not matter: it is sorted). A node whose ID is not
	// among them starts with no configuration and waits to be added (as a
	// learner, by the leader).
	Voters []uint64
	// TickInterval is raft's tick (default 50ms), timed by env.Clock timers.
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks (defaults 10 and 1): with the default
	// tick, a follower that hears no leader campaigns after 0.5 to 1 s.
	ElectionTicks, HeartbeatTicks int
	// SnapshotEntries: a snapshot of the state machine is taken every this
	// many applied entries (default 20000).
	SnapshotEntries uint64
	// SnapshotBytes: or every this many bytes of applied entry data
	// (default 20 MiB, Kafka's
	// metadata.log.max.record.bytes.between.snapshots).
	SnapshotBytes int64
	// SnapshotInterval: or once this long has passed since the last
	// snapshot (or the start) with entries applied since (Kafka's
	// metadata.log.max.snapshot.interval.ms). Zero never snapshots by time.
	SnapshotInterval time.Duration
	// CompactionMargin, SegmentBytes: see StorageConfig.
	CompactionMargin uint64
	SegmentBytes     int64
	// Logger receives the node's and raft's logs; nil discards them.
	Logger *slog.Logger
	// OnFailure, if set, runs on the loop once when the node stops by error
	// (a write that failed, a state machine that returned an error, an
	// entry that cannot be read): the node then refuses everything, and
	// only a new Node opened on the directory can go on.
	OnFailure func(error)
}

// Defaults of Config.
const (
	DefaultTickInterval    = 50 * time.Millisecond
	DefaultElectionTicks   = 10
	DefaultHeartbeatTicks  = 1
	DefaultSnapshotEntries = 20000
	DefaultSnapshotBytes   = 20 << 20
	// MaxEntryBytes bounds the data of one proposal, as Kafka bounds a
	// metadata batch (8 MiB).
	MaxEntryBytes = 8 << 20
)

func (c Config) withDefaults() (Config, error) {
	if c.ID == 0 {
		return c, errors.New("metadata quorum: ID must not be 0")
	}
	if c.Dir == "" {
		return c, errors.New("metadata quorum: Dir is required")
	}
	if c.TickInterval < 0 || c.ElectionTicks < 0 || c.HeartbeatTicks < 0 || c.SnapshotBytes < 0 || c.SnapshotInterval < 0 {
		return c, fmt.Errorf("metadata quorum: negative TickInterval %v, ElectionTicks %d, HeartbeatTicks %d, SnapshotBytes %d or SnapshotInterval %v",
			c.TickInterval, c.ElectionTicks, c.HeartbeatTicks, c.SnapshotBytes, c.SnapshotInterval)
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return c, fmt.Errorf("metadata quorum: ElectionTicks %d must exceed HeartbeatTicks %d", c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = DefaultSnapshotBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	voters := slices.Clone(c.Voters)
	slices.Sort(voters)
	voters = slices.Compact(voters)
	if len(voters) > 0 && voters[0] == 0 {
		return c, errors.New("metadata quorum: voter id 0 is not allowed")
	}
	c.Voters = voters
	return c, nil
}

// StateMachine is what the quorum replicates into. Every method runs on
// the node's loop; none may block.
type StateMachine interface {
	// Apply applies a committed entry, in index order, every index once.
	// A leader's empty entry (the first of each term) comes with neither
	// Data nor ConfChange: it changes nothing but the applied index, which
	// a caller waiting for the state to reach a commit index needs to see
	// move (a log may end in one). An error stops the node: it means a bug
	// or corruption, and the entry's effect on the state is unknown.
	Apply(e Applied) error
	// Snapshot returns the state as of the last applied entry.
	Snapshot() ([]byte, error)
	// Restore replaces the state by a snapshot's, taken at index.
	Restore(index uint64, data []byte) error
	// LeaderChanged reports that the leader or term raft knows moved
	// (leader 0: none known, as while an election runs).
	LeaderChanged(leader, term uint64)
	// Activated reports that this node leads term and has applied every
	// entry of earlier terms (its own term's first entry is applied): a
	// controller may now decide from the state.
	Activated(term uint64)
}

// Applied is a committed entry: its data as proposed (Data), a membership
// change (ConfChange, with the configuration it led to in ConfState), or
// neither: a leader's empty entry.
type Applied struct {
	Index, Term uint64
	Data        []byte
	ConfChange  *pb.ConfChangeV2
	ConfState   *pb.ConfState
}

// Sender carries raft's messages to the other nodes. Send never blocks
// and takes ownership of msgs: it may batch them per peer, and drop any (raft
// retries). Messages from peers come back through Node.Step; a MsgSnap's
// fate goes back through Node.ReportSnapshot, and a peer found unreachable
// may be told through Node.ReportUnreachable.
type Sender interface {
	Send(msgs []*pb.Message)
}

// Errors of proposals and membership changes.
var (
	// ErrNotLeader: the node does not lead, so it cannot propose. The
	// proposal was not made; send it to the leader (Leader) instead.
	ErrNotLeader = errors.New("metadata quorum: not the leader")
	// ErrLeadershipLost: the node stopped leading (or lost and regained
	// leadership, in a new term) before the entry was applied. Its outcome
	// is unknown: it may have reached a quorum and be applied by the new
	// leader, or be gone. A caller that needs to know must read the state.
	ErrLeadershipLost = errors.New("metadata quorum: leadership lost before the entry was applied; its outcome is unknown")
	// ErrLeadershipUnconfirmed: ConfirmLeadership's term ended before a
	// quorum confirmed it; the node may have been deposed already when
	// it was called.
	ErrLeadershipUnconfirmed = errors.New("metadata quorum: leadership ended before a quorum confirmed it")
	// ErrClosed: the node is closed. A proposal pending at Close has an
	// unknown outcome, as with ErrLeadershipLost.
	ErrClosed = errors.New("metadata quorum: node closed")
	// ErrMembershipChangePending: a membership change proposed here is not
	// applied yet; raft takes one at a time.
	ErrMembershipChangePending = errors.New("metadata quorum: a membership change is already in progress")
	// ErrMembershipChangeRefused: raft refused the change when it reached
	// the log (another change was unapplied, or a joint configuration
	// must be left first); it was not made.
	ErrMembershipChangeRefused = errors.New("metadata quorum: membership change refused by raft")
	// ErrEntryTooLarge: the data exceeds MaxEntryBytes.
	ErrEntryTooLarge = errors.New("metadata quorum: entry too large")
)

// Raft's own ErrProposalDropped (a leadership transfer is in progress, or
// the uncommitted tail is too large) is passed on as it is: the proposal was
// not made.

type nodeState int

const (
	stateOpened   nodeState = iota // Open returned, Start not called
	stateStarting                  // making what recovery read durable
	stateRunning
	stateClosing // waiting for the writes in flight
	stateClosed
	stateFailed
)

// Node drives one raft member on its node's loop: ticks from env.Clock
// timers, one Ready at a time made durable before its messages leave and
// its entries are applied, proposals matched to the entries they became.
// Every method must be called on the loop; none blocks, and callbacks run on
// later loop turns, never inside the call that registered them.
type Node struct {
	e   env.Env
	cfg Config
	sm  StateMachine
	t   Sender
	st  *Storage
	rn  *raft.RawNode
	log *slog.Logger
	// campaigned says this process has started its sole voter's election
	// (campaignIfSole).
	campaigned bool

	state  nodeState
	err    error // why the node failed
	ticker env.Timer
	// posted says a loop turn is queued to handle the next Ready; inReady
	// that a Ready is being made durable (raft hands out one at a time).
	posted, inReady bool
	closeDone       func(error)

	// Proposals: nonce tells this incarnation's entries from an earlier
	// one's (seq restarts at every Open); pending are the proposals made
	// in pendingTerm and not applied yet, in seq order (the order of their
	// entries in the log).
	nonce, seq  uint64
	pending     []*proposal
	pendingTerm uint64
	confPending bool // a membership change proposed here is pending
	completions []completion
	// reads are the ConfirmLeadership calls not answered yet, in the
	// order made (node_confirm.go).
	reads   []*leaderRead
	readSeq uint64

	// What the state machine has been told and has applied.
	lead, term     uint64 // as last reported by LeaderChanged
	activated      uint64 // the term last reported by Activated
	applied        uint64
	appliedTerm    uint64
	confState      *pb.ConfState
	snapIndex      uint64 // the latest snapshot taken or restored
	bytesSinceSnap int64
	// snapTime is when the last snapshot was taken or installed, or the
	// node opened: SnapshotInterval counts from it.
	snapTime     time.Time
	snapshotting bool

	// sabotage is a test-only hook: it breaks the driver in a named way, to
	// show that the simulation's checks catch it.
	sabotage sabotage
}

type sabotage int

const (
	sabotageNone sabotage = iota
	// sabotageSendBeforeSync sends a Ready's messages before its entries
	// and hard state are durable.
	sabotageSendBeforeSync
)

type proposal struct {
	seq  uint64
	conf bool
	done func(error)
}

type completion struct {
	done func(error)
	err  error
}

// Open recovers the quorum's storage in cfg.Dir, restores the latest
// snapshot into sm, and returns a node ready to Start. A directory that is
// empty is bootstrapped when cfg.ID is among cfg.Voters. Damage recovery
// cannot take for a crash's doing is a *CorruptError (see OpenStorage).
func Open(e env.Env, cfg Config, sm StateMachine, t Sender) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if sm == nil || t == nil {
		return nil, errors.New("metadata quorum: a state machine and a transport are required")
	}
	log := cfg.Logger.With("raft.id", cfg.ID)
	scfg := StorageConfig{Dir: cfg.Dir, SegmentBytes: cfg.SegmentBytes, CompactionMargin: cfg.CompactionMargin, Logger: log}
	st, err := OpenStorage(e, scfg)
	if err != nil {
		return nil, err
	}
	if st, err = rebootstrapIfTorn(e, cfg, scfg, st, log); err != nil {
		return nil, err
	}
	n := &Node{e: e, cfg: cfg, sm: sm, t: t, st: st, log: log, nonce: e.Rand.Uint64(), snapTime: e.Clock.Now()}
	snap := st.snap
	md := snap.GetMetadata()
	n.confState = pb.EnsureConfState(md.GetConfState())
	if !raft.IsEmptySnap(snap) {
		if err := sm.Restore(md.GetIndex(), snap.GetData()); err != nil {
			st.Close()
			return nil, fmt.Errorf("metadata quorum: restore snapshot %d: %w", md.GetIndex(), err)
		}
		n.applied, n.appliedTerm, n.snapIndex = md.GetIndex(), md.GetTerm(), md.GetIndex()
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   n.applied,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    raftLogger{log},
		// Proposals are made on the leader only (ErrNotLeader elsewhere),
		// so every entry of a term is its leader's: that is what lets
		// applied entries be matched to proposals in order.
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
	})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("metadata quorum: %w", err)
	}
	n.rn = rn
	if st.lastIndex() == 0 && raft.IsEmptySnap(snap) && slices.Contains(cfg.Voters, cfg.ID) {
		peers := make([]raft.Peer, len(cfg.Voters))
		for i, id := range cfg.Voters {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			st.Close()
			return nil, fmt.Errorf("metadata quorum: bootstrap: %w", err)
		}
		log.Info("metadata quorum bootstrapped", "voters", cfg.Voters)
	}
	return n, nil
}

// Start makes what recovery read durable (a killed process may have left it
// in the page cache only), then starts ticking and handling raft's work.
func (n *Node) Start() {
	if n.state != stateOpened {
		return
	}
	n.state = stateStarting
	n.st.Sync(func(err error) {
		if n.state != stateStarting {
			n.finishClose()
			return
		}
		if err != nil {
			n.fail(fmt.Errorf("make recovered state durable: %w", err))
			return
		}
		n.state = stateRunning
		n.armTicker()
		n.schedule()
	})
}

// campaignIfSole starts an election at once, once per process, on a node
// that is the only voter of a configuration not changing and has applied
// what it knows committed (raft refuses to campaign with configuration
// changes unapplied): a quorum of one need not wait out an election
// timeout, so a single node serves half a second to a second sooner after
// every start.
func (n *Node) campaignIfSole() {
	if n.campaigned || n.rn.BasicStatus().RaftState != raft.StateFollower || !n.soleVoter() ||
		n.applied < n.rn.BasicStatus().GetCommit() {
		return
	}
	n.campaigned = true
	if err := n.rn.Campaign(); err != nil {
		n.log.Warn("metadata quorum: the sole voter's campaign failed; its election timeout will start one", "err", err)
	}
}

// soleVoter says this node is the only voter of a configuration that is not
// changing.
func (n *Node) soleVoter() bool {
	cfg := n.rn.Status().Config
	ids := cfg.Voters.IDs()
	_, self := ids[n.cfg.ID]
	return len(ids) == 1 && self && len(cfg.Voters[1]) == 0
}

// armTicker arms raft's next tick. No tick counts while a Ready is being
// made durable: raft's clock stands still while the disk holds it up. A
// candidate's vote for itself is stepped only once its hard state is
// durable (at Advance), so with syncs slower than the election timeout a
// ticking candidate would start a new election before it could count its
// own vote, forever: a single voter on a slow disk never elected itself
// (the node tests found it, at one second per sync). Ticks only decide
// timeouts, never safety, and a node whose disk is that slow could not
// have sent the heartbeats or votes those ticks would have made anyway.
func (n *Node) armTicker() {
	n.ticker = n.e.Clock.AfterFunc(n.cfg.TickInterval, func() {
		if n.state != stateRunning {
			return
		}
		if !n.inReady {
			n.rn.Tick()
			n.schedule()
			// A snapshot may come due by time alone.
			n.maybeSnapshot()
		}
		n.armTicker()
	})
}

// live says raft may be stepped: the node is starting or running.
func (n *Node) live() bool { return n.state == stateStarting || n.state == stateRunning }

// Step hands raft a message from a peer. Messages that arrive before Start
// or after Close are dropped; raft retries.
func (n *Node) Step(m *pb.Message) {
	if !n.live() || m == nil {
		return
	}
	if m.GetType() == pb.MsgProp {
		return // no node forwards proposals (DisableProposalForwarding)
	}
	if err := n.rn.Step(m); err != nil {
		n.log.Debug("raft message dropped", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
	n.schedule()
}

// ReportUnreachable tells raft that the last message to id was not
// delivered, so it stops sending optimistically and probes.
func (n *Node) ReportUnreachable(id uint64) {
	if n.live() {
		n.rn.ReportUnreachable(id)
		n.schedule()
	}
}

// ReportSnapshot tells raft whether the MsgSnap sent to id arrived.
func (n *Node) ReportSnapshot(id uint64, failed bool) {
	if n.live() {
		status := raft.SnapshotFinish
		if failed {
			status = raft.SnapshotFailure
		}
		n.rn.ReportSnapshot(id, status)
		n.schedule()
	}
}

// schedule queues one loop turn to handle the next Ready, if none is queued.
func (n *Node) schedule() {
	if n.posted || n.state != stateRunning {
		return
	}
	n.posted = true
	n.e.Loop.Post(func() {
		n.posted = false
		n.handleReady()
	})
}

// handleReady takes the next Ready, if raft has one and none is in flight,
// and makes it durable.
func (n *Node) handleReady() {
	if n.inReady || n.state != stateRunning || !n.rn.HasReady() {
		return
	}
	rd := n.rn.Ready()
	n.inReady = true
	if n.sabotage == sabotageSendBeforeSync {
		n.t.Send(rd.Messages)
		rd.Messages = nil
	}
	n.st.Save(rd.HardState, rd.Entries, rd.Snapshot, func(err error) { n.afterSave(rd, err) })
}

// afterSave finishes a Ready once it is durable: its messages leave, its
// snapshot and committed entries are applied, raft is told (Advance), and
// the node reports leadership, completes proposals and snapshots as due.
func (n *Node) afterSave(rd raft.Ready, err error) {
	n.inReady = false
	if n.state != stateRunning {
		n.finishClose()
		return
	}
	if err != nil {
		n.fail(err)
		return
	}
	if len(rd.Messages) > 0 {
		if !n.freshenSnapshots(rd.Messages) {
			return
		}
		n.t.Send(rd.Messages)
	}
	if !raft.IsEmptySnap(rd.Snapshot) && !n.restore(rd.Snapshot) {
		return
	}
	n.observeLeadership()
	if !n.applyEntries(rd.CommittedEntries) {
		return
	}
	n.confirmReads(rd.ReadStates)
	n.rn.Advance(rd)
	n.campaignIfSole()
	n.dropLostProposals()
	n.completeReads()
	n.maybeActivate()
	n.flushCompletions()
	n.maybeSnapshot()
	n.schedule()
}

// freshenSnapshots replaces the snapshot of every MsgSnap by one of the
// state machine as applied now, as etcd's server does. raft sends the
// latest snapshot in storage, which may predate the recipient's own
// addition to the configuration: a learner added since would refuse it (it
// is not in its ConfState) and, with no newer snapshot due while no entries
// are applied, never catch up. A fresh one also leaves fewer entries to
// replay. raft's progress takes the higher index the follower then
// acknowledges. It returns false if the node failed.
func (n *Node) freshenSnapshots(msgs []*pb.Message) bool {
	var fresh *pb.Snapshot
	for _, m := range msgs {
		if m.GetType() != pb.MsgSnap || m.GetSnapshot().GetMetadata().GetIndex() >= n.applied {
			continue
		}
		if fresh == nil {
			data, err := n.sm.Snapshot()
			if err != nil {
				n.fail(fmt.Errorf("snapshot the state machine at %d for a follower: %w", n.applied, err))
				return false
			}
			fresh = &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
				ConfState: proto.Clone(n.confState).(*pb.ConfState),
				Index:     new(n.applied),
				Term:      new(n.st.term(n.applied)),
			}}
		}
		m.Snapshot = fresh
	}
	return true
}

// restore replaces the state machine's state by a snapshot received from
// the leader, now durable.
func (n *Node) restore(snap *pb.Snapshot) bool {
	md := snap.GetMetadata()
	if err := n.sm.Restore(md.GetIndex(), snap.GetData()); err != nil {
		n.fail(fmt.Errorf("restore snapshot %d from the leader: %w", md.GetIndex(), err))
		return false
	}
	n.applied, n.appliedTerm, n.snapIndex, n.bytesSinceSnap = md.GetIndex(), md.GetTerm(), md.GetIndex(), 0
	n.snapTime = n.e.Clock.Now()
	n.confState = pb.EnsureConfState(md.GetConfState())
	n.log.Info("metadata snapshot restored from the leader", "index", md.GetIndex(), "term", md.GetTerm())
	return true
}

// observeLeadership reports a move of raft's leader or term, once the
// term is durable: raft may have moved to a newer term (a message stepped
// while the last Ready was being saved) that a power loss would take back,
// since nothing was sent in it yet; the next Ready saves it and reports it.
func (n *Node) observeLeadership() {
	bs := n.rn.BasicStatus()
	lead, term := bs.Lead, bs.GetTerm()
	if lead == n.lead && term == n.term || term > n.st.HardState().GetTerm() {
		return
	}
	n.lead, n.term = lead, term
	n.sm.LeaderChanged(lead, term)
}

// maybeActivate reports Activated once this node leads and has applied an
// entry of its own term (the first of which is its empty entry, after every
// entry of earlier terms).
func (n *Node) maybeActivate() {
	if n.state == stateRunning && n.lead == n.cfg.ID && n.appliedTerm == n.term && n.activated != n.term {
		n.activated = n.term
		n.sm.Activated(n.term)
	}
}

// maybeSnapshot snapshots the state machine once enough entries or bytes
// were applied since the last snapshot, or enough time passed with any,
// one snapshot at a time.
func (n *Node) maybeSnapshot() {
	if n.snapshotting || n.state != stateRunning || n.applied <= n.snapIndex {
		return
	}
	now := n.e.Clock.Now()
	byTime := n.cfg.SnapshotInterval > 0 && now.Sub(n.snapTime) >= n.cfg.SnapshotInterval
	if n.applied-n.snapIndex < n.cfg.SnapshotEntries && n.bytesSinceSnap < n.cfg.SnapshotBytes && !byTime {
		return
	}
	n.snapTime = now
	data, err := n.sm.Snapshot()
	if err != nil {
		n.fail(fmt.Errorf("snapshot the state machine at %d: %w", n.applied, err))
		return
	}
	index := n.applied
	n.snapIndex, n.bytesSinceSnap, n.snapshotting = index, 0, true
	n.st.CreateSnapshot(index, n.confState, data, func(err error) {
		n.snapshotting = false
		switch {
		case n.state != stateRunning:
			n.finishClose()
		case err != nil:
			n.fail(fmt.Errorf("snapshot at %d: %w", index, err))
		default:
			n.log.Debug("metadata snapshot taken", "index", index)
		}
	})
}

// fail stops the node for good: no more ticks, writes or applies; pending
// proposals fail with err.
func (n *Node) fail(err error) {
	if n.state == stateFailed || n.state == stateClosing || n.state == stateClosed {
		return
	}
	n.state, n.err = stateFailed, err
	n.stopTicker()
	n.failPending(err)
	n.failReads(err)
	n.flushCompletions()
	n.log.Error("metadata quorum node stopped", "err", err)
	if n.cfg.OnFailure != nil {
		n.e.Loop.Post(func() { n.cfg.OnFailure(err) })
	}
}

func (n *Node) stopTicker() {
	if n.ticker != nil {
		n.ticker.Stop()
		n.ticker = nil
	}
}

// Err returns why the node stopped by error, or nil.
func (n *Node) Err() error { return n.err }

// Close stops ticking, fails pending proposals with ErrClosed, waits for the
// writes in flight (their results are dropped: the messages of a Ready
// still being made durable are never sent), closes the files and calls done.
func (n *Node) Close(done func(error)) {
	if n.state == stateClosing || n.state == stateClosed {
		n.e.Loop.Post(func() { done(ErrClosed) })
		return
	}
	n.state = stateClosing
	n.closeDone = done
	n.stopTicker()
	n.failPending(ErrClosed)
	n.failReads(ErrClosed)
	n.flushCompletions()
	n.finishClose()
}

// finishClose closes the storage once nothing is in flight.
func (n *Node) finishClose() {
	if n.state != stateClosing || n.inReady || n.snapshotting {
		return
	}
	n.state = stateClosed
	err := n.st.Close()
	done := n.closeDone
	n.closeDone = nil
	n.e.Loop.Post(func() { done(err) })
}

// Leader returns the leader raft knows (0 for none) and the current term.
func (n *Node) Leader() (id, term uint64) {
	bs := n.rn.BasicStatus()
	return bs.Lead, bs.GetTerm()
}

func (n *Node) assertf(ok bool, format string, args ...any) {
	if invariants.Enabled && !ok {
		invariants.Panicf("quorum node %d: "+format, append([]any{n.cfg.ID}, args...)...)
	}
}

// rebootstrapIfTorn starts the bootstrap of a voter over when a crash cut
// it short. Bootstrapping appends one configuration entry per voter (term 1,
// indexes 1 to n) and a hard state that commits them, in one Ready whose
// segment and hard state are synced side by side: a crash may keep either,
// or a prefix of the entries. Such a directory holds fewer than n entries
// and no snapshot, and its hard state is at most term 1 with no vote (raft
// neither campaigns nor votes before that Ready is durable). Left as it is,
// it has no configuration (the entries that carry it are not committed, or
// not all there),
// and the node never campaigns (the simulator found it: four seeds in
// sixty of the first single-node sweep on the quorum); or its hard state
// commits entries it lacks, which raft refuses. Every voter's bootstrap
// entries are the same bytes, so the directory is emptied and bootstrapped
// again. A directory without a snapshot whose log or commit stops short of
// the bootstrap entries but holds a later term, a vote or more entries is
// damage, and an error.
func rebootstrapIfTorn(e env.Env, cfg Config, scfg StorageConfig, st *Storage, log *slog.Logger) (*Storage, error) {
	n := uint64(len(cfg.Voters))
	last, commit := st.lastIndex(), st.hs.GetCommit()
	if !raft.IsEmptySnap(st.snap) || !slices.Contains(cfg.Voters, cfg.ID) || (last >= n && commit >= n) {
		return st, nil // bootstrapped (a completed bootstrap durably commits its n entries), or not a voter's
	}
	if last == 0 && commit == 0 {
		return st, nil // empty, or a hard state alone that commits nothing: Bootstrap takes it
	}
	if st.hs.GetTerm() > 1 || st.hs.GetVote() != 0 || last > n {
		st.Close()
		return nil, &CorruptError{Dir: cfg.Dir, File: hardStateName, Reason: fmt.Sprintf(
			"the hard state is at term %d with vote %d and commits %d, and the log holds %d entries and no snapshot: "+
				"not a bootstrap of %d voters a crash cut short", st.hs.GetTerm(), st.hs.GetVote(), commit, last, n)}
	}
	log.Warn("metadata quorum: a crash cut the bootstrap short; bootstrapping again",
		"entries", st.lastIndex(), "of", n, "commit", st.hs.GetCommit())
	if err := st.Close(); err != nil {
		return nil, err
	}
	names, err := e.FS.List(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("metadata quorum: list %s: %w", cfg.Dir, err)
	}
	for _, name := range names {
		if err := e.FS.Remove(cfg.Dir + "/" + name); err != nil {
			return nil, fmt.Errorf("metadata quorum: remove %s/%s to bootstrap again: %w", cfg.Dir, name, err)
		}
	}
	return OpenStorage(e, scfg)
}
