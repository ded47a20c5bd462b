package env

// Net gives a node ordered, reliable byte streams with TCP semantics. A node's
// identity on the network is its advertised host:port, as in Kafka.
//
// Everything completes on the loop: accepted connections, dial results,
// arriving bytes and closes. Bytes written by one side arrive at the other in
// order, possibly split or merged differently, or not at all if the
// connection breaks; a broken connection is always reported to both sides
// eventually, through OnClose, unless the peer's host is gone (a half-open
// connection then looks alive until written to or closed locally).
type Net interface {
	// Listen accepts connections on addr ("host:port"; port 0 picks a free
	// port, see Listener.Addr). For each accepted connection accept runs on
	// the loop and returns the handler for that connection's events.
	Listen(addr string, accept func(Conn) ConnHandler) (Listener, error)
	// Dial connects to addr in the background. connected runs on the loop
	// exactly once: with the connection and a nil error, returning the
	// handler for its events; or with a nil Conn and the error, its return
	// value then ignored.
	Dial(addr string, connected func(Conn, error) ConnHandler)
}

// Listener is a bound, accepting address.
type Listener interface {
	// Addr is the address actually bound (with the port chosen for port 0).
	Addr() string
	// Close stops accepting. Connections already accepted stay open.
	Close() error
}

// Conn is one end of a connection.
type Conn interface {
	// Write queues p to be sent and returns at once; it takes ownership of p,
	// which the caller must not change afterwards. Writes after a close (local
	// or reported) return ErrClosed.
	Write(p []byte) error
	// Close closes the connection: queued bytes are still sent, then the
	// peer sees a close. OnClose is not called for a local Close.
	Close() error
	LocalAddr() string
	RemoteAddr() string
}

// ConnHandler receives a connection's events on the loop.
type ConnHandler interface {
	// OnData delivers the next bytes from the peer. p belongs to the
	// callee, but not the capacity beyond its length: an implementation may
	// deliver the next bytes into it (osenv reads a large frame into one
	// buffer, piece by piece), so the callee must not append to p in place.
	OnData(p []byte)
	// OnClose reports that the connection is gone: closed by the peer (err is
	// nil) or broken (err says why). No OnData follows it.
	OnClose(err error)
}

// FrameRecycler is implemented by connections that read large frames into
// buffers they can reuse (osenv). Reading into the same few warm buffers
// instead of fresh memory costs a receiver a fifth of the CPU: a fresh
// buffer is zeroed, faulted in page by page and cold in every cache.
type FrameRecycler interface {
	// Recycle hands back frame, the bytes of one size-prefixed frame that
	// arrived through OnData (without its size prefix), once the handler
	// holds no reference to any of them: the connection may read new bytes
	// into them at once. A frame the connection did not lend as a whole is
	// ignored (the simulator overwrites it with junk instead, so that a
	// handler that still reads it fails its tests).
	Recycle(frame []byte)
}

// FrameBorrower is implemented by connection handlers that hand large
// frames back with FrameRecycler.Recycle. A connection that lends frame
// buffers (osenv) lends one only to a handler that says, for that frame, it
// will hand it back: a lent buffer never handed back stays pinned, out of
// the collector's reach, until the connection ends. A handler without this
// method (a client reading responses) is never lent a buffer.
type FrameBorrower interface {
	// BorrowsFrame reports whether the handler will recycle the frame whose
	// body (after the size prefix) begins with head: at least its first two
	// bytes, or the whole body if it is shorter. It may be called from any
	// goroutine, before the connection's first event and during any, so it
	// must depend on head alone.
	BorrowsFrame(head []byte) bool
}

// FileSender is implemented by connections that can send a range of a file
// without copying it through the program (sendfile in osenv; the simulator
// models it, unless told not to with simnet's SetSendFile). It is optional:
// callers that find it missing read the bytes and Write them, checking what
// they read.
type FileSender interface {
	// SendFile queues n bytes of f starting at off, to go out after
	// everything queued before it. The bytes are read when they are sent,
	// so the caller must not change that range of f meanwhile; closing or
	// removing f is allowed. A closed f, a negative range or a closed
	// connection is refused at once. A read that fails later, or a file
	// that ends before the range does, breaks the connection: the peer gets
	// a prefix of the stream, then a close, and OnClose reports the error.
	SendFile(f File, off, n int64) error
}
