package isr

import (
	"github.com/sluicemq/sluice/internal/invariants"
)

// becomeFollower starts following the metadata's leader in its epoch:
// first the epoch query, unless the log is empty (nothing can diverge).
func (r *Replica) becomeFollower() {
	r.resetRole()
	r.role, r.step = RoleFollower, stepFollower
	if r.local.LatestEpoch < 0 {
		r.phase = phaseFetch
		return
	}
	r.askEpoch()
}

func (r *Replica) askEpoch() {
	r.phase = phaseQuery
	r.query = &EpochQuery{Leader: r.meta.Leader, CurrentLeaderEpoch: r.meta.LeaderEpoch, Epoch: r.local.LatestEpoch}
}

func stepFollower(r *Replica, m Message) {
	switch m.Type {
	case MsgEpochEnd:
		if r.phase != phaseQuery {
			return
		}
		r.truncate(TruncationPoint(EpochAnswer{Asked: r.local.LatestEpoch, LeaderEpoch: m.Epoch, LeaderEnd: m.Offset,
			LocalEpoch: m.LocalEpoch, LocalEnd: m.LocalOffset, LogEnd: r.local.LogEnd, HighWatermark: r.hw}))
	case MsgTruncated:
		if r.phase != phaseTruncate {
			return
		}
		r.phase = phaseFetch
		if r.hw > r.local.Position {
			// Only where CheckTruncation is off (an unclean election, a
			// power loss with page-cache positions): what was called
			// committed here is gone.
			r.hw, r.hwMoved = r.local.Position, true
		}
		if !r.truncationDone {
			r.askEpoch()
		}
	case MsgFetched:
		if r.phase == phaseFetch {
			r.followLeaderHW(m.Offset)
		}
	case MsgLocal:
		r.followLeaderHW(r.leaderHW)
	}
}

// truncate asks for the truncation to offset; done false means the
// answer proved only that much, and another query follows it.
func (r *Replica) truncate(offset int64, done bool) {
	r.truncationDone = done
	if offset >= r.local.LogEnd {
		// Nothing to remove.
		r.phase = phaseFetch
		if !done {
			r.askEpoch()
		}
		return
	}
	if invariants.Enabled && offset < r.hw && r.cfg.CheckTruncation {
		invariants.Panicf("isr: replica %d: truncation to %d below its high watermark %d (epoch %d)", r.cfg.ID, offset, r.hw, r.meta.LeaderEpoch)
	}
	r.phase, r.truncateTo = phaseTruncate, offset
}

// followLeaderHW takes the leader's high watermark, capped at this
// replica's position: what it has (on its disk, where positions are
// durable).
func (r *Replica) followLeaderHW(leaderHW int64) {
	r.leaderHW = leaderHW
	r.setFollowerHW(min(leaderHW, r.local.Position))
}

func (r *Replica) setFollowerHW(hw int64) {
	if hw > r.hw {
		r.hw, r.hwMoved = hw, true
	}
}

// EpochAnswer is what a follower's truncation is decided from: Asked is
// the epoch the follower asked about (its latest); LeaderEpoch and
// LeaderEnd the leader's answer (-1, -1: the leader has no epoch at or
// below it); LocalEpoch and LocalEnd the follower's own end offset for
// LeaderEpoch (log.EndOffsetForEpoch); LogEnd its log end and
// HighWatermark its high watermark.
type EpochAnswer struct {
	Asked, LeaderEpoch, LocalEpoch             int32
	LeaderEnd, LocalEnd, LogEnd, HighWatermark int64
}

// TruncationPoint decides a follower's truncation from the leader's answer
// to its epoch query, as Kafka's AbstractFetcherThread does (KIP-279). It
// returns the offset to truncate to (the log end: nothing) and whether the
// truncation is complete.
//
//   - The leader has nothing at or below the asked epoch: its answer proves
//     nothing beyond what both know is committed, so the follower keeps
//     its high watermark's worth (as Kafka does); a fetch above the
//     leader's log then answers out of range, which the node resolves.
//   - The leader has the asked epoch: both logs agree up to the smaller
//     end.
//   - The leader answers an older epoch: if the follower has that epoch
//     too, the logs agree up to the smaller of the two ends for it; if not
//     (its own answer is older still), it truncates to the smaller end and
//     asks again about its new latest epoch (not complete).
func TruncationPoint(a EpochAnswer) (int64, bool) {
	switch {
	case a.LeaderEpoch < 0 || a.LeaderEnd < 0:
		return min(a.HighWatermark, a.LogEnd), true
	case a.LeaderEpoch == a.Asked:
		return min(a.LeaderEnd, a.LogEnd), true
	case a.LocalEpoch == a.LeaderEpoch:
		return min(a.LeaderEnd, a.LocalEnd, a.LogEnd), true
	default:
		return min(a.LeaderEnd, a.LocalEnd, a.LogEnd), false
	}
}
