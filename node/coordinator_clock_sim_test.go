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

// The sessions' monotonic clock counts elapsed time, not steps of the
// wall clock: a second after a 4 s step forward (below the 5 s past which
// a late tick counts as a stall) it has moved a second, not five. It used
// to count the step, so a KIP-848 coordinator expired a member's session
// early and gave its partition to another member while the first still
// owned it (five-node seed 672 of the simulator's sweep).
func TestMonotonicClockIgnoresASmallStep(t *testing.T) {
	for _, step := range []time.Duration{4 * time.Second, -4 * time.Second, time.Hour} {
		c := newSimCluster(t, 77, 1, nil)
		b := c.brokers[0]
		before, beforeMono := c.world.Now(), b.monoNow()
		c.world.Node(c.host(0)).Clock().Jump(step)
		c.world.Run(time.Second)
		passed, passedMono := c.world.Now()-before, b.monoNow().Sub(beforeMono)
		require.InDelta(t, passed.Seconds(), passedMono.Seconds(), 0.01, "step %s: %s of virtual time, %s on the monotonic clock", step, passed, passedMono)
		require.InDelta(t, passed.Seconds(), b.mono.now.Sub(beforeMono).Seconds(), monoTick.Seconds()+0.01, "step %s: its ticks", step)
	}
}
