package node

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups, versions 0-5.
//
// A batch: each shard describes its own groups
// (groups/15_describe_groups.go) and the answers are merged in the
// request's order; a group whose shard is not served here gets that
// shard's coordinator error (11_join_group.go) on its own entry.
func (b *Broker) handleDescribeGroups(r *request) {
	req := r.body.(*kmsg.DescribeGroupsRequest)
	fanOutGroups(b, r, req.Groups, req.Groups,
		func(part []string) kmsg.Request { s := *req; s.Groups = part; return &s },
		func(resp kmsg.Response) []kmsg.DescribeGroupsResponseGroup {
			return resp.(*kmsg.DescribeGroupsResponse).Groups
		},
		func(merged []kmsg.DescribeGroupsResponseGroup) {
			resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
			resp.Groups = merged
			r.respond(resp)
		})
}
