package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersionsResponse answers an ApiVersions request from the table.
//
//   - A request of a version the table serves gets a response of that version
//     listing every served API. From v3 the response also has the feature
//     fields (KIP-584); they are left empty, with the finalized features
//     epoch at -1 (unknown), for the caller to fill in if it has features.
//   - A v3+ request whose client software name or version does not match
//     Kafka's pattern gets INVALID_REQUEST and no API list, as in Kafka.
//   - A request of any other version (newer than served, as clients send
//     before they know the broker, or negative) gets a v0 response with
//     UNSUPPORTED_VERSION and the served APIs. Kafka lists only its
//     ApiVersions range there; the whole table lets a client skip the retry.
func (t *Table) ApiVersionsResponse(req *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	served, ok := t.Versions(keyApiVersions)
	if !ok || req.Version < served.Min || req.Version > served.Max {
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = t.apiKeys()
		return resp
	}
	resp.Version = req.Version
	if req.Version >= 3 && !(validSoftware(req.ClientSoftwareName) && validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = t.apiKeys()
	return resp
}

func (t *Table) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, len(t.apis))
	for i, a := range t.apis {
		keys[i] = kmsg.NewApiVersionsResponseApiKey()
		keys[i].ApiKey, keys[i].MinVersion, keys[i].MaxVersion = a.Key, a.Min, a.Max
	}
	return keys
}

// validSoftware reports whether s matches Kafka's pattern for a client
// software name or version (KIP-511): [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func validSoftware(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
