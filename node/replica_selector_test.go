package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSelectRackAwareAsKafkasRackAwareReplicaSelector(t *testing.T) {
	leader := replicaView{id: 1, rack: "a", live: true, logEnd: 10}
	view := func(id int32, rack string, logEnd int64, since time.Duration) replicaView {
		return replicaView{id: id, rack: rack, live: true, logEnd: logEnd, sinceCaughtUp: since}
	}
	dead := view(4, "b", 10, 0)
	dead.live = false
	for _, tc := range []struct {
		name       string
		clientRack string
		followers  []replicaView
		want       int32
	}{
		{"no client rack", "", []replicaView{view(2, "b", 10, 0)}, 1},
		{"no replica in the rack", "c", []replicaView{view(2, "b", 10, 0)}, 1},
		{"the leader in the rack", "a", []replicaView{view(2, "a", 10, 0)}, 1},
		{"the follower in the rack", "b", []replicaView{view(2, "b", 9, 0), view(3, "c", 10, 0)}, 2},
		{"the greatest log end", "b", []replicaView{view(2, "b", 9, 0), view(3, "b", 10, time.Second)}, 3},
		{"then the most recently caught up", "b", []replicaView{view(2, "b", 10, time.Millisecond), view(3, "b", 10, time.Second)}, 2},
		{"then the greatest id", "b", []replicaView{view(3, "b", 10, 0), view(2, "b", 10, 0)}, 3},
		{"a broker without an endpoint has no rack", "b", []replicaView{dead}, 1},
		{"case matters, as Java's equals", "B", []replicaView{view(2, "b", 10, 0)}, 1},
	} {
		got := selectRackAware(tc.clientRack, append([]replicaView{leader}, tc.followers...))
		require.Equal(t, tc.want, got.id, tc.name)
	}
}

// A configuration built in code is checked as a file's is.
func TestValidateRefusesAnUnknownReplicaSelector(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReplicaSelectorClass = "org.example.NearestSelector"
	require.ErrorContains(t, cfg.Validate(), "config replica.selector.class=org.example.NearestSelector")
	cfg.ReplicaSelectorClass = RackAwareSelectorClass
	require.NoError(t, cfg.Validate())
}
