package simnet

import (
	"fmt"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/sched"
)

// conn is one connection: the end that dialed, the end that accepted, and a
// pipe each way.
type conn struct {
	n         *Network
	id        uint64
	port      int     // the acceptor's
	localPort int     // the dialer's
	ends      [2]*end // [0] dialed, [1] accepted
	connected func(env.Conn, error) env.ConnHandler
	// listener is the one whose port the SYN found; the handshake completes
	// only if it is still listening when the ACK arrives.
	listener *listener
	retired  bool
	// noSendFile: the application's ends do not implement env.FileSender
	// (Network.SetSendFile).
	noSendFile bool
}

// endState is the kernel's view of one end.
type endState uint8

const (
	stIdle    endState = iota // accepting end before the SYN reached its host
	stSynSent                 // dialing end waiting for SYN-ACK
	stSynRcvd                 // accepting end waiting for the ACK
	stOpen
	stFinSent // closed locally; the FIN is queued or in flight
	// stClosed: the connection closed cleanly (this end's FIN arrived, or
	// the peer's FIN was reported). Late bytes are discarded, as osenv
	// drains what a peer still sends after a local Close.
	stClosed
	// stGone: the kernel forgot the connection (a handshake given up or
	// refused, a break, a reset). It answers whatever still arrives for
	// it, except an RST, with an RST.
	stGone
)

// end is one end of a connection and the env.Conn its application holds.
type end struct {
	c     *conn
	h     *host
	state endState
	// incarnation is the host's boot the end belongs to; 0 until the SYN
	// reaches the accepting host.
	incarnation   uint64
	local, remote string
	out, in       *pipe
	// handshake gives up on a handshake that never completes: the dialer's
	// connect timeout, or the acceptor's wait for the ACK.
	handshake *sched.Event

	// What the application sees. ready means the accept or connected
	// callback is due (the handshake completed, or the dial failed with
	// dialErr); after it, buffered bytes, then the close.
	ready, announced      bool
	dialErr               error
	handler               env.ConnHandler
	closedLocal, reported bool
	// busy is set while an application event is scheduled on the loop;
	// there is at most one, so events reach the application in order.
	busy   bool
	rcv    [][]byte
	rcvLen int
	// finRcvd: the peer closed; OnClose(nil) follows the buffered bytes.
	// err: the connection broke; OnClose(err) follows. The first one wins.
	finRcvd bool
	err     error
	rstSent bool
}

var _ env.Conn = (*end)(nil)

func (n *Network) dial(src *host, local int, dst *host, port int, connected func(env.Conn, error) env.ConnHandler) {
	n.nextConn++
	c := &conn{n: n, id: n.nextConn, port: port, localPort: local, connected: connected, noSendFile: n.noSendFile}
	dialer := &end{c: c, h: src, state: stSynSent, incarnation: src.incarnation,
		local: joinHostPort(src.name, local), remote: joinHostPort(dst.name, port)}
	acceptor := &end{c: c, h: dst, state: stIdle, local: dialer.remote, remote: dialer.local}
	dialer.out = n.newPipe(c, dialer, acceptor)
	acceptor.out = n.newPipe(c, acceptor, dialer)
	dialer.in, acceptor.in = acceptor.out, dialer.out
	c.ends = [2]*end{dialer, acceptor}
	n.conns = append(n.conns, c)
	dialer.armHandshake(c.connectTimedOut)
	dialer.out.send(segSyn, nil)
}

func (e *end) LocalAddr() string  { return e.local }
func (e *end) RemoteAddr() string { return e.remote }

// Write implements env.Conn. On a connection that broke but has not said so
// yet, the bytes are accepted and lost, as a socket's would be.
func (e *end) Write(p []byte) error {
	if e.done() {
		return fmt.Errorf("write to %s: %w", e.remote, env.ErrClosed)
	}
	if len(p) > 0 && e.state == stOpen {
		e.out.send(segData, p)
	}
	return nil
}

// Close implements env.Conn: the bytes already written go out, then a FIN.
func (e *end) Close() error {
	if e.done() {
		return fmt.Errorf("close connection to %s: %w", e.remote, env.ErrClosed)
	}
	e.closedLocal = true
	e.dropReceived()
	if e.state == stOpen {
		e.state = stFinSent
		e.out.send(segFin, nil)
	}
	e.c.maybeRetire()
	return nil
}

// stale reports that the end's host rebooted (or crashed) since the end
// was made: the host no longer knows it.
func (e *end) stale() bool { return e.incarnation != e.h.incarnation }

// forgotten reports that the end's host keeps no record of the connection:
// it gave it up, broke or refused it, or rebooted since. Such a host answers
// any segment of the connection but a SYN or an RST with an RST.
func (e *end) forgotten() bool { return e.state == stGone || e.stale() }

// live reports that the end is still sending, so it retransmits and can
// time out.
func (e *end) live() bool {
	return (e.state == stOpen || e.state == stFinSent) && !e.stale()
}

// done reports that the application gets no more events and may not write.
func (e *end) done() bool { return e.closedLocal || e.reported || e.stale() }

func (e *end) dropReceived() {
	clear(e.rcv)
	e.rcv, e.rcvLen = e.rcv[:0], 0
}

// kick schedules the application's next event, if one is due and none is
// scheduled.
func (e *end) kick() {
	if e.busy || !e.ready || e.done() {
		return
	}
	switch {
	case !e.announced:
		e.post("net."+e.announceKind(), sched.Digest([]byte(e.local+" "+e.remote)), e.announce)
	case e.rcvLen > 0:
		e.postData(e.takeChunk())
	case e.finRcvd:
		e.post("net.close", 0, func() { e.closeReported(nil) })
	case e.err != nil:
		err := e.err
		e.post("net.close", digestError(err), func() { e.closeReported(err) })
	}
}

func (e *end) announceKind() string {
	if e == e.c.ends[0] {
		return "dial"
	}
	return "accept"
}

// post schedules f on the host's loop as the end's one pending event.
func (e *end) post(kind string, digest uint64, f func()) {
	e.busy = true
	e.h.loop.Schedule(0, sched.Label{Kind: kind, Node: e.h.name, Digest: digest}, func() { e.posted(f, nil) })
}

// postData is post of the delivery of chunk p, in one closure rather than
// two: a run delivers millions.
func (e *end) postData(p []byte) {
	e.busy = true
	e.h.loop.Schedule(0, sched.Label{Kind: "net.data", Node: e.h.name, Digest: sched.Digest(p)}, func() { e.posted(nil, p) })
}

// posted runs the end's pending event: f, or with f nil the delivery of
// p, unless the end is done by now.
func (e *end) posted(f func(), p []byte) {
	e.busy = false
	if !e.done() {
		if f != nil {
			f()
		} else {
			e.handler.OnData(p)
		}
		e.kick()
	}
	e.c.maybeRetire()
}

// announce runs the connected or accept callback.
func (e *end) announce() {
	e.announced = true
	c := e.c
	var h env.ConnHandler
	switch {
	case e.dialErr != nil:
		e.reported = true
		c.connected(nil, e.dialErr)
		return
	case e == c.ends[0]:
		h = c.connected(e.app(), nil)
	case !c.listener.live():
		// Closed before accepting: the kernel resets its accept queue.
		e.reported = true
		e.abort(nil)
		return
	default:
		h = c.listener.accept(e.app())
	}
	if e.done() {
		return // closed inside the callback
	}
	if h == nil {
		e.Close() // the callback does not want the connection
		return
	}
	e.handler = h
}

func (e *end) closeReported(err error) {
	e.reported = true
	if e.state == stOpen {
		// The peer closed: what this end wrote since has nobody to read it.
		// (A broken end keeps its pipe: it may carry the RST.)
		e.state = stClosed
		e.out.clear()
	}
	e.handler.OnClose(err)
}

// takeChunk removes the next OnData payload from the receive buffer: all of
// it, the first write's worth, or a random prefix, drawn from the incoming
// link's stream.
func (e *end) takeChunk() []byte {
	l := e.in.link
	n := e.rcvLen
	switch l.r.Uint64n(4) {
	case 2:
		n = len(e.rcv[0])
	case 3:
		n = 1 + int(l.draw(int64(e.rcvLen-1)))
	}
	e.rcvLen -= n
	if first := e.rcv[0]; n <= len(first) {
		e.popReceived(n)
		return first[:n:n]
	}
	p := make([]byte, 0, n)
	for len(p) < n {
		k := min(len(e.rcv[0]), n-len(p))
		p = append(p, e.rcv[0][:k]...)
		e.popReceived(k)
	}
	return p
}

// popReceived drops the first k bytes of the first buffered write.
func (e *end) popReceived(k int) {
	if k < len(e.rcv[0]) {
		e.rcv[0] = e.rcv[0][k:]
		return
	}
	e.rcv[0] = nil
	e.rcv = e.rcv[1:]
}

// broken ends the connection at this end because of err (nil when nobody
// is told): what it was sending and had received is gone. A FIN that
// arrived first still wins: the peer had closed cleanly.
func (e *end) broken(err error) {
	e.state = stGone
	e.out.clear()
	if !e.finRcvd && e.err == nil {
		e.err = err
		e.dropReceived()
	}
	e.kick()
}

// abort gives up on the connection and tells the peer with an RST.
func (e *end) abort(err error) {
	e.broken(err)
	e.sendReset()
}

// sendReset sends one RST to the peer, from an end the host no longer
// keeps.
func (e *end) sendReset() {
	if !e.rstSent {
		e.rstSent = true
		e.out.send(segRst, nil)
	}
}

// armHandshake runs f if the handshake is still going after the connect
// timeout.
func (e *end) armHandshake(f func()) {
	label := sched.Label{Kind: "net.handshake-timeout", Node: e.h.name, Digest: e.c.id}
	e.handshake = e.c.n.s.After(e.c.n.connectTimeout, label, func() {
		e.handshake = nil
		f()
		e.c.maybeRetire()
	})
}

func (e *end) stopHandshake() {
	if e.handshake != nil {
		e.handshake.Cancel()
		e.handshake = nil
	}
}

// vanish forgets the end without a word: its host crashed.
func (e *end) vanish() {
	e.stopHandshake()
	e.state = stGone
	e.out.clear()
	e.dropReceived()
}

// finished reports that the end will never act or be told anything again.
func (e *end) finished() bool {
	switch {
	case e.state != stGone && e.state != stClosed && e.state != stIdle:
		return false
	case e.stale():
		return true
	default:
		return !e.busy && (e.done() || !e.ready)
	}
}

// dialFailed fails a pending dial with err.
func (c *conn) dialFailed(err error) {
	d, a := c.ends[0], c.ends[1]
	d.stopHandshake()
	d.state = stGone
	d.out.clear()
	d.dialErr = fmt.Errorf("dial %s: %w", d.remote, err)
	d.ready = true
	d.kick()
	if a.state == stIdle || a.state == stSynRcvd {
		// The accepting side's half-open handshake times out too.
		a.abandonHandshake()
	}
}

func (c *conn) connectTimedOut() {
	if c.ends[0].state == stSynSent {
		c.dialFailed(ErrTimedOut)
	}
}

// abandonHandshake forgets an acceptor's handshake in progress.
func (e *end) abandonHandshake() {
	e.stopHandshake()
	e.state = stGone
	e.out.clear()
}

func (e *end) acceptTimedOut() {
	if e.state == stSynRcvd {
		e.abandonHandshake()
	}
}

// reset breaks the connection at both ends at once.
func (c *conn) reset() {
	for _, e := range c.ends {
		switch e.state {
		case stSynSent:
			c.dialFailed(ErrConnReset)
		case stOpen, stFinSent:
			e.broken(errorf(e, ErrConnReset))
		case stSynRcvd:
			e.abandonHandshake()
		}
	}
	c.maybeRetire()
}

// maybeRetire drops the connection from the network's list once nothing
// about it can happen any more.
func (c *conn) maybeRetire() {
	if c.retired {
		return
	}
	for _, e := range c.ends {
		if !e.finished() || !e.out.empty() || e.handshake != nil {
			return
		}
	}
	c.retired = true
	c.n.retired++
	d := c.ends[0].h
	if d.dialing[c.localPort]--; d.dialing[c.localPort] == 0 {
		delete(d.dialing, c.localPort)
	}
}

// The handshake and the arrivals that change an end's state.

func (c *conn) synArrived() {
	a := c.ends[1]
	if a.state != stIdle {
		return
	}
	a.incarnation = a.h.incarnation
	l := a.h.listeners[c.port]
	if l == nil {
		a.state = stGone
		a.sendReset()
		return
	}
	c.listener = l
	a.state = stSynRcvd
	a.armHandshake(a.acceptTimedOut)
	a.out.send(segSynAck, nil)
}

func (c *conn) synAckArrived() {
	d := c.ends[0]
	if d.state != stSynSent {
		return
	}
	d.stopHandshake()
	d.state = stOpen
	d.ready = true
	d.out.send(segAck, nil)
	d.kick()
}

func (c *conn) ackArrived() {
	a := c.ends[1]
	if a.state != stSynRcvd {
		return
	}
	a.stopHandshake()
	if !c.listener.live() {
		a.state = stGone
		a.sendReset()
		return
	}
	a.state = stOpen
	a.ready = true
	a.kick()
}

func (e *end) dataArrived(pieces []piece) {
	if e.state != stOpen || e.finRcvd {
		return // closed locally, or broken: nobody reads them
	}
	for _, pc := range pieces {
		if p := pc.bytes(); len(p) > 0 {
			e.rcv = append(e.rcv, p)
			e.rcvLen += len(p)
		}
	}
	e.kick()
}

func (e *end) finArrived(from *end) {
	if from.state == stFinSent {
		from.state = stClosed // its close is complete
	}
	switch e.state {
	case stOpen:
		e.finRcvd = true
		e.kick()
	case stFinSent:
		e.state = stClosed // both sides closed
	}
}

func (e *end) rstArrived() {
	switch e.state {
	case stSynSent:
		e.c.dialFailed(ErrConnRefused)
	case stSynRcvd:
		e.abandonHandshake()
	case stOpen, stFinSent:
		e.broken(errorf(e, ErrConnReset))
	}
}

// errorf names the connection in a break reported at e.
func errorf(e *end, err error) error {
	return fmt.Errorf("connection %s->%s: %w", e.local, e.remote, err)
}
