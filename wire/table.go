package wire

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxApiVersionsServed is the newest ApiVersions version a Table may serve.
// Version 5 (KIP-1242) makes the broker check the client's idea of the
// cluster and node id, which ApiVersionsResponse does not do.
const maxApiVersionsServed = 4

// APIRange says that the API Key is served in versions Min to Max inclusive.
type APIRange struct {
	Key      int16
	Min, Max int16
}

// Table is the broker's dispatch table: which APIs it serves, in which
// versions. It decides which requests are decoded and what ApiVersions
// answers. A Table is immutable once built, so connections (and osenv's
// decoding goroutines) may share one.
type Table struct {
	apis  []APIRange // sorted by key
	byKey []int      // key -> index in apis + 1; 0 when not served
}

// NewTable builds a table serving the given ranges. Each key must be one kmsg
// knows, at most once, with 0 <= Min <= Max <= the newest version kmsg can
// decode (and ApiVersions at most v4).
func NewTable(apis []APIRange) (*Table, error) {
	t := &Table{apis: slices.Clone(apis)}
	slices.SortFunc(t.apis, func(a, b APIRange) int { return int(a.Key) - int(b.Key) })
	for i, a := range t.apis {
		if err := checkRange(a); err != nil {
			return nil, err
		}
		if i > 0 && t.apis[i-1].Key == a.Key {
			return nil, fmt.Errorf("wire table: api key %d (%s) listed twice", a.Key, kmsg.NameForKey(a.Key))
		}
	}
	if n := len(t.apis); n > 0 {
		t.byKey = make([]int, t.apis[n-1].Key+1)
	}
	for i, a := range t.apis {
		t.byKey[a.Key] = i + 1
	}
	return t, nil
}

func checkRange(a APIRange) error {
	req := kmsg.RequestForKey(a.Key)
	if req == nil {
		return fmt.Errorf("wire table: api key %d is unknown to kmsg", a.Key)
	}
	newest := req.MaxVersion()
	if a.Key == keyApiVersions {
		newest = min(newest, maxApiVersionsServed)
	}
	if a.Min < 0 || a.Min > a.Max || a.Max > newest {
		return fmt.Errorf("wire table: %s (key %d) versions %d-%d are not within 0-%d",
			kmsg.NameForKey(a.Key), a.Key, a.Min, a.Max, newest)
	}
	return nil
}

// Versions returns the range served for key, and whether key is served.
func (t *Table) Versions(key int16) (APIRange, bool) {
	if key < 0 || int(key) >= len(t.byKey) || t.byKey[key] == 0 {
		return APIRange{}, false
	}
	return t.apis[t.byKey[key]-1], true
}

// APIs returns the served ranges, sorted by key.
func (t *Table) APIs() []APIRange { return slices.Clone(t.apis) }

// Request is a parsed request frame.
type Request struct {
	Header RequestHeader
	// Body is the decoded body, a pointer to the kmsg request type for
	// Header.Key (e.g. *kmsg.MetadataRequest), at Header.Version. Its
	// strings are copies; byte slices (Produce records) alias the frame.
	Body kmsg.Request
}

// ParseRequest parses a request frame (size removed) and decodes its body,
// if the table serves its key at its version. Errors:
//
//   - *HeaderError: the header is malformed;
//   - *UnsupportedError: the key is unknown or not served, or the version is
//     not served;
//   - *BodyError: the body does not decode.
//
// Kafka closes the connection on each of these, and so should the caller.
//
// ApiVersions is the exception: a request of a version the table does not
// serve is returned without error and with its body left unparsed (Kafka does
// the same), because the answer does not depend on it: ApiVersionsResponse
// answers it in version 0 with UNSUPPORTED_VERSION and the table.
func (t *Table) ParseRequest(frame []byte) (Request, error) {
	h, body, req, err := parseRequestHeader(frame)
	if err != nil {
		return Request{Header: h}, err
	}
	served, ok := t.Versions(h.Key)
	inRange := ok && h.Version >= served.Min && h.Version <= served.Max
	switch {
	case ok && h.Key == keyApiVersions && !inRange:
		return Request{Header: h, Body: req}, nil
	case !inRange:
		return Request{Header: h}, &UnsupportedError{Header: h, Served: ok, Versions: served}
	}
	// req already has h.Version set: finding the header version set it.
	if err := req.ReadFrom(body); err != nil {
		return Request{Header: h}, &BodyError{Header: h, BodyBytes: len(body), EndedEarly: endedEarly(err), Err: err}
	}
	return Request{Header: h, Body: req}, nil
}

// UnsupportedError reports a request the table does not serve: an API key
// kmsg does not know, a key not in the table, or a version outside its range.
// Kafka closes the connection for these (ApiVersions aside, see
// Table.ParseRequest).
type UnsupportedError struct {
	// Header is the request's header. For a key kmsg does not know only
	// Key, Version and CorrelationID are set.
	Header RequestHeader
	// Served reports whether the table serves the key, in Versions.
	Served   bool
	Versions APIRange
}

// KeyKnown reports whether the API key is one kmsg (and so Kafka, as of
// kmsg's release) defines.
func (e *UnsupportedError) KeyKnown() bool { return kmsg.RequestForKey(e.Header.Key) != nil }

func (e *UnsupportedError) Error() string {
	h := e.Header
	switch {
	case !e.KeyKnown():
		return fmt.Sprintf("unsupported request: unknown api key %d (version %d, correlation id %d)",
			h.Key, h.Version, h.CorrelationID)
	case !e.Served:
		return fmt.Sprintf("unsupported request: %s is not served", h)
	}
	return fmt.Sprintf("unsupported request: %s: versions %d-%d are served", h, e.Versions.Min, e.Versions.Max)
}

// BodyError reports a request body that does not decode at its version.
//
// kmsg's decoders fail in one way, for a request as for a response: a
// field, or the bytes a length in it announces, runs past the end of the
// body; its message ("response did not contain enough data to be valid")
// says neither which request nor that it is one. EndedEarly marks that
// case and Error names the API and version whose fields ran out. Bytes left
// over after a body's last field are not an error: Kafka's readers ignore
// them, and so do kmsg's.
type BodyError struct {
	Header    RequestHeader
	BodyBytes int
	// EndedEarly says the body ended before the fields of its API and
	// version did (kmsg's only decoding error).
	EndedEarly bool
	Err        error
}

func (e *BodyError) Error() string {
	if e.EndedEarly {
		return fmt.Sprintf("malformed request body: %s: the body ended early: its %d bytes end before the fields "+
			"of that version do (a field, or the bytes a length in it announces, runs past the end)",
			e.Header, e.BodyBytes)
	}
	return fmt.Sprintf("malformed request body: %s, %d bytes: %v", e.Header, e.BodyBytes, e.Err)
}

func (e *BodyError) Unwrap() error { return e.Err }

// endedEarly reports whether err is kmsg's "not enough data" error. It lives
// in an internal package of kmsg, so it is recognized by what decoding
// nothing returns.
func endedEarly(err error) bool {
	return errors.Is(err, new(kmsg.MetadataRequest).ReadFrom(nil))
}
