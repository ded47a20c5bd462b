package quorum

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/sluicemq/sluice/wire"
)

// transportConn is one raft connection, dialed or accepted, and the
// handler of its events. Both directions carry frames.
type transportConn struct {
	t      *Transport
	c      env.Conn
	seq    uint64
	remote string
	// peer is the peer dialed, on an outbound connection; nil on an
	// inbound one.
	peer *transportPeer
	// peerID is the node at the other end: the one dialed, or the sender
	// named by an inbound hello (0 until it is read).
	peerID uint64
	// preambleN counts the preamble bytes read so far. Only the dialer
	// sends one, so an outbound connection starts with it complete.
	preambleN int
	// helloDone is set once the peer's hello has been read and accepted;
	// until then no other frame is taken, and an inbound connection is
	// not a reply path.
	helloDone bool
	frames    *wire.FrameReader
	// acks are the snapshots written to this connection whose acks have not
	// come, oldest first. The receiver acks in the order it reads them.
	acks      []*awaitedAck
	handshake env.Timer
	// keepalive is the connection's keepalive timer, armed once the
	// handshake is done; idle says nothing was written since it last
	// fired. heardAt is when the peer last sent anything (the clock's
	// Elapsed), which the timer holds to SilenceTimeout.
	keepalive env.Timer
	idle      bool
	heardAt   time.Duration
	// wrote is set once we have written messages: losing the connection
	// then may have lost some.
	wrote  bool
	closed bool
}

// awaitedAck is a snapshot written and not yet acknowledged.
type awaitedAck struct {
	ref   snapshotRef
	timer env.Timer
}

// newConn registers a connection: outbound to p, or inbound if p is nil.
func (t *Transport) newConn(c env.Conn, p *transportPeer) *transportConn {
	t.connSeq++
	tc := &transportConn{
		t:      t,
		c:      c,
		seq:    t.connSeq,
		remote: c.RemoteAddr(),
		peer:   p,
		frames: wire.NewFrameReader(wire.FrameReaderConfig{MaxBytes: int32(t.cfg.MaxFrameBytes)}),
	}
	if p != nil {
		tc.peerID = p.id
		tc.preambleN = len(transportPreamble)
	}
	tc.handshake = t.env.Clock.AfterFunc(t.cfg.HandshakeTimeout, tc.handshakeTimedOut)
	t.conns[tc.seq] = tc
	return tc
}

// OnData implements env.ConnHandler.
func (tc *transportConn) OnData(p []byte) {
	if tc.closed {
		return
	}
	tc.heardAt = tc.t.env.Clock.Elapsed()
	if tc.preambleN < len(transportPreamble) {
		n := min(len(p), len(transportPreamble)-tc.preambleN)
		if string(p[:n]) != transportPreamble[tc.preambleN:tc.preambleN+n] {
			tc.fail("bad preamble", preambleError(tc.preambleN, p[:n]))
			return
		}
		tc.preambleN += n
		p = p[n:]
	}
	tc.frames.Feed(p)
	for !tc.closed {
		frame, ok, err := tc.frames.Next()
		if err != nil {
			tc.fail("bad frame", frameSizeError(err))
			return
		}
		if !ok {
			return
		}
		tc.handleFrame(frame)
	}
}

// preambleError describes bytes that should have continued the preamble
// after its first matched bytes.
func preambleError(matched int, got []byte) error {
	err := fmt.Errorf("the connection opened with %q, not the raft preamble %q", transportPreamble[:matched]+string(got), transportPreamble)
	if matched == 0 && len(got) > 0 && got[0] != transportPreamble[0] {
		err = fmt.Errorf("%w (a Kafka client on a listener that takes only raft connections?)", err)
	}
	return err
}

func frameSizeError(err error) error {
	var fse *wire.FrameSizeError
	if errors.As(err, &fse) {
		return fmt.Errorf("frame size %d is negative or above the %d bytes a raft frame may have (prefix % x)", fse.Size, fse.Max, fse.Prefix)
	}
	return err
}

// handleFrame takes one whole frame.
func (tc *transportConn) handleFrame(frame []byte) {
	kind, body, err := parseFrame(frame)
	if err != nil {
		tc.fail("bad frame", err)
		return
	}
	if kind == frameRefusal {
		tc.refused(body)
		return
	}
	if !tc.helloDone {
		if kind != frameHello {
			tc.fail("bad hello", fmt.Errorf("the first frame is of kind %d, not a hello", kind))
			return
		}
		tc.onHello(body)
		return
	}
	switch kind {
	case frameMessage:
		tc.onMessage(body)
	case frameSnapshotAck:
		tc.onSnapshotAck(body)
	case frameKeepalive:
		if len(body) != 0 {
			tc.fail("bad frame", fmt.Errorf("a keepalive with a %d-byte body", len(body)))
		}
	case frameHello:
		tc.fail("bad frame", errors.New("a second hello"))
	default:
		tc.fail("bad frame", fmt.Errorf("unknown frame kind %d", kind))
	}
}

func (tc *transportConn) onHello(body []byte) {
	h, err := parseHello(body)
	if err != nil {
		tc.fail("bad hello", err)
		return
	}
	if tc.peer == nil {
		tc.onInboundHello(h)
	} else {
		tc.onOutboundHello(h)
	}
}

// onInboundHello checks the dialer's hello, answers with ours and makes the
// connection a reply path to the dialer.
func (tc *transportConn) onInboundHello(h transportHello) {
	t := tc.t
	switch {
	case h.version != transportVersion:
		tc.refuse(fmt.Sprintf("the hello is of version %d; raft node %d speaks version %d", h.version, t.self, transportVersion))
		return
	case h.sender == 0:
		tc.refuse("the hello names sender 0, which is not a raft id")
		return
	case h.sender == t.self:
		tc.refuse(fmt.Sprintf("the hello names sender %d, this node's own id: a node dialing itself, or two nodes with one id", h.sender))
		return
	case h.receiver != t.self:
		tc.refuse(fmt.Sprintf("the connection is meant for raft node %d, but this is raft node %d: "+
			"check that every node has the same controller quorum voters", h.receiver, t.self))
		return
	}
	tc.peerID = h.sender
	tc.handshakeDone()
	if !tc.write(appendHello(nil, transportHello{version: transportVersion, sender: t.self, receiver: h.sender})) {
		return
	}
	t.inbound[h.sender] = append(t.inbound[h.sender], tc)
	tc.armKeepalive()
	if p := t.peers[h.sender]; p != nil {
		p.peerConnected()
	}
}

// onOutboundHello checks that the node dialed is the one meant.
func (tc *transportConn) onOutboundHello(h transportHello) {
	t := tc.t
	switch {
	case h.version != transportVersion:
		tc.fail("bad hello", fmt.Errorf("the peer answered with version %d; this node speaks version %d", h.version, transportVersion))
		return
	case h.sender != tc.peerID || h.receiver != t.self:
		tc.fail("bad hello", fmt.Errorf("dialed raft node %d at %s, but raft node %d answered, for node %d: check the voters' addresses",
			tc.peerID, tc.peer.addr, h.sender, h.receiver))
		return
	}
	tc.handshakeDone()
	tc.peer.handshakeDone()
	tc.armKeepalive()
}

// armKeepalive arms the next keepalive of the connection: one
// KeepaliveInterval from now, a frame goes out if nothing else did, and a
// connection that has heard nothing from its peer for SilenceTimeout is
// failed (both ends write keepalives, so only a path that holds or drops
// what is sent is that silent).
func (tc *transportConn) armKeepalive() {
	tc.idle = true
	tc.keepalive = tc.t.env.Clock.AfterFunc(tc.t.cfg.KeepaliveInterval, func() {
		tc.keepalive = nil
		if tc.closed {
			return
		}
		if silent := tc.t.env.Clock.Elapsed() - tc.heardAt; silent > tc.t.cfg.SilenceTimeout {
			tc.fail("silent", fmt.Errorf("nothing from raft node %d for %v", tc.peerID, silent.Round(time.Millisecond)))
			return
		}
		if tc.idle && !tc.write(appendKeepalive(nil)) {
			return
		}
		tc.armKeepalive()
	})
}

func (tc *transportConn) handshakeDone() {
	tc.helloDone = true
	if tc.handshake != nil {
		tc.handshake.Stop()
		tc.handshake = nil
	}
}

// onMessage checks a message and steps it; a snapshot is acknowledged once
// stepped.
func (tc *transportConn) onMessage(body []byte) {
	t := tc.t
	m, err := parseMessage(body)
	if err != nil {
		tc.fail("bad message", err)
		return
	}
	if err := tc.checkMessage(m); err != nil {
		tc.fail("bad message", err)
		return
	}
	t.r.Step(m)
	if m.GetType() == raftpb.MsgSnap && !tc.closed {
		ref := snapshotOf(m)
		tc.write(appendSnapshotAck(nil, ref.index, ref.term))
	}
}

// checkMessage refuses a message this connection cannot carry: not from
// its peer, not to this node, one raft makes only locally, or a MsgSnap
// without a snapshot.
func (tc *transportConn) checkMessage(m *raftpb.Message) error {
	typ := m.GetType()
	switch {
	case m.GetFrom() != tc.peerID || m.GetTo() != tc.t.self:
		return fmt.Errorf("a %v from %d to %d, on a connection from %d to %d", typ, m.GetFrom(), m.GetTo(), tc.peerID, tc.t.self)
	case m.Type == nil || raft.IsLocalMsg(typ):
		return fmt.Errorf("a %v, which raft never sends to a peer", typ)
	case typ == raftpb.MsgSnap && m.GetSnapshot().GetMetadata() == nil:
		return errors.New("a MsgSnap without a snapshot")
	}
	return nil
}

func (tc *transportConn) onSnapshotAck(body []byte) {
	index, term, err := parseSnapshotAck(body)
	if err != nil {
		tc.fail("bad snapshot ack", err)
		return
	}
	if len(tc.acks) == 0 {
		tc.fail("bad snapshot ack", fmt.Errorf("an ack of the snapshot at index %d term %d, but none was sent", index, term))
		return
	}
	a := tc.acks[0]
	if a.ref != (snapshotRef{index: index, term: term}) {
		tc.fail("bad snapshot ack", fmt.Errorf("an ack of the snapshot at index %d term %d, but the one sent is at index %d term %d",
			index, term, a.ref.index, a.ref.term))
		return
	}
	a.timer.Stop()
	tc.acks[0] = nil
	tc.acks = tc.acks[1:]
	tc.t.reportSnapshot(tc.peerID, false)
}

// writeBatch writes one batch of message frames.
func (tc *transportConn) writeBatch(b transportBatch) {
	if invariants.Enabled && tc.closed {
		invariants.Panicf("raft transport: a batch of %d bytes for peer %d written to a closed connection", len(b.buf), tc.peerID)
	}
	if len(b.buf) == 0 {
		return
	}
	for _, ref := range b.snaps {
		tc.awaitAck(ref)
	}
	tc.wrote = true
	tc.write(b.buf)
}

// write writes p, taking a failure as the connection's loss. It reports
// whether the connection is still up.
func (tc *transportConn) write(p []byte) bool {
	tc.idle = false
	if err := tc.c.Write(p); err != nil {
		tc.t.log.Info("raft transport: write failed", "peer", tc.peerID, "remote", tc.remote, "err", err)
		tc.close()
		return false
	}
	return true
}

// awaitAck waits for the ack of a snapshot being written.
func (tc *transportConn) awaitAck(ref snapshotRef) {
	a := &awaitedAck{ref: ref}
	a.timer = tc.t.env.Clock.AfterFunc(tc.t.cfg.SnapshotAckTimeout, func() {
		if tc.closed || !slices.Contains(tc.acks, a) {
			return
		}
		tc.fail("snapshot not acknowledged", fmt.Errorf("no ack of the snapshot at index %d term %d within %v",
			ref.index, ref.term, tc.t.cfg.SnapshotAckTimeout))
	})
	tc.acks = append(tc.acks, a)
}

func (tc *transportConn) handshakeTimedOut() {
	tc.handshake = nil
	if tc.closed || tc.helloDone {
		return
	}
	tc.fail("handshake timed out", fmt.Errorf("no hello within %v", tc.t.cfg.HandshakeTimeout))
}

// refuse tells the dialer why its connection is refused, then closes it.
func (tc *transportConn) refuse(reason string) {
	tc.t.log.Warn("raft transport: refusing connection", "remote", tc.remote, "reason", reason)
	tc.c.Write(appendRefusal(nil, reason)) // an error means it is gone already
	tc.close()
}

// refused logs the peer's refusal of the connection and closes it.
func (tc *transportConn) refused(body []byte) {
	tc.t.log.Warn("raft transport: peer refused the connection", "peer", tc.peerID, "remote", tc.remote, "reason", parseRefusal(body))
	tc.close()
}

// fail closes the connection over bad input or a timeout, with a warning.
func (tc *transportConn) fail(why string, err error) {
	tc.t.log.Warn("raft transport: closing connection: "+why, "peer", tc.peerID, "remote", tc.remote, "err", err)
	tc.close()
}

// close closes the connection from our side.
func (tc *transportConn) close() {
	if tc.closed {
		return
	}
	tc.c.Close()
	tc.teardown()
}

// OnClose implements env.ConnHandler.
func (tc *transportConn) OnClose(err error) {
	if tc.closed {
		return
	}
	switch {
	case err != nil:
		tc.t.log.Info("raft transport: connection lost", "peer", tc.peerID, "remote", tc.remote, "err", err)
	default:
		tc.t.log.Debug("raft transport: connection closed by the peer", "peer", tc.peerID, "remote", tc.remote)
	}
	tc.teardown()
}

// teardown forgets a connection that is gone, reporting what it may have
// lost.
func (tc *transportConn) teardown() {
	t := tc.t
	tc.closed = true
	tc.stopTimers()
	delete(t.conns, tc.seq)
	if tc.wrote {
		t.reportUnreachable(tc.peerID)
	}
	for range tc.acks {
		t.reportSnapshot(tc.peerID, true)
	}
	tc.acks = nil
	if tc.peer != nil {
		tc.peer.connLost(tc)
		return
	}
	if in := t.inbound[tc.peerID]; len(in) > 0 {
		in = slices.DeleteFunc(in, func(x *transportConn) bool { return x == tc })
		if len(in) == 0 {
			delete(t.inbound, tc.peerID)
		} else {
			t.inbound[tc.peerID] = in
		}
	}
}

func (tc *transportConn) stopTimers() {
	if tc.handshake != nil {
		tc.handshake.Stop()
		tc.handshake = nil
	}
	if tc.keepalive != nil {
		tc.keepalive.Stop()
		tc.keepalive = nil
	}
	for _, a := range tc.acks {
		a.timer.Stop()
	}
}
