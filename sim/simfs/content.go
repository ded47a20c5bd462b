package simfs

import "slices"

// content is a file's bytes: the ones written, b, and then zeros up to
// size, which no write has reached. A file extended by Truncate (Kafka
// preallocates each index to index.size.max.bytes, 10 MiB) is its size
// at once and costs nothing until written: materializing those zeros, in
// the page cache and again in the durable copy at every sync, was a
// quarter of a busy cluster run's time. Invariant: len(b) <= size.
type content struct {
	b    []byte
	size int64
}

func (c content) Len() int64 { return c.size }

// resize cuts the contents to n bytes or extends them with zeros.
func (c *content) resize(n int64) {
	if n < int64(len(c.b)) {
		c.b = c.b[:n]
	}
	c.size = n
}

// writeAt writes p at off, extending the contents if it ends past them.
func (c *content) writeAt(off int64, p []byte) {
	if end := off + int64(len(p)); end > int64(len(c.b)) {
		old := len(c.b)
		c.b = slices.Grow(c.b, int(end)-old)[:end]
		if off > int64(old) {
			clear(c.b[old:off]) // capacity beyond the old length may hold stale bytes
		}
		c.size = max(c.size, end)
	}
	copy(c.b[off:], p)
}

// readAt copies the contents at off into p, returning how many bytes
// there were (fewer than len(p) at the end).
func (c content) readAt(p []byte, off int64) int {
	if off >= c.size {
		return 0
	}
	n := int(min(int64(len(p)), c.size-off))
	copied := 0
	if off < int64(len(c.b)) {
		copied = copy(p[:n], c.b[off:])
	}
	clear(p[copied:n])
	return n
}

// flip flips bits of the byte at off, which must be below the size.
func (c *content) flip(off int64, bits byte) {
	if off >= int64(len(c.b)) {
		c.writeAt(off, []byte{0})
	}
	c.b[off] ^= bits
}

// clone is an independent copy.
func (c content) clone() content {
	return content{b: slices.Clone(c.b), size: c.size}
}

// bytes returns all the contents, zeros included, as a new slice.
func (c content) bytes() []byte {
	out := make([]byte, c.size)
	copy(out, c.b)
	return out
}
