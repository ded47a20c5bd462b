package wire

import (
	"encoding/binary"
	"fmt"
)

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes: 100 MiB.
const DefaultMaxRequestBytes = 100 << 20

// gatherPreallocMax bounds the buffer allocated for a straddling frame before
// its bytes have arrived. A peer can claim a 100 MiB frame with four bytes;
// beyond this much, the buffer grows (doubling) only as bytes actually come,
// so memory follows what was received rather than what was promised.
const gatherPreallocMax = 1 << 20

// FrameReaderConfig configures a FrameReader.
type FrameReaderConfig struct {
	// MaxBytes is socket.request.max.bytes: the largest frame accepted, not
	// counting its 4-byte size. Zero means DefaultMaxRequestBytes.
	MaxBytes int32
}

// FrameReader cuts a byte stream, fed in arbitrary chunks, into frames. It is
// not safe for concurrent use; a connection owns one.
//
// Feed takes ownership of each chunk: frames that lie wholly inside a chunk
// are returned as slices of it (capacity capped at their length, so appending
// to one cannot clobber the next), and the chunk must not be changed
// afterwards. env.ConnHandler.OnData hands its slice over on these terms.
type FrameReader struct {
	maxBytes int32

	// chunks[head:] are fed bytes not yet consumed; chunks[head] may be
	// partly consumed already (the consumed prefix is sliced off).
	chunks [][]byte
	head   int
	// buffered counts the bytes in chunks[head:], sizeBuf and gather.
	buffered int

	// sizeBuf holds sizeN bytes of a size prefix that straddles chunks.
	sizeBuf [4]byte
	sizeN   int
	// size is the length of the frame being read, or -1 while its size
	// prefix is incomplete.
	size int32
	// gather accumulates a frame that straddles chunks; nil when the frame
	// being read has not started to straddle.
	gather []byte
	// gatherBorrowed says gather is a slice of fed chunks (see
	// gatherFrame), not a buffer of our own: it must not be appended to.
	gatherBorrowed bool

	err error
}

// NewFrameReader returns a FrameReader with the given configuration.
func NewFrameReader(cfg FrameReaderConfig) *FrameReader {
	maxBytes := cfg.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxRequestBytes
	}
	return &FrameReader{maxBytes: maxBytes, size: -1}
}

// Feed appends p to the stream. The reader keeps p until every frame it
// contains has been returned by Next. Feeding after an error is allowed and
// does nothing.
func (r *FrameReader) Feed(p []byte) {
	if len(p) == 0 || r.err != nil {
		return
	}
	if r.head == len(r.chunks) {
		r.chunks, r.head = r.chunks[:0], 0
	}
	r.chunks = append(r.chunks, p)
	r.buffered += len(p)
}

// Buffered returns how many fed bytes have not yet been returned in a frame,
// size prefixes included. A connection that stops reading frames (a request
// is parked) can use it to stop reading from the socket.
func (r *FrameReader) Buffered() int { return r.buffered }

// Pending describes the frame being read once Next has returned every
// complete one: how many of its bytes have arrived, size prefix included,
// and its size without the prefix, or -1 while the prefix itself is
// incomplete. Between frames it returns 0 and -1.
func (r *FrameReader) Pending() (received int, size int32) {
	if r.buffered == 0 {
		return 0, -1
	}
	return r.buffered, r.size
}

// Next returns the next complete frame, without its size prefix. It returns
// ok false, with a nil error, when more bytes are needed. Once it has returned
// an error (a *FrameSizeError) it returns that error forever: the stream has
// lost its framing and the connection must be closed.
func (r *FrameReader) Next() (frame []byte, ok bool, err error) {
	if r.err != nil {
		return nil, false, r.err
	}
	if r.size < 0 && !r.readSize() {
		return nil, false, r.err
	}
	if r.size == 0 {
		r.finish(0)
		return []byte{}, true, nil
	}
	if r.gather == nil {
		// Fast path: the whole frame lies in the current chunk.
		if c := r.current(); len(c) >= int(r.size) {
			frame = c[:r.size:r.size]
			r.consume(int(r.size))
			r.finish(len(frame))
			return frame, true, nil
		}
	}
	if !r.gatherFrame() {
		return nil, false, nil
	}
	frame, r.gather = r.gather, nil
	r.finish(len(frame))
	return frame, true, nil
}

// readSize completes the size prefix from the fed chunks and validates it. It
// reports false when bytes are missing or the size is bad (r.err set).
func (r *FrameReader) readSize() bool {
	for r.sizeN < 4 {
		c := r.current()
		if c == nil {
			return false
		}
		n := copy(r.sizeBuf[r.sizeN:], c)
		r.sizeN += n
		r.consume(n)
	}
	size := int32(binary.BigEndian.Uint32(r.sizeBuf[:]))
	if size < 0 || size > r.maxBytes {
		r.err = &FrameSizeError{Size: size, Max: r.maxBytes, Prefix: r.sizeBuf}
		r.chunks, r.head, r.gather, r.gatherBorrowed, r.buffered = nil, 0, nil, false, 0
		return false
	}
	r.size = size
	return true
}

// gatherFrame collects fed bytes into r.gather until it holds r.size bytes.
// It reports whether the frame is complete.
//
// Where the chunks of a frame lie one after another in one array (osenv
// reads a large frame into a buffer of its own exact size and delivers it as
// it arrives, in pieces of that buffer), the frame is the array itself and
// nothing is copied: gather borrows the first piece and grows over each next
// piece that continues it in memory. Otherwise bytes are copied into a
// buffer of our own, grown no faster than bytes arrive.
func (r *FrameReader) gatherFrame() bool {
	size := int(r.size)
	for len(r.gather) < size {
		c := r.current()
		if c == nil {
			return false
		}
		n := min(len(c), size-len(r.gather))
		switch {
		case r.gather == nil && cap(c) >= size:
			r.gather, r.gatherBorrowed = c[:n:size], true
		case r.gatherBorrowed && continues(r.gather, c):
			r.gather = r.gather[:len(r.gather)+n]
		default:
			r.ownGather(n)
			r.gather = append(r.gather, c[:n]...)
		}
		r.consume(n)
	}
	r.gatherBorrowed = false
	return true
}

// continues reports whether c starts exactly where g ends, inside g's
// capacity: the same array, next bytes.
func continues(g, c []byte) bool {
	return len(c) > 0 && len(g) < cap(g) && &g[:len(g)+1][len(g)] == &c[0]
}

// ownGather makes r.gather a buffer of our own with room for n more bytes,
// growing it no faster than bytes arrive.
func (r *FrameReader) ownGather(n int) {
	size := int(r.size)
	if r.gather == nil {
		r.gather = make([]byte, 0, min(size, max(gatherPreallocMax, r.buffered)))
	}
	if r.gatherBorrowed || len(r.gather)+n > cap(r.gather) {
		grown := make([]byte, len(r.gather), min(size, max(2*cap(r.gather), len(r.gather)+n)))
		copy(grown, r.gather)
		r.gather, r.gatherBorrowed = grown, false
	}
}

// current returns the unconsumed part of the first chunk, or nil if every fed
// byte has been consumed.
func (r *FrameReader) current() []byte {
	if r.head == len(r.chunks) {
		return nil
	}
	return r.chunks[r.head]
}

// consume drops n bytes from the front of the first chunk, and the chunk
// itself once it is used up. Bytes moved into sizeBuf or gather stay counted
// in buffered until their frame is returned.
func (r *FrameReader) consume(n int) {
	c := r.chunks[r.head][n:]
	if len(c) > 0 {
		r.chunks[r.head] = c
		return
	}
	r.chunks[r.head] = nil // let the chunk be collected once its frames are
	r.head++
}

// finish resets the per-frame state after a frame of n bytes was returned.
func (r *FrameReader) finish(n int) {
	r.buffered -= 4 + n
	r.size, r.sizeN = -1, 0
}

// FrameSizeError reports a frame whose size prefix is negative or exceeds the
// limit. The connection's framing is lost; it must be closed.
type FrameSizeError struct {
	Size   int32   // the size as read
	Max    int32   // socket.request.max.bytes
	Prefix [4]byte // the four bytes read as the size
}

func (e *FrameSizeError) Error() string {
	var msg string
	if e.Size < 0 {
		msg = fmt.Sprintf("invalid request frame: size %d is negative (socket.request.max.bytes %d)", e.Size, e.Max)
	} else {
		msg = fmt.Sprintf("invalid request frame: size %d exceeds socket.request.max.bytes %d", e.Size, e.Max)
	}
	if hint := e.hint(); hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

// hint guesses what a peer that sends such a size is speaking.
func (e *FrameSizeError) hint() string {
	p := e.Prefix
	if p[0] == 0x16 && p[1] == 0x03 {
		return "the bytes look like a TLS handshake: is the client using TLS against a plaintext listener?"
	}
	switch string(p[:]) {
	case "GET ", "POST", "PUT ", "HEAD", "PRI ", "OPTI", "DELE", "PATC":
		return fmt.Sprintf("the bytes read %q: is the client speaking HTTP?", string(p[:]))
	}
	return ""
}
