package osenv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/env"
	"golang.org/x/sys/unix"
)

// readBufferSize is how much one read from a socket may deliver in one
// OnData call, outside a large frame read in place.
const readBufferSize = 64 << 10

// frameReadMax is how much one read into a large frame's own buffer may
// deliver. Larger than readBufferSize because each delivery costs a wake-up
// of the loop: a megabyte produce request then takes one or two instead of
// sixteen.
const frameReadMax = 1 << 20

// readAheadMax bounds the bytes a connection's reader may have posted to the
// loop and not yet delivered. A peer that sends faster than the loop keeps up
// then waits in TCP flow control instead of filling our memory.
const readAheadMax = 4 << 20

// sendQueueMax and sendQueueResume mute a connection whose peer does not
// read, as Kafka mutes a channel while a response to it is pending: once
// more than sendQueueMax bytes are queued for the peer and not yet handed to
// the kernel, the reader stops reading the socket (so TCP flow control holds
// the peer's further requests in its own buffers) until the writer has
// brought them down to sendQueueResume.
//
// Write never refuses or waits, as the loop must not block: a response of
// any size (a Fetch of tens of MiB) is always accepted whole. The bound is on
// reading, not on accepting, so a connection holds at most sendQueueMax plus
// the responses to what was read before the reader stopped (at most
// readAheadMax posted plus one read).
//
// Muting costs throughput only if the socket runs dry while the reader is
// stopped. When it resumes, the writer still has sendQueueResume bytes to
// hand over and the kernel's send buffer (a few MiB once autotuned) to
// transmit: a millisecond or more even at 10 Gbit/s, far longer than reading
// the next request, one loop turn and queueing its response. A client that
// waits for its responses (franz-go and the Java client keep one Fetch in
// flight per connection, and Produce responses are small) never reaches the
// mark, except during a single response above it, when Kafka would be muted
// too.
//
// File ranges queued by SendFile count by their length, like bytes: they
// cost no memory here, but each holds a duplicated descriptor (a peer that
// never reads would otherwise run the process out of them), and they are
// backlog the peer must take before anything queued after them.
const (
	sendQueueMax    = 4 << 20
	sendQueueResume = 1 << 20
)

// writeChunk is how many queued bytes the writer hands the kernel at once
// before it accounts for them, so that a large response lowers the queued
// count (and can let the reader resume) as it goes out, not only at its end.
const writeChunk = 256 << 10

// network is the production env.Net over TCP.
type network struct {
	node   *Node
	dialer net.Dialer
}

// Listen implements env.Net.
func (nt *network) Listen(addr string, accept func(env.Conn) env.ConnHandler) (env.Listener, error) {
	if accept == nil {
		panic("osenv: Listen with a nil accept func")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &listener{node: nt.node, ln: ln, accept: accept}
	if !register(nt.node, nt.node.listeners, l) || !nt.node.spawn(l.acceptLoop) {
		unregister(nt.node, nt.node.listeners, l)
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", addr, env.ErrClosed)
	}
	return l, nil
}

// Dial implements env.Net: it connects on a goroutine and reports on the loop.
func (nt *network) Dial(addr string, connected func(env.Conn, error) env.ConnHandler) {
	if connected == nil {
		panic("osenv: Dial with a nil callback")
	}
	n := nt.node
	spawned := n.spawn(func() {
		nc, err := nt.dialer.DialContext(n.ctx, "tcp", addr)
		if err != nil {
			n.post(func() { connected(nil, err) })
			return
		}
		c := newConn(n, nc.(*net.TCPConn))
		if c == nil {
			return // the node closed meanwhile
		}
		n.post(func() { c.attach(connected(c, nil)) })
		c.start() // after the post above, so no event can overtake it
	})
	if !spawned {
		n.post(func() { connected(nil, fmt.Errorf("dial %s: %w", addr, env.ErrClosed)) })
	}
}

// listener is the production env.Listener.
type listener struct {
	node   *Node
	ln     net.Listener
	accept func(env.Conn) env.ConnHandler
	closed atomic.Bool
}

func (l *listener) Addr() string { return l.ln.Addr().String() }

// Close implements env.Listener: connections already accepted stay open, and
// any accepted but not yet handed to the accept func are closed.
func (l *listener) Close() error {
	if l.closed.Swap(true) {
		return fmt.Errorf("close listener %s: %w", l.Addr(), env.ErrClosed)
	}
	unregister(l.node, l.node.listeners, l)
	return l.ln.Close()
}

// acceptLoop accepts connections until the listener or the node closes.
// Errors such as running out of file descriptors are retried with backoff,
// as a server must survive them.
func (l *listener) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if l.closed.Load() || l.node.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			l.node.log.Warn("accept failed; retrying", "addr", l.Addr(), "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-l.node.quit:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		c := newConn(l.node, nc.(*net.TCPConn))
		if c == nil {
			return // the node closed meanwhile
		}
		l.node.post(func() {
			if l.closed.Load() {
				c.done = true
				c.kill()
				return
			}
			c.attach(l.accept(c))
		})
		c.start()
	}
}

// conn is the production env.Conn. Its reader goroutine posts OnData and
// OnClose; its writer goroutine drains the queue that Write fills. The
// reader stops reading while the loop is too far behind it (readAheadMax) or
// the queue too far ahead of the peer (sendQueueMax).
//
// Closing has three paths. A local Close (on the loop) lets the writer flush
// the queue and half-close (FIN), then the reader discards whatever the peer
// still sends until the peer closes too, so that the kernel never answers
// unread data with a reset that could destroy what we sent. A close seen by
// the reader (EOF or an error) tears the socket down and reports OnClose. And
// kill (Node.Close, or a listener closed before the accept func ran) tears
// it down at once without a word. CloseTimeout bounds the first path.
type conn struct {
	node   *Node
	nc     *net.TCPConn
	local  string
	remote string

	// Loop-owned.
	h env.ConnHandler
	// done is set by a local Close or when OnClose is delivered: from then
	// on no event reaches h, and Write fails.
	done bool

	// quiet is set by a local Close or kill: the reader then delivers
	// nothing more, and an error it sees is ours, not the peer's.
	quiet atomic.Bool

	// readAhead counts bytes posted by the reader and not yet delivered;
	// delivered wakes a reader waiting for it to fall to readAheadMax.
	readAhead atomic.Int64
	delivered chan struct{}

	// lent are the buffers of large frames handed to h, by address of
	// their first byte, until h recycles them (frames.go); nil once the
	// reader has exited.
	lentMu sync.Mutex
	lent   map[*byte][]byte
	// borrower is h, once attached, if it borrows frames; the reader
	// asks it which frames to lend.
	borrower atomic.Pointer[env.FrameBorrower]

	// unsent counts the bytes queued by Write and SendFile and not yet
	// handed to the kernel (or dropped); drained wakes a reader muted
	// because of it (see sendQueueMax) when it falls to sendQueueResume or
	// when the reader must stop waiting: the writer exited, or quiet was
	// set.
	unsent     atomic.Int64
	drained    chan struct{}
	writerDone atomic.Bool
	// unsentPeak and mutes are for tests: the most unsent ever reached, and
	// how many times the reader stopped because of it.
	unsentPeak atomic.Int64
	mutes      atomic.Int64

	mu      sync.Mutex // guards the writer's state below
	queue   []outItem
	closing bool  // local Close: flush, then half-close
	stopped bool  // the writer must exit now
	failure error // first write error, the reason the reader reports
	wake    chan struct{}
}

// newConn registers a connection with the node, or closes it and returns nil
// if the node is closed.
func newConn(n *Node, nc *net.TCPConn) *conn {
	// Nagle would hold back small responses waiting for an ACK; the loop
	// already batches writes per turn.
	nc.SetNoDelay(true)
	c := &conn{
		node:      n,
		nc:        nc,
		local:     nc.LocalAddr().String(),
		remote:    nc.RemoteAddr().String(),
		wake:      make(chan struct{}, 1),
		delivered: make(chan struct{}, 1),
		drained:   make(chan struct{}, 1),
		lent:      make(map[*byte][]byte),
	}
	if !register(n, n.conns, c) {
		nc.Close()
		return nil
	}
	return c
}

// start runs the reader and writer. If the node is closing, Node.Close has
// killed (or will kill) the registered connection, so a refused spawn needs
// no cleanup.
func (c *conn) start() {
	if c.node.spawn(c.readLoop) {
		c.node.spawn(c.writeLoop)
	}
}

// attach installs the handler returned by the accept or connected callback.
// A nil handler means the callback does not want the connection.
func (c *conn) attach(h env.ConnHandler) {
	if c.done {
		return // closed inside the callback
	}
	if h == nil {
		c.Close()
		return
	}
	c.h = h
	if fb, ok := h.(env.FrameBorrower); ok {
		c.borrower.Store(&fb)
	}
}

func (c *conn) LocalAddr() string  { return c.local }
func (c *conn) RemoteAddr() string { return c.remote }

// Write implements env.Conn.
func (c *conn) Write(p []byte) error {
	if c.done {
		return fmt.Errorf("write to %s: %w", c.remote, env.ErrClosed)
	}
	if len(p) == 0 {
		return nil
	}
	c.mu.Lock()
	if c.stopped {
		// Broken, its OnClose on the way: nobody would send p.
		c.mu.Unlock()
		return fmt.Errorf("write to %s: %w", c.remote, env.ErrClosed)
	}
	// Counted before the writer can see it, so that the writer never
	// counts it sent first (the count would go negative).
	c.enqueued(int64(len(p)))
	c.queue = append(c.queue, outItem{bytes: p})
	c.mu.Unlock()
	c.signal()
	return nil
}

// outItem is one thing queued for the writer: bytes, or a range of a file
// sent with sendfile(2) from a duplicate of its descriptor (so that closing
// the file meanwhile is harmless).
type outItem struct {
	bytes []byte
	file  bool // the item is the file range below, which owns fd
	fd    int
	off   int64
	n     int64
}

// size is what the item counts in unsent.
func (it outItem) size() int64 {
	if it.file {
		return it.n
	}
	return int64(len(it.bytes))
}

// enqueued counts n more unsent bytes, on the loop, with mu held and before
// the item is queued.
func (c *conn) enqueued(n int64) {
	u := c.unsent.Add(n)
	if u > c.unsentPeak.Load() { // only the loop raises unsent
		c.unsentPeak.Store(u)
	}
}

// dequeued counts n unsent bytes as gone, sent or dropped, and wakes a muted
// reader once few enough are left.
func (c *conn) dequeued(n int64) {
	if n == 0 {
		return
	}
	u := c.unsent.Add(-n)
	if u < 0 {
		panic(fmt.Sprintf("osenv: %d bytes unsent to %s after %d more went", u, c.remote, n))
	}
	if u <= sendQueueResume {
		c.wakeReader()
	}
}

// wakeReader makes a reader muted in awaitWriter look again.
func (c *conn) wakeReader() {
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// SendFile implements env.FileSender: n bytes of f from off go out after
// everything queued before, copied by the kernel from the page cache to the
// socket without passing through user space.
func (c *conn) SendFile(f env.File, off, n int64) error {
	if c.done {
		return fmt.Errorf("send file to %s: %w", c.remote, env.ErrClosed)
	}
	of, ok := f.(*file)
	if !ok {
		return fmt.Errorf("send file to %s: %T is not an osenv file", c.remote, f)
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("send file %s to %s: bad range [%d, +%d)", of.name, c.remote, off, n)
	}
	if n == 0 {
		return nil
	}
	fd, err := of.dup()
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		unix.Close(fd)
		return fmt.Errorf("send file to %s: %w", c.remote, env.ErrClosed)
	}
	c.enqueued(n) // before the writer can see it, as in Write
	c.queue = append(c.queue, outItem{file: true, fd: fd, off: off, n: n})
	c.mu.Unlock()
	c.signal()
	return nil
}

// Close implements env.Conn: queued bytes are still sent, then the peer sees
// a close. No event reaches the handler afterwards.
func (c *conn) Close() error {
	if c.done {
		return fmt.Errorf("close connection to %s: %w", c.remote, env.ErrClosed)
	}
	c.done = true
	c.quiet.Store(true)
	c.wakeReader() // a muted reader now drains what the peer sends
	deadline := time.Now().Add(c.node.closeTimeout)
	c.nc.SetDeadline(deadline)
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.signal()
	return nil
}

// kill tears the connection down at once, from any goroutine.
func (c *conn) kill() {
	c.quiet.Store(true)
	c.stop()
	c.nc.Close()
}

// stop makes the writer exit without sending what is queued.
func (c *conn) stop() {
	c.mu.Lock()
	c.stopped = true
	dropped := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.drop(dropped)
	c.signal()
	c.wakeReader()
}

// drop releases items that will not be sent: it closes their descriptors and
// takes them out of unsent.
func (c *conn) drop(items []outItem) {
	var n int64
	for i := range items {
		n += items[i].size()
		items[i].release()
	}
	c.dequeued(n)
}

// release lets go of an item that is sent or dropped: its bytes, so that
// they can be collected while the rest of its batch goes out, and its
// descriptor.
func (it *outItem) release() {
	if it.file {
		unix.Close(it.fd)
	}
	*it = outItem{}
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) readLoop() {
	defer unregister(c.node, c.node.conns, c)
	defer c.nc.Close()
	defer c.forgetLent()
	r := frameAligner{newFrame: c.lendFrame}
	for {
		if !c.awaitWriter() {
			return
		}
		chunks, err := r.next(c.nc)
		for _, p := range chunks {
			if len(p) == 0 || c.quiet.Load() {
				continue
			}
			c.readAhead.Add(int64(len(p)))
			c.node.post(func() { c.deliver(p) })
			if !c.awaitLoop() {
				return
			}
		}
		if err == nil {
			continue
		}
		c.stop()
		if c.quiet.Load() {
			return // our own close (or the peer's answer to it)
		}
		c.mu.Lock()
		if c.failure != nil {
			err = c.failure
		}
		c.mu.Unlock()
		if errors.Is(err, io.EOF) {
			err = nil
		}
		c.node.post(func() { c.closed(err) })
		return
	}
}

// frameAligner reads a connection's bytes so that, whenever the stream is a
// sequence of size-prefixed frames (as everything Sluice speaks is: Kafka's
// protocol), the loop does less work. Delivery is still a plain byte stream,
// as env.Net promises: every byte read goes out at once, nothing is held.
//
//   - Each read fills a fresh buffer that is handed over whole, so frames
//     that lie inside one read are returned by the loop's frame reader as
//     slices of it, uncopied.
//   - When a read ends inside a frame larger than a read buffer whose size
//     prefix lies in that read, the frame's body is read into a buffer of
//     its own (lent from the node's frame pool, to be recycled by the
//     handler: frames.go) holding the body's first bytes too; each read's
//     bytes are delivered as the next piece of that buffer, and the loop's
//     frame reader, seeing the pieces continue one another in memory,
//     returns the buffer itself (wire.FrameReader).
//
// The aligner follows the stream's frame boundaries across reads (a frame,
// or a size prefix, may be cut anywhere); once a size is absurd it stops
// aligning for good and passes bytes through.
type frameAligner struct {
	// newFrame returns a buffer of n bytes for the body of a large frame
	// that begins with head; nil means make one.
	newFrame func(n int, head []byte) []byte
	// spare is a read buffer none of whose bytes were handed over, to
	// read into next.
	spare []byte
	// frame is the buffer of a large frame's body being read in place, of
	// which filled bytes are read and delivered.
	frame  []byte
	filled int
	// skip is how many bytes of the current frame are still to come when it
	// is not being read in place.
	skip int64
	// prefix holds the first prefixN bytes of a size prefix cut by a read.
	prefix  [4]byte
	prefixN int
	// lost is set once the stream does not look framed.
	lost bool
}

// alignedFrameMax bounds a frame read in place. A peer can announce any size
// with four bytes; beyond this the bytes go out as they come (and the loop's
// frame reader judges them), so a stranger cannot make the reader allocate
// more than this before sending anything.
const alignedFrameMax = 16 << 20

// next reads once and returns the chunks to deliver, in order, and the read
// error, if any. Ownership of the chunks passes to the caller.
func (r *frameAligner) next(src io.Reader) ([][]byte, error) {
	if r.frame != nil {
		n, err := src.Read(r.frame[r.filled:min(len(r.frame), r.filled+frameReadMax)])
		piece := r.frame[r.filled : r.filled+n] // capacity runs to the frame's end
		r.filled += n
		if r.filled == len(r.frame) {
			r.frame, r.filled = nil, 0
		}
		return [][]byte{piece}, err
	}
	buf := r.spare
	r.spare = nil
	if buf == nil {
		buf = make([]byte, readBufferSize)
	}
	n, err := src.Read(buf)
	full := buf
	buf = buf[:n:n]
	if r.lost || err != nil {
		return [][]byte{buf}, err
	}
	if start, size, ok := r.track(buf); ok {
		// buf ends inside a large frame whose size prefix is in it: the
		// body's first bytes move to a buffer of its own, which every
		// further piece fills.
		body := start + 4
		if r.newFrame != nil {
			r.frame = r.newFrame(int(size), buf[body:])
		} else {
			r.frame = make([]byte, size)
		}
		r.filled = copy(r.frame, buf[body:])
		head := buf[:body]
		if start == 0 {
			// Nothing but the size prefix stays in buf, as when produce
			// requests follow one another: hand over a copy of the prefix
			// and read into buf again, instead of into fresh memory.
			head = append([]byte(nil), head...)
			r.spare = full
		}
		return [][]byte{head, r.frame[:r.filled]}, nil
	}
	if n <= smallReadMax {
		// A short read (a request of a few hundred bytes, as offset commits
		// and heartbeats are) would pin a whole read buffer, zeroed for
		// it: copy it out and read into the same buffer again.
		r.spare = full
		return [][]byte{append(make([]byte, 0, n), buf...)}, nil
	}
	return [][]byte{buf}, nil
}

// smallReadMax is the largest read the aligner copies out of its read
// buffer instead of handing the buffer over: copying it costs less than
// the allocation and zeroing of a fresh readBufferSize buffer, which the
// first profile of offset commits showed as 7% of a node's CPU.
const smallReadMax = 4 << 10

// track follows frame boundaries through buf. If buf ends inside a frame
// larger than a read buffer (and at most alignedFrameMax) whose size prefix
// starts in buf, it returns where that frame starts and its size.
func (r *frameAligner) track(buf []byte) (start int, size int64, ok bool) {
	i := 0
	for i < len(buf) {
		if r.skip > 0 {
			d := int(min(r.skip, int64(len(buf)-i)))
			i += d
			r.skip -= int64(d)
			continue
		}
		frameStart := i - r.prefixN // negative if the prefix began in an earlier read
		need := 4 - r.prefixN
		if len(buf)-i < need {
			r.prefixN += copy(r.prefix[r.prefixN:], buf[i:])
			return 0, 0, false
		}
		copy(r.prefix[r.prefixN:], buf[i:i+need])
		i += need
		r.prefixN = 0
		size := int64(int32(binary.BigEndian.Uint32(r.prefix[:])))
		if size < 0 {
			r.lost = true
			return 0, 0, false
		}
		if int64(len(buf)-i) >= size {
			i += int(size)
			continue
		}
		if frameStart >= 0 && 4+size > readBufferSize && size <= alignedFrameMax {
			return frameStart, size, true
		}
		r.skip = size - int64(len(buf)-i)
		return 0, 0, false
	}
	return 0, 0, false
}

func (c *conn) writeLoop() {
	defer func() {
		// Nothing will lower unsent any more: a muted reader must not wait
		// for it.
		c.writerDone.Store(true)
		c.wakeReader()
	}()
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		closing, stopped := c.closing, c.stopped
		c.mu.Unlock()
		switch {
		case stopped:
			c.drop(batch)
			return
		case len(batch) > 0:
			if err := c.send(batch); err != nil {
				c.fail(err)
				return
			}
		case closing:
			// Everything is sent: half-close, and let the reader drain
			// until the peer closes its side (or the deadline passes).
			if err := c.nc.CloseWrite(); err != nil {
				c.fail(err)
			}
			return
		default:
			<-c.wake
		}
	}
}

// send writes a batch of queued items in order: runs of bytes with writev,
// writeChunk bytes at a time, file ranges with sendfile. Each item is
// released and taken out of unsent as it goes out; on an error, the rest is
// dropped.
func (c *conn) send(batch []outItem) error {
	i := 0
	defer func() { c.drop(batch[i:]) }()
	for i < len(batch) {
		if batch[i].file {
			err := c.sendFile(batch[i])
			batch[i].release()
			i++
			if err != nil {
				return err
			}
			continue
		}
		// Gather up to writeChunk bytes, cutting the last item if it is
		// larger; its rest stays in batch[i] for the next round.
		var bufs net.Buffers
		var size int64
		j := i
		for j < len(batch) && !batch[j].file && size < writeChunk {
			p := batch[j].bytes
			if room := writeChunk - size; int64(len(p)) > room {
				bufs = append(bufs, p[:room])
				batch[j].bytes = p[room:]
				size += room
				break
			}
			bufs = append(bufs, p)
			size += int64(len(p))
			j++
		}
		_, err := bufs.WriteTo(c.nc)
		for ; i < j; i++ {
			batch[i].release()
		}
		c.dequeued(size) // sent, or lost with the connection
		if err != nil {
			return err
		}
	}
	return nil
}

// sendFile sends one file range with sendfile(2), waiting for the socket to
// be writable as the runtime's poller decides. It takes the range out of
// unsent as it goes out, and what is left of it when sending fails.
func (c *conn) sendFile(it outItem) error {
	rc, err := c.nc.SyscallConn()
	if err != nil {
		c.dequeued(it.n)
		return err
	}
	off, left := it.off, it.n
	var serr error
	err = rc.Write(func(sock uintptr) bool {
		for left > 0 {
			n, err := unix.Sendfile(int(sock), it.fd, &off, int(min(left, 1<<30)))
			if n > 0 {
				left -= int64(n)
				c.dequeued(int64(n))
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket is writable
			case err == unix.EINTR:
			case err != nil:
				serr = fmt.Errorf("sendfile: %w", mapErr(err)) // EIO reads as env.ErrIO, as in simnet
				return true
			case n == 0:
				serr = fmt.Errorf("sendfile: the file ended %d bytes early", left)
				return true
			}
		}
		return true
	})
	c.dequeued(left) // not sent: the connection is broken
	if err != nil {
		return err
	}
	return serr
}

// fail records a write error and tears the socket down; the reader reports
// the error unless the connection was closed locally.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.failure == nil {
		c.failure = err
	}
	c.mu.Unlock()
	c.nc.Close()
}

// awaitLoop holds the reader while the loop is more than readAheadMax bytes
// behind. It reports false if the node closes meanwhile.
func (c *conn) awaitLoop() bool {
	for c.readAhead.Load() > readAheadMax {
		select {
		case <-c.delivered:
		case <-c.node.quit:
			return false
		}
	}
	return true
}

// awaitWriter mutes the reader while the peer has more than sendQueueMax
// bytes to take, until the writer brings them down to sendQueueResume. It
// stops waiting when the writer exits (the connection is broken or closing:
// the read that follows sees it) or the connection goes quiet (a local Close
// or kill: the reader then drains or ends), and reports false if the node
// closes meanwhile.
func (c *conn) awaitWriter() bool {
	if c.unsent.Load() <= sendQueueMax || c.quiet.Load() || c.writerDone.Load() {
		return true
	}
	c.mutes.Add(1)
	for c.unsent.Load() > sendQueueResume && !c.quiet.Load() && !c.writerDone.Load() {
		select {
		case <-c.drained:
		case <-c.node.quit:
			return false
		}
	}
	return true
}

// deliver hands arriving bytes to the handler, on the loop.
func (c *conn) deliver(p []byte) {
	if c.readAhead.Add(-int64(len(p))) <= readAheadMax {
		select {
		case c.delivered <- struct{}{}:
		default:
		}
	}
	if c.done {
		return
	}
	c.h.OnData(p)
}

// closed reports the end of the connection, on the loop.
func (c *conn) closed(err error) {
	if c.done {
		return
	}
	c.done = true
	c.h.OnClose(err)
}
