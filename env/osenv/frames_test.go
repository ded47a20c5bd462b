package osenv

import (
	"encoding/binary"
	"testing"

	"github.com/sluicemq/sluice/env"
)

// produceBorrower borrows frames whose body starts with API key 0, as the
// broker does.
type produceBorrower struct{ dataFunc }

func (produceBorrower) BorrowsFrame(head []byte) bool {
	return len(head) >= 2 && head[0] == 0 && head[1] == 0
}

func lendingConn(h env.ConnHandler) *conn {
	c := &conn{node: &Node{}, lent: make(map[*byte][]byte)}
	c.attach(h)
	return c
}

// TestOnlyBorrowedFramesAreLentAndRecycled: a frame the handler borrows
// gets a buffer from the pool and, recycled, that buffer serves the next
// one; a frame it does not borrow gets a buffer of its own, never tracked,
// and Recycle ignores it (and any frame it did not lend).
func TestOnlyBorrowedFramesAreLentAndRecycled(t *testing.T) {
	c := lendingConn(produceBorrower{})
	const size = 300 << 10
	produce, metadata := []byte{0, 0, 0, 9}, []byte{0, 3, 0, 12}

	other := c.lendFrame(size, metadata)
	if len(c.lent) != 0 {
		t.Fatalf("a Metadata frame was lent: %d buffers tracked", len(c.lent))
	}
	c.Recycle(other)
	if c.node.frames.pooled != 0 {
		t.Fatal("Recycle pooled a buffer it never lent")
	}

	first := c.lendFrame(size, produce)
	if len(first) != size || len(c.lent) != 1 {
		t.Fatalf("Produce frame: %d bytes, %d tracked; want %d bytes, 1 tracked", len(first), len(c.lent), size)
	}
	c.Recycle(first[:size-10]) // a frame is its buffer's first bytes
	if len(c.lent) != 0 || c.node.frames.pooled != 512<<10 {
		t.Fatalf("after Recycle: %d tracked, %d bytes pooled; want 0 and %d", len(c.lent), c.node.frames.pooled, 512<<10)
	}
	second := c.lendFrame(size+1000, produce)
	if &second[0] != &first[0] {
		t.Fatal("the next Produce frame of the same class did not reuse the recycled buffer")
	}
	c.forgetLent()
	c.Recycle(second)
	if c.node.frames.pooled != 0 {
		t.Fatal("a buffer recycled after the connection stopped lending went back to the pool")
	}
}

// TestHandlersThatDoNotBorrowAreLentNothing: a handler without
// BorrowsFrame, and a connection whose handler is not attached yet, get
// fresh buffers even for frames that look like a Produce request.
func TestHandlersThatDoNotBorrowAreLentNothing(t *testing.T) {
	produce := []byte{0, 0, 0, 9}
	for name, c := range map[string]*conn{
		"plain handler": lendingConn(dataFunc(func([]byte) {})),
		"no handler":    {node: &Node{}, lent: make(map[*byte][]byte)},
	} {
		c.lendFrame(300<<10, produce)
		if len(c.lent) != 0 {
			t.Errorf("%s: %d buffers lent", name, len(c.lent))
		}
	}
}

// TestDialedConnectionPinsNoResponseBuffers: responses begin with their
// correlation id, whose first two bytes read as API key 0 (Produce) for
// every id below 65536. A dialed connection, whose handler reads responses
// and recycles nothing, must not be lent a pooled buffer for them: before
// handlers said what they borrow, each such response pinned one, up to 32
// per connection.
func TestDialedConnectionPinsNoResponseBuffers(t *testing.T) {
	n := startNode(t)
	const responses, size = 40, 300 << 10
	var got int
	c, peer := dialPeer(t, n, dataFunc(func(p []byte) { got += len(p) }))
	frame := make([]byte, 4+size)
	binary.BigEndian.PutUint32(frame, size)
	for id := range responses {
		binary.BigEndian.PutUint32(frame[4:], uint32(id)) // correlation id < 65536
		if _, err := peer.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, n, func() bool { return got == responses*len(frame) })
	c.lentMu.Lock()
	lent := len(c.lent)
	c.lentMu.Unlock()
	n.frames.mu.Lock()
	pooled := n.frames.pooled
	n.frames.mu.Unlock()
	if lent != 0 || pooled != 0 {
		t.Fatalf("after %d responses of %d bytes: %d buffers lent to the client's handler, %d bytes in the pool; want none",
			responses, size, lent, pooled)
	}
}
