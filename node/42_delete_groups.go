package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups, versions 0-2.
//
// A batch: each shard deletes its own groups (groups/42_delete_groups.go:
// NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID) and the answers
// are merged in the request's order; a group whose shard is not served
// here gets the coordinator error (11_join_group.go) on its own entry.
func (b *Broker) handleDeleteGroups(r *request) {
	req := r.body.(*kmsg.DeleteGroupsRequest)
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
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
		for j, index := range split.shards {
			got := answers[j].(*kmsg.DeleteGroupsResponse)
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
