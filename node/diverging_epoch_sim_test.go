package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// divergingFetch is a consumer's v12 fetch at offset after reading a batch
// of lastFetchedEpoch.
func divergingFetch(topic string, offset int64, lastFetchedEpoch int32) *kmsg.FetchRequest {
	req := consumerFetch(topic, 0, offset, "", -1)
	req.Topics[0].Partitions[0].LastFetchedEpoch = lastFetchedEpoch
	return req
}

// twoEpochs makes partition 0 of topic hold a, b, c written in one leader
// epoch and d, e in a later one, on every replica, and returns the current
// leader and its epoch.
func twoEpochs(t *testing.T, c *simCluster, topic string) (leader int, epoch int32) {
	require.Zero(t, c.createTopicRF(c.controller(), topic, 1, 3))
	first, _ := c.replicatedTo(topic, "a", "b", "c")
	c.world.Node(c.host(first)).Kill()
	c.brokers[first], c.clients[first] = nil, nil
	other := (first + 1) % 3
	require.True(t, c.world.RunUntil(func() bool {
		l, ok := c.leaders(other, topic)[0]
		return ok && l >= 0 && int(l-1) != first
	}, time.Minute), "no new leader")
	c.world.Node(c.host(first)).Restart()
	c.waitRunning(first)
	leader, end := c.replicatedTo(topic, "d", "e")
	require.Equal(t, int64(5), end)
	p := c.replicaOf(leader, topic, 0)
	require.Positive(t, p.leaderEpoch)
	for i := range c.brokers {
		e, ok := c.replicaOf(i, topic, 0).log.LatestEpoch()
		require.True(t, ok)
		require.Equal(t, p.leaderEpoch, e, "node %d's log ends in the leader's epoch", i+1)
	}
	return leader, p.leaderEpoch
}

// A consumer whose last fetched (epoch, offset) is not on the log gets
// DivergingEpoch, the end of its epoch here, and no records; one whose
// position is on the log reads on. The leader and a follower answer alike.
func TestAConsumerWhoseLogDivergedIsToldWhereItEnds(t *testing.T) {
	c := newRackCluster(t, 41, RackAwareSelectorClass, nil)
	leader, epoch := twoEpochs(t, c, "events")
	follower := (leader + 1) % 3
	// The first epoch is the one the records a, b, c were written in.
	firstEpoch, _, ok := c.replicaOf(leader, "events", 0).log.EndOffsetForEpoch(0)
	require.True(t, ok)
	for _, at := range []int{leader, follower} {
		// Read c at 2 in the first epoch, but the consumer believes that
		// epoch went on to offset 5: it ends at 3 here.
		rp, recs := c.fetchAt(at, divergingFetch("events", 5, firstEpoch))
		require.Zero(t, rp.ErrorCode, "node %d: %v", at+1, kerr.ErrorForCode(rp.ErrorCode))
		require.Equal(t, firstEpoch, rp.DivergingEpoch.Epoch, "node %d", at+1)
		require.Equal(t, int64(3), rp.DivergingEpoch.EndOffset, "node %d", at+1)
		require.Empty(t, recs, "node %d: no records with a diverging epoch", at+1)
		require.Equal(t, int64(5), rp.HighWatermark, "node %d", at+1)

		// Its position is where the first epoch ends: it reads on.
		rp, recs = c.fetchAt(at, divergingFetch("events", 3, firstEpoch))
		require.Zero(t, rp.ErrorCode, "node %d: %v", at+1, kerr.ErrorForCode(rp.ErrorCode))
		require.Equal(t, int32(-1), rp.DivergingEpoch.Epoch, "node %d", at+1)
		requireValues(t, recs, "d", "e")

		// The leader's epoch ends at the log end: a consumer at the end
		// waits for more.
		rp, recs = c.fetchAt(at, divergingFetch("events", 5, epoch))
		require.Zero(t, rp.ErrorCode, "node %d: %v", at+1, kerr.ErrorForCode(rp.ErrorCode))
		require.Equal(t, int32(-1), rp.DivergingEpoch.Epoch, "node %d", at+1)
		require.Empty(t, recs)

		// An epoch newer than any here has no end: OFFSET_OUT_OF_RANGE.
		rp, _ = c.fetchAt(at, divergingFetch("events", 5, epoch+3))
		require.Equal(t, kerr.OffsetOutOfRange.Code, rp.ErrorCode, "node %d", at+1)
		require.Equal(t, int32(-1), rp.DivergingEpoch.Epoch, "node %d", at+1)

		// v11 carries no LastFetchedEpoch: nothing is checked.
		old := divergingFetch("events", 3, firstEpoch)
		old.Version = 11
		rp, recs = c.fetchAt(at, old)
		require.Zero(t, rp.ErrorCode)
		requireValues(t, recs, "d", "e")
	}
}

// A diverging epoch is answered at once, not parked for MaxWaitMillis, and
// in an incremental fetch session too.
func TestADivergingEpochIsAnsweredAtOnceInASession(t *testing.T) {
	c := newRackCluster(t, 42, "", nil)
	leader, _ := twoEpochs(t, c, "events")
	firstEpoch, _, ok := c.replicaOf(leader, "events", 0).log.EndOffsetForEpoch(0)
	require.True(t, ok)

	open := divergingFetch("events", 5, -1)
	open.SessionEpoch = 0 // a new session
	resp, err := c.do(leader, open)
	require.NoError(t, err)
	fr := resp.(*kmsg.FetchResponse)
	require.NotZero(t, fr.SessionID)

	next := divergingFetch("events", 5, firstEpoch)
	next.SessionID, next.SessionEpoch = fr.SessionID, 1
	next.MaxWaitMillis = 30000
	start := c.world.Now()
	rp, recs := c.fetchAt(leader, next)
	require.Less(t, c.world.Now()-start, 10*time.Second, "parked")
	require.Equal(t, firstEpoch, rp.DivergingEpoch.Epoch)
	require.Equal(t, int64(3), rp.DivergingEpoch.EndOffset)
	require.Empty(t, recs)
}
