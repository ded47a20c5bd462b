package node

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batched group requests (OffsetFetch v8+, DescribeGroups, DeleteGroups,
// ListGroups) name groups of many shards: each shard is handed only its
// own, and the answers are merged in the request's order.

// groupSplit is a batch of group ids split by shard: shards in order, and
// for each the positions of its ids in the batch.
type groupSplit struct {
	shards    []int32
	positions map[int32][]int
}

// splitGroups splits ids by shard. Before __consumer_offsets exists every
// id goes to shard 0, which answers COORDINATOR_NOT_AVAILABLE.
func (b *Broker) splitGroups(ids []string) groupSplit {
	s := groupSplit{positions: map[int32][]int{}}
	for i, id := range ids {
		index, _ := b.shardOf(id)
		if s.positions[index] == nil {
			s.shards = append(s.shards, index)
		}
		s.positions[index] = append(s.positions[index], i)
	}
	slices.Sort(s.shards)
	return s
}

// fanOut sends one sub-request to each shard (sub builds it) and calls
// done with the answers, in shard order, once every shard has answered.
func (b *Broker) fanOut(r *request, shards []int32, sub func(index int32) kmsg.Request, done func([]kmsg.Response)) {
	answers := make([]kmsg.Response, len(shards))
	left := len(shards)
	if left == 0 {
		done(answers)
		return
	}
	client := groupClient(r)
	for i, index := range shards {
		i := i
		b.toShard(index, client, sub(index), func(resp kmsg.Response) {
			answers[i] = resp
			left--
			if left == 0 {
				done(answers)
			}
		})
	}
}

// fanOutGroups runs a batched request over its groups' shards: the
// request names groups (one entry each, G), ids their group ids in order;
// each shard gets a copy of req holding only its own entries (withGroups
// makes it), answers them in order (answered reads them back), and done
// gets every answer, in the request's order. A group of a shard not served
// here gets that shard's coordinator error in its own entry.
func fanOutGroups[E, G any](b *Broker, r *request, ids []string, entries []E,
	withGroups func([]E) kmsg.Request, answered func(kmsg.Response) []G, done func([]G)) {
	split := b.splitGroups(ids)
	sub := func(index int32) kmsg.Request {
		part := make([]E, 0, len(split.positions[index]))
		for _, i := range split.positions[index] {
			part = append(part, entries[i])
		}
		return withGroups(part)
	}
	b.fanOut(r, split.shards, sub, func(answers []kmsg.Response) {
		merged := make([]G, len(ids))
		for j, index := range split.shards {
			got := answered(answers[j])
			if len(got) != len(split.positions[index]) {
				panic(fmt.Sprintf("node: shard %d answered %d groups of %d", index, len(got), len(split.positions[index])))
			}
			for k, i := range split.positions[index] {
				merged[i] = got[k]
			}
		}
		done(merged)
	})
}

// emptyGroupID answers a request naming the empty group id
// INVALID_GROUP_ID before any routing, as Kafka's GroupCoordinatorService
// checks it first (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetDelete).
func emptyGroupID(r *request, group string) bool {
	if group != "" {
		return false
	}
	r.respond(coordErrorResponse(r.body, kerr.InvalidGroupID))
	return true
}

// toGroupShard routes a one-group request to its shard and answers it.
func (b *Broker) toGroupShard(r *request, group string) {
	index, _ := b.shardOf(group)
	b.toShard(index, groupClient(r), r.body, r.respond)
}
