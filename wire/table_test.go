package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// everythingTable serves every API kmsg knows in every version kmsg knows
// (ApiVersions up to v4): the widest table a node could build.
func everythingTable(t testing.TB) *Table {
	t.Helper()
	var apis []APIRange
	for _, key := range kmsgKeys() {
		maxVersion := kmsg.RequestForKey(key).MaxVersion()
		if key == keyApiVersions {
			maxVersion = maxApiVersionsServed
		}
		apis = append(apis, APIRange{Key: key, Min: 0, Max: maxVersion})
	}
	table, err := NewTable(apis)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// smallTable serves what an early Sluice node might.
func smallTable(t testing.TB) *Table {
	t.Helper()
	table, err := NewTable([]APIRange{
		{Key: 18, Min: 0, Max: 4},
		{Key: 3, Min: 0, Max: 12},
		{Key: 0, Min: 3, Max: 11},
	})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestNewTableRejects(t *testing.T) {
	tests := []struct {
		name   string
		apis   []APIRange
		reason string
	}{
		{"unknown key", []APIRange{{Key: 500, Min: 0, Max: 0}}, "api key 500 is unknown to kmsg"},
		{"min above max", []APIRange{{Key: 3, Min: 5, Max: 4}}, "Metadata (key 3) versions 5-4 are not within 0-"},
		{"negative min", []APIRange{{Key: 3, Min: -1, Max: 4}}, "versions -1-4"},
		{"max beyond kmsg", []APIRange{{Key: 3, Min: 0, Max: 99}}, "versions 0-99"},
		{"ApiVersions v5 needs cluster checks", []APIRange{{Key: 18, Min: 0, Max: 5}}, "ApiVersions (key 18) versions 0-5 are not within 0-4"},
		{"duplicate", []APIRange{{Key: 3, Min: 0, Max: 1}, {Key: 18, Min: 0, Max: 4}, {Key: 3, Min: 0, Max: 2}}, "api key 3 (Metadata) listed twice"},
	}
	for _, tt := range tests {
		_, err := NewTable(tt.apis)
		if err == nil || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: NewTable error = %v, want one containing %q", tt.name, err, tt.reason)
		}
	}
}

func TestTableVersions(t *testing.T) {
	table := smallTable(t)
	if got, ok := table.Versions(0); !ok || got != (APIRange{Key: 0, Min: 3, Max: 11}) {
		t.Errorf("Versions(Produce) = %+v, %v", got, ok)
	}
	for _, key := range []int16{-1, 1, 17, 19, 1000} {
		if _, ok := table.Versions(key); ok {
			t.Errorf("Versions(%d) reports a key the table does not serve", key)
		}
	}
	want := []APIRange{{0, 3, 11}, {3, 0, 12}, {18, 0, 4}}
	if got := table.APIs(); !reflect.DeepEqual(got, want) {
		t.Errorf("APIs() = %v, want sorted %v", got, want)
	}
}

func TestParseRequest(t *testing.T) {
	table := smallTable(t)
	metadataV1 := []byte{0, 3, 0, 1, 0, 0, 0, 7, 0, 2, 'k', 'p', 0xff, 0xff, 0xff, 0xff}
	req, err := table.ParseRequest(metadataV1)
	if err != nil {
		t.Fatalf("Metadata v1: %v", err)
	}
	body, ok := req.Body.(*kmsg.MetadataRequest)
	if !ok || body.Version != 1 || body.Topics != nil || req.Header.ClientID != "kp" {
		t.Fatalf("Metadata v1 parsed as %+v, body %+v; want all topics (nil) at v1", req.Header, req.Body)
	}

	errorCases := []struct {
		name  string
		frame []byte
		check func(t *testing.T, err error)
	}{
		{"Produce v2 is below the served range", AppendRequest(nil, 1, "c", &kmsg.ProduceRequest{Version: 2})[4:], func(t *testing.T, err error) {
			var u *UnsupportedError
			if !errors.As(err, &u) || !u.Served || u.Versions.Min != 3 || !u.KeyKnown() {
				t.Fatalf("error = %v, want *UnsupportedError for a served key", err)
			}
			if !strings.Contains(err.Error(), "Produce v2") || !strings.Contains(err.Error(), "versions 3-11 are served") {
				t.Fatalf("error %q does not say what was asked and what is served", err)
			}
		}},
		{"Metadata v13 is beyond kmsg", []byte{0, 3, 0, 13, 0, 0, 0, 1, 0, 0, 0}, func(t *testing.T, err error) {
			var u *UnsupportedError
			if !errors.As(err, &u) || !u.Served || u.Versions.Max != 12 {
				t.Fatalf("error = %v, want *UnsupportedError", err)
			}
		}},
		{"Fetch is not served", AppendRequest(nil, 1, "c", &kmsg.FetchRequest{Version: 4})[4:], func(t *testing.T, err error) {
			var u *UnsupportedError
			if !errors.As(err, &u) || u.Served || !u.KeyKnown() || !strings.Contains(err.Error(), "Fetch v4") {
				t.Fatalf("error = %v, want *UnsupportedError for a key not served", err)
			}
		}},
		{"Metadata body cut short", append(bytes.Clone(metadataV1[:12]), 0, 0, 0, 5), func(t *testing.T, err error) {
			var b *BodyError
			if !errors.As(err, &b) || b.Header.CorrelationID != 7 || b.BodyBytes != 4 {
				t.Fatalf("error = %v, want *BodyError for correlation id 7", err)
			}
		}},
		{"header cut short", metadataV1[:9], func(t *testing.T, err error) {
			var h *HeaderError
			if !errors.As(err, &h) {
				t.Fatalf("error = %v, want *HeaderError", err)
			}
		}},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			req, err := table.ParseRequest(tt.frame)
			if req.Body != nil {
				t.Fatalf("a failed parse returned a body %T", req.Body)
			}
			tt.check(t, err)
		})
	}
}

// TestBodyErrorSaysWhichRequestEndedEarly: kmsg's decoders say "response
// did not contain enough data to be valid" for a request too; the error a
// node logs must name the request and say that its body ended early.
func TestBodyErrorSaysWhichRequestEndedEarly(t *testing.T) {
	table := smallTable(t)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("orders")
	req.Topics = append(req.Topics, topic)
	frame := AppendRequest(nil, 7, "kp", req)[4:]
	cut := frame[:len(frame)-5] // into the topic's name
	_, err := table.ParseRequest(cut)
	var b *BodyError
	if !errors.As(err, &b) || !b.EndedEarly {
		t.Fatalf("error = %#v, want a *BodyError that ended early", err)
	}
	msg := err.Error()
	for _, want := range []string{"malformed request body", "Metadata v12 (key 3, correlation id 7", "ended early"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "response") {
		t.Errorf("error %q speaks of a response", msg)
	}

	// Bytes after the last field are ignored, as Kafka ignores them.
	junk := append(bytes.Clone(frame), 1, 2, 3)
	if _, err := table.ParseRequest(junk); err != nil {
		t.Errorf("trailing bytes: %v", err)
	}
}

// readResponse parses a response frame written by AppendResponse and decodes
// its body at version.
func readResponse(t *testing.T, frame []byte, key, version int16) (int32, kmsg.Response) {
	t.Helper()
	if size := int(binary.BigEndian.Uint32(frame)); size != len(frame)-4 {
		t.Fatalf("frame size prefix %d, frame holds %d", size, len(frame)-4)
	}
	corr, body, err := ParseResponse(frame[4:], key, version)
	if err != nil {
		t.Fatalf("ParseResponse: %v", err)
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(key), version, err)
	}
	return corr, resp
}

func TestApiVersionsServedVersions(t *testing.T) {
	table := smallTable(t)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "sluice-test", "1.0.0"
		parsed, err := table.ParseRequest(AppendRequest(nil, 11, "c", req)[4:])
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		answer := table.ApiVersionsResponse(parsed.Body.(*kmsg.ApiVersionsRequest))
		corr, decoded := readResponse(t, AppendResponse(nil, parsed.Header.CorrelationID, answer), 18, v)
		resp := decoded.(*kmsg.ApiVersionsResponse)
		if corr != 11 || resp.ErrorCode != 0 {
			t.Fatalf("v%d: correlation id %d, error %d", v, corr, resp.ErrorCode)
		}
		var got []APIRange
		for _, k := range resp.ApiKeys {
			got = append(got, APIRange{k.ApiKey, k.MinVersion, k.MaxVersion})
		}
		if !reflect.DeepEqual(got, table.APIs()) {
			t.Fatalf("v%d: ApiKeys %v, want %v", v, got, table.APIs())
		}
		if v >= 3 && (resp.FinalizedFeaturesEpoch != -1 || len(resp.SupportedFeatures) != 0 || len(resp.FinalizedFeatures) != 0) {
			t.Fatalf("v%d: features %+v / %+v epoch %d, want empty with epoch -1", v, resp.SupportedFeatures, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
		}
	}
}

// TestApiVersionsUnsupportedVersion: a client that asks in a version the
// broker does not serve gets a v0 answer with UNSUPPORTED_VERSION and the
// table, read the way franz-go reads it (byte 1 of the body is 35).
func TestApiVersionsUnsupportedVersion(t *testing.T) {
	table := smallTable(t)
	for _, v := range []int16{5, 6, 100, -1} {
		// Version 5+ bodies are flexible; whatever follows the header
		// is not read.
		frame := []byte{0, 18, byte(uint16(v) >> 8), byte(v), 0, 0, 0, 21, 0, 3, 'k', 'g', 'o', 0, 0xde, 0xad}
		parsed, err := table.ParseRequest(frame)
		if err != nil {
			t.Fatalf("v%d: ParseRequest error %v; an unserved ApiVersions version must be answered", v, err)
		}
		out := AppendResponse(nil, parsed.Header.CorrelationID, table.ApiVersionsResponse(parsed.Body.(*kmsg.ApiVersionsRequest)))
		body := out[8:]
		if body[0] != 0 || body[1] != 35 {
			t.Fatalf("v%d: body starts %x, want error code 35 right after the v0 header", v, body[:2])
		}
		corr, decoded := readResponse(t, out, 18, 0)
		resp := decoded.(*kmsg.ApiVersionsResponse)
		if corr != 21 || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 3 {
			t.Fatalf("v%d: answer corr %d error %d keys %v", v, corr, resp.ErrorCode, resp.ApiKeys)
		}
	}
	// The exact bytes for a one-entry table.
	only, err := NewTable([]APIRange{{Key: 18, Min: 0, Max: 4}})
	if err != nil {
		t.Fatal(err)
	}
	got := AppendResponse(nil, 0x01020304, only.ApiVersionsResponse(&kmsg.ApiVersionsRequest{Version: 9}))
	want := []byte{
		0, 0, 0, 16, // size
		1, 2, 3, 4, // correlation id, header v0
		0, 35, // error code UNSUPPORTED_VERSION
		0, 0, 0, 1, // one api key (v0 arrays are int32-counted)
		0, 18, 0, 0, 0, 4, // ApiVersions 0-4
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("unsupported answer\n got %x\nwant %x", got, want)
	}
}

func TestApiVersionsInvalidSoftwareName(t *testing.T) {
	table := smallTable(t)
	tests := []struct {
		name, version string
		valid         bool
	}{
		{"franz-go", "1.22.3", true},
		{"apache-kafka-java", "4.0.0", true},
		{"a", "1", true},
		{"", "1.0", false},
		{"-leading", "1.0", false},
		{"trailing.", "1.0", false},
		{"has space", "1.0", false},
		{"ok", "1.0_beta", false},
	}
	for _, tt := range tests {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, tt.name, tt.version
		resp := table.ApiVersionsResponse(req)
		wantCode := int16(0)
		if !tt.valid {
			wantCode = kerr.InvalidRequest.Code
		}
		if resp.ErrorCode != wantCode || resp.Version != 3 || (tt.valid != (len(resp.ApiKeys) > 0)) {
			t.Errorf("software %q %q: error %d with %d keys at v%d; want error %d", tt.name, tt.version, resp.ErrorCode, len(resp.ApiKeys), resp.Version, wantCode)
		}
	}
	// Before v3 there are no such fields to check.
	if resp := table.ApiVersionsResponse(&kmsg.ApiVersionsRequest{Version: 2}); resp.ErrorCode != 0 {
		t.Errorf("v2 request with no software fields got error %d", resp.ErrorCode)
	}
}

// TestHandConstructedOldRequests parses requests as kafka-python (1.x and
// 2.0) writes them, byte for byte, without kmsg's help to build them.
func TestHandConstructedOldRequests(t *testing.T) {
	table := everythingTable(t)
	for _, seed := range oldClientSeeds() {
		req, err := table.ParseRequest(seed.frame)
		if err != nil {
			t.Fatalf("%s: %v", seed.name, err)
		}
		if req.Header.ClientID != "kafka-python-2.0.2" {
			t.Fatalf("%s: client id %q", seed.name, req.Header.ClientID)
		}
		if err := seed.check(req.Body); err != nil {
			t.Fatalf("%s: %v", seed.name, err)
		}
	}
}

func TestResponseFramingEveryAPI(t *testing.T) {
	for _, key := range kmsgKeys() {
		resp := kmsg.ResponseForKey(key)
		for v := int16(0); v <= resp.MaxVersion(); v++ {
			resp.SetVersion(v)
			frame := AppendResponse(nil, -77, resp)
			hv, _ := ResponseHeaderVersion(key, v)
			if headerBytes := len(frame) - 4 - len(resp.AppendTo(nil)); headerBytes != 4+int(hv) {
				t.Fatalf("%s v%d: header of %d bytes, want %d (header v%d)", kmsg.NameForKey(key), v, headerBytes, 4+hv, hv)
			}
			if corr, _ := readResponse(t, frame, key, v); corr != -77 {
				t.Fatalf("%s v%d: correlation id %d", kmsg.NameForKey(key), v, corr)
			}
		}
	}
}

func TestAppendResponseBytes(t *testing.T) {
	hb := kmsg.NewPtrHeartbeatResponse()
	hb.ThrottleMillis, hb.ErrorCode = 1, 27
	tests := []struct {
		version int16
		want    []byte
	}{
		{3, []byte{0, 0, 0, 10, 0, 0, 0, 5, 0, 0, 0, 1, 0, 27}},
		{4, []byte{0, 0, 0, 12, 0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 27, 0}},
	}
	for _, tt := range tests {
		hb.Version = tt.version
		if got := AppendResponse([]byte("keep"), 5, hb); !bytes.Equal(got, append([]byte("keep"), tt.want...)) {
			t.Errorf("Heartbeat v%d: got %x, want %x after the kept prefix", tt.version, got, tt.want)
		}
	}
}
