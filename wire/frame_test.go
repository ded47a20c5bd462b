package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// frameStream returns the frames' wire form: each with its size prefix.
func frameStream(frames ...[]byte) []byte {
	var s []byte
	for _, f := range frames {
		s = binary.BigEndian.AppendUint32(s, uint32(len(f)))
		s = append(s, f...)
	}
	return s
}

// drain returns every frame Next has ready.
func drain(t *testing.T, r *FrameReader) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		f, ok, err := r.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if !ok {
			return out
		}
		if cap(f) != len(f) {
			t.Fatalf("frame of %d bytes has capacity %d: appending to it would clobber the stream", len(f), cap(f))
		}
		out = append(out, f)
	}
}

// readChunks feeds chunks one at a time, draining after each, and returns
// the frames read.
func readChunks(t *testing.T, cfg FrameReaderConfig, chunks [][]byte) [][]byte {
	t.Helper()
	r := NewFrameReader(cfg)
	var out [][]byte
	for _, c := range chunks {
		r.Feed(bytes.Clone(c))
		out = append(out, drain(t, r)...)
	}
	if r.Buffered() != 0 {
		t.Fatalf("Buffered() = %d after the whole stream was read", r.Buffered())
	}
	return out
}

func equalFrames(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestFrameReaderEverySplit feeds a short stream split into chunks in every
// possible way (every subset of the 15 inner boundaries) and checks that the
// same frames come out.
func TestFrameReaderEverySplit(t *testing.T) {
	want := [][]byte{{}, {0xaa}, {1, 2, 3}}
	stream := frameStream(want...)
	if len(stream) != 16 {
		t.Fatalf("stream is %d bytes, the test expects 16", len(stream))
	}
	for mask := 0; mask < 1<<(len(stream)-1); mask++ {
		var chunks [][]byte
		start := 0
		for i := 1; i < len(stream); i++ {
			if mask&(1<<(i-1)) != 0 {
				chunks = append(chunks, stream[start:i])
				start = i
			}
		}
		chunks = append(chunks, stream[start:])
		if got := readChunks(t, FrameReaderConfig{}, chunks); !equalFrames(got, want) {
			t.Fatalf("split mask %#x: got frames %x, want %x", mask, got, want)
		}
	}
}

// TestFrameReaderThreeWaySplits cuts a longer stream at every pair of points,
// and also feeds all chunks before draining, so that frames are read across
// queued chunks.
func TestFrameReaderThreeWaySplits(t *testing.T) {
	want := [][]byte{bytes.Repeat([]byte{1}, 40), {}, {2, 3}, bytes.Repeat([]byte{4}, 25), {5}}
	stream := frameStream(want...)
	for i := 0; i <= len(stream); i++ {
		for j := i; j <= len(stream); j++ {
			chunks := [][]byte{stream[:i], stream[i:j], stream[j:]}
			if got := readChunks(t, FrameReaderConfig{}, chunks); !equalFrames(got, want) {
				t.Fatalf("cuts at %d,%d: got %x, want %x", i, j, got, want)
			}
			r := NewFrameReader(FrameReaderConfig{})
			for _, c := range chunks {
				r.Feed(bytes.Clone(c))
			}
			if got := drain(t, r); !equalFrames(got, want) {
				t.Fatalf("cuts at %d,%d, fed before draining: got %x, want %x", i, j, got, want)
			}
		}
	}
}

func TestFrameReaderWholeFrameIsNotCopied(t *testing.T) {
	chunk := frameStream([]byte("first"), []byte("second"))
	r := NewFrameReader(FrameReaderConfig{})
	r.Feed(chunk)
	frames := drain(t, r)
	if len(frames) != 2 {
		t.Fatalf("got %d frames, want 2", len(frames))
	}
	if unsafe.SliceData(frames[0]) != &chunk[4] || unsafe.SliceData(frames[1]) != &chunk[4+5+4] {
		t.Fatal("frames that arrived whole in one chunk were copied")
	}
}

func TestFrameReaderStraddlingFrameIsCopiedOnce(t *testing.T) {
	frame := bytes.Repeat([]byte("abcdefgh"), 125) // 1000 bytes
	stream := frameStream(frame)
	var chunks [][]byte
	for i := 0; i < len(stream); i += 100 {
		// Each chunk in an array of its own, as separate reads deliver them.
		chunks = append(chunks, bytes.Clone(stream[i:min(i+100, len(stream))]))
	}
	r := NewFrameReader(FrameReaderConfig{})
	allocs := testing.AllocsPerRun(20, func() {
		for _, c := range chunks {
			r.Feed(c)
		}
		got, ok, err := r.Next()
		if err != nil || !ok || !bytes.Equal(got, frame) {
			t.Fatalf("Next = %d bytes, %v, %v", len(got), ok, err)
		}
	})
	if allocs != 1 {
		t.Fatalf("reading a frame over %d chunks made %v allocations, want 1 (its buffer)", len(chunks), allocs)
	}
}

// TestFrameReaderFrameInOneArrayIsNotCopied feeds a frame in pieces that
// lie one after another in one array, as osenv delivers a large frame it
// reads into a buffer of the frame's size: the frame is that array.
func TestFrameReaderFrameInOneArrayIsNotCopied(t *testing.T) {
	frame := bytes.Repeat([]byte("0123456789"), 1000)
	stream := frameStream(frame)
	r := NewFrameReader(FrameReaderConfig{})
	allocs := testing.AllocsPerRun(20, func() {
		for i := 0; i < len(stream); i += 999 {
			r.Feed(stream[i:min(i+999, len(stream))])
		}
		got, ok, err := r.Next()
		if err != nil || !ok || !bytes.Equal(got, frame) || unsafe.SliceData(got) != &stream[4] {
			t.Fatalf("Next = %d bytes, %v, %v, aliasing the stream: %v", len(got), ok, err, unsafe.SliceData(got) == &stream[4])
		}
	})
	if allocs != 0 {
		t.Fatalf("reading a frame from pieces of one array made %v allocations, want 0", allocs)
	}
	// A piece from elsewhere in the middle falls back to a copy, correctly.
	mixed := [][]byte{stream[:500], bytes.Clone(stream[500:1500]), stream[1500:]}
	for _, c := range mixed {
		r.Feed(c)
	}
	got, ok, err := r.Next()
	if err != nil || !ok || !bytes.Equal(got, frame) {
		t.Fatalf("mixed pieces: Next = %d bytes, %v, %v", len(got), ok, err)
	}
}

// TestFrameReaderLargeFrameGrowsWithData reads a frame larger than the
// preallocation bound in 64 KiB chunks.
func TestFrameReaderLargeFrameGrowsWithData(t *testing.T) {
	frame := make([]byte, 3*gatherPreallocMax+12345)
	for i := range frame {
		frame[i] = byte(i * 7)
	}
	stream := frameStream(frame, []byte("next"))
	r := NewFrameReader(FrameReaderConfig{})
	r.Feed(bytes.Clone(stream[:10]))
	if _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("Next after 10 bytes = %v, %v; want not ready", ok, err)
	}
	if cap(r.gather) > gatherPreallocMax {
		t.Fatalf("after 6 bytes of a %d-byte frame the buffer holds %d bytes: memory should follow the data", len(frame), cap(r.gather))
	}
	var got [][]byte
	for i := 10; i < len(stream); i += 64 << 10 {
		r.Feed(bytes.Clone(stream[i:min(i+64<<10, len(stream))]))
		got = append(got, drain(t, r)...)
	}
	if !equalFrames(got, [][]byte{frame, []byte("next")}) {
		t.Fatalf("got %d frames, first %d bytes; want the %d-byte frame and \"next\"", len(got), len(got[0]), len(frame))
	}
}

func TestFrameReaderSizeLimits(t *testing.T) {
	tests := []struct {
		name    string
		max     int32
		prefix  []byte
		wantErr []string // substrings; nil means accepted
	}{
		{"at the limit", 10, []byte{0, 0, 0, 10}, nil},
		{"one over the limit", 10, []byte{0, 0, 0, 11}, []string{"size 11", "socket.request.max.bytes 10"}},
		{"default limit accepts 100 MiB", 0, []byte{0x06, 0x40, 0, 0}, nil},
		{"default limit refuses 100 MiB + 1", 0, []byte{0x06, 0x40, 0, 1}, []string{"size 104857601", "104857600"}},
		{"minus one", 10, []byte{0xff, 0xff, 0xff, 0xff}, []string{"size -1 is negative"}},
		{"most negative", 10, []byte{0x80, 0, 0, 0}, []string{"size -2147483648 is negative"}},
		{"HTTP", 0, []byte("GET "), []string{"size 1195725856", `"GET "`, "HTTP"}},
		{"TLS client hello", 0, []byte{0x16, 0x03, 0x01, 0x02}, []string{"TLS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewFrameReader(FrameReaderConfig{MaxBytes: tt.max})
			r.Feed(bytes.Clone(tt.prefix[:2]))
			if _, ok, err := r.Next(); ok || err != nil {
				t.Fatalf("Next after half a size = %v, %v; want not ready", ok, err)
			}
			r.Feed(bytes.Clone(tt.prefix[2:]))
			_, ok, err := r.Next()
			if tt.wantErr == nil {
				if err != nil || ok {
					t.Fatalf("Next = %v, %v; want not ready (the frame's bytes have not come)", ok, err)
				}
				return
			}
			var sizeErr *FrameSizeError
			if !errors.As(err, &sizeErr) {
				t.Fatalf("Next error = %v, want a *FrameSizeError", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			r.Feed(frameStream([]byte("valid")))
			if _, _, again := r.Next(); again != err {
				t.Errorf("after an error Next returned %v, want the same error again", again)
			}
			if r.Buffered() != 0 {
				t.Errorf("Buffered() = %d after an error, want 0", r.Buffered())
			}
		})
	}
}

func TestFrameReaderBuffered(t *testing.T) {
	r := NewFrameReader(FrameReaderConfig{})
	stream := frameStream([]byte("abc"), []byte("defgh"))
	steps := []struct {
		feed         int // bytes of the stream fed in this step
		wantFrames   int
		wantBuffered int
		wantSize     int32 // Pending's size of the frame being read
	}{
		{2, 0, 2, -1},
		{4, 0, 6, 3},
		{3, 1, 2, -1},
		{7, 1, 0, -1},
	}
	fed := 0
	for i, s := range steps {
		r.Feed(stream[fed : fed+s.feed])
		fed += s.feed
		if got := len(drain(t, r)); got != s.wantFrames {
			t.Fatalf("step %d: %d frames, want %d", i, got, s.wantFrames)
		}
		if r.Buffered() != s.wantBuffered {
			t.Fatalf("step %d: Buffered() = %d, want %d", i, r.Buffered(), s.wantBuffered)
		}
		if got, size := r.Pending(); got != s.wantBuffered || size != s.wantSize {
			t.Fatalf("step %d: Pending() = %d, %d, want %d, %d", i, got, size, s.wantBuffered, s.wantSize)
		}
	}
}

func BenchmarkFrameReader(b *testing.B) {
	for _, frameBytes := range []int{100, 1 << 10, 16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("frame=%d/chunk=64KiB", frameBytes), func(b *testing.B) {
			frame := make([]byte, frameBytes)
			var stream []byte
			for len(stream) < 4<<20 {
				stream = append(stream, frameStream(frame)...)
			}
			b.SetBytes(int64(len(stream)))
			r := NewFrameReader(FrameReaderConfig{})
			for b.Loop() {
				for i := 0; i < len(stream); i += 64 << 10 {
					r.Feed(stream[i:min(i+64<<10, len(stream))])
					for {
						_, ok, err := r.Next()
						if err != nil {
							b.Fatal(err)
						}
						if !ok {
							break
						}
					}
				}
			}
		})
	}
}
