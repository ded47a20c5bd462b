package node

import "github.com/twmb/franz-go/pkg/kmsg"

// ConsumerGroupDescribe (KIP-848), versions 0-1.
//
// A batch, as DescribeGroups (15_describe_groups.go): each shard describes
// its own groups (groups/69_consumer_group_describe.go: INVALID_GROUP_ID
// for an empty id, GROUP_ID_NOT_FOUND for a missing or classic group) and
// the answers are merged in the request's order; a group whose shard is
// not served here gets that shard's coordinator error on its own entry.
func (b *Broker) handleConsumerGroupDescribe(r *request) {
	req := r.body.(*kmsg.ConsumerGroupDescribeRequest)
	fanOutGroups(b, r, req.Groups, req.Groups,
		func(part []string) kmsg.Request { s := *req; s.Groups = part; return &s },
		func(resp kmsg.Response) []kmsg.ConsumerGroupDescribeResponseGroup {
			return resp.(*kmsg.ConsumerGroupDescribeResponse).Groups
		},
		func(merged []kmsg.ConsumerGroupDescribeResponseGroup) {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
			resp.Groups = merged
			r.respond(resp)
		})
}
