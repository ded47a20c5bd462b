package isr

import (
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
)

// ErrStaleEpoch is what MsgAlterDone carries when the controller refused
// the change as made against old epochs (INVALID_UPDATE_VERSION,
// FENCED_LEADER_EPOCH): the leader waits for newer metadata before it
// proposes again. Any other refusal drops the change.
var ErrStaleEpoch = errors.New("isr: the ISR change was made against stale epochs")

// ErrOutcomeUnknown is what MsgAlterDone carries when the change may or may
// not have committed (a timeout, a lost connection, a controller that lost
// its leadership with the proposal in flight).
var ErrOutcomeUnknown = errors.New("isr: the ISR change's outcome is unknown")

// becomeLeader starts a leader's epoch: every follower unknown, and caught
// up as of now, so that none leaves the ISR before it has had
// ReplicaLagTimeMax to fetch (Kafka does the same).
func (r *Replica) becomeLeader(now time.Time) {
	r.resetRole()
	r.role, r.step = RoleLeader, stepLeader
	r.epochStart = r.local.LogEnd
	for _, id := range r.meta.Replicas {
		if id != r.cfg.ID {
			r.followers = append(r.followers, follower{id: id, offset: -1, caughtUp: now, lastFetch: now, lastFetchLeaderEnd: -1})
		}
	}
	r.maybeAdvance()
}

// leaderTookISR follows a committed ISR change in the leader's own epoch
// (its own, or the controller's removal of a fenced member).
func (r *Replica) leaderTookISR() {
	if r.pending != nil && r.proposed && slices.Equal(r.pending.ISR, r.meta.ISR) {
		r.pending, r.proposed = nil, false
	}
	if r.pending != nil && r.pending.PartitionEpoch < r.meta.PartitionEpoch {
		// The change in flight was made against an older partition epoch:
		// the controller refuses it; what to change is decided afresh.
		r.pending, r.proposed = nil, false
	}
	// A replica may have been added or removed (reassignment).
	kept := r.followers[:0]
	for _, f := range r.followers {
		if slices.Contains(r.meta.Replicas, f.id) {
			kept = append(kept, f)
		}
	}
	r.followers = kept
	for _, id := range r.meta.Replicas {
		if id != r.cfg.ID && r.followerOf(id) == nil {
			r.followers = append(r.followers, follower{id: id, offset: -1, lastFetchLeaderEnd: -1})
		}
	}
	r.maybeAdvance()
	r.checkISRHoldsHW()
}

func stepLeader(r *Replica, m Message) {
	switch m.Type {
	case MsgLocal:
		r.maybeAdvance()
	case MsgFetch:
		r.followerFetched(m.Replica, m.Offset, m.BrokerEpoch, m.Now)
	case MsgTick:
		r.retryStale()
		r.maybeShrink(m.Now)
	case MsgAlterDone:
		r.alterDone(m)
	}
}

func (r *Replica) followerOf(id int32) *follower {
	for i := range r.followers {
		if r.followers[i].id == id {
			return &r.followers[i]
		}
	}
	return nil
}

// followerFetched records a follower's fetch offset: what it has, since
// it asks for what comes next.
func (r *Replica) followerFetched(id int32, offset, brokerEpoch int64, now time.Time) {
	f := r.followerOf(id)
	if f == nil || offset < 0 || offset > r.local.LogEnd {
		return // not a replica, or out of range: the node answered it an error
	}
	switch {
	case offset >= r.local.LogEnd:
		f.caughtUp = now
	case offset >= f.lastFetchLeaderEnd && f.lastFetchLeaderEnd >= 0:
		// It has everything the leader had at its previous fetch.
		f.caughtUp = later(f.caughtUp, f.lastFetch)
	}
	f.offset, f.brokerEpoch = offset, brokerEpoch
	f.lastFetch, f.lastFetchLeaderEnd = now, r.local.LogEnd
	r.maybeExpand(f)
	r.maybeAdvance()
	r.checkISRHoldsHW()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// maximalISR is the committed ISR plus a member whose addition is in
// flight: the high watermark waits for it too, so that it is in sync the
// moment the change commits. (A removal in flight keeps the member until
// it commits.)
func (r *Replica) maximalISR() []int32 {
	isr := r.meta.ISR
	if r.pending != nil && len(r.pending.ISR) > len(isr) {
		isr = r.pending.ISR
	}
	return isr
}

// maybeAdvance moves the high watermark to the smallest position of the
// maximal ISR, unless the committed ISR is under min.insync.replicas.
func (r *Replica) maybeAdvance() {
	if r.UnderMinISR() {
		return
	}
	hw := r.local.Position
	for _, id := range r.maximalISR() {
		if id == r.cfg.ID {
			continue
		}
		f := r.followerOf(id)
		if f == nil || f.offset < 0 {
			return // a member not heard from in this epoch holds it
		}
		hw = min(hw, f.offset)
	}
	r.setHW(hw)
}

// checkISRHoldsHW asserts the rule every clean election relies on: each
// member of the committed ISR has every record below the high watermark.
// A member the leader has not heard from in this epoch is not known
// short; one whose fetch offset is below the high watermark lacks records
// the leader acknowledged, so the controller took into the ISR a replica
// the leader did not count (an ISR change applied against an older
// partition epoch, say).
func (r *Replica) checkISRHoldsHW() {
	if !invariants.Enabled || !r.cfg.CheckTruncation {
		return
	}
	for _, id := range r.meta.ISR {
		if f := r.followerOf(id); id != r.cfg.ID && f != nil && f.offset >= 0 && f.offset < r.hw {
			invariants.Panicf("isr: replica %d leading epoch %d (partition epoch %d): ISR member %d is at offset %d, below the high watermark %d",
				r.cfg.ID, r.meta.LeaderEpoch, r.meta.PartitionEpoch, id, f.offset, r.hw)
		}
	}
}

func (r *Replica) setHW(hw int64) {
	if hw <= r.hw {
		return
	}
	if invariants.Enabled && hw > r.local.Position {
		invariants.Panicf("isr: replica %d: high watermark %d past its own position %d", r.cfg.ID, hw, r.local.Position)
	}
	r.hw, r.hwMoved = hw, true
}

// maybeExpand proposes adding f to the ISR once it has the high watermark
// and this epoch's start.
func (r *Replica) maybeExpand(f *follower) {
	if r.pending != nil || slices.Contains(r.meta.ISR, f.id) {
		return
	}
	if f.offset < r.hw || f.offset < r.epochStart {
		return
	}
	r.propose(append(slices.Clone(r.meta.ISR), f.id))
}

// maybeShrink proposes removing the ISR members not caught up within
// ReplicaLagTimeMax.
func (r *Replica) maybeShrink(now time.Time) {
	if r.pending != nil {
		return
	}
	var out []int32
	for _, id := range r.meta.ISR {
		if id == r.cfg.ID {
			continue
		}
		f := r.followerOf(id)
		// A follower that has the whole log is in sync however long ago
		// it fetched (Kafka's isCaughtUp): nothing was written since.
		if f != nil && f.offset != r.local.LogEnd && now.Sub(f.caughtUp) > r.cfg.ReplicaLagTimeMax {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return
	}
	isr := make([]int32, 0, len(r.meta.ISR))
	for _, id := range r.meta.ISR {
		if !slices.Contains(out, id) {
			isr = append(isr, id)
		}
	}
	r.propose(isr)
}

func (r *Replica) propose(isr []int32) {
	if r.meta.PartitionEpoch == r.refusedEpoch {
		return // refused as stale at this epoch: wait for the metadata
	}
	r.pending = &AlterISR{ISR: isr, LeaderEpoch: r.meta.LeaderEpoch, PartitionEpoch: r.meta.PartitionEpoch}
	r.proposed = false
	r.maybeAdvance()
}

// staleRetryTicks is how many ticks (replica.lag.time.max.ms/2 apart) a
// change refused as stale waits for the metadata that would show why
// before it is proposed again.
const staleRetryTicks = 2

// retryStale proposes again a change refused as stale whose newer metadata
// has not come in staleRetryTicks ticks: the refusal may have come from a
// controller that had just lost its quorum, deciding against records it
// had proposed and that were then dropped (the sweep found a leader left
// with an ISR under min.insync.replicas for good, seed 1173). A genuine
// refusal is refused again, no more often than this; the right controller
// commits the change.
func (r *Replica) retryStale() {
	if r.pending == nil || !r.proposed || r.refusedEpoch != r.meta.PartitionEpoch {
		r.staleTicks = 0
		return
	}
	r.staleTicks++
	if r.staleTicks >= staleRetryTicks {
		r.proposed, r.staleTicks = false, 0
	}
}

// alterDone takes the controller's answer to the change in flight.
//
// An answer that does not say the change was refused leaves its outcome
// unknown: a request that timed out, or whose connection broke, may have
// committed; a refusal as stale may come because an earlier attempt of the
// same change committed. The change then stays in the maximal ISR, so the
// high watermark still waits for a member it adds, until metadata newer
// than the change arrives (leaderTookISR); an unknown outcome is proposed
// again at once. Dropping it let a leader count the high watermark over
// an ISR the controller had already grown, and acknowledge alone what a
// successor elected from the grown ISR lacked (the cluster sweep found two
// acknowledged records lost so).
func (r *Replica) alterDone(m Message) {
	if r.pending == nil || !r.proposed {
		return
	}
	switch {
	case m.Err == nil && m.Meta.LeaderEpoch > r.meta.LeaderEpoch:
		// Taken, and the same metadata change moved the partition on (a
		// reassignment completed that removes this leader, electing a
		// member the change added): this replica no longer leads, and
		// will hear so from the metadata. Until then the change stays in
		// the maximal ISR, as an unknown outcome does: dropping it counted
		// the high watermark over the old ISR alone and acknowledged what
		// the new leader lacked (the four-node sweep lost records so).
	case m.Err == nil:
		r.pending, r.proposed = nil, false
		if m.Meta.LeaderEpoch == r.meta.LeaderEpoch && m.Meta.PartitionEpoch > r.meta.PartitionEpoch {
			// The answer may come before the metadata log brings the change.
			r.meta = cloneMetadata(m.Meta)
			r.leaderTookISR()
		}
	case errors.Is(m.Err, ErrStaleEpoch):
		// Newer metadata is coming; until it does, nothing is proposed
		// against these epochs again, and the change stays pending.
		r.refusedEpoch, r.staleTicks = r.meta.PartitionEpoch, 0
	case errors.Is(m.Err, ErrOutcomeUnknown):
		r.proposed = false // proposed again by the next Ready
	default:
		// Refused for good (an ineligible member, say): a shrink or expand
		// still due is proposed by the tick or fetch after it.
		r.pending, r.proposed = nil, false
	}
	r.maybeAdvance()
}
