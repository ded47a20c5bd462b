package node

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups, versions 0-6.
//
// A batch: each shard describes its own groups
// (groups/15_describe_groups.go) and the answers are merged in the
// request's order; a group whose shard is not served here gets that
// shard's coordinator error (11_join_group.go) on its own entry, with no
// error message (v6+), as Kafka's coordinator sends none. v6 (KIP-1043)
// is the shard's: GROUP_ID_NOT_FOUND and Kafka's message for a group that
// does not exist or is not a classic group.
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
