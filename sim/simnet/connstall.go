package simnet

import (
	"slices"
	"time"
)

// Way names the directions of one connection a per-connection fault holds.
type Way uint8

const (
	// DialerToAcceptor is what the dialing end sends: a client's requests.
	DialerToAcceptor Way = 1 << iota
	// AcceptorToDialer is what the accepting end sends: a server's answers.
	AcceptorToDialer
	// BothWays is both directions.
	BothWays = DialerToAcceptor | AcceptorToDialer
)

// Conns returns the ids of the connections that dialer dialed to
// acceptor's port (every port if port is 0) and that are established at
// both ends, oldest first. The ids name connections for StallConn; a new
// connection between the same hosts gets a larger one.
func (n *Network) Conns(dialer, acceptor string, port int) []uint64 {
	var ids []uint64
	for _, c := range n.liveConns() {
		d, a := c.ends[0], c.ends[1]
		if d.h.name == dialer && a.h.name == acceptor && (port == 0 || c.port == port) &&
			d.state == stOpen && a.state == stOpen && !d.stale() && !a.stale() {
			ids = append(ids, c.id)
		}
	}
	return ids
}

// StallConn holds back what connection id carries the given way during the
// next d, while every other connection between its hosts, and every one
// made later, flows: the connection's segments sit somewhere on the path,
// or wait for a retransmission after a long backoff. When the stall ends
// they arrive in order (a link stall or partition may hold them longer).
//
// Like a link stall it never breaks the connection: the sender's RTO does
// not run (a kernel whose user timeout is longer than d). In particular an
// end that closes or gives the connection up meanwhile (Close) still has
// what it wrote delivered, and its FIN after it: a request written to a
// connection its client abandoned reaches the server after those the
// client sent since on a newer connection, and the server answers into a
// closed end. Only what breaks the connection loses the held bytes: a
// Reset, a Kill or a Crash of the sender's host, or an RST.
//
// It reports whether id is a connection still live; a stall already
// running is lengthened, never shortened (UnstallConn ends it).
func (n *Network) StallConn(id uint64, way Way, d time.Duration) bool {
	c := n.connByID(id)
	if c == nil {
		return false
	}
	until := n.s.Now() + max(d, 0)
	for i, p := range [2]*pipe{c.ends[0].out, c.ends[1].out} {
		if way&(Way(1)<<i) != 0 {
			p.holdUntil = max(p.holdUntil, until)
		}
	}
	return true
}

// UnstallConn ends connection id's stall at once, both ways: what it held
// arrives in order after the link's latency. Unknown or retired ids, and
// connections not stalled, are left alone.
func (n *Network) UnstallConn(id uint64) {
	c := n.connByID(id)
	if c == nil {
		return
	}
	for _, e := range c.ends {
		e.out.unhold()
	}
}

// connByID returns the live connection id, or nil.
func (n *Network) connByID(id uint64) *conn {
	live := n.liveConns()
	i, found := slices.BinarySearchFunc(live, id, func(c *conn, id uint64) int {
		switch {
		case c.id < id:
			return -1
		case c.id > id:
			return 1
		}
		return 0
	})
	if !found {
		return nil
	}
	return live[i]
}

// unhold ends the pipe's stall now: segments it put off past the link's
// latency from now arrive then instead, still in order.
func (p *pipe) unhold() {
	now := p.now()
	if p.holdUntil <= now {
		return
	}
	p.holdUntil = 0
	p.retime(now + p.link.sample())
}

// retime pulls every arrival later than at back to at (arrivals stay in
// order), and restarts the first one's transit.
func (p *pipe) retime(at time.Duration) {
	for i := range p.segs {
		p.segs[i].arriveAt = min(p.segs[i].arriveAt, at)
	}
	if k := len(p.segs); k > 0 {
		p.lastArrive = p.segs[k-1].arriveAt
	} else {
		p.lastArrive = min(p.lastArrive, at)
	}
	if p.transit != nil {
		p.transit.Cancel()
		p.transit = nil
	}
	p.pump()
}
