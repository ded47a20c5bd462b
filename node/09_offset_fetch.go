package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch, versions 0-9.
//
// v0-v7 name one group, routed to its shard (groups/09_offset_fetch.go
// decides; the empty group id is allowed, as in Kafka). v8+ name a batch
// (KIP-709): each shard gets its own groups and the answers are merged in
// the request's order, each group with its own coordinator error.
//
//   - Coordinator errors (11_join_group.go) as Kafka's getErrorResponse
//     puts them: on every partition asked in v0 and v1, at the top level in
//     v2-v7, on each group in v8+.
//   - The answer waits for every commit acknowledged before it.
func (b *Broker) handleOffsetFetch(r *request) {
	req := r.body.(*kmsg.OffsetFetchRequest)
	if req.Version < 8 {
		b.toGroupShard(r, req.Group)
		return
	}
	ids := make([]string, len(req.Groups))
	for i, g := range req.Groups {
		ids[i] = g.Group
	}
	split := b.splitGroups(ids)
	sub := func(index int32) kmsg.Request {
		s := *req
		s.Groups = nil
		for _, i := range split.positions[index] {
			s.Groups = append(s.Groups, req.Groups[i])
		}
		return &s
	}
	b.fanOut(r, split.shards, sub, func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
		for j, index := range split.shards {
			got := answers[j].(*kmsg.OffsetFetchResponse)
			if len(got.Groups) != len(split.positions[index]) {
				panic(fmt.Sprintf("node: shard %d answered %d groups of %d", index, len(got.Groups), len(split.positions[index])))
			}
			for k, i := range split.positions[index] {
				resp.Groups[i] = got.Groups[k]
			}
		}
		r.respond(resp)
	})
}
