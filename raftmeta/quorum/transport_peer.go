package quorum

import (
	"context"
	"log/slog"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/internal/invariants"
)

// transportPeer is a peer with an address: its outbound connection, the
// dial and backoff that keep it up, and what waits for it.
type transportPeer struct {
	t    *Transport
	id   uint64
	addr string

	// conn is the outbound connection once dialed, until it fails.
	conn *transportConn
	// dialing is set while a Dial is in flight; dialSeq numbers the dials,
	// so that the result of one made stale (a new address, a removal) is
	// thrown away.
	dialing bool
	dialSeq uint64
	// retry is the backoff timer of the next dial.
	retry env.Timer
	// failures counts the dials and connections that failed since the
	// last connection that completed its handshake: the backoff's
	// exponent.
	failures int

	// pending are the batches of the Sends made while there was no
	// connection, oldest first, pendingBytes their total length.
	pending      []transportBatch
	pendingBytes int
}

// send writes one Send's messages to the connection, or keeps them for the
// next one.
func (p *transportPeer) send(msgs []*raftpb.Message) {
	if p.conn != nil {
		p.conn.writeBatch(p.t.encode(p.id, msgs, -1))
		return
	}
	b := p.t.encode(p.id, msgs, p.t.cfg.MaxPendingBytes-p.pendingBytes)
	if len(b.buf) == 0 {
		return
	}
	p.pending = append(p.pending, b)
	p.pendingBytes += len(b.buf)
	if invariants.Enabled && p.pendingBytes > p.t.cfg.MaxPendingBytes {
		invariants.Panicf("raft transport: %d bytes pending for peer %d, above the bound %d", p.pendingBytes, p.id, p.t.cfg.MaxPendingBytes)
	}
}

// dial starts a dial of the peer's address.
func (p *transportPeer) dial() {
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	p.dialing = true
	p.dialSeq++
	seq := p.dialSeq
	p.t.env.Net.Dial(p.addr, func(c env.Conn, err error) env.ConnHandler {
		return p.dialed(seq, c, err)
	})
}

// dialed takes the result of dial number seq.
func (p *transportPeer) dialed(seq uint64, c env.Conn, err error) env.ConnHandler {
	t := p.t
	if t.closed || t.peers[p.id] != p || seq != p.dialSeq {
		if c != nil {
			c.Close()
		}
		return discardHandler{}
	}
	p.dialing = false
	if err != nil {
		p.failures++
		level := levelFirstFailure(p.failures)
		t.log.Log(context.Background(), level, "raft transport: dial failed", "peer", p.id, "addr", p.addr, "failures", p.failures, "err", err)
		p.dropPending()
		p.scheduleRedial()
		return discardHandler{}
	}
	tc := t.newConn(c, p)
	p.conn = tc
	// The handshake and everything pending go out in one write.
	size := len(transportPreamble) + frameHeaderLen + helloBodyLen + p.pendingBytes
	buf := make([]byte, 0, size)
	buf = append(buf, transportPreamble...)
	buf = appendHello(buf, transportHello{version: transportVersion, sender: t.self, receiver: p.id})
	var snaps []snapshotRef
	for _, b := range p.pending {
		buf = append(buf, b.buf...)
		snaps = append(snaps, b.snaps...)
	}
	p.pending, p.pendingBytes = nil, 0
	tc.writeBatch(transportBatch{buf: buf, snaps: snaps})
	return tc
}

// levelFirstFailure logs the first failure of a streak at Info and the
// rest, one per backoff, at Debug.
func levelFirstFailure(failures int) slog.Level {
	if failures <= 1 {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// connLost is called when the outbound connection tc fails or is closed.
func (p *transportPeer) connLost(tc *transportConn) {
	if p.conn != tc {
		return
	}
	p.conn = nil
	p.failures++
	p.scheduleRedial()
}

// handshakeDone is called when the peer's hello arrives on the outbound
// connection: the connection works, and the backoff starts over.
func (p *transportPeer) handshakeDone() { p.failures = 0 }

// scheduleRedial arms the backoff timer for the next dial.
func (p *transportPeer) scheduleRedial() {
	if p.retry != nil || p.dialing || p.conn != nil {
		return
	}
	d := p.backoff()
	p.retry = p.t.env.Clock.AfterFunc(d, func() {
		p.retry = nil
		if p.t.closed || p.t.peers[p.id] != p || p.dialing || p.conn != nil {
			return
		}
		p.dial()
	})
}

// backoff is the wait before the next dial: BackoffMin doubled for each
// failure after the first, capped at BackoffMax, jittered by ±20%.
func (p *transportPeer) backoff() time.Duration {
	cfg := p.t.cfg
	d := cfg.BackoffMin
	for i := 1; i < p.failures && d < cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, cfg.BackoffMax)
	jitter := 0.8 + 0.4*env.Float64(p.t.env.Rand)
	return time.Duration(float64(d) * jitter)
}

// peerConnected is called when the peer's hello arrives on an inbound
// connection. If the outbound connection is waiting out a backoff, the
// peer is evidently back: dial it now.
func (p *transportPeer) peerConnected() {
	if p.retry != nil && !p.dialing && p.conn == nil {
		p.failures = 0
		p.dial()
	}
}

// readdress points the peer at a new address: the old connection (or dial)
// is abandoned, pending messages stay for the new one.
func (p *transportPeer) readdress(addr string) {
	p.addr = addr
	p.failures = 0
	if tc := p.conn; tc != nil {
		p.conn = nil
		tc.close()
	}
	p.dial()
}

// remove forgets the peer's address: its connection is closed and what was
// pending dropped.
func (p *transportPeer) remove() {
	p.dialSeq++ // a dial in flight is now stale
	p.dialing = false
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	if tc := p.conn; tc != nil {
		p.conn = nil
		tc.close()
	}
	p.dropPending()
}

// dropPending drops what waits for the peer, reporting it.
func (p *transportPeer) dropPending() {
	if len(p.pending) == 0 {
		return
	}
	p.t.reportUnreachable(p.id)
	for _, b := range p.pending {
		for range b.snaps {
			p.t.reportSnapshot(p.id, true)
		}
	}
	p.pending, p.pendingBytes = nil, 0
}

// stop cancels the peer's timer and forgets what is pending, without
// reports: the transport is closing.
func (p *transportPeer) stop() {
	p.dialSeq++
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	p.pending, p.pendingBytes = nil, 0
}
