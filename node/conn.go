package node

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection. Requests are answered in order, one at a
// time, as Kafka does: the next request is not started until the current one
// has its response (or, for Produce with acks=0, has been handled). A request
// that must wait (long-poll Fetch, acks=all Produce, a metadata change) parks
// and calls respond later; requests behind it stay queued.
//
// One exception makes group commit possible: a Produce whose records are
// appended and which waits only for them to become durable lets the next
// request start if that one is a Produce too. Idempotent clients keep up to
// five produce requests in flight on a connection; appending them all before
// the first is durable lets one flush cover them all, instead of one flush
// each, one after another. Their responses still leave in request order (an
// answered request holds its response until those before it have gone:
// sendAnswered), and since the appends happen in request order too, the log
// sees exactly what it would have seen one request at a time: only their
// acknowledgements overlap.
type conn struct {
	b      *Broker
	id     uint64 // the n-th connection this broker accepted, for logs and order
	c      env.Conn
	frames *wire.FrameReader
	// controller says the connection came to the CONTROLLER listener: the
	// requests on it are for the active controller (forward.go).
	controller bool
	// queue holds frames received but not yet started. Kafka mutes a socket
	// while a request is in flight; env.Net cannot stop reading, so frames
	// wait here instead.
	queue [][]byte
	// queuedBytes counts the bytes of queue. A client may pipeline, but a
	// client that keeps sending while a request is parked would otherwise
	// grow the queue without bound: past queuedBytesMax it is disconnected.
	queuedBytes int
	// started are the requests started and not yet answered on the wire,
	// oldest first. All but the last have let the next one start.
	started []*request
	// starting is set while startNext runs: a request answered from inside
	// its own dispatch lets startNext's loop go on, instead of starting the
	// next request one stack frame deeper (a client pipelining thousands of
	// requests would otherwise grow the stack without bound).
	starting bool
	closed   bool

	// idle runs while no request is started or queued, from the last bytes
	// in or out (connections.max.idle.ms): each delivery stops it, and it
	// is armed afresh once nothing is in flight; responses go out only
	// while their request is started, so the last one written is where a
	// quiet spell begins. The timer itself measures idleness: env.Clock's
	// timers count elapsed time, while Now may jump.
	idle env.Timer
	// read is armed while part of a frame has arrived, from the first bytes
	// of that frame (sluice.request.read.timeout.ms); it runs whether or
	// not a request is parked, since a client writes a frame whole.
	read env.Timer
}

// maxOvertaking bounds how many produce requests may be started while the
// oldest awaits durability: the five in flight that idempotent Kafka
// clients allow, with room to spare.
const maxOvertaking = 8

// request is one request being handled.
type request struct {
	c      *conn
	header wire.RequestHeader
	body   kmsg.Request
	// overtakable says the handler's work on shared state is done and only
	// the answer is awaited: the next request may start (see conn).
	overtakable bool
	// done says the request is answered; the answer is held in frame or
	// parts until every request started before it has been sent.
	done   bool
	frame  []byte
	parts  []framePart
	sender env.FileSender
	// closeWhy, if set, makes the answer a close of the connection, once
	// the answers of the requests before it have gone (closeErr says why).
	closeWhy string
	closeErr error
	// raw is the request's frame, kept for the APIs a broker may forward
	// to the controller (forward.go).
	raw []byte
	// forwarded, set on a request that came in an Envelope, receives the
	// answer's frame instead of a connection.
	forwarded func(frame []byte)
}

// acceptController accepts a Kafka connection on the CONTROLLER listener
// (raft's own connections there go to the quorum's transport).
func (b *Broker) acceptController(c env.Conn) env.ConnHandler {
	cn := b.accept(c).(*conn)
	cn.controller = true
	return cn
}

func (b *Broker) accept(c env.Conn) env.ConnHandler {
	b.connSeq++
	cn := &conn{
		b:      b,
		id:     b.connSeq,
		c:      c,
		frames: wire.NewFrameReader(wire.FrameReaderConfig{MaxBytes: b.cfg.SocketRequestMaxBytes}),
	}
	b.conns[cn.id] = cn
	cn.watchIdle() // a client that connects and says nothing is idle too
	return cn
}

// OnData feeds arriving bytes to the framer and starts the next request if
// none is in flight.
func (cn *conn) OnData(p []byte) {
	if cn.closed {
		return
	}
	stopTimer(&cn.idle)
	cn.frames.Feed(p)
	framed := false
	for {
		frame, ok, err := cn.frames.Next()
		if err != nil {
			cn.fail("bad frame", err)
			return
		}
		if !ok {
			break
		}
		cn.queue = append(cn.queue, frame)
		cn.queuedBytes += len(frame)
		framed = true
	}
	if limit := cn.queuedBytesMax(); cn.queuedBytes > limit {
		cn.fail("too many requests queued behind one in flight", fmt.Errorf("%d bytes queued, limit %d", cn.queuedBytes, limit))
		return
	}
	cn.watchRead(framed)
	cn.startNext()
}

// watchRead keeps the read timer running while part of a frame has
// arrived, counting from that frame's first bytes: a frame completed in
// this delivery (framed) means the part now held is a new frame's.
func (cn *conn) watchRead(framed bool) {
	if cn.frames.Buffered() == 0 {
		stopTimer(&cn.read)
		return
	}
	timeout := cn.b.cfg.RequestReadTimeout
	if timeout < 0 || (cn.read != nil && !framed) {
		return
	}
	stopTimer(&cn.read)
	cn.read = cn.b.env.Clock.AfterFunc(timeout, cn.readTimedOut)
}

// readTimedOut closes a connection whose frame did not arrive whole in time.
func (cn *conn) readTimedOut() {
	cn.read = nil
	if cn.closed {
		return
	}
	got, size := cn.frames.Pending()
	what := fmt.Sprintf("%d of the 4 bytes of a request's size", got)
	if size >= 0 {
		what = fmt.Sprintf("%d of the %d bytes of a request", got-4, size)
	}
	cn.fail("request read timed out", fmt.Errorf("%s arrived, the rest not within sluice.request.read.timeout.ms (%v)",
		what, cn.b.cfg.RequestReadTimeout))
}

// watchIdle arms the idle timer, unless it runs already or a request is in
// flight. It is called once whatever could start has started, after every
// delivery and every response.
func (cn *conn) watchIdle() {
	timeout := cn.b.cfg.ConnectionsMaxIdle
	if cn.closed || cn.idle != nil || timeout < 0 || len(cn.started) > 0 || len(cn.queue) > 0 {
		return
	}
	cn.idle = cn.b.env.Clock.AfterFunc(timeout, cn.idleTimedOut)
}

// idleTimedOut closes a connection that stayed quiet for
// connections.max.idle.ms. Kafka does this silently (a trace log): it is
// how a broker sheds the connections clients forgot, not a fault.
func (cn *conn) idleTimedOut() {
	cn.idle = nil
	if cn.closed {
		return
	}
	cn.b.env.Log.Debug("closing idle connection", "conn", cn.id, "remote", cn.c.RemoteAddr(),
		"idle", cn.b.cfg.ConnectionsMaxIdle)
	cn.close()
}

// stopTimer stops *t, if set, and clears it.
func stopTimer(t *env.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// queuedBytesMax is how much a connection may queue: two maximal requests,
// far more than clients pipeline (franz-go and the Java client keep at most
// five produce requests of a megabyte or so in flight).
func (cn *conn) queuedBytesMax() int {
	return 2 * int(cn.b.cfg.SocketRequestMaxBytes)
}

// OnClose forgets the connection; a parked request's response goes nowhere.
func (cn *conn) OnClose(err error) {
	cn.forget()
}

// close closes the connection from our side.
func (cn *conn) close() {
	if cn.closed {
		return
	}
	cn.forget()
	cn.c.Close()
}

// forget marks the connection closed and drops what the broker holds for it.
func (cn *conn) forget() {
	cn.closed = true
	delete(cn.b.conns, cn.id)
	stopTimer(&cn.idle)
	stopTimer(&cn.read)
}

// fail logs why the connection is being closed, then closes it. The same
// reason from the same host is logged at most once a minute (warnings.go).
func (cn *conn) fail(why string, err error) {
	remote := cn.c.RemoteAddr()
	cn.b.warnings.warn(hostOf(remote), "closing connection: "+why, "conn", cn.id, "remote", remote, "err", err)
	cn.close()
}

// startNext parses and dispatches queued requests until one is in flight
// that the next may not overtake.
func (cn *conn) startNext() {
	if cn.starting {
		return
	}
	cn.starting = true
	defer func() {
		cn.starting = false
		cn.watchIdle()
	}()
	for !cn.closed && len(cn.queue) > 0 && cn.mayStart(cn.queue[0]) {
		frame := cn.queue[0]
		cn.queue[0] = nil
		cn.queue = cn.queue[1:]
		cn.queuedBytes -= len(frame)
		req, err := cn.b.table.ParseRequest(frame)
		if err != nil {
			cn.rejectRequest(err)
			continue
		}
		r := &request{c: cn, header: req.Header, body: req.Body}
		if forwardedKeys[r.header.Key] {
			r.raw = frame
		}
		cn.started = append(cn.started, r)
		cn.b.dispatch(r)
		if r.header.Key == produceKey {
			cn.recycle(r, frame)
		}
	}
}

// recycle hands a Produce's frame back to the connection once its handler
// has returned: by then its records are in the log (written, so copied into
// the page cache) or rejected, and what waits for durability holds only the
// response. Nothing of the request may be read after this; body goes so that
// a mistake fails loudly instead of reading reused bytes.
func (cn *conn) recycle(r *request, frame []byte) {
	r.body = nil
	if rc, ok := cn.c.(env.FrameRecycler); ok {
		rc.Recycle(frame)
	}
}

// BorrowsFrame implements env.FrameBorrower: the connection recycles the
// frames of Produce requests, and only those.
func (cn *conn) BorrowsFrame(head []byte) bool {
	key, ok := wire.FrameAPIKey(head)
	return ok && key == produceKey
}

// mayStart says whether the request in frame may start now: when nothing
// else is in flight, or when it is a Produce and every request in flight is
// a Produce waiting only for durability.
func (cn *conn) mayStart(frame []byte) bool {
	if len(cn.started) == 0 {
		return true
	}
	if len(cn.started) >= maxOvertaking || !cn.started[len(cn.started)-1].overtakable {
		return false
	}
	key, ok := wire.FrameAPIKey(frame)
	return ok && key == produceKey
}

// produceKey is Produce's API key.
var produceKey = (&kmsg.ProduceRequest{}).Key()

// rejectRequest closes the connection for a request the table refused, as
// Kafka does: a client that sends a version it was not offered, or bytes that
// do not decode, has lost track of the protocol and nothing it sends next can
// be trusted. The log says which.
func (cn *conn) rejectRequest(err error) {
	var unsupported *wire.UnsupportedError
	if errors.As(err, &unsupported) {
		cn.fail("unsupported request", err)
		return
	}
	cn.fail("malformed request", err)
}

// respond sends resp as the answer to r and lets the connection go on to its
// next request. resp carries its own version: handlers make it with
// r.body.ResponseKind(), which copies the request's (ApiVersions alone may
// answer in another). Responding after the connection closed sends nothing.
func (r *request) respond(resp kmsg.Response) {
	r.answer()
	if resp != nil {
		r.frame = wire.AppendResponse(make([]byte, 0, responseSizeHint(resp)), r.header.CorrelationID, resp)
	}
	if r.forwarded != nil {
		r.forwarded(r.frame)
		return
	}
	r.c.sendAnswered()
}

// respondFrame answers r with a whole response frame (a forwarded
// request's answer, from the controller).
func (r *request) respondFrame(frame []byte) {
	r.answer()
	r.frame = frame
	if r.forwarded != nil {
		r.forwarded(r.frame)
		return
	}
	r.c.sendAnswered()
}

// respondParts sends a response laid out in parts (see fetch_encode.go),
// file ranges by sendfile, and lets the connection go on to its next
// request.
func (r *request) respondParts(parts []framePart, sender env.FileSender) {
	r.answer()
	r.parts, r.sender = parts, sender
	r.c.sendAnswered()
}

// letNextStart says r's handler is done with shared state and only awaits
// its answer: a Produce may start behind it (see conn).
func (r *request) letNextStart() {
	r.overtakable = true
	r.c.startNext()
}

func (r *request) answer() {
	if r.done {
		panic("node: request " + r.header.String() + " answered twice")
	}
	r.done = true
}

// sendAnswered writes the answers of the oldest started requests that have
// one, in order, then starts whatever may start next.
func (cn *conn) sendAnswered() {
	for !cn.closed && len(cn.started) > 0 && cn.started[0].done {
		r := cn.started[0]
		cn.started[0] = nil
		cn.started = cn.started[1:]
		if r.closeWhy != "" {
			cn.fail(r.closeWhy, r.closeErr)
			return
		}
		if err := cn.send(r); err != nil {
			// Part of a frame may be out: the stream is broken.
			cn.fail("send response", err)
			return
		}
	}
	cn.startNext()
}

// send writes r's answer, if it has one.
func (cn *conn) send(r *request) error {
	if r.frame != nil {
		return cn.c.Write(r.frame)
	}
	for _, part := range r.parts {
		var err error
		if part.bytes != nil {
			err = cn.c.Write(part.bytes)
		} else {
			err = r.sender.SendFile(part.chunk.File, part.chunk.Position, part.chunk.Size)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// noResponse finishes a request that gets no answer (Produce with acks=0).
func (r *request) noResponse() { r.respond(nil) }

// closeInstead answers r by closing the connection (as Kafka tells a
// producer with acks=0 that a write failed), after the answers of the
// requests started before it, which may still be waiting to be durable,
// have gone out.
func (r *request) closeInstead(why string, err error) {
	r.answer()
	r.closeWhy, r.closeErr = why, err
	r.c.sendAnswered()
}

// responseSizeHint guesses a response's encoded size, so that a Fetch
// response carrying megabytes of records is encoded into one buffer instead
// of one that doubles (and copies) its way up.
func responseSizeHint(resp kmsg.Response) int {
	fetch, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 256
	}
	n := 64
	for _, t := range fetch.Topics {
		n += 32 + len(t.Topic)
		for _, p := range t.Partitions {
			n += 64 + len(p.RecordBatches)
		}
	}
	return n
}
