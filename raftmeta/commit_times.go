package raftmeta

import "time"

// CommitTimes remembers when a node's image reached each offset of the
// metadata log, back to the newest sample older than its horizon: what the
// controller measures a heartbeat's image against (ControllerConfig.
// ImageLagMax). The node notes every apply, whether it is the active
// controller or not, so that a controller that starts knows how old the
// log it starts with is: one that counted its whole log as committed at
// its start would find every broker caught up for ImageLagMax after each
// failover, long enough for a broker whose image stopped to renew its
// lease (a sweep found a learner doing so through a run of failovers).
type CommitTimes struct {
	horizon time.Duration
	samples []commitSample // oldest first, offsets increasing
}

type commitSample struct {
	offset uint64
	at     time.Time
}

// NewCommitTimes keeps samples for horizon, which must be at least the
// ImageLagMax of the controllers that read them.
func NewCommitTimes(horizon time.Duration) *CommitTimes {
	return &CommitTimes{horizon: horizon}
}

// Note says the image reached offset at time at (a clock that may step
// back: an earlier at than the last sample's is taken as the last's).
func (ct *CommitTimes) Note(offset uint64, at time.Time) {
	n := len(ct.samples)
	if n > 0 && offset <= ct.samples[n-1].offset {
		return
	}
	if n > 0 && at.Before(ct.samples[n-1].at) {
		at = ct.samples[n-1].at
	}
	ct.samples = append(ct.samples, commitSample{offset: offset, at: at})
	cut := at.Add(-ct.horizon)
	k := 0
	for k+1 < len(ct.samples) && !ct.samples[k+1].at.After(cut) {
		k++
	}
	if k > 0 {
		ct.samples = append(ct.samples[:0], ct.samples[k:]...)
	}
}

// reachedBy returns the largest offset the image had reached by time t (0
// if no sample is that old).
func (ct *CommitTimes) reachedBy(t time.Time) uint64 {
	var bound uint64
	for _, s := range ct.samples {
		if s.at.After(t) {
			break
		}
		bound = s.offset
	}
	return bound
}
