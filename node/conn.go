package node

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/node/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection. Requests are answered in order, one at a
// time, as Kafka does: the next request is not started until the current one
// has its response (or, for Produce with acks=0, has been handled). A request
// that must wait (long-poll Fetch, acks=all Produce, a metadata change) parks
// and calls respond later; requests behind it stay queued.
type conn struct {
	b      *Broker
	id     uint64 // the n-th connection this broker accepted, for logs and order
	c      env.Conn
	frames *wire.FrameReader
	// queue holds frames received but not yet started. Kafka mutes a socket
	// while a request is in flight; env.Net cannot stop reading, so frames
	// wait here instead.
	queue [][]byte
	// queuedBytes counts the bytes of queue. A client may pipeline, but a
	// client that keeps sending while a request is parked would otherwise
	// grow the queue without bound: past queuedBytesMax it is disconnected.
	queuedBytes int
	inflight    *request
	// starting is set while startNext runs: a request answered from inside
	// its own dispatch lets startNext's loop go on, instead of starting the
	// next request one stack frame deeper (a client pipelining thousands of
	// requests would otherwise grow the stack without bound).
	starting bool
	closed   bool
}

// request is one request being handled.
type request struct {
	c      *conn
	header wire.RequestHeader
	body   kmsg.Request
	done   bool
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
	return cn
}

// OnData feeds arriving bytes to the framer and starts the next request if
// none is in flight.
func (cn *conn) OnData(p []byte) {
	if cn.closed {
		return
	}
	cn.frames.Feed(p)
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
	}
	if limit := cn.queuedBytesMax(); cn.queuedBytes > limit {
		cn.fail("too many requests queued behind one in flight", fmt.Errorf("%d bytes queued, limit %d", cn.queuedBytes, limit))
		return
	}
	cn.startNext()
}

// queuedBytesMax is how much a connection may queue: two maximal requests,
// far more than clients pipeline (franz-go and the Java client keep at most
// five produce requests of a megabyte or so in flight).
func (cn *conn) queuedBytesMax() int {
	return 2 * int(cn.b.cfg.SocketRequestMaxBytes)
}

// OnClose forgets the connection; a parked request's response goes nowhere.
func (cn *conn) OnClose(err error) {
	cn.closed = true
	delete(cn.b.conns, cn.id)
}

// close closes the connection from our side.
func (cn *conn) close() {
	if cn.closed {
		return
	}
	cn.closed = true
	delete(cn.b.conns, cn.id)
	cn.c.Close()
}

// fail logs why the connection is being closed, then closes it.
func (cn *conn) fail(why string, err error) {
	cn.b.env.Log.Warn("closing connection: "+why, "conn", cn.id, "remote", cn.c.RemoteAddr(), "err", err)
	cn.close()
}

// startNext parses and dispatches queued requests until one is in flight.
func (cn *conn) startNext() {
	if cn.starting {
		return
	}
	cn.starting = true
	defer func() { cn.starting = false }()
	for !cn.closed && cn.inflight == nil && len(cn.queue) > 0 {
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
		cn.inflight = r
		cn.b.dispatch(r)
	}
}

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
	if r.done {
		panic("node: request " + r.header.String() + " answered twice")
	}
	r.done = true
	cn := r.c
	if cn.closed {
		return
	}
	if resp != nil {
		frame := wire.AppendResponse(make([]byte, 0, responseSizeHint(resp)), r.header.CorrelationID, resp)
		if err := cn.c.Write(frame); err != nil {
			cn.close()
			return
		}
	}
	r.finish()
}

// finish lets the connection start its next request.
func (r *request) finish() {
	cn := r.c
	if cn.inflight == r {
		cn.inflight = nil
		cn.startNext()
	}
}

// respondParts sends a response laid out in parts (see fetch_encode.go),
// file ranges by sendfile, and lets the connection go on to its next
// request.
func (r *request) respondParts(parts []framePart, sender env.FileSender) {
	if r.done {
		panic("node: request " + r.header.String() + " answered twice")
	}
	r.done = true
	cn := r.c
	if cn.closed {
		return
	}
	for _, part := range parts {
		var err error
		if part.bytes != nil {
			err = cn.c.Write(part.bytes)
		} else {
			err = sender.SendFile(part.chunk.File, part.chunk.Position, part.chunk.Size)
		}
		if err != nil {
			// Part of a frame may be out: the stream is broken.
			cn.fail("send response", err)
			return
		}
	}
	r.finish()
}

// noResponse finishes a request that gets no answer (Produce with acks=0).
func (r *request) noResponse() { r.respond(nil) }

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
