package simnet

import (
	"time"

	"github.com/sluicemq/sluice/sim/sched"
)

type segKind uint8

const (
	segSyn segKind = iota
	segSynAck
	segAck
	segData
	segFin
	segRst
)

// segment is what crosses a link in one piece. A data segment may carry
// several writes that arrive together.
type segment struct {
	kind     segKind
	pieces   []piece
	arriveAt time.Duration
}

// piece is what one Write or SendFile put in a data segment: bytes, or a
// file range whose bytes are read before the segment arrives (sendfile.go).
type piece struct {
	p    []byte
	file *fileRead
}

// bytes returns the piece's payload; a file range's once it is read.
func (pc piece) bytes() []byte {
	if pc.file != nil {
		return pc.file.data
	}
	return pc.p
}

// pipe carries one direction of a connection: segments sent by from, in
// order, to to.
type pipe struct {
	c        *conn
	from, to *end
	link     *link // from's host to to's host: carries the segments
	back     *link // the other way: carries their acknowledgements
	// segs are sent and not yet arrived; arriveAt never decreases along it.
	segs       []segment
	lastArrive time.Duration
	// transit is the arrival event of segs[0]; nil while held or empty.
	transit *sched.Event
	// held: segs[0] was dropped (link cut, or its host down) and waits for
	// a retransmission that can get through.
	held      bool
	heldSince time.Duration
	// ackLost: something arrived but its acknowledgement could not come
	// back (back was cut), so the sender is still retransmitting it.
	ackLost      bool
	ackLostSince time.Duration
	// rto breaks the connection at from if the pipe stays blocked.
	rto *sched.Event
	// holdUntil holds back every arrival before it, on this pipe alone
	// (StallConn); like a link's stall it never arms the RTO.
	holdUntil time.Duration

	// reads are the file ranges queued by SendFile and not yet read, in
	// the order sent; read is the event that reads reads[0], at its readAt.
	// lastReadAt is the latest read time drawn, so reads stay in order.
	reads      []*fileRead
	read       *sched.Event
	lastReadAt time.Duration

	transitFn, rtoFn, readFn func()
}

func (n *Network) newPipe(c *conn, from, to *end) *pipe {
	p := &pipe{c: c, from: from, to: to,
		link: n.link(from.h.name, to.h.name), back: n.link(to.h.name, from.h.name)}
	p.transitFn, p.rtoFn, p.readFn = p.onTransit, p.onRTO, p.onRead
	return p
}

func (p *pipe) now() time.Duration { return p.c.n.s.Now() }

func (p *pipe) empty() bool { return len(p.segs) == 0 && p.rto == nil }

// send queues a segment. It arrives after a latency drawn from the link,
// but not before the segment ahead of it; a write that would arrive
// together with the data ahead of it joins that segment.
func (p *pipe) send(kind segKind, data []byte) {
	var pc *piece
	if data != nil {
		pc = &piece{p: data}
	}
	p.sendPiece(kind, pc)
}

// sendPiece is send with the payload of a data segment as a piece (nil for
// none). It returns when the segment is due to arrive.
func (p *pipe) sendPiece(kind segKind, pc *piece) time.Duration {
	at := p.enqueue(kind, pc)
	p.pump()
	return at
}

// enqueue is sendPiece without scheduling the arrival: the caller pumps.
func (p *pipe) enqueue(kind segKind, pc *piece) time.Duration {
	at := max(p.now()+p.link.sample(), p.lastArrive)
	if k := len(p.segs); kind == segData && k > 0 {
		if last := &p.segs[k-1]; last.kind == segData && last.arriveAt == at {
			if pc != nil {
				last.pieces = append(last.pieces, *pc)
			}
			return at
		}
	}
	p.lastArrive = at
	seg := segment{kind: kind, arriveAt: at}
	if pc != nil {
		seg.pieces = []piece{*pc}
	}
	p.segs = append(p.segs, seg)
	return at
}

// pump schedules the arrival of the first segment if it may travel.
func (p *pipe) pump() {
	if p.transit != nil || p.held || len(p.segs) == 0 {
		return
	}
	at := max(p.segs[0].arriveAt, p.now())
	label := sched.Label{Kind: "net.arrive", Node: p.to.h.name, Digest: p.c.id<<8 | uint64(p.segs[0].kind)}
	p.transit = p.c.n.s.At(at, label, p.transitFn)
}

func (p *pipe) onTransit() {
	p.transit = nil
	if len(p.segs) == 0 {
		return
	}
	now := p.now()
	switch {
	case now < p.link.stallUntil || now < p.holdUntil:
		p.delay(max(p.link.stallUntil, p.holdUntil))
		p.pump()
		return
	case p.link.blocks(p.c.port) || !p.to.h.up:
		p.held, p.heldSince = true, now
		p.updateRTO()
		return
	}
	// A file range that has not been read yet is read now, on its way out;
	// if that fails, the segment keeps what was read and is the last.
	p.readThrough()
	seg := p.segs[0]
	p.segs[0] = segment{}
	p.segs = p.segs[1:]
	p.arrive(seg)
	p.pump()
	p.updateRTO()
	p.c.maybeRetire()
}

// delay holds every queued segment back until at least t.
func (p *pipe) delay(t time.Duration) {
	for i := range p.segs {
		p.segs[i].arriveAt = max(p.segs[i].arriveAt, t)
	}
	p.lastArrive = max(p.lastArrive, t)
}

// arrive hands a segment to its destination host.
func (p *pipe) arrive(seg segment) {
	to := p.to
	if seg.kind == segData || seg.kind == segFin || seg.kind == segAck {
		p.acknowledge()
	}
	if seg.kind != segSyn && to.forgotten() {
		// The host rebooted since, or gave the connection up: it answers
		// whatever it does not know with an RST, every time.
		if seg.kind != segRst {
			to.out.send(segRst, nil)
		}
		return
	}
	switch seg.kind {
	case segSyn:
		p.c.synArrived()
	case segSynAck:
		p.c.synAckArrived()
	case segAck:
		p.c.ackArrived()
	case segData:
		to.dataArrived(seg.pieces)
	case segFin:
		to.finArrived(p.from)
	case segRst:
		to.rstArrived()
	}
}

// acknowledge notes whether the acknowledgement of what just arrived can
// get back to the sender.
func (p *pipe) acknowledge() {
	switch {
	case !p.back.blocks(p.c.port):
		p.ackLost = false
	case !p.ackLost:
		p.ackLost, p.ackLostSince = true, p.now()
	}
}

// reconsider retransmits what was held or unacknowledged, now that a link
// healed or a host came back.
func (p *pipe) reconsider() {
	if p.held && !p.link.blocks(p.c.port) && p.to.h.up {
		p.resume()
	}
	if p.ackLost && !p.back.blocks(p.c.port) {
		p.ackLost = false
		if p.from.live() && p.to.stale() {
			// The retransmission of the unacknowledged tail finds out what
			// became of the peer's host.
			p.send(segData, nil)
		}
		p.updateRTO()
	}
}

// resume retransmits the held segments, after the link's latency plus a
// backoff that grows with how long they were held.
func (p *pipe) resume() {
	now := p.now()
	backoff := time.Duration(p.link.draw(int64(min(now-p.heldSince, MaxBackoff))))
	p.held = false
	p.delay(now + p.link.sample() + backoff)
	p.pump()
	p.updateRTO()
}

// clear discards everything in the pipe: its sender is gone.
func (p *pipe) clear() {
	clear(p.segs)
	p.segs = p.segs[:0]
	if p.transit != nil {
		p.transit.Cancel()
		p.transit = nil
	}
	p.dropReads()
	p.held, p.ackLost = false, false
	p.updateRTO()
}

// blockedSince reports whether the sender is retransmitting in vain, and
// since when.
func (p *pipe) blockedSince() (time.Duration, bool) {
	if !p.from.live() {
		return 0, false
	}
	switch {
	case p.held && p.ackLost:
		return min(p.heldSince, p.ackLostSince), true
	case p.held:
		return p.heldSince, true
	case p.ackLost:
		return p.ackLostSince, true
	}
	return 0, false
}

// updateRTO arms the retransmission timeout while the pipe is blocked and
// disarms it otherwise.
func (p *pipe) updateRTO() {
	since, blocked := p.blockedSince()
	if !blocked {
		if p.rto != nil {
			p.rto.Cancel()
			p.rto = nil
		}
		return
	}
	if p.rto == nil {
		at := max(since+p.c.n.rto, p.now())
		label := sched.Label{Kind: "net.rto", Node: p.from.h.name, Digest: p.c.id}
		p.rto = p.c.n.s.At(at, label, p.rtoFn)
	}
}

func (p *pipe) onRTO() {
	p.rto = nil
	since, blocked := p.blockedSince()
	switch {
	case !blocked:
	case p.now() < since+p.c.n.rto:
		p.updateRTO()
	default:
		from := p.from
		from.abort(errorf(from, ErrTimedOut))
	}
	p.c.maybeRetire()
}
