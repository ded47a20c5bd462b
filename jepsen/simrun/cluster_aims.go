package simrun

import (
	"strings"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// aimSchedule times one kind of aimed fault (cluster_lagging_leader.go,
// cluster_stale_follower.go, cluster_paused_controller.go): its draws come
// from a random stream of its own, so that a seed's other draws stay what
// they were, and its tries follow one another until the heal.
type aimSchedule struct {
	n     *clusterNemesis
	rand  *rng.Rand
	label string // of its events in the trace
	// try makes one try and reports whether it aimed; an aim that did
	// schedules the next try itself, when it ends.
	try  func() bool
	next *sched.Event
}

// startAims draws, from the stream named stream, whether this seed aims
// that way (in share of the seeds that may), and returns the schedule, or
// nil for a seed that does not; the caller schedules the first try.
func (n *clusterNemesis) startAims(stream string, share float64, try func() bool) *aimSchedule {
	s := &aimSchedule{n: n, rand: n.r.w.Rand(stream), label: strings.ReplaceAll(stream, "/", "."), try: try}
	if !s.rand.Chance(share) {
		return nil
	}
	n.aims = append(n.aims, s)
	return s
}

func (s *aimSchedule) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rand.Uint64n(uint64(hi-lo)))
}

// after tries in d, if the safety phase lasts that long; a try that does
// not aim is followed by another 1-5 s later.
func (s *aimSchedule) after(d time.Duration) {
	if s.n.r.w.Now()+d > s.n.safetyEnd {
		return
	}
	s.next = s.n.r.w.After(d, s.label, func() {
		s.next = nil
		if s.n.r.stopping {
			return
		}
		if !s.try() {
			s.gap()
		}
	})
}

// gap schedules the next try 1-5 s from now.
func (s *aimSchedule) gap() { s.after(s.uniform(time.Second, 5*time.Second)) }

// stop cancels the next try (the heal).
func (s *aimSchedule) stop() {
	if s.next != nil {
		s.next.Cancel()
		s.next = nil
	}
}
