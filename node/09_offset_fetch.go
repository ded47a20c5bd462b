package node

import "github.com/twmb/franz-go/pkg/kmsg"

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
	fanOutGroups(b, r, ids, req.Groups,
		func(part []kmsg.OffsetFetchRequestGroup) kmsg.Request { s := *req; s.Groups = part; return &s },
		func(resp kmsg.Response) []kmsg.OffsetFetchResponseGroup {
			return resp.(*kmsg.OffsetFetchResponse).Groups
		},
		func(merged []kmsg.OffsetFetchResponseGroup) {
			if b.cfg.SabotageCoordinatorFetchAhead {
				sabotageFetchAhead(merged)
			}
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.Groups = merged
			r.respond(resp)
		})
}

// sabotageFetchAhead moves every committed offset of gs one on
// (Config.SabotageCoordinatorFetchAhead).
func sabotageFetchAhead(gs []kmsg.OffsetFetchResponseGroup) {
	for gi := range gs {
		for ti := range gs[gi].Topics {
			for pi := range gs[gi].Topics[ti].Partitions {
				if p := &gs[gi].Topics[ti].Partitions[pi]; p.Offset >= 0 {
					p.Offset++
				}
			}
		}
	}
}
