package quorum

import (
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/env"
)

// Receiver is the raft node a Transport delivers to (the driver's *Node
// implements it). The Transport calls it only on the loop, never from
// inside one of its own methods (Send, SetPeer, Accept, Close), and never
// after Close.
type Receiver interface {
	// Step delivers a message from a peer, on the loop.
	Step(m *raftpb.Message)
	// ReportUnreachable says a send to id failed or had no route.
	ReportUnreachable(id uint64)
	// ReportSnapshot gives the outcome of a MsgSnap handed to Send.
	ReportSnapshot(id uint64, failed bool)
}

// TransportConfig tunes a Transport. The zero value of a field means its
// default.
type TransportConfig struct {
	// MaxFrameBytes bounds one frame after its size prefix, and so one
	// message (5 bytes less), each way: a larger message is not sent, and
	// a peer that announces a larger frame is disconnected. Default 256
	// MiB, room for the snapshot of a cluster of 100,000 partitions (tens
	// of MB) several times over; between 64 bytes and math.MaxInt32.
	MaxFrameBytes int
	// MaxPendingBytes bounds what is held for one peer while its
	// connection is being dialed or is down. Messages beyond it are
	// dropped (raft tolerates loss) and reported. Default 16 MiB; a
	// snapshot larger than that goes only to a connected peer.
	MaxPendingBytes int
	// BackoffMin and BackoffMax bound the wait before a redial after a
	// failed dial or a broken connection: BackoffMin after the first
	// failure, doubling with each consecutive one up to BackoffMax, each
	// wait jittered by ±20% from env.Rand (Kafka's reconnect.backoff.ms
	// and reconnect.backoff.max.ms, and their defaults: 50ms and 1s).
	BackoffMin, BackoffMax time.Duration
	// HandshakeTimeout bounds the wait for the peer's hello on a new
	// connection, either way; a connection still silent then is closed.
	// Default 10s.
	HandshakeTimeout time.Duration
	// SnapshotAckTimeout bounds the wait for the receiver's acknowledgement
	// of a MsgSnap written to a connection. When it runs out the snapshot
	// is reported failed and the connection, which is evidently not
	// delivering, is closed and redialed. Default 1 minute.
	SnapshotAckTimeout time.Duration
	// KeepaliveInterval is how often an outbound connection that has
	// written nothing since the last interval writes a keepalive frame.
	// A connection that only receives (a learner's to a voter that is
	// not the leader, or to the leader before it speaks) would otherwise
	// never learn that the peer rebooted or that the path died, and the
	// peer could never answer it: writing makes the loss surface as a
	// reset or a retransmission timeout, and the connection is redialed.
	// Default 1s.
	KeepaliveInterval time.Duration
	// SilenceTimeout is how long a connection may go without a byte from
	// its peer before it is taken for dead, closed, and (if we dialed it)
	// redialed. Both ends write keepalives on an idle connection, so only
	// a path that holds or drops what is sent goes silent, and TCP alone
	// may take many minutes to give up on one (its retransmissions back
	// off to minutes): a learner's image would stop for as long. Default
	// three KeepaliveIntervals; more than one.
	SilenceTimeout time.Duration
}

// Defaults of TransportConfig.
const (
	DefaultMaxFrameBytes      = 256 << 20
	DefaultMaxPendingBytes    = 16 << 20
	DefaultBackoffMin         = 50 * time.Millisecond
	DefaultBackoffMax         = time.Second
	DefaultHandshakeTimeout   = 10 * time.Second
	DefaultSnapshotAckTimeout = time.Minute
	DefaultKeepaliveInterval  = time.Second
)

// minFrameBytes is the least MaxFrameBytes may be: a hello must fit.
const minFrameBytes = 64

// TransportOption changes a Transport's configuration.
type TransportOption func(*TransportConfig)

// WithTransportConfig sets every field of the configuration at once (zero
// fields keep their defaults).
func WithTransportConfig(cfg TransportConfig) TransportOption {
	return func(c *TransportConfig) { *c = cfg }
}

// withDefaults fills in the defaults and replaces values out of range,
// naming each replacement.
func (c TransportConfig) withDefaults() (TransportConfig, []string) {
	var fixed []string
	if c.MaxFrameBytes < minFrameBytes || c.MaxFrameBytes > math.MaxInt32 {
		if c.MaxFrameBytes != 0 {
			fixed = append(fixed, "MaxFrameBytes")
		}
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxPendingBytes <= 0 {
		if c.MaxPendingBytes != 0 {
			fixed = append(fixed, "MaxPendingBytes")
		}
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffMin)
	}
	if c.BackoffMax < c.BackoffMin {
		fixed = append(fixed, "BackoffMax")
		c.BackoffMax = c.BackoffMin
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.SnapshotAckTimeout <= 0 {
		c.SnapshotAckTimeout = DefaultSnapshotAckTimeout
	}
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.SilenceTimeout <= c.KeepaliveInterval {
		if c.SilenceTimeout != 0 {
			fixed = append(fixed, "SilenceTimeout")
		}
		c.SilenceTimeout = 3 * c.KeepaliveInterval
	}
	return c, fixed
}

// Transport carries raft messages between the nodes of the metadata quorum
// over env.Net, on the node's loop. The wire format is described in
// transport_frame.go.
//
// Sending. A peer with an address (SetPeer) has one outbound connection,
// dialed as soon as the address is known and kept up: after a failed dial
// or a broken connection it is redialed with capped exponential backoff
// with jitter, and at once when the peer itself connects to us meanwhile
// (it is evidently back). Send encodes the messages of one call for one
// peer into one buffer and writes it with one Conn.Write. While the
// connection is being dialed or is down, up to MaxPendingBytes per peer
// wait for it (written together with the handshake, again in one Write);
// beyond that messages are dropped, and so is everything a connection held
// when it fails.
//
// Peers without an address. A broker-only node follows the log as a raft
// learner without a CONTROLLER listener: the leader knows its id but
// cannot dial it. The learner dials every voter, and a node with no
// address for a peer sends on the most recent live inbound connection
// from that peer. Both directions of every connection carry messages.
//
// Reports. ReportUnreachable(id) follows any drop of a message to id (no
// route, the pending bound, a frame too large, a dial that failed with
// messages waiting) and the loss of a connection we had written to: at
// most once per peer per loop turn. A MsgSnap is reported exactly once:
// ReportSnapshot(id, false) when the receiving transport acknowledges that
// it decoded the snapshot and stepped it (a snapshot-ack frame back on the
// same connection), ReportSnapshot(id, true) when it was dropped before
// reaching a connection, when its connection failed before the ack came,
// or when the ack did not come within SnapshotAckTimeout. An ack rather
// than the hand-off to Conn.Write, because a report of success for a
// snapshot lost in a dying connection's queue leaves the leader probing
// for a round trip, while a missing report of failure leaves it paused in
// StateSnapshot until one comes.
//
// Receiving. Each message is handed to Receiver.Step on the loop, in the
// order it arrived on its connection. A bad preamble, hello, checksum,
// frame size or message closes the connection with a warning naming the
// remote address.
//
// A Transport is used from its node's loop only.
type Transport struct {
	env  env.Env
	self uint64
	r    Receiver
	log  *slog.Logger
	cfg  TransportConfig

	// peers are those with an address, by id.
	peers map[uint64]*transportPeer
	// inbound are the live inbound connections whose hello has been read,
	// by the sender's id, oldest first: the last one is the reply path to
	// a peer without an address.
	inbound map[uint64][]*transportConn
	// conns are every live connection, by their sequence number (iterated
	// in that order).
	conns   map[uint64]*transportConn
	connSeq uint64

	// reports wait for the loop turn that delivers them (flushReports), so
	// that the Receiver never sees a call from inside Send.
	reports      []transportReport
	reportPosted bool

	closed bool
}

// transportReport is one call to make on the Receiver.
type transportReport struct {
	id       uint64
	snapshot bool // ReportSnapshot, else ReportUnreachable
	failed   bool
}

// NewTransport returns the transport of raft node self (never 0), which
// delivers to r. A nil logger means e.Log. The caller gives it peers with
// SetPeer and inbound connections with Accept (directly, or through Demux).
func NewTransport(e env.Env, self uint64, r Receiver, logger *slog.Logger, opts ...TransportOption) *Transport {
	if logger == nil {
		logger = e.Log
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var cfg TransportConfig
	for _, o := range opts {
		o(&cfg)
	}
	cfg, fixed := cfg.withDefaults()
	t := &Transport{
		env:     e,
		self:    self,
		r:       r,
		log:     logger.With("raft", self),
		cfg:     cfg,
		peers:   make(map[uint64]*transportPeer),
		inbound: make(map[uint64][]*transportConn),
		conns:   make(map[uint64]*transportConn),
	}
	if len(fixed) > 0 {
		t.log.Warn("raft transport: configuration out of range, using defaults instead", "fields", fixed)
	}
	if self == 0 {
		t.log.Error("raft transport: node id 0 is not a raft id; every connection will be refused")
	}
	return t
}

// Config returns the configuration in effect, defaults filled in.
func (t *Transport) Config() TransportConfig { return t.cfg }

// SetPeer sets the address of peer id: "" removes it (what was pending for
// it is dropped, and a peer without an address is reached only over its
// own connections to us), a new address dials it, a changed one closes the
// old connection and dials the new address (keeping what is pending). The
// node's own id is ignored, so a caller may pass the whole voter list.
func (t *Transport) SetPeer(id uint64, addr string) {
	if t.closed || id == t.self {
		return
	}
	if id == 0 {
		t.log.Warn("raft transport: ignoring an address for raft id 0", "addr", addr)
		return
	}
	p := t.peers[id]
	switch {
	case addr == "" && p == nil:
	case addr == "":
		p.remove()
		delete(t.peers, id)
	case p == nil:
		p = &transportPeer{t: t, id: id, addr: addr}
		t.peers[id] = p
		p.dial()
	case p.addr != addr:
		t.log.Info("raft transport: peer address changed", "peer", id, "from", p.addr, "to", addr)
		p.readdress(addr)
	}
}

// PeerAddr is the address SetPeer gave peer id, "" if none: such a peer
// is reached only over its own connections to us.
func (t *Transport) PeerAddr(id uint64) string {
	if p := t.peers[id]; p != nil {
		return p.addr
	}
	return ""
}

// Reached reports whether the transport holds a connection it dialed to
// peer id at the address SetPeer gave, whose hello named id: the peer
// listens there, as that raft id. Messages a peer sends on its own
// connections prove nothing of the kind (a learner without a listener
// dials the voters).
func (t *Transport) Reached(id uint64) bool {
	p := t.peers[id]
	return p != nil && p.conn != nil && p.conn.helloDone
}

// Send sends msgs, the messages of one raft Ready, to their peers. It never
// blocks and never calls the Receiver: reports follow on the loop.
func (t *Transport) Send(msgs []*raftpb.Message) {
	if t.closed || len(msgs) == 0 {
		return
	}
	byPeer := make(map[uint64][]*raftpb.Message)
	var ids []uint64
	for _, m := range msgs {
		if m == nil {
			continue
		}
		id := m.GetTo()
		if _, ok := byPeer[id]; !ok {
			ids = append(ids, id)
		}
		byPeer[id] = append(byPeer[id], m)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t.sendTo(id, byPeer[id])
	}
}

// sendTo sends the messages of one Send to one peer.
func (t *Transport) sendTo(id uint64, msgs []*raftpb.Message) {
	if id == 0 || id == t.self {
		t.log.Error("raft transport: dropping messages with no peer to go to", "to", id, "type", msgs[0].GetType(), "messages", len(msgs))
		return
	}
	if p := t.peers[id]; p != nil {
		p.send(msgs)
		return
	}
	if in := t.inbound[id]; len(in) > 0 {
		tc := in[len(in)-1]
		b := t.encode(id, msgs, -1)
		tc.writeBatch(b)
		return
	}
	t.dropped(id, msgs)
}

// transportBatch is the encoded frames of one Send to one peer, and the
// snapshots among them.
type transportBatch struct {
	buf   []byte
	snaps []snapshotRef
}

// snapshotRef names a MsgSnap's snapshot, as its ack does.
type snapshotRef struct{ index, term uint64 }

func snapshotOf(m *raftpb.Message) snapshotRef {
	md := m.GetSnapshot().GetMetadata()
	return snapshotRef{index: md.GetIndex(), term: md.GetTerm()}
}

// encode encodes msgs for peer id into one batch of at most budget bytes (a
// negative budget has no bound); messages that do not fit, or cannot be
// sent at all, are dropped and reported.
func (t *Transport) encode(id uint64, msgs []*raftpb.Message, budget int) transportBatch {
	lens := make([]int, len(msgs))
	keep := make([]bool, len(msgs))
	total := 0
	var drop []*raftpb.Message
	for i, m := range msgs {
		frameLen, bodyLen := messageFrameLen(m)
		switch {
		case bodyLen+frameOverhead > t.cfg.MaxFrameBytes:
			t.log.Error("raft transport: dropping a message larger than a frame may be", "peer", id, "type", m.GetType(),
				"bytes", bodyLen, "max_frame_bytes", t.cfg.MaxFrameBytes)
			drop = append(drop, m)
		case budget >= 0 && total+frameLen > budget:
			drop = append(drop, m)
		default:
			lens[i], keep[i] = frameLen, true
			total += frameLen
		}
	}
	b := transportBatch{buf: make([]byte, 0, total)}
	for i, m := range msgs {
		if !keep[i] {
			continue
		}
		buf, err := appendMessage(b.buf, m)
		if err != nil {
			t.log.Error("raft transport: dropping a message that does not encode", "peer", id, "err", err)
			drop = append(drop, m)
			continue
		}
		b.buf = buf
		if m.GetType() == raftpb.MsgSnap {
			b.snaps = append(b.snaps, snapshotOf(m))
		}
	}
	t.dropped(id, drop)
	return b
}

// dropped reports messages to id that will not be sent.
func (t *Transport) dropped(id uint64, msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	t.reportUnreachable(id)
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			t.reportSnapshot(id, true)
		}
	}
}

func (t *Transport) reportUnreachable(id uint64) {
	t.queueReport(transportReport{id: id})
}

func (t *Transport) reportSnapshot(id uint64, failed bool) {
	t.queueReport(transportReport{id: id, snapshot: true, failed: failed})
}

func (t *Transport) queueReport(r transportReport) {
	if t.closed {
		return
	}
	t.reports = append(t.reports, r)
	if !t.reportPosted {
		t.reportPosted = true
		t.env.Loop.Post(t.flushReports)
	}
}

// flushReports makes the queued reports, in order, unreachability at most
// once per peer.
func (t *Transport) flushReports() {
	reports := t.reports
	t.reports, t.reportPosted = nil, false
	var unreachable []uint64
	for _, r := range reports {
		if t.closed {
			return
		}
		switch {
		case r.snapshot:
			t.r.ReportSnapshot(r.id, r.failed)
		case !slices.Contains(unreachable, r.id):
			unreachable = append(unreachable, r.id)
			t.r.ReportUnreachable(r.id)
		}
	}
}

// Accept takes an inbound raft connection, whose first bytes are the
// preamble, and returns its handler. Give it to env.Net.Listen directly for
// a listener of its own, or to Demux to share a listener with Kafka.
func (t *Transport) Accept(c env.Conn) env.ConnHandler {
	if t.closed {
		c.Close()
		return discardHandler{}
	}
	tc := t.newConn(c, nil)
	return tc
}

// Close closes every connection and stops every timer. The Receiver hears
// nothing more, and later calls do nothing.
func (t *Transport) Close() {
	if t.closed {
		return
	}
	t.closed = true
	t.reports = nil
	for _, id := range sortedKeys(t.peers) {
		t.peers[id].stop()
	}
	for _, seq := range sortedKeys(t.conns) {
		tc := t.conns[seq]
		tc.stopTimers()
		tc.closed = true
		tc.c.Close()
	}
	clear(t.peers)
	clear(t.inbound)
	clear(t.conns)
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// discardHandler ignores a connection's events: a dial that completed for
// nothing, an accept after Close.
type discardHandler struct{}

func (discardHandler) OnData([]byte) {}
func (discardHandler) OnClose(error) {}
