package groups

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Java's String.hashCode, as Kafka hashes group ids: values a JVM gives.
func TestPartitionForIsKafkas(t *testing.T) {
	for _, tc := range []struct {
		group string
		parts int32
		want  int32
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},
		{"hello", 1 << 30, 99162322},                 // "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0},                // hashCode() == Integer.MIN_VALUE: Utils.abs gives 0
		{"\U0001F600", 1 << 30, 1772899},             // two UTF-16 code units: 0xD83D*31 + 0xDE00
		{"Aa", 1 << 30, 2112}, {"BB", 1 << 30, 2112}, // Java's best-known collision
	} {
		require.Equal(t, tc.want, PartitionFor(tc.group, tc.parts), "%q", tc.group)
	}
}

// A shard loaded after a failover gives each member a full session from
// its load, then expires the silent ones, as Kafka's coordinator does.
func TestLoadedMembersGetAFreshSession(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: -1})
	stableGroup1(h)
	h.now = h.now.Add(time.Hour)
	s := h.replayed(0)
	require.Equal(t, stateStable, s.groups["g"].state)
	h.s = s
	rd := h.s.Ready()
	require.Equal(t, 10*time.Second, rd.Deadline.Sub(h.now))
	h.advance(10 * time.Second)
	require.Empty(t, h.s.groups["g"].members)
	last := h.log[len(h.log)-1]
	v, err := decodeGroupValue(last.Value)
	require.NoError(t, err)
	require.Empty(t, v.Members)
	require.Equal(t, int32(2), v.Generation)
}

func BenchmarkCommit(b *testing.B) {
	s := NewShard(Config{})
	s.Loaded(epoch)
	req := commitReq(8, "g", -1, "", "t", 0, 1)
	b.ReportAllocs()
	for i := range b.N {
		req.Group = "g" + string(rune('a'+i%26))
		req.Topics[0].Partitions[0].Offset = int64(i)
		s.Handle(epoch, RequestID(i), req)
		s.Ready()
	}
}
