package node

import "github.com/twmb/franz-go/pkg/kmsg"

// ApiVersions, versions 0-4.
//
// The answer comes from the dispatch table (package wire), so it lists
// exactly what the broker serves. A request of a version above 4 is answered
// in version 0 with UNSUPPORTED_VERSION and the table, which is how clients
// newer than the broker learn what to fall back to. v3+ requests whose client
// software name or version is malformed get INVALID_REQUEST, as in Kafka.
func (b *Broker) handleApiVersions(r *request) {
	req := r.body.(*kmsg.ApiVersionsRequest)
	req.Version = r.header.Version // an unsupported version arrives unparsed
	r.respond(b.table.ApiVersionsResponse(req))
}
