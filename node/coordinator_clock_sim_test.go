package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator's timers count elapsed time, not the wall clock,
// as the controller's sessions do: a JoinGroup parked for the initial
// rebalance delay is answered after the delay even when the coordinator's
// clock is stepped back an hour meanwhile (found by the simulator's group
// workload: a classic member waited for the length of the jump).
func TestGroupTimersIgnoreAClockJump(t *testing.T) {
	for _, jump := range []time.Duration{-time.Hour, time.Hour} {
		c := newSimCluster(t, 75, 3, func(_ int, cfg *Config) { cfg.OffsetsTopicNumPartitions = 3 })
		const group = "jumpy"
		co := c.findCoordinator(0, group)
		m := c.dialMember(co)
		first := c.await(m.send(joinRequest(group, "")))[0].(*kmsg.JoinGroupResponse)
		require.Equal(t, kerr.MemberIDRequired.Code, first.ErrorCode)
		answer := m.send(joinRequest(group, first.MemberID))
		c.world.Run(time.Second) // parked for the 3 s delay
		require.Nil(t, answer())
		c.world.Node(c.host(co)).Clock().Jump(jump)
		start := c.world.Now()
		require.True(t, c.world.RunUntil(func() bool { return answer() != nil }, 10*time.Second),
			"jump %s: the parked join was not answered 10 s after the delay should have ended", jump)
		jr := answer().(*kmsg.JoinGroupResponse)
		require.Zero(t, jr.ErrorCode, "jump %s: %v", jump, kerr.ErrorForCode(jr.ErrorCode))
		require.Less(t, c.world.Now()-start, 5*time.Second, "jump %s", jump)
	}
}
