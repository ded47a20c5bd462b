package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe (KIP-848), versions 0-1.
//
// A batch, as DescribeGroups (15_describe_groups.go): each shard describes
// its own groups (groups/69_consumer_group_describe.go: INVALID_GROUP_ID
// for an empty id, GROUP_ID_NOT_FOUND for a missing or classic group) and
// the answers are merged in the request's order; a group whose shard is
// not served here gets that shard's coordinator error on its own entry.
func (b *Broker) handleConsumerGroupDescribe(r *request) {
	req := r.body.(*kmsg.ConsumerGroupDescribeRequest)
	split := b.splitGroups(req.Groups)
	sub := func(index int32) kmsg.Request {
		s := *req
		s.Groups = nil
		for _, i := range split.positions[index] {
			s.Groups = append(s.Groups, req.Groups[i])
		}
		return &s
	}
	b.fanOut(r, split.shards, sub, func(answers []kmsg.Response) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
		for j, index := range split.shards {
			got := answers[j].(*kmsg.ConsumerGroupDescribeResponse)
			if len(got.Groups) != len(split.positions[index]) {
				panic(fmt.Sprintf("node: shard %d described %d consumer groups of %d", index, len(got.Groups), len(split.positions[index])))
			}
			for k, i := range split.positions[index] {
				resp.Groups[i] = got.Groups[k]
			}
		}
		r.respond(resp)
	})
}
