package simfs

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// content behaves as the plain byte slice it stands for, whose tail of
// zeros it leaves unmaterialized: the same operations on both read the
// same everywhere.
func TestContentIsTheBytesItStandsFor(t *testing.T) {
	var c content
	var want []byte
	apply := func(trunc bool, off int64, p []byte, size int64) {
		if trunc {
			c.resize(size)
			if size <= int64(len(want)) {
				want = want[:size]
			} else {
				want = append(want, make([]byte, size-int64(len(want)))...)
			}
		} else {
			c.writeAt(off, p)
			if end := off + int64(len(p)); end > int64(len(want)) {
				want = append(want, make([]byte, end-int64(len(want)))...)
			}
			copy(want[off:], p)
		}
		require.Equal(t, int64(len(want)), c.Len())
		require.Equal(t, want, c.bytes())
		require.LessOrEqual(t, int64(len(c.b)), c.size)
		for _, off := range []int64{0, 1, 7, int64(len(want)) / 2, int64(len(want)) - 3, int64(len(want))} {
			if off < 0 {
				continue
			}
			got := bytes.Repeat([]byte{0xee}, 9)
			n := c.readAt(got, off)
			end := min(off+9, int64(len(want)))
			require.Equal(t, int(max(end-off, 0)), n, "read at %d", off)
			if n > 0 {
				require.Equal(t, want[off:end], got[:n], "read at %d", off)
			}
		}
	}
	apply(false, 0, []byte("hello"), 0)
	apply(true, 0, nil, 10<<20) // preallocated: nothing materialized
	require.Len(t, c.b, 5)
	apply(false, 20, []byte("index"), 0)
	require.Len(t, c.b, 25)
	apply(true, 0, nil, 12)
	apply(false, 30, []byte("past the end"), 0)
	apply(true, 0, nil, 3)
	apply(true, 0, nil, 40)
	apply(false, 1, []byte("xy"), 0)
	c.flip(35, 0x01)
	want[35] ^= 0x01
	require.Equal(t, want, c.bytes())
	d := c.clone()
	d.writeAt(0, []byte("Z"))
	require.Equal(t, want, c.bytes(), "a clone shares nothing")
}
