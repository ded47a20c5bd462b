package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The first acks=all produce to a new replicated topic waits for its
// followers' first fetches, which may reach the leader before it has
// applied the topic's creation and be refused (NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_TOPIC_ID). Such a refusal is the metadata's lag, gone within
// milliseconds: the follower fetches again after a short backoff that
// grows towards replica.fetch.backoff.ms, rather than leaving the
// partition for the whole second (which held the first write of every
// new __consumer_offsets shard for a second, found by the group
// benchmark).
func TestTheFirstProduceToANewTopicIsNotHeldForTheFetchBackoff(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		c := newSimCluster(t, seed, 3, nil)
		require.Zero(t, c.createTopicRF(0, "fresh", 8, 3))
		start := c.world.Now()
		for p := int32(0); p < 8; p++ {
			c.produceValues("fresh", p, 1)
		}
		took := c.world.Now() - start
		t.Logf("seed %d: 8 first produces at acks=all in %s", seed, took)
		require.Less(t, took, time.Second, "seed %d: the first produces waited for the fetch backoff (%s)", seed, took)
	}
}
