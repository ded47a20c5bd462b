package node

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func consumerHeartbeat(group, member string, epoch int32, topics []string, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = topics
	req.Topics = owned
	if req.Topics == nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return req
}

// owned turns an assignment into what the member then says it owns.
func owned(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	var out []kmsg.ConsumerGroupHeartbeatRequestTopic
	if a == nil {
		return nil
	}
	for _, t := range a.Topics {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t.TopicID, slices.Clone(t.Partitions)
		out = append(out, rt)
	}
	return out
}

func partitionsOf(a []kmsg.ConsumerGroupHeartbeatRequestTopic) []int32 {
	var ps []int32
	for _, t := range a {
		ps = append(ps, t.Partitions...)
	}
	slices.Sort(ps)
	return ps
}

// KIP-848 through the node: two consumer-protocol members of one group
// on a 3-node cluster heartbeat to the group's coordinator, which the
// runtime routes to the shard; the second member's partitions come only
// after the first has given them up, every partition ends up owned once,
// and ConsumerGroupDescribe (batched, with a group of another shard and a
// missing one) shows both members.
func TestConsumerGroupProtocolThroughTheCoordinator(t *testing.T) {
	c := newSimCluster(t, 73, 3, func(_ int, cfg *Config) { cfg.OffsetsTopicNumPartitions = 3 })
	require.Zero(t, c.createTopicRF(c.controller(), "events", 4, 3))
	const group = "kip848"
	co := c.findCoordinator(0, group)

	beat := func(member string, epoch int32, own []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatResponse {
		resp := c.retryCoordinator(co, func() kmsg.Request { return consumerHeartbeat(group, member, epoch, []string{"events"}, own) },
			func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode })
		got := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		require.Zero(t, got.ErrorCode, "heartbeat of %s: %v %v", member, kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
		return got
	}
	a := beat("member-a", 0, nil)
	require.NotNil(t, a.Assignment)
	ownA := owned(a.Assignment)
	require.Equal(t, []int32{0, 1, 2, 3}, partitionsOf(ownA), "a lone member gets every partition")
	a = beat("member-a", a.MemberEpoch, ownA)

	b := beat("member-b", 0, nil)
	require.Empty(t, partitionsOf(owned(b.Assignment)), "nothing for b before a gives it up")
	epochB := b.MemberEpoch
	a = beat("member-a", a.MemberEpoch, ownA)
	require.NotNil(t, a.Assignment, "a is told to revoke")
	ownA = owned(a.Assignment)
	require.Len(t, partitionsOf(ownA), 2)
	beat("member-a", a.MemberEpoch, ownA) // a acknowledges giving two up
	var ownB []kmsg.ConsumerGroupHeartbeatRequestTopic
	for range 3 {
		b = beat("member-b", epochB, ownB)
		epochB = b.MemberEpoch
		if b.Assignment != nil {
			ownB = owned(b.Assignment)
		}
	}
	require.Len(t, partitionsOf(ownB), 2, "b gets what a released")
	all := append(partitionsOf(ownA), partitionsOf(ownB)...)
	slices.Sort(all)
	require.Equal(t, []int32{0, 1, 2, 3}, all, "every partition owned once")

	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group, "nobody"}
	desc := c.retryCoordinator(co, func() kmsg.Request { return req },
		func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode }).(*kmsg.ConsumerGroupDescribeResponse)
	require.Len(t, desc.Groups, 2)
	require.Equal(t, group, desc.Groups[0].Group)
	require.Len(t, desc.Groups[0].Members, 2)
	require.Equal(t, "nobody", desc.Groups[1].Group)
	require.NotZero(t, desc.Groups[1].ErrorCode, "a missing group or another shard's gets an error of its own")
}
