package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request API keys this package treats specially.
const (
	keyControlledShutdown int16 = 7
	keyApiVersions        int16 = 18
)

// RequestHeader is the header that opens every request frame.
type RequestHeader struct {
	Key           int16 // the API, e.g. 0 for Produce
	Version       int16 // the API's version
	CorrelationID int32 // echoed in the response
	// ClientID is the client's name; empty when null or absent (header v0),
	// as Kafka reads it.
	ClientID string
	// HeaderVersion is the header's own version, 0, 1 or 2; see
	// RequestHeaderVersion.
	HeaderVersion int8
}

// String describes the header for logs: "Metadata v12 (key 3, correlation id
// 7, client id "kgo")".
func (h RequestHeader) String() string {
	return fmt.Sprintf("%s v%d (key %d, correlation id %d, client id %q)",
		kmsg.NameForKey(h.Key), h.Version, h.Key, h.CorrelationID, h.ClientID)
}

// RequestHeaderVersion returns the request header version a client uses for
// the API key at this version: 2 when the request is flexible, 1 when not,
// and 0 for ControlledShutdown v0 (which has no client id). It reports false
// for an API key kmsg does not know. Versions beyond those kmsg knows are
// judged by the same rule as the ones it does (flexible from some version
// onwards), which is how a flexible ApiVersions request newer than the broker
// is still read.
func RequestHeaderVersion(key, version int16) (int8, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, false
	}
	return requestHeaderVersion(req, version), true
}

func requestHeaderVersion(req kmsg.Request, version int16) int8 {
	req.SetVersion(version)
	switch {
	case req.Key() == keyControlledShutdown && version == 0:
		return 0
	case req.IsFlexible():
		return 2
	default:
		return 1
	}
}

// ResponseHeaderVersion returns the response header version a client expects
// for the API key at this version: 1 when the response is flexible, else 0;
// and always 0 for ApiVersions (KIP-511). It reports false for an API key
// kmsg does not know.
func ResponseHeaderVersion(key, version int16) (int8, bool) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return 0, false
	}
	return responseHeaderVersion(resp, version), true
}

func responseHeaderVersion(resp kmsg.Response, version int16) int8 {
	resp.SetVersion(version)
	if resp.Key() != keyApiVersions && resp.IsFlexible() {
		return 1
	}
	return 0
}

// FrameAPIKey returns the API key a request frame starts with, without
// parsing the rest of it; false if the frame is too short to have one.
func FrameAPIKey(frame []byte) (int16, bool) {
	if len(frame) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(frame)), true
}

// ParseRequestHeader reads the header at the start of a frame and returns it
// with the body bytes that follow (a slice of frame). Errors are a
// *HeaderError for malformed bytes, or an *UnsupportedError for an API key
// kmsg does not know (whose header version cannot be worked out).
func ParseRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	h, body, _, err := parseRequestHeader(frame)
	return h, body, err
}

// parseRequestHeader is ParseRequestHeader that also returns the empty kmsg
// request for the key (with its version set), which it needed to find the
// header version, so that the body can be decoded into it.
func parseRequestHeader(frame []byte) (RequestHeader, []byte, kmsg.Request, error) {
	var h RequestHeader
	if len(frame) < 8 {
		if len(frame) >= 4 {
			h.Key = int16(binary.BigEndian.Uint16(frame))
			h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
		}
		return h, nil, nil, headerErrorf(h, len(frame), "truncated: %d bytes, need 8 for api key, version and correlation id", len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, nil, &UnsupportedError{Header: h}
	}
	h.HeaderVersion = requestHeaderVersion(req, h.Version)
	rest := frame[8:]
	if h.HeaderVersion >= 1 {
		id, tail, err := readClientID(rest)
		if err != nil {
			return h, nil, nil, headerErrorf(h, len(frame), "%v", err)
		}
		h.ClientID, rest = id, tail
	}
	if h.HeaderVersion >= 2 {
		tail, err := skipTaggedFields(rest)
		if err != nil {
			return h, nil, nil, headerErrorf(h, len(frame), "tagged fields: %v", err)
		}
		rest = tail
	}
	return h, rest, req, nil
}

// readClientID reads a nullable string with an int16 length.
func readClientID(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("truncated client id length: %d bytes left, need 2", len(b))
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	switch {
	case n == -1:
		return "", b, nil
	case n < 0:
		return "", nil, fmt.Errorf("client id length %d is negative and not -1 (null)", n)
	case n > len(b):
		return "", nil, fmt.Errorf("truncated client id: length %d, %d bytes left", n, len(b))
	}
	return string(b[:n]), b[n:], nil
}

// skipTaggedFields reads past a tagged-field section: a uvarint count, then
// for each field a uvarint tag, a uvarint size and size bytes. Tags the
// header does not define (none yet) are skipped, as Kafka does.
func skipTaggedFields(b []byte) ([]byte, error) {
	count, b, err := readUvarint(b, "count")
	if err != nil {
		return nil, err
	}
	// Each field takes at least two bytes (tag and size), so a count larger
	// than that allows is a lie; say so rather than fail on field n.
	if uint64(count) > uint64(len(b)/2) {
		return nil, fmt.Errorf("count %d does not fit in the %d bytes left", count, len(b))
	}
	for i := uint32(0); i < count; i++ {
		var tag, size uint32
		if tag, b, err = readUvarint(b, "tag"); err != nil {
			return nil, fmt.Errorf("field %d: %w", i, err)
		}
		if size, b, err = readUvarint(b, "size"); err != nil {
			return nil, fmt.Errorf("field %d (tag %d): %w", i, tag, err)
		}
		if uint64(size) > uint64(len(b)) {
			return nil, fmt.Errorf("field %d (tag %d): size %d, %d bytes left", i, tag, size, len(b))
		}
		b = b[size:]
	}
	return b, nil
}

// readUvarint reads an unsigned varint of at most 32 bits (5 bytes, the last
// holding 4 bits), as Kafka encodes tagged-field counts, tags and sizes.
func readUvarint(b []byte, what string) (uint32, []byte, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i == len(b) {
			return 0, nil, fmt.Errorf("truncated %s varint after %d bytes", what, i)
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, nil, fmt.Errorf("%s varint overflows 32 bits", what)
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, b[i+1:], nil
		}
	}
	return 0, nil, fmt.Errorf("%s varint overflows 32 bits", what)
}

// AppendRequestHeader appends h in the header version its key and version
// call for (h.HeaderVersion is ignored), with an empty tagged-field section in
// v2. It reports false for an API key kmsg does not know.
func AppendRequestHeader(dst []byte, h RequestHeader) ([]byte, bool) {
	hv, ok := RequestHeaderVersion(h.Key, h.Version)
	if !ok {
		return dst, false
	}
	return appendRequestHeader(dst, h, hv), true
}

func appendRequestHeader(dst []byte, h RequestHeader, headerVersion int8) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if headerVersion >= 1 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.ClientID)))
		dst = append(dst, h.ClientID...)
	}
	if headerVersion >= 2 {
		dst = append(dst, 0)
	}
	return dst
}

// AppendRequest appends a whole request frame (size, header, body) as a
// client sends it: the header's key and version are taken from body. The
// simulator's clients and this package's tests use it; a broker never sends
// requests.
func AppendRequest(dst []byte, correlationID int32, clientID string, body kmsg.Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	h := RequestHeader{Key: body.Key(), Version: body.GetVersion(), CorrelationID: correlationID, ClientID: clientID}
	dst = appendRequestHeader(dst, h, requestHeaderVersion(body, h.Version))
	dst = body.AppendTo(dst)
	return putFrameSize(dst, start)
}

// putFrameSize writes the size of the frame that starts at dst[start] (its
// 4-byte size slot included) into that slot.
func putFrameSize(dst []byte, start int) []byte {
	size := len(dst) - start - 4
	if size > 1<<31-1 {
		panic(fmt.Sprintf("wire: frame of %d bytes does not fit an int32 size", size))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst
}

// HeaderError reports a malformed request header. Kafka closes the
// connection; so should the caller.
type HeaderError struct {
	// Header holds what was read before the fault: Key and Version if the
	// frame had 4 bytes, CorrelationID if it had 8.
	Header RequestHeader
	// FrameBytes is the length of the frame.
	FrameBytes int
	Reason     string
}

func headerErrorf(h RequestHeader, frameBytes int, format string, args ...any) *HeaderError {
	return &HeaderError{Header: h, FrameBytes: frameBytes, Reason: fmt.Sprintf(format, args...)}
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("malformed request header in %d-byte frame (api key %d, version %d, correlation id %d): %s",
		e.FrameBytes, e.Header.Key, e.Header.Version, e.Header.CorrelationID, e.Reason)
}
