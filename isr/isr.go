package isr

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
)

// NoLeader is the leader id of a partition without one.
const NoLeader int32 = -1

// Metadata is the partition's committed state, as the metadata log has it.
type Metadata struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// Replicas are every broker that holds the partition, ISR those in sync.
	Replicas []int32
	ISR      []int32
}

// Config is what a replica needs to know beyond the metadata.
type Config struct {
	// ID is this replica's broker id.
	ID int32
	// ReplicaLagTimeMax is how long a follower may stay behind before it
	// leaves the ISR (replica.lag.time.max.ms).
	ReplicaLagTimeMax time.Duration
	// MinInSync is min.insync.replicas.
	MinInSync int
	// CheckTruncation asserts (with the invariants tag) that a follower
	// never truncates below its high watermark, and that a leader never
	// finds a member of the committed ISR, heard from in its epoch, short
	// of its high watermark: true when positions are durable and elections
	// clean, which together make every record below a high watermark
	// survive on every later leader.
	CheckTruncation bool
}

// Role is what the metadata makes of this replica.
type Role int8

const (
	// RoleNone: the partition has no leader, or this broker is not a
	// replica: nothing is served or fetched.
	RoleNone Role = iota
	RoleLeader
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// MessageType says what a Message tells the replica.
type MessageType int8

const (
	// MsgMetadata: the committed metadata changed (Meta).
	MsgMetadata MessageType = iota + 1
	// MsgLocal: this replica's log moved (Local).
	MsgLocal
	// MsgFetch (leader): follower Replica fetched at Offset, at Now, as the
	// incarnation of broker epoch BrokerEpoch (-1 unknown).
	MsgFetch
	// MsgTick: time passed; the leader checks for lagging followers.
	MsgTick
	// MsgAlterDone (leader): the controller answered the ISR change in
	// flight: Err nil with the committed Meta, or the error.
	MsgAlterDone
	// MsgEpochEnd (follower): the leader answered the epoch query with
	// Epoch and Offset (its end offset for the latest epoch at or below the
	// one asked; -1, -1 when it has none), and the node looked up its own
	// log: LocalEpoch and LocalOffset are its own end for Epoch (see
	// log.EndOffsetForEpoch).
	MsgEpochEnd
	// MsgFetched (follower): a fetch response from the leader said its high
	// watermark is Offset; Local is the log after its records were
	// appended.
	MsgFetched
	// MsgTruncated (follower): the truncation asked for is done (Local: the
	// log afterwards).
	MsgTruncated
)

// Local is this replica's own log: its start and end, the epoch of its
// last batch (-1: empty), and Position, what of it counts toward the high
// watermark (see the package doc): at most the end.
type Local struct {
	LogStart, LogEnd, Position int64
	LatestEpoch                int32
}

// Message is one input to Step. Only the fields its type names are read;
// Local is read by every type but MsgTick and MsgAlterDone.
type Message struct {
	Type        MessageType
	Now         time.Time
	Meta        Metadata
	Local       Local
	Replica     int32
	Offset      int64
	Epoch       int32
	LocalEpoch  int32
	LocalOffset int64
	BrokerEpoch int64
	Err         error
}

// AlterISR is an ISR change for the node to send to the controller
// (AlterPartition), made against the epochs it names.
type AlterISR struct {
	ISR            []int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// EpochQuery asks the node to send OffsetForLeaderEpoch to Leader, at
// CurrentLeaderEpoch, for Epoch (the follower's latest), and to answer with
// MsgEpochEnd.
type EpochQuery struct {
	Leader             int32
	CurrentLeaderEpoch int32
	Epoch              int32
}

// Ready is what the node should do, collected since the last Ready.
type Ready struct {
	// HighWatermark is set when the high watermark moved (to it).
	HighWatermark int64
	HWMoved       bool
	// Alter is an ISR change to propose; at most one is in flight, until
	// MsgAlterDone.
	Alter *AlterISR
	// Query asks for the leader's end offset of an epoch (follower).
	Query *EpochQuery
	// TruncateTo asks the node to remove every record at or after the
	// offset, then to step MsgTruncated (-1: none).
	TruncateTo int64
	// Fetch says the follower may fetch from Leader at LeaderEpoch from its
	// log end (its truncation is done); it stays true until the role
	// changes.
	Fetch bool
}

// Empty says there is nothing to do.
func (rd Ready) Empty() bool {
	return !rd.HWMoved && rd.Alter == nil && rd.Query == nil && rd.TruncateTo < 0
}

// follower is the leader's view of one other replica.
type follower struct {
	id int32
	// offset is its last fetch offset, -1 before its first fetch in this
	// epoch.
	offset int64
	// caughtUp is when it last was caught up (see the package doc).
	caughtUp time.Time
	// lastFetch is its previous fetch's time, lastFetchLeaderEnd the
	// leader's log end then.
	lastFetch          time.Time
	lastFetchLeaderEnd int64
	// brokerEpoch is the broker epoch its last fetch came from.
	brokerEpoch int64
}

// followerPhase is a follower's progress in its epoch.
type followerPhase int8

const (
	// phaseQuery: waiting for the answer to the epoch query.
	phaseQuery followerPhase = iota
	// phaseTruncate: waiting for the truncation to be done.
	phaseTruncate
	// phaseFetch: fetching.
	phaseFetch
)

type stepFunc func(r *Replica, m Message)

// Replica is one replica of a partition on this broker.
type Replica struct {
	cfg  Config
	meta Metadata
	role Role
	step stepFunc

	// local is the replica's own log; its LatestEpoch is what a follower
	// asks the leader about.
	local Local

	hw      int64
	hwMoved bool

	// Leader state.
	followers []follower
	// epochStart is the log end when this replica became leader: the
	// first offset of its epoch. A follower joins the ISR only past it,
	// and ListOffsets' latest waits for the high watermark to reach it
	// (KIP-207).
	epochStart int64
	// pending is the ISR change in flight; proposed says Ready has handed
	// it out.
	pending  *AlterISR
	proposed bool
	// refusedEpoch is the partition epoch at which the controller called
	// a change stale (-1 none): nothing more is proposed until the
	// metadata moves past it. staleTicks counts the ticks the refused
	// change has waited for that metadata (retryStale).
	refusedEpoch int32
	staleTicks   int

	// Follower state.
	phase      followerPhase
	query      *EpochQuery
	truncateTo int64
	// truncationDone says the truncation asked for completes the
	// follower's reconciliation; false: another epoch query follows it.
	truncationDone bool
	// leaderHW is the leader's high watermark in its last fetch response.
	leaderHW int64
}

// New returns the replica with its log as recovered (hw: the high
// watermark it last knew, at most the log end) and no role until the
// first MsgMetadata.
func New(cfg Config, local Local, hw int64) *Replica {
	r := &Replica{cfg: cfg, local: local, hw: hw, truncateTo: -1, refusedEpoch: -1, step: stepNone}
	r.checkOffsets()
	return r
}

// Role is this replica's role.
func (r *Replica) Role() Role { return r.role }

// Metadata is the committed state the replica follows.
func (r *Replica) Metadata() Metadata { return r.meta }

// HighWatermark is the high watermark as this replica knows it.
func (r *Replica) HighWatermark() int64 { return r.hw }

// EpochStart is the offset at which this leader's epoch began.
func (r *Replica) EpochStart() int64 { return r.epochStart }

// InSync is the committed ISR's size.
func (r *Replica) InSync() int { return len(r.meta.ISR) }

// MinInSync is the effective min.insync.replicas: at most the replicas.
func (r *Replica) MinInSync() int {
	return max(1, min(r.cfg.MinInSync, len(r.meta.Replicas)))
}

// UnderMinISR says acks=all writes must be refused (NOT_ENOUGH_REPLICAS)
// and the high watermark stands still.
func (r *Replica) UnderMinISR() bool { return r.InSync() < r.MinInSync() }

// SetMinInSync changes min.insync.replicas (a topic config change).
func (r *Replica) SetMinInSync(n int) {
	r.cfg.MinInSync = n
	if r.role == RoleLeader {
		r.maybeAdvance()
	}
}

// FollowerBrokerEpoch is the broker epoch of follower id's last fetch in
// this epoch (-1 unknown): an ISR change names it, so that the controller
// refuses the change if that incarnation is gone (KIP-903).
func (r *Replica) FollowerBrokerEpoch(id int32) int64 {
	if f := r.followerOf(id); f != nil && f.offset >= 0 {
		return f.brokerEpoch
	}
	return -1
}

// FollowerOffset is the last fetch offset of follower id (-1 unknown).
func (r *Replica) FollowerOffset(id int32) int64 {
	if f := r.followerOf(id); f != nil {
		return f.offset
	}
	return -1
}

// FollowerCaughtUp is when follower id was last caught up with the
// leader's log end (zero unknown), for KIP-392's preferred read replica.
func (r *Replica) FollowerCaughtUp(id int32) time.Time {
	if f := r.followerOf(id); f != nil {
		return f.caughtUp
	}
	return time.Time{}
}

// Step takes one input.
func (r *Replica) Step(m Message) {
	switch m.Type {
	case MsgMetadata:
		r.local = m.Local
		r.stepMetadata(m)
	case MsgTick, MsgAlterDone:
		r.step(r, m)
	default:
		r.local = m.Local
		r.step(r, m)
	}
	r.checkOffsets()
}

// Ready returns what to do and clears it.
func (r *Replica) Ready() Ready {
	rd := Ready{TruncateTo: -1}
	if r.hwMoved {
		rd.HighWatermark, rd.HWMoved = r.hw, true
		r.hwMoved = false
	}
	if r.pending != nil && !r.proposed {
		a := *r.pending
		a.ISR = slices.Clone(a.ISR)
		rd.Alter = &a
		r.proposed = true
	}
	if r.query != nil {
		rd.Query = r.query
		r.query = nil
	}
	if r.truncateTo >= 0 {
		rd.TruncateTo = r.truncateTo
		r.truncateTo = -1
	}
	rd.Fetch = r.role == RoleFollower && r.phase == phaseFetch
	return rd
}

// stepMetadata follows committed metadata: a new leader or leader epoch
// starts the role afresh; otherwise the leader takes the new ISR.
func (r *Replica) stepMetadata(m Message) {
	next := m.Meta
	if next.LeaderEpoch < r.meta.LeaderEpoch || (next.LeaderEpoch == r.meta.LeaderEpoch && next.PartitionEpoch < r.meta.PartitionEpoch) {
		return // older than what the replica already follows (an answer came first)
	}
	newEpoch := next.LeaderEpoch != r.meta.LeaderEpoch || next.Leader != r.meta.Leader || r.role == RoleNone
	r.meta = cloneMetadata(next)
	switch {
	case !slices.Contains(next.Replicas, r.cfg.ID) || next.Leader == NoLeader:
		r.becomeNone()
	case next.Leader == r.cfg.ID && (newEpoch || r.role != RoleLeader):
		r.becomeLeader(m.Now)
	case next.Leader == r.cfg.ID:
		r.leaderTookISR()
	case newEpoch || r.role != RoleFollower:
		r.becomeFollower()
	}
}

// Restart starts a follower afresh, as a new epoch would: one whose log
// the leader's batches no longer continue asks about its epoch again.
func (r *Replica) Restart() {
	if r.role == RoleFollower {
		r.becomeFollower()
	}
}

func (r *Replica) becomeNone() {
	r.resetRole()
	r.role, r.step = RoleNone, stepNone
}

func (r *Replica) resetRole() {
	r.followers, r.pending, r.proposed, r.refusedEpoch = nil, nil, false, -1
	r.query, r.truncateTo, r.phase = nil, -1, phaseQuery
}

func stepNone(*Replica, Message) {}

func cloneMetadata(m Metadata) Metadata {
	m.Replicas, m.ISR = slices.Clone(m.Replicas), slices.Clone(m.ISR)
	return m
}

// checkOffsets asserts log start <= high watermark <= log end, and that a
// position never passes the log end.
func (r *Replica) checkOffsets() {
	if !invariants.Enabled {
		return
	}
	l := r.local
	if !(l.LogStart <= l.LogEnd && l.Position <= l.LogEnd && r.hw <= l.LogEnd) {
		invariants.Panicf("isr: replica %d (%s, epoch %d): want log start %d <= log end %d, position %d <= log end, high watermark %d <= log end",
			r.cfg.ID, r.role, r.meta.LeaderEpoch, l.LogStart, l.LogEnd, l.Position, r.hw)
	}
}

// String describes the replica for transcripts and failure messages.
func (r *Replica) String() string {
	s := fmt.Sprintf("%s epoch=%d pepoch=%d isr=%v hw=%d end=%d pos=%d", r.role, r.meta.LeaderEpoch, r.meta.PartitionEpoch, r.meta.ISR, r.hw, r.local.LogEnd, r.local.Position)
	switch r.role {
	case RoleLeader:
		for _, f := range r.followers {
			s += fmt.Sprintf(" f%d=%d", f.id, f.offset)
		}
		if r.pending != nil {
			s += fmt.Sprintf(" pending=%v", r.pending.ISR)
		}
	case RoleFollower:
		s += " phase=" + [...]string{"query", "truncate", "fetch"}[r.phase]
	}
	return s
}
