package simnet

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/sched"
)

// SetSendFile says whether connections made from now on implement
// env.FileSender (they do by default). Without it, callers take their
// copying path, reading the bytes and writing them.
func (n *Network) SetSendFile(on bool) { n.noSendFile = !on }

// Stats counts what SendFile did.
type Stats struct {
	SendFiles       int   // ranges queued
	SendFileBytes   int64 // bytes read for them
	SendFilesFailed int   // ranges whose read failed or came up short, ending their stream
}

// Stats returns the network's counters.
func (n *Network) Stats() Stats { return n.stats }

// plainConn is an end as its application holds it when the network does
// not offer SendFile: env.Conn's methods and nothing more.
type plainConn struct{ env.Conn }

// app returns the end as its application holds it.
func (e *end) app() env.Conn {
	if e.c.noSendFile {
		return plainConn{e}
	}
	return e
}

var _ env.FileSender = (*end)(nil)

// duper is a file that SendFile can read after the caller closes it, as
// osenv reads a duplicated descriptor: a simfs file (simfs's Dup).
type duper interface {
	Dup() (env.File, error)
}

// fileRead is a file range queued by SendFile: read at readAt, or when its
// segment arrives if that comes first.
type fileRead struct {
	f      env.File // a duplicate of the caller's file, closed once read
	name   string
	off, n int64
	readAt time.Duration
	data   []byte // what was read, once done
	done   bool
}

// SendFile implements env.FileSender as osenv's sendfile does:
//
//   - The range is queued behind what was sent before and read when it goes
//     out, at a seeded time between the call and the segment's arrival
//     (one in four at once, one in four as it arrives), so a change to the
//     range meanwhile may or may not show, as in production. Closing,
//     removing or renaming the file meanwhile is harmless: the range is read
//     through a duplicate (simfs's Dup), as osenv duplicates the descriptor.
//   - The read is a simfs read: the disk's read faults strike it. A flipped
//     bit goes out flipped; an error (env.ErrIO) or a file that ends before
//     the range does (truncated meanwhile) ends the stream there, as a
//     failing sendfile makes osenv's writer close the socket: the peer gets
//     the bytes before, then a FIN, or an RST when this end had bytes
//     waiting unread (one time in two), and nothing queued after; this end
//     reports the error through OnClose, after dropping what it had
//     received, unless the peer's FIN came first.
//   - Errors returned at once: the connection closed (env.ErrClosed), a
//     file simnet cannot read later (not a simfs file), a negative range,
//     or a closed file (env.ErrClosed, from Dup). An empty range sends
//     nothing. On a connection that broke but has not said so yet, the
//     range is either refused with env.ErrClosed or accepted and lost,
//     drawn from the seed: osenv does either, depending on whether its
//     writer has stopped yet.
func (e *end) SendFile(f env.File, off, n int64) error {
	if e.done() {
		return fmt.Errorf("send file to %s: %w", e.remote, env.ErrClosed)
	}
	d, ok := f.(duper)
	if !ok {
		return fmt.Errorf("send file to %s: %T is not a simfs file", e.remote, f)
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("send file %s to %s: bad range [%d, +%d)", f.Name(), e.remote, off, n)
	}
	if n == 0 {
		return nil
	}
	dup, err := d.Dup()
	if err != nil {
		return fmt.Errorf("send file to %s: %w", e.remote, err)
	}
	if e.state != stOpen {
		dup.Close()
		if e.out.link.draw(1) == 0 {
			return fmt.Errorf("send file to %s: %w", e.remote, env.ErrClosed)
		}
		return nil
	}
	e.out.sendFile(&fileRead{f: dup, name: f.Name(), off: off, n: n})
	return nil
}

// sendFile queues fr as a piece of a data segment and draws when it is
// read: not before the last read queued, nor after the segment arrives.
func (p *pipe) sendFile(fr *fileRead) {
	at := p.sendPiece(segData, &piece{file: fr})
	lo := max(p.now(), p.lastReadAt)
	at = max(at, lo) // arrivals never go back along a pipe, so this only guards the draw
	switch p.link.draw(3) {
	case 0:
		fr.readAt = lo // the writer gets to it at once
	case 1:
		fr.readAt = at // it is read as it leaves
	default:
		fr.readAt = lo + time.Duration(p.link.draw(int64(at-lo)))
	}
	p.lastReadAt = fr.readAt
	p.reads = append(p.reads, fr)
	p.c.n.stats.SendFiles++
	p.pumpReads()
}

// pumpReads schedules the read of the first queued range, if none is.
func (p *pipe) pumpReads() {
	if p.read != nil || len(p.reads) == 0 {
		return
	}
	label := sched.Label{Kind: "net.sendfile", Node: p.from.h.name, Digest: p.c.id}
	p.read = p.c.n.s.At(max(p.reads[0].readAt, p.now()), label, p.readFn)
}

func (p *pipe) onRead() {
	p.read = nil
	if len(p.reads) > 0 {
		p.readNext()
	}
	p.pumpReads()
	p.pump() // a failed read may have queued a FIN or an RST
	p.c.maybeRetire()
}

// readThrough reads the queued ranges up to the last one in the first
// segment, which is about to arrive. The caller pumps.
func (p *pipe) readThrough() {
	for len(p.reads) > 0 && len(p.segs) > 0 && unread(p.segs[0]) {
		if p.read != nil {
			p.read.Cancel()
			p.read = nil
		}
		p.readNext()
	}
	p.pumpReads()
}

func unread(seg segment) bool {
	for _, pc := range seg.pieces {
		if pc.file != nil && !pc.file.done {
			return true
		}
	}
	return false
}

// readNext reads the first queued range from its file; a read that fails
// or comes up short ends the stream.
func (p *pipe) readNext() {
	fr := p.reads[0]
	p.reads[0] = nil
	p.reads = p.reads[1:]
	data, err := fr.readFile()
	fr.f.Close()
	fr.f, fr.data, fr.done = nil, data, true
	p.c.n.stats.SendFileBytes += int64(len(data))
	if err != nil {
		p.c.n.stats.SendFilesFailed++
		p.sendFailed(fr, err)
	}
}

// readFile reads the range through the duplicate: all of it, or what comes
// before the end of the file or a failure, and the reason it stopped.
func (fr *fileRead) readFile() ([]byte, error) {
	size, err := fr.f.Size()
	if err != nil {
		return nil, fmt.Errorf("sendfile: %w", err)
	}
	buf := make([]byte, min(fr.n, max(size-fr.off, 0)))
	k, err := fr.f.ReadAt(buf, fr.off)
	switch {
	case int64(k) == fr.n:
		return buf, nil
	case err == nil || errors.Is(err, io.EOF):
		return buf[:k], fmt.Errorf("sendfile %s: the file ended %d bytes early", fr.name, fr.n-int64(k))
	default:
		return buf[:k], fmt.Errorf("sendfile: %w", err)
	}
}

// sendFailed ends the stream after what fr read, as osenv's writer does
// when sendfile fails: it closes the socket, so the peer gets what went
// before, then a FIN, or an RST if bytes were waiting unread (Linux resets
// a socket closed with unread data); what was queued after is dropped, and
// this end reports err.
func (p *pipe) sendFailed(fr *fileRead, err error) {
	p.cutAfter(fr)
	p.dropReads()
	e := p.from
	kind := segFin
	if e.rcvLen > 0 && p.link.draw(1) == 0 {
		kind, e.rstSent = segRst, true
	}
	p.enqueue(kind, nil)
	e.state = stGone
	if !e.finRcvd && e.err == nil {
		e.err = errorf(e, err)
		e.dropReceived()
	}
	p.updateRTO()
	e.kick()
}

// cutAfter drops everything queued after fr's piece.
func (p *pipe) cutAfter(fr *fileRead) {
	for i := range p.segs {
		for j, pc := range p.segs[i].pieces {
			if pc.file != fr {
				continue
			}
			seg := &p.segs[i]
			clear(seg.pieces[j+1:])
			seg.pieces = seg.pieces[:j+1]
			clear(p.segs[i+1:])
			p.segs = p.segs[:i+1]
			p.lastArrive = seg.arriveAt
			return
		}
	}
	panic(fmt.Sprintf("simnet: the range [%d, +%d) of %s read for connection %d is in none of its %d segments",
		fr.off, fr.n, fr.name, p.c.id, len(p.segs)))
}

// dropReads forgets the ranges not yet read: their segments are gone.
func (p *pipe) dropReads() {
	for _, fr := range p.reads {
		fr.f.Close()
		fr.f, fr.done = nil, true
	}
	clear(p.reads)
	p.reads = p.reads[:0]
	if p.read != nil {
		p.read.Cancel()
		p.read = nil
	}
}
