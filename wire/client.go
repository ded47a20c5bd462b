package wire

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/env"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is the client side of a Kafka connection over env.Net: it frames
// kmsg requests, pipelines them, and matches responses to requests in order.
// The simulator's deterministic clients and the broker's tests use it; it runs
// on a loop like everything else, so it has no timeouts of its own (a caller
// that wants one arms a timer and calls Close).
type Client struct {
	conn     env.Conn
	clientID string
	frames   *FrameReader
	nextID   int32
	pending  []pendingRequest
	closed   bool
	closeErr error
	// recycle: the connection may lend large response frames, handed back
	// once their callback returns (DialRecycling). Set before the handler
	// is attached and never changed: BorrowsFrame reads it from the
	// connection's reader.
	recycle bool
}

type pendingRequest struct {
	correlationID int32
	req           kmsg.Request
	done          func(kmsg.Response, error)
}

// ErrClientClosed is passed to a request's callback when the connection
// closed before its response arrived: whether the broker acted on it is
// unknown.
var ErrClientClosed = errors.New("wire client: connection closed before the response")

// Dial connects to addr; connected runs on the loop with the client or the
// dial error.
func Dial(n env.Net, addr, clientID string, connected func(*Client, error)) {
	dial(n, addr, clientID, false, connected)
}

// DialRecycling is Dial for a client whose callbacks keep no reference to
// a response's bytes once they return (a decoded response's byte slices,
// such as a fetch's RecordBatches, point into its frame): each response
// frame is then handed back to the connection (env.FrameRecycler) after its
// callback, so that large responses are read into the same warm buffers
// instead of fresh memory. A follower's fetcher reads every replicated byte
// this way. The simulator overwrites a recycled frame with junk, so a
// callback that keeps one fails its checks.
func DialRecycling(n env.Net, addr, clientID string, connected func(*Client, error)) {
	dial(n, addr, clientID, true, connected)
}

func dial(n env.Net, addr, clientID string, recycle bool, connected func(*Client, error)) {
	n.Dial(addr, func(conn env.Conn, err error) env.ConnHandler {
		if err != nil {
			connected(nil, err)
			return nil
		}
		c := &Client{conn: conn, clientID: clientID, frames: NewFrameReader(FrameReaderConfig{}), recycle: recycle}
		connected(c, nil)
		return c
	})
}

// BorrowsFrame implements env.FrameBorrower: a client made by DialRecycling
// hands every frame back.
func (c *Client) BorrowsFrame([]byte) bool { return c.recycle }

// Request sends req; done runs on the loop with its response (decoded at the
// request's version) or an error. Callbacks run in request order. A Produce
// with acks=0 gets no response: done runs at once with a nil response.
func (c *Client) Request(req kmsg.Request, done func(kmsg.Response, error)) {
	if c.closed {
		done(nil, c.closedError())
		return
	}
	c.nextID++
	frame := AppendRequest(nil, c.nextID, c.clientID, req)
	if err := c.conn.Write(frame); err != nil {
		c.shutdown(err)
		done(nil, c.closedError())
		return
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		done(nil, nil)
		return
	}
	c.pending = append(c.pending, pendingRequest{correlationID: c.nextID, req: req, done: done})
}

// Pending returns how many requests await their response.
func (c *Client) Pending() int { return len(c.pending) }

// Close closes the connection; requests still pending get ErrClientClosed.
func (c *Client) Close() {
	if c.closed {
		return
	}
	c.conn.Close()
	c.shutdown(nil)
}

// OnData implements env.ConnHandler.
func (c *Client) OnData(p []byte) {
	if c.closed {
		return
	}
	c.frames.Feed(p)
	for !c.closed {
		frame, ok, err := c.frames.Next()
		if err != nil {
			c.conn.Close()
			c.shutdown(err)
			return
		}
		if !ok {
			return
		}
		err = c.deliver(frame)
		if c.recycle {
			if rc, ok := c.conn.(env.FrameRecycler); ok {
				rc.Recycle(frame)
			}
		}
		if err != nil {
			c.conn.Close()
			c.shutdown(err)
			return
		}
	}
}

// OnClose implements env.ConnHandler.
func (c *Client) OnClose(err error) { c.shutdown(err) }

// deliver decodes one response frame and completes the oldest request.
func (c *Client) deliver(frame []byte) error {
	if len(c.pending) == 0 {
		return errors.New("wire client: a response arrived with no request pending")
	}
	p := c.pending[0]
	c.pending = c.pending[1:]
	key, version := p.req.Key(), p.req.GetVersion()
	corr, body, err := ParseResponse(frame, key, version)
	if err != nil {
		p.done(nil, err)
		return err
	}
	if corr != p.correlationID {
		err := fmt.Errorf("wire client: response correlation id %d, expected %d", corr, p.correlationID)
		p.done(nil, err)
		return err
	}
	resp := p.req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		// ApiVersions answers a version it does not serve in v0.
		if av, ok := resp.(*kmsg.ApiVersionsResponse); ok {
			av.Version = 0
			if err0 := av.ReadFrom(body); err0 == nil {
				p.done(av, nil)
				return nil
			}
		}
		err = fmt.Errorf("wire client: decode %s v%d response: %w", kmsg.NameForKey(key), version, err)
		p.done(nil, err)
		return err
	}
	p.done(resp, nil)
	return nil
}

func (c *Client) shutdown(err error) {
	if c.closed {
		return
	}
	c.closed, c.closeErr = true, err
	pending := c.pending
	c.pending = nil
	for _, p := range pending {
		p.done(nil, c.closedError())
	}
}

func (c *Client) closedError() error {
	if c.closeErr != nil {
		return fmt.Errorf("%w: %v", ErrClientClosed, c.closeErr)
	}
	return ErrClientClosed
}
