package node

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteGroups, versions 0-2.
//
// A batch: each shard deletes its own groups (groups/42_delete_groups.go:
// NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID) and the answers
// are merged in the request's order; a group whose shard is not served
// here gets the coordinator error (11_join_group.go) on its own entry.
func (b *Broker) handleDeleteGroups(r *request) {
	req := r.body.(*kmsg.DeleteGroupsRequest)
	fanOutGroups(b, r, req.Groups, req.Groups,
		func(part []string) kmsg.Request { s := *req; s.Groups = part; return &s },
		func(resp kmsg.Response) []kmsg.DeleteGroupsResponseGroup {
			return resp.(*kmsg.DeleteGroupsResponse).Groups
		},
		func(merged []kmsg.DeleteGroupsResponseGroup) {
			resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
			resp.Groups = merged
			r.respond(resp)
		})
}
