package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaFirstFlexible is, per API key, the first version whose request and
// response are flexible, transcribed from the "flexibleVersions" of Apache
// Kafka's message definitions (clients/src/main/resources/common/message),
// where requests and responses agree for every API. -1 means never. It is
// the oracle for the header versions, independent of kmsg. Keys from 88 on
// postdate the Kafka snapshot read; KIP-482 made every new API flexible from
// its first version, so they are 0.
var kafkaFirstFlexible = map[int16]int16{
	0: 9, 1: 12, 2: 6, 3: 9, 4: 4, 5: 2, 6: 6, 7: 3, 8: 8, 9: 6,
	10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 17: -1, 18: 3, 19: 5,
	20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 29: 2,
	30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 38: 2, 39: 2,
	40: 2, 41: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: -1, 48: 1, 49: 1,
	50: 0, 51: 0, 52: 0, 53: 1, 54: 1, 55: 0, 56: 0, 57: 0, 58: 0, 59: 0,
	60: 0, 61: 0, 62: 0, 63: 0, 64: 0, 65: 0, 66: 0, 67: 0, 68: 0, 69: 0,
	70: 0, 71: 0, 72: 0, 73: 0, 74: 0, 75: 0, 76: 0, 77: 0, 78: 0, 79: 0,
	80: 0, 81: 0, 82: 0, 83: 0, 84: 0, 85: 0, 86: 0, 87: 0, 88: 0, 89: 0,
	90: 0, 91: 0, 92: 0, 93: 0, 94: 0,
}

// kmsgKeys returns every API key kmsg knows, in order.
func kmsgKeys() []int16 {
	var keys []int16
	for k := int16(0); k < 1000; k++ {
		if kmsg.RequestForKey(k) != nil {
			keys = append(keys, k)
		}
	}
	return keys
}

func flexibleByKafka(t *testing.T, key, version int16) bool {
	t.Helper()
	first, ok := kafkaFirstFlexible[key]
	if !ok {
		t.Fatalf("api key %d (%s) is known to kmsg but missing from kafkaFirstFlexible: add it from Kafka's message definitions", key, kmsg.NameForKey(key))
	}
	return first >= 0 && version >= first
}

// TestHeaderVersionsEveryAPI checks both header versions for every API key
// kmsg knows, at every version it knows and one beyond, against Kafka's rules.
func TestHeaderVersionsEveryAPI(t *testing.T) {
	keys := kmsgKeys()
	if len(keys) < 90 {
		t.Fatalf("kmsg knows only %d api keys; the enumeration is broken", len(keys))
	}
	for _, key := range keys {
		maxVersion := kmsg.RequestForKey(key).MaxVersion()
		for v := int16(0); v <= maxVersion+1; v++ {
			flexible := flexibleByKafka(t, key, v)
			wantReq, wantResp := int8(1), int8(0)
			if flexible {
				wantReq, wantResp = 2, 1
			}
			if key == keyControlledShutdown && v == 0 {
				wantReq = 0
			}
			if key == keyApiVersions {
				wantResp = 0
			}
			if got, ok := RequestHeaderVersion(key, v); !ok || got != wantReq {
				t.Errorf("RequestHeaderVersion(%s=%d, v%d) = %d, %v; want %d", kmsg.NameForKey(key), key, v, got, ok, wantReq)
			}
			if got, ok := ResponseHeaderVersion(key, v); !ok || got != wantResp {
				t.Errorf("ResponseHeaderVersion(%s=%d, v%d) = %d, %v; want %d", kmsg.NameForKey(key), key, v, got, ok, wantResp)
			}
		}
	}
	for _, key := range []int16{-1, keys[len(keys)-1] + 1, 1000} {
		if _, ok := RequestHeaderVersion(key, 0); ok {
			t.Errorf("RequestHeaderVersion(%d, 0) reports a known key", key)
		}
		if _, ok := ResponseHeaderVersion(key, 0); ok {
			t.Errorf("ResponseHeaderVersion(%d, 0) reports a known key", key)
		}
	}
}

func TestHeaderVersionsNamedCases(t *testing.T) {
	tests := []struct {
		name           string
		key, version   int16
		request, reply int8
	}{
		{"Produce v8 is the last rigid", 0, 8, 1, 0},
		{"Produce v9 is the first flexible", 0, 9, 2, 1},
		{"Fetch v11 is the last rigid", 1, 11, 1, 0},
		{"Fetch v12 is the first flexible", 1, 12, 2, 1},
		{"Fetch v18 (KIP-1166)", 1, 18, 2, 1},
		{"Metadata v0 as kafka-python sends", 3, 0, 1, 0},
		{"Metadata v12", 3, 12, 2, 1},
		{"ControlledShutdown v0 has no client id", 7, 0, 0, 0},
		{"ControlledShutdown v1", 7, 1, 1, 0},
		{"SaslHandshake is never flexible", 17, 1, 1, 0},
		{"ApiVersions v0", 18, 0, 1, 0},
		{"ApiVersions v3 request is flexible, its response header is not", 18, 3, 2, 0},
		{"ApiVersions v4", 18, 4, 2, 0},
		{"ApiVersions from the future", 18, 99, 2, 0},
		{"OffsetDelete is never flexible", 47, 0, 1, 0},
		{"DescribeCluster is flexible from v0", 60, 0, 2, 1},
	}
	for _, tt := range tests {
		req, _ := RequestHeaderVersion(tt.key, tt.version)
		resp, _ := ResponseHeaderVersion(tt.key, tt.version)
		if req != tt.request || resp != tt.reply {
			t.Errorf("%s: header versions request %d, response %d; want %d, %d", tt.name, req, resp, tt.request, tt.reply)
		}
	}
}

func TestParseRequestHeader(t *testing.T) {
	tests := []struct {
		name     string
		frame    []byte
		want     RequestHeader
		wantBody []byte
	}{
		{
			// The example in the package doc: kafka-python style Metadata v1.
			name:     "Metadata v1, all topics",
			frame:    []byte{0, 3, 0, 1, 0, 0, 0, 7, 0, 2, 'k', 'p', 0xff, 0xff, 0xff, 0xff},
			want:     RequestHeader{Key: 3, Version: 1, CorrelationID: 7, ClientID: "kp", HeaderVersion: 1},
			wantBody: []byte{0xff, 0xff, 0xff, 0xff},
		},
		{
			name:     "null client id reads as empty",
			frame:    []byte{0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
			want:     RequestHeader{Key: 18, Version: 0, CorrelationID: 1, HeaderVersion: 1},
			wantBody: []byte{},
		},
		{
			name:     "flexible header, no tags",
			frame:    []byte{0, 18, 0, 3, 0, 0, 0, 2, 0, 1, 'c', 0, 9, 9},
			want:     RequestHeader{Key: 18, Version: 3, CorrelationID: 2, ClientID: "c", HeaderVersion: 2},
			wantBody: []byte{9, 9},
		},
		{
			name:     "flexible header, unknown tags are skipped",
			frame:    []byte{0, 3, 0, 12, 0xff, 0xff, 0xff, 0xfe, 0, 0, 2, 0, 1, 0xaa, 0x81, 0x01, 2, 0xbb, 0xcc, 7},
			want:     RequestHeader{Key: 3, Version: 12, CorrelationID: -2, HeaderVersion: 2},
			wantBody: []byte{7},
		},
		{
			name:     "ControlledShutdown v0 has no client id",
			frame:    []byte{0, 7, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1},
			want:     RequestHeader{Key: 7, Version: 0, CorrelationID: 3, HeaderVersion: 0},
			wantBody: []byte{0, 0, 0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, body, err := ParseRequestHeader(tt.frame)
			if err != nil {
				t.Fatalf("ParseRequestHeader: %v", err)
			}
			if h != tt.want || !bytes.Equal(body, tt.wantBody) {
				t.Fatalf("got %+v, body %x; want %+v, body %x", h, body, tt.want, tt.wantBody)
			}
		})
	}
}

func TestParseRequestHeaderMalformed(t *testing.T) {
	// Metadata v1 (header v1) and v12 (header v2) prefixes.
	v1 := []byte{0, 3, 0, 1, 0, 0, 0, 5}
	v2 := []byte{0, 3, 0, 12, 0, 0, 0, 5, 0, 0}
	cat := func(a []byte, b ...byte) []byte { return append(bytes.Clone(a), b...) }
	tests := []struct {
		name   string
		frame  []byte
		reason string
	}{
		{"empty frame", nil, "truncated: 0 bytes, need 8"},
		{"only an api key", []byte{0, 3}, "truncated: 2 bytes"},
		{"no correlation id", []byte{0, 3, 0, 1, 0, 0, 0}, "truncated: 7 bytes"},
		{"no client id length", v1, "truncated client id length: 0 bytes left"},
		{"half a client id length", cat(v1, 0), "truncated client id length: 1 bytes left"},
		{"client id length -2", cat(v1, 0xff, 0xfe), "client id length -2 is negative and not -1"},
		{"client id length -32768", cat(v1, 0x80, 0), "client id length -32768"},
		{"client id longer than the frame", cat(v1, 0, 5, 'a', 'b'), "truncated client id: length 5, 2 bytes left"},
		{"flexible header without tagged fields", v2, "tagged fields: truncated count varint after 0 bytes"},
		{"tag count varint cut short", cat(v2, 0x80), "truncated count varint after 1 bytes"},
		{"tag count varint over 32 bits", cat(v2, 0xff, 0xff, 0xff, 0xff, 0x7f), "count varint overflows 32 bits"},
		{"tag count varint of six bytes", cat(v2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), "count varint overflows 32 bits"},
		{"more tags than bytes", cat(v2, 3, 0, 0), "count 3 does not fit in the 2 bytes left"},
		{"tag without size", cat(v2, 1, 5, 0x80), "field 0 (tag 5): truncated size varint after 1 bytes"},
		{"tag larger than the frame", cat(v2, 1, 5, 4, 1, 2), "field 0 (tag 5): size 4, 2 bytes left"},
		{"second tag cut short", cat(v2, 2, 0, 0, 0x81, 0x81), "field 1: truncated tag varint after 2 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseRequestHeader(tt.frame)
			var herr *HeaderError
			if !errors.As(err, &herr) {
				t.Fatalf("error = %v, want a *HeaderError", err)
			}
			if !strings.Contains(herr.Reason, tt.reason) {
				t.Fatalf("reason %q does not contain %q", herr.Reason, tt.reason)
			}
			if len(tt.frame) >= 8 && herr.Header.CorrelationID != 5 {
				t.Fatalf("error carries correlation id %d, want 5 (for the log line)", herr.Header.CorrelationID)
			}
		})
	}
}

func TestParseRequestHeaderUnknownKey(t *testing.T) {
	_, _, err := ParseRequestHeader([]byte{0x7f, 0, 0, 1, 0, 0, 0, 9, 0, 0})
	var uerr *UnsupportedError
	if !errors.As(err, &uerr) {
		t.Fatalf("error = %v, want an *UnsupportedError", err)
	}
	if uerr.KeyKnown() || uerr.Header.Key != 0x7f00 || uerr.Header.CorrelationID != 9 {
		t.Fatalf("error = %+v, want unknown key 32512 with correlation id 9", uerr)
	}
	if !strings.Contains(err.Error(), "unknown api key 32512") {
		t.Fatalf("error %q does not name the key", err)
	}
}

// TestAppendRequestMatchesKmsgFormatter checks our client-side encoding
// against kmsg's own request formatter for every API and version, so that
// the fuzz targets' re-encoding and the simulator's clients are right.
func TestAppendRequestMatchesKmsgFormatter(t *testing.T) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-test"))
	for _, key := range kmsgKeys() {
		req := kmsg.RequestForKey(key)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			want := formatter.AppendRequest(nil, req, 42)
			got := AppendRequest(nil, 42, "sluice-test", req)
			gotCmp, wantCmp := got, want
			if key == keyControlledShutdown && v == 0 {
				// kmsg's formatter writes no body for it at all
				// (a quirk); compare headers only.
				gotCmp, wantCmp = got[4:12], want[4:12]
			}
			if !bytes.Equal(gotCmp, wantCmp) {
				t.Errorf("%s v%d: AppendRequest = %x, kmsg formatter = %x", kmsg.NameForKey(key), v, got, want)
			}
			h, body, err := ParseRequestHeader(got[4:])
			if err != nil {
				t.Fatalf("%s v%d: parse what AppendRequest wrote: %v", kmsg.NameForKey(key), v, err)
			}
			if h.Key != key || h.Version != v || h.CorrelationID != 42 || (h.HeaderVersion > 0 && h.ClientID != "sluice-test") {
				t.Errorf("%s v%d: parsed header %+v", kmsg.NameForKey(key), v, h)
			}
			if !bytes.Equal(body, req.AppendTo(nil)) && !(key == keyControlledShutdown && v == 0) {
				t.Errorf("%s v%d: parsed body %x, want %x", kmsg.NameForKey(key), v, body, req.AppendTo(nil))
			}
		}
	}
}
