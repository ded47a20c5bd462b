package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata lists only unfenced brokers, as Kafka's KRaft broker does: a
// broker killed and fenced drops out of the list (its id stays in the
// replicas of its partitions), so clients that keep a group coordinator
// by broker id (sarama) look it up again instead of dialing the dead one;
// back and unfenced, it is listed again.
//
// DescribeCluster does the same, and lists it marked IsFenced when asked
// with IncludeFencedBrokers (v2+).
func TestMetadataListsOnlyUnfencedBrokers(t *testing.T) {
	c := newSimCluster(t, 7, 3, nil)
	require.Zero(t, c.createTopic(0, "spread", 3))
	ctl := c.controller()
	victim := (ctl + 1) % 3
	observer := (ctl + 2) % 3
	id := int32(victim + 1)
	listed := func() []int32 {
		resp, err := c.do(observer, kmsg.NewPtrMetadataRequest())
		require.NoError(t, err)
		var ids []int32
		for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
			ids = append(ids, b.NodeID)
		}
		return ids
	}
	require.ElementsMatch(t, []int32{1, 2, 3}, listed())
	described := func(includeFenced bool) map[int32]bool {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType, req.IncludeFencedBrokers = 2, 1, includeFenced
		resp, err := c.do(observer, req)
		require.NoError(t, err)
		out := map[int32]bool{}
		for _, b := range resp.(*kmsg.DescribeClusterResponse).Brokers {
			out[b.NodeID] = b.IsFenced
		}
		return out
	}
	require.Equal(t, map[int32]bool{1: false, 2: false, 3: false}, described(true))

	c.world.Node(c.host(victim)).Kill()
	c.brokers[victim], c.clients[victim] = nil, nil
	c.world.Run(15 * time.Second) // past broker.session.timeout.ms
	require.True(t, c.brokers[observer].image.Brokers[id].Fenced)
	require.NotContains(t, listed(), id, "a fenced broker is listed")
	require.NotContains(t, described(false), id, "DescribeCluster lists a fenced broker")
	require.True(t, described(true)[id], "DescribeCluster v2 with IncludeFencedBrokers marks it fenced")
	resp, err := c.do(observer, kmsg.NewPtrMetadataRequest())
	require.NoError(t, err)
	replica := false
	for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
		for _, p := range tp.Partitions {
			for _, r := range p.Replicas {
				replica = replica || r == id
			}
		}
	}
	require.True(t, replica, "the fenced broker is no longer a replica of any partition")

	c.world.Node(c.host(victim)).Restart()
	c.waitRunning(victim)
	require.True(t, c.world.RunUntil(func() bool {
		b := c.brokers[observer].image.Brokers[id]
		return !b.Fenced
	}, time.Minute), "the returning broker is unfenced")
	require.ElementsMatch(t, []int32{1, 2, 3}, listed())
}
