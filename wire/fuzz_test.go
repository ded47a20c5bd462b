package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The fuzz targets below run their seeds (testdata/fuzz/<Name>/, captured
// from real clients by capture_test.go, plus the f.Add seeds) in every go
// test run, and explore from them under `make fuzz`.

// FuzzFrameReader feeds a stream in chunks whose lengths, and whether Next is
// called after each, come from cuts, and checks the frames and error against
// a plain reading of the whole stream.
func FuzzFrameReader(f *testing.F) {
	f.Add(frameStream([]byte("a"), nil, []byte("bcd")), []byte{1, 0x82, 3})
	f.Add(frameStream(bytes.Repeat([]byte{7}, 300)), []byte{0x10, 0x40})
	f.Add([]byte("GET / HTTP/1.1\r\n"), []byte{4})
	f.Add([]byte{0xff, 0xff, 0xff, 0xfe, 0}, []byte{})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		maxBytes := int32(DefaultMaxRequestBytes)
		if len(cuts) > 0 && cuts[0] > 0 {
			maxBytes = int32(cuts[0]) * 3
		}
		want, wantErr, wantRest := readWhole(stream, maxBytes)
		r := NewFrameReader(FrameReaderConfig{MaxBytes: maxBytes})
		var got [][]byte
		var gotErr error
		next := func() {
			for gotErr == nil {
				frame, ok, err := r.Next()
				if err != nil {
					gotErr = err
					return
				}
				if !ok {
					return
				}
				if cap(frame) != len(frame) {
					t.Fatalf("frame of %d bytes has capacity %d", len(frame), cap(frame))
				}
				got = append(got, bytes.Clone(frame))
			}
		}
		for i, fed := 0, 0; fed < len(stream); i++ {
			n := len(stream) - fed
			drainNow := true
			if len(cuts) > 0 {
				c := cuts[i%len(cuts)]
				n = min(n, int(c&0x3f)+1)
				drainNow = c&0x80 == 0
			}
			r.Feed(bytes.Clone(stream[fed : fed+n]))
			fed += n
			if drainNow {
				next()
			}
		}
		next()

		if !equalFrames(got, want) {
			t.Fatalf("incremental reading gave %d frames, whole reading %d", len(got), len(want))
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("incremental error %v, whole-stream error %v", gotErr, wantErr)
		}
		var sizeErr *FrameSizeError
		if gotErr != nil && (!errors.As(gotErr, &sizeErr) || *sizeErr != *wantErr) {
			t.Fatalf("error %v, want %v", gotErr, wantErr)
		}
		if gotErr == nil && r.Buffered() != wantRest {
			t.Fatalf("Buffered() = %d, want %d bytes of an incomplete frame", r.Buffered(), wantRest)
		}
	})
}

// readWhole is the reference framing: the frames of a whole stream, the size
// error that stops it, and how many bytes are left over in an incomplete
// frame.
func readWhole(stream []byte, maxBytes int32) ([][]byte, *FrameSizeError, int) {
	var frames [][]byte
	for len(stream) >= 4 {
		size := int32(binary.BigEndian.Uint32(stream))
		if size < 0 || size > maxBytes {
			return frames, &FrameSizeError{Size: size, Max: maxBytes, Prefix: [4]byte(stream[:4])}, 0
		}
		if len(stream)-4 < int(size) {
			break
		}
		frames = append(frames, stream[4:4+size])
		stream = stream[4+size:]
	}
	return frames, nil, len(stream)
}

// FuzzParseRequestHeader checks that any frame either fails with a typed
// error or parses to a header that re-encodes to the same header and body.
func FuzzParseRequestHeader(f *testing.F) {
	for _, seed := range oldClientSeeds() {
		f.Add(seed.frame)
	}
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 2, 0, 1, 0xaa, 0x81, 0x01, 1, 0xbb, 9})
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := ParseRequestHeader(frame)
		if err != nil {
			var herr *HeaderError
			var uerr *UnsupportedError
			if !errors.As(err, &herr) && !errors.As(err, &uerr) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		if len(body) > len(frame) || !bytes.Equal(body, frame[len(frame)-len(body):]) {
			t.Fatalf("body %x is not the tail of the frame %x", body, frame)
		}
		again, ok := AppendRequestHeader(nil, h)
		if !ok {
			t.Fatalf("AppendRequestHeader refused %+v, which parsed", h)
		}
		again = append(again, body...)
		h2, body2, err := ParseRequestHeader(again)
		if err != nil {
			t.Fatalf("re-encoded header %x does not parse: %v", again, err)
		}
		if h2 != h || !bytes.Equal(body2, body) {
			t.Fatalf("re-encoded header parsed as %+v body %x; first parse %+v body %x", h2, body2, h, body)
		}
	})
}

// FuzzParseRequest decodes frames with a table serving every API kmsg knows,
// in every version. A frame that decodes must re-encode to bytes that decode
// again and re-encode identically (the first re-encoding may differ from the
// input: it drops trailing bytes and puts tagged fields in order), and its
// default response must frame and read back.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range oldClientSeeds() {
		f.Add(seed.frame)
	}
	for _, key := range kmsgKeys() {
		req := kmsg.RequestForKey(key)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(AppendRequest(nil, int32(v), "seed", req)[4:])
		}
	}
	table := everythingTable(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := table.ParseRequest(frame)
		if err != nil {
			var herr *HeaderError
			var uerr *UnsupportedError
			var berr *BodyError
			if !errors.As(err, &herr) && !errors.As(err, &uerr) && !errors.As(err, &berr) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		h := req.Header
		if a, ok := req.Body.(*kmsg.ApiVersionsRequest); ok {
			checkApiVersionsAnswer(t, table, a)
			if served, _ := table.Versions(h.Key); h.Version < served.Min || h.Version > served.Max {
				return // not parsed, nothing to re-encode
			}
		}
		first := AppendRequest(nil, h.CorrelationID, h.ClientID, req.Body)
		again, err := table.ParseRequest(first[4:])
		if err != nil {
			t.Fatalf("%s: re-encoded request does not parse: %v\ninput %x\nre-encoded %x", h, err, frame, first)
		}
		second := AppendRequest(nil, h.CorrelationID, h.ClientID, again.Body)
		if !bytes.Equal(first, second) {
			t.Fatalf("%s: re-encoding is not stable\ninput  %x\nfirst  %x\nsecond %x", h, frame, first, second)
		}
		checkDefaultResponse(t, h, req.Body)
	})
}

func checkApiVersionsAnswer(t *testing.T, table *Table, req *kmsg.ApiVersionsRequest) {
	resp := table.ApiVersionsResponse(req)
	out := AppendResponse(nil, 1, resp)
	_, body, err := ParseResponse(out[4:], 18, resp.Version)
	if err != nil {
		t.Fatalf("ApiVersions answer to v%d does not read back: %v", req.Version, err)
	}
	decoded := kmsg.NewPtrApiVersionsResponse()
	decoded.Version = resp.Version
	if err := decoded.ReadFrom(body); err != nil || decoded.ErrorCode != resp.ErrorCode {
		t.Fatalf("ApiVersions answer to v%d decodes to error code %d, %v; want %d", req.Version, decoded.ErrorCode, err, resp.ErrorCode)
	}
}

func checkDefaultResponse(t *testing.T, h RequestHeader, body kmsg.Request) {
	resp := body.ResponseKind()
	out := AppendResponse(nil, h.CorrelationID, resp)
	corr, respBody, err := ParseResponse(out[4:], h.Key, h.Version)
	if err != nil || corr != h.CorrelationID {
		t.Fatalf("%s: response reads back with correlation id %d, %v", h, corr, err)
	}
	decoded := kmsg.ResponseForKey(h.Key)
	decoded.SetVersion(h.Version)
	if err := decoded.ReadFrom(respBody); err != nil {
		t.Fatalf("%s: response body does not decode: %v", h, err)
	}
}
