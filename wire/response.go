package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppendResponse appends a whole response frame to dst: the size, the
// response header for resp's key and version (see ResponseHeaderVersion), and
// resp's body. The body is encoded straight into dst, with no intermediate
// buffer.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendResponseHeader(dst, correlationID, responseHeaderVersion(resp, resp.GetVersion()))
	dst = resp.AppendTo(dst)
	return putFrameSize(dst, start)
}

// AppendResponseHeader appends a response header of the given version (0 or
// 1, from ResponseHeaderVersion), for a caller that frames and writes the body
// itself, such as a Fetch response whose records are sent from a file.
func AppendResponseHeader(dst []byte, correlationID int32, headerVersion int8) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if headerVersion >= 1 {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// ParseResponse reads the response header of a response frame (size removed)
// answering a request of the given key and version, and returns the
// correlation id and the body bytes. It is the client's side of
// AppendResponse, for the simulator's clients and for tests. The body of an
// ApiVersions response whose error code is UNSUPPORTED_VERSION is in version
// 0 whatever version was asked.
func ParseResponse(frame []byte, key, version int16) (int32, []byte, error) {
	hv, ok := ResponseHeaderVersion(key, version)
	if !ok {
		return 0, nil, fmt.Errorf("parse response: unknown api key %d", key)
	}
	if len(frame) < 4 {
		return 0, nil, fmt.Errorf("parse %s v%d response: truncated: %d bytes, need 4 for correlation id", kmsg.NameForKey(key), version, len(frame))
	}
	correlationID := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if hv >= 1 {
		rest, err := skipTaggedFields(body)
		if err != nil {
			return correlationID, nil, fmt.Errorf("parse %s v%d response header tagged fields: %w", kmsg.NameForKey(key), version, err)
		}
		body = rest
	}
	return correlationID, body, nil
}
