package node

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups, versions 0-5.
//
// The groups of every shard this broker leads (groups/16_list_groups.go
// applies the state and type filters), merged in shard order; clients ask
// every broker. A shard still loading makes the answer
// COORDINATOR_LOAD_IN_PROGRESS, with the groups of the others, as Kafka's
// coordinator answers; a shard lost meanwhile (NOT_COORDINATOR) is left
// out, as Kafka leaves it out. No shard: an empty list.
func (b *Broker) handleListGroups(r *request) {
	req := r.body.(*kmsg.ListGroupsRequest)
	b.syncShards()
	shards := sortedKeys(b.coord.shards)
	b.fanOut(r, shards, func(int32) kmsg.Request { s := *req; return &s }, func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		for _, a := range answers {
			got := a.(*kmsg.ListGroupsResponse)
			if got.ErrorCode != 0 && got.ErrorCode != kerr.NotCoordinator.Code && resp.ErrorCode == 0 {
				resp.ErrorCode = got.ErrorCode
			}
			resp.Groups = append(resp.Groups, got.Groups...)
		}
		r.respond(resp)
	})
}
