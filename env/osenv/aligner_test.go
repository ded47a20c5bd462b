package osenv

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/wire"
)

// choppyReader returns at most a random number of bytes per Read, as a
// socket does.
type choppyReader struct {
	data []byte
	rnd  *rand.Rand
}

func (r *choppyReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rnd.IntN(100_000))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func TestFrameAlignerDeliversEveryByteAndLargeFramesInPlace(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var frames [][]byte
	for i := 0; i < 200; i++ {
		size := rnd.IntN(2000)
		if i%5 == 0 {
			size = 100_000 + rnd.IntN(1_000_000) // larger than a read buffer
		}
		f := make([]byte, size)
		for j := range f {
			f[j] = byte(rnd.Uint32())
		}
		frames = append(frames, f)
		stream = binary.BigEndian.AppendUint32(stream, uint32(size))
		stream = append(stream, f...)
	}
	src := &choppyReader{data: stream, rnd: rnd}
	var a frameAligner
	fr := wire.NewFrameReader(wire.FrameReaderConfig{})
	var delivered []byte
	var got [][]byte
	for {
		chunks, err := a.next(src)
		for _, c := range chunks {
			if len(c) > frameReadMax {
				t.Fatalf("a chunk of %d bytes exceeds the largest read", len(c))
			}
			delivered = append(delivered, c...)
			fr.Feed(c)
		}
		for {
			f, ok, ferr := fr.Next()
			if ferr != nil {
				t.Fatal(ferr)
			}
			if !ok {
				break
			}
			got = append(got, f)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(delivered, stream) {
		t.Fatal("the delivered bytes differ from the stream")
	}
	if len(got) != len(frames) {
		t.Fatalf("got %d frames, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

// scriptedReader returns reads of the given sizes, in turn.
type scriptedReader struct {
	data  []byte
	sizes []int
}

func (r *scriptedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data))
	if len(r.sizes) > 0 {
		n = min(n, r.sizes[0])
		r.sizes = r.sizes[1:]
	}
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func TestFrameAlignerFollowsASizePrefixCutByARead(t *testing.T) {
	var stream []byte
	for i := 0; i < 3; i++ {
		stream = binary.BigEndian.AppendUint32(stream, 256)
		// Bodies whose bytes, read as a size, would be 16 MiB and more.
		stream = append(stream, bytes.Repeat([]byte{1, 0, 0, 0}, 64)...)
	}
	src := &scriptedReader{data: stream, sizes: []int{4 + 256 + 2, 3, 100}}
	var a frameAligner
	var delivered []byte
	for {
		chunks, err := a.next(src)
		for _, c := range chunks {
			if cap(c) > readBufferSize {
				t.Fatalf("a %d-byte chunk has a %d-byte buffer behind it: the aligner misread a size", len(c), cap(c))
			}
			delivered = append(delivered, c...)
		}
		if err != nil {
			break
		}
	}
	if !bytes.Equal(delivered, stream) {
		t.Fatal("the delivered bytes differ from the stream")
	}
}

func TestFrameAlignerCopiesShortReadsOutOfItsBuffer(t *testing.T) {
	var stream []byte
	for i := range 3 {
		stream = binary.BigEndian.AppendUint32(stream, 100)
		stream = append(stream, bytes.Repeat([]byte{byte(i)}, 100)...)
	}
	src := &scriptedReader{data: stream, sizes: []int{104, 104, 104}}
	var a frameAligner
	var kept [][]byte
	for {
		chunks, err := a.next(src)
		for _, c := range chunks {
			if cap(c) != len(c) {
				t.Fatalf("a %d-byte read pins a %d-byte buffer", len(c), cap(c))
			}
			kept = append(kept, c)
		}
		if err != nil {
			break
		}
	}
	// Every read went into the same buffer: what was handed over must not
	// have changed with the reads after it.
	if got := bytes.Join(kept, nil); !bytes.Equal(got, stream) {
		t.Fatal("a chunk handed over changed with a later read")
	}
}
