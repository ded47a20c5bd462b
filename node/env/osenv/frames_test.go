package osenv

import "testing"

// TestOnlyProduceFramesAreLentAndRecycled: a Produce frame's buffer comes
// from the pool and, recycled, serves the next one; a frame of another API
// gets a buffer of its own, never tracked, and Recycle ignores it (and any
// frame it did not lend).
func TestOnlyProduceFramesAreLentAndRecycled(t *testing.T) {
	c := &conn{node: &Node{}, lent: make(map[*byte][]byte)}
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
