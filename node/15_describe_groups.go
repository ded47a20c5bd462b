package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups, versions 0-5.
//
// A batch: each shard describes its own groups
// (groups/15_describe_groups.go) and the answers are merged in the
// request's order; a group whose shard is not served here gets that
// shard's coordinator error (11_join_group.go) on its own entry.
func (b *Broker) handleDescribeGroups(r *request) {
	req := r.body.(*kmsg.DescribeGroupsRequest)
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
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
		for j, index := range split.shards {
			got := answers[j].(*kmsg.DescribeGroupsResponse)
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
