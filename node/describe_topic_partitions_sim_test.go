package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeTopicPartitions asks node i for one page.
func (c *simCluster) describeTopicPartitions(i int, topics []string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) *kmsg.DescribeTopicPartitionsResponse {
	c.t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range topics {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
	}
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	resp, err := c.do(i, req)
	require.NoError(c.t, err)
	return resp.(*kmsg.DescribeTopicPartitionsResponse)
}

// pageTopicPartitions follows NextCursor from the start and returns every
// partition seen, as "topic/partition" strings, and the number of pages.
func (c *simCluster) pageTopicPartitions(i int, topics []string, limit int32) ([]string, int) {
	c.t.Helper()
	var seen []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for pages := 1; ; pages++ {
		require.Less(c.t, pages, 100, "paging does not end")
		resp := c.describeTopicPartitions(i, topics, limit, cursor)
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				seen = append(seen, *t.Topic+"/"+string(rune('0'+p.Partition)))
				n++
			}
		}
		require.LessOrEqual(c.t, n, int(limit), "page %d is over the limit", pages)
		if resp.NextCursor == nil {
			return seen, pages
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
}

func TestDescribeTopicPartitionsPagesEveryTopicInNameOrder(t *testing.T) {
	c := newSimCluster(t, 11, 3, nil)
	require.Zero(t, c.createTopic(0, "b", 3))
	require.Zero(t, c.createTopic(1, "a", 2))
	require.Zero(t, c.createTopic(2, "c", 1))
	c.world.Run(2 * time.Second)

	// Every node answers from its own image, the same way.
	for i := 0; i < 3; i++ {
		resp := c.describeTopicPartitions(i, nil, 0, nil)
		require.Nil(t, resp.NextCursor)
		require.Len(t, resp.Topics, 3)
		for k, name := range []string{"a", "b", "c"} {
			rt := resp.Topics[k]
			require.Equal(t, name, *rt.Topic)
			require.Zero(t, rt.ErrorCode)
			require.NotEqual(t, [16]byte{}, rt.TopicID)
			for _, p := range rt.Partitions {
				require.Zero(t, p.ErrorCode, "%s/%d", name, p.Partition)
				require.Equal(t, []int32{p.LeaderID}, p.Replicas)
				require.Equal(t, []int32{p.LeaderID}, p.ISR)
				require.GreaterOrEqual(t, p.LeaderEpoch, int32(0))
				require.Empty(t, p.EligibleLeaderReplicas)
				require.Empty(t, p.LastKnownELR)
				require.Empty(t, p.OfflineReplicas)
			}
		}
		require.Len(t, resp.Topics[1].Partitions, 3)
	}

	all := []string{"a/0", "a/1", "b/0", "b/1", "b/2", "c/0"}
	for _, limit := range []int32{1, 2, 3, 5, 6, 7} {
		seen, pages := c.pageTopicPartitions(0, nil, limit)
		require.Equal(t, all, seen, "limit %d", limit)
		require.Equal(t, (len(all)+int(limit)-1)/int(limit), pages, "limit %d", limit)
	}
	// A page that ends with a topic points at the next topic's first
	// partition.
	resp := c.describeTopicPartitions(0, nil, 2, nil)
	require.Equal(t, &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: "b", Partition: 0}, resp.NextCursor)
}

func TestDescribeTopicPartitionsListedTopicsUnknownAndBadCursor(t *testing.T) {
	c := newSimCluster(t, 12, 3, nil)
	require.Zero(t, c.createTopic(0, "x", 2))
	require.Zero(t, c.createTopic(0, "y", 2))
	c.world.Run(2 * time.Second)

	resp := c.describeTopicPartitions(1, []string{"y", "nope", "x", "y"}, 3, nil)
	require.Len(t, resp.Topics, 3)
	require.Equal(t, "nope", *resp.Topics[0].Topic)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].ErrorCode)
	require.Empty(t, resp.Topics[0].Partitions)
	require.Equal(t, "x", *resp.Topics[1].Topic)
	require.Len(t, resp.Topics[1].Partitions, 2)
	require.Equal(t, "y", *resp.Topics[2].Topic)
	require.Len(t, resp.Topics[2].Partitions, 1)
	require.Equal(t, &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: "y", Partition: 1}, resp.NextCursor)

	seen, pages := c.pageTopicPartitions(1, []string{"y", "x"}, 1)
	require.Equal(t, []string{"x/0", "x/1", "y/0", "y/1"}, seen)
	require.Equal(t, 4, pages)

	// The cursor names a topic that is not listed, or a negative partition.
	for _, cur := range []kmsg.DescribeTopicPartitionsRequestCursor{{Topic: "z", Partition: 0}, {Topic: "x", Partition: -1}} {
		resp = c.describeTopicPartitions(1, []string{"x", "y"}, 10, &cur)
		require.Len(t, resp.Topics, 2)
		for _, rt := range resp.Topics {
			require.Equal(t, kerr.InvalidRequest.Code, rt.ErrorCode, "cursor %+v", cur)
		}
	}
	// A cursor past its topic's end gives the topic without partitions,
	// then the next.
	resp = c.describeTopicPartitions(1, nil, 10, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "x", Partition: 9})
	require.Len(t, resp.Topics, 2)
	require.Empty(t, resp.Topics[0].Partitions)
	require.Len(t, resp.Topics[1].Partitions, 2)
	require.Nil(t, resp.NextCursor)
}

func TestDescribeTopicPartitionsCursorMayPointAtAnUnknownTopic(t *testing.T) {
	c := newSimCluster(t, 13, 1, nil)
	require.Zero(t, c.createTopic(0, "a", 2))
	resp := c.describeTopicPartitions(0, []string{"a", "b", "bad/name"}, 2, nil)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: "b", Partition: 0}, resp.NextCursor,
		"the page ended with a, and b is next, known or not")
	resp = c.describeTopicPartitions(0, []string{"a", "b", "bad/name"}, 2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b"})
	require.Nil(t, resp.NextCursor)
	require.Len(t, resp.Topics, 2)
	require.Equal(t, "b", *resp.Topics[0].Topic)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].ErrorCode)
	require.Equal(t, "bad/name", *resp.Topics[1].Topic)
	require.Equal(t, kerr.InvalidTopicException.Code, resp.Topics[1].ErrorCode)
}

// A fenced broker's replicas are offline; a partition whose only replica
// it is has no leader.
func TestDescribeTopicPartitionsNamesTheReplicasOfAFencedBrokerOffline(t *testing.T) {
	c := newSimCluster(t, 14, 3, nil)
	require.Zero(t, c.createTopic(0, "spread", 6))
	ctl := c.controller()
	victim := (ctl + 1) % 3
	observer := (ctl + 2) % 3
	id := int32(victim + 1)
	c.world.Node(c.host(victim)).Kill()
	c.brokers[victim], c.clients[victim] = nil, nil
	c.world.Run(15 * time.Second) // past broker.session.timeout.ms
	require.True(t, c.brokers[observer].image.Brokers[id].Fenced)
	resp := c.describeTopicPartitions(observer, []string{"spread"}, 0, nil)
	offline := 0
	for _, p := range resp.Topics[0].Partitions {
		require.Zero(t, p.ErrorCode)
		if p.Replicas[0] == id {
			offline++
			require.Equal(t, []int32{id}, p.OfflineReplicas, "partition %d", p.Partition)
		} else {
			require.Empty(t, p.OfflineReplicas, "partition %d", p.Partition)
		}
	}
	require.Positive(t, offline)
}
