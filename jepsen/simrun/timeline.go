package simrun

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/sched"
)

// recorder draws a run's timeline (Config.Timeline) as it goes: each
// node's crashes, kills and pauses from the trace's own entries (so it
// sees every one, a power loss's and a supervisor's restarts included),
// the faults the nemesis injects, and, in a cluster run, the quorum's
// leaders and the data partitions' leaders, epochs and ISRs as the
// observer samples them. Recording only watches: it schedules nothing and
// draws no random numbers, so a run's trace is the same with it or not.
type recorder struct {
	t   jepsen.Timeline
	now func() time.Duration
	// down holds, by node, the span of the outage or pause under way.
	down map[string]*jepsen.Span
	// partitions are the data partitions' current spans (cluster runs).
	partitions []*jepsen.Span
}

// The lane groups, in the order they are drawn.
var timelineGroups = []string{"nodes", "quorum", "partitions", "groups", "clients"}

func newRecorder(cfg Config) *recorder {
	if !cfg.Timeline {
		return nil
	}
	return &recorder{down: map[string]*jepsen.Span{}}
}

// observe reads a node's state changes off the trace.
func (rec *recorder) observe(e sched.TraceEntry) {
	kind, node, _ := strings.Cut(e.Kind, "/")
	if !e.Fold {
		if e.Kind == "node.boot" {
			rec.up(e.Node, e.At)
		}
		return
	}
	switch kind {
	case "node.crash":
		rec.up(node, e.At)
		rec.open(node, e.At, "crashed", "down")
	case "node.kill":
		rec.up(node, e.At)
		rec.open(node, e.At, "killed", "killed")
	case "node.pause":
		rec.open(node, e.At, "paused", "paused")
	case "node.resume":
		rec.up(node, e.At)
	}
}

func (rec *recorder) open(node string, at time.Duration, label, class string) {
	rec.down[node] = &jepsen.Span{From: at, To: -1, Label: label, Class: class}
}

// up ends the node's outage or pause, if one is under way.
func (rec *recorder) up(node string, at time.Duration) {
	if s := rec.down[node]; s != nil {
		s.To = at
		lane := rec.nodeLane(node)
		lane.Spans = append(lane.Spans, *s)
		delete(rec.down, node)
	}
}

func (rec *recorder) nodeLane(node string) *jepsen.Lane { return rec.t.Lane("nodes", node) }

// fault marks a fault injected on a node (a client's node too).
func (rec *recorder) fault(node string, f Fault, detail string) {
	if rec == nil {
		return
	}
	label := "fault " + string(f)
	if detail != "" {
		label += ": " + detail
	}
	lane := rec.nodeLane(node)
	lane.Points = append(lane.Points, jepsen.Point{At: rec.now(), Label: label, Class: "fault"})
}

// during draws a state of a node (class "disk": its disk failing;
// "partition": cut off from some of the others) from now until the
// returned function is called.
func (rec *recorder) during(node, class, label string) (end func()) {
	if rec == nil {
		return func() {}
	}
	from := rec.now()
	return func() {
		lane := rec.nodeLane(node)
		lane.Spans = append(lane.Spans, jepsen.Span{From: from, To: rec.now(), Class: class, Label: label})
	}
}

// partitionsAt records the data partitions' leaders, epochs and ISRs as
// the quorum's image has them (cluster runs), drawing a span per state.
func (rec *recorder) partitionsAt(t *raftmeta.Topic) {
	if rec == nil || t == nil {
		return
	}
	now := rec.now()
	for p, part := range t.Partitions {
		label := fmt.Sprintf("n%d e%d isr%v", part.Leader, part.LeaderEpoch, part.ISR)
		if part.Leader < 0 {
			label = fmt.Sprintf("no leader e%d isr%v", part.LeaderEpoch, part.ISR)
		}
		for len(rec.partitions) <= p {
			rec.partitions = append(rec.partitions, nil)
		}
		if cur := rec.partitions[p]; cur != nil && cur.Label == label {
			continue
		}
		rec.endPartition(p, now)
		rec.partitions[p] = &jepsen.Span{From: now, To: -1, Label: label, Class: "part"}
	}
}

func (rec *recorder) endPartition(p int, at time.Duration) {
	if cur := rec.partitions[p]; cur != nil {
		cur.To = at
		lane := rec.t.Lane("partitions", fmt.Sprintf("%s-%d", clusterTopic, p))
		lane.Spans = append(lane.Spans, *cur)
		rec.partitions[p] = nil
	}
}

// finish closes what is still open at the run's end, adds the quorum's
// leaders, the groups' generations and the clients' operations, marks the
// violations, and returns the timeline.
func (rec *recorder) finish(s Summary, w *sim.World, raft []jepsen.RaftSample, nodeNames map[int32]string) *jepsen.Timeline {
	if rec == nil {
		return nil
	}
	end := w.Now()
	rec.t.End = end
	rec.t.Title = fmt.Sprintf("sluice sim: seed %d", s.Seed)
	rec.t.Notes = append(rec.t.Notes, s.Line())
	if !s.OK() {
		rec.t.Notes = append(rec.t.Notes, s.Details())
	}
	for _, n := range w.Nodes() {
		rec.nodeLane(n.Name()) // every node has its lane, in the world's order
		rec.up(n.Name(), end)
	}
	for p := range rec.partitions {
		rec.endPartition(p, end)
	}
	rec.addLeaders(raft, nodeNames, end)
	rec.addGroups(s.GroupHistory)
	rec.t.AddHistory(s.History, s.Check)
	for _, f := range s.Failures {
		rec.t.Marks = append(rec.t.Marks, jepsen.Mark{At: failureTime(f, end), Label: f})
	}
	for _, v := range s.Meta.Violations {
		rec.t.Marks = append(rec.t.Marks, jepsen.Mark{At: end, Label: "metadata: " + v.String()})
	}
	// Node lanes first, in the world's order, then the quorum's and the
	// partitions' by name, the groups' as first seen, the clients' by id.
	var order []string
	for _, n := range w.Nodes() {
		order = append(order, n.Name())
	}
	slices.SortStableFunc(rec.t.Lanes, func(a, b jepsen.Lane) int {
		if d := slices.Index(timelineGroups, a.Group) - slices.Index(timelineGroups, b.Group); d != 0 {
			return d
		}
		switch a.Group {
		case "nodes":
			return slices.Index(order, a.Name) - slices.Index(order, b.Name)
		case "quorum", "partitions", "clients":
			return cmp.Or(cmp.Compare(len(a.Name), len(b.Name)), cmp.Compare(a.Name, b.Name))
		}
		return 0
	})
	return &rec.t
}

// failureTime reads "panic at 1.5s: ..." for when a failure happened; a
// failure that says no time is marked at the end.
func failureTime(f string, end time.Duration) time.Duration {
	if rest, ok := strings.CutPrefix(f, "panic at "); ok {
		if at, _, ok := strings.Cut(rest, ":"); ok {
			if d, err := time.ParseDuration(at); err == nil {
				return d
			}
		}
	}
	return end
}

// addLeaders draws, on a lane per voter, the spans in which it said it led
// the quorum, term by term, from the observer's samples: a span ends at
// the node's next sample, or its first outage or pause before that.
func (rec *recorder) addLeaders(samples []jepsen.RaftSample, names map[int32]string, end time.Duration) {
	type lead struct {
		from time.Duration
		term uint64
	}
	leading := map[int32]*lead{}
	stop := func(node int32, at time.Duration) {
		if l := leading[node]; l != nil {
			lane := rec.t.Lane("quorum", names[node])
			to := rec.outageAfter(names[node], l.from, at)
			lane.Spans = append(lane.Spans, jepsen.Span{From: l.from, To: to, Class: "leader", Label: fmt.Sprintf("leader t%d", l.term)})
			delete(leading, node)
		}
	}
	for _, s := range samples {
		at := time.Duration(s.Time)
		rec.t.Lane("quorum", names[s.Node])
		if l := leading[s.Node]; l != nil && (s.Leader != s.Node || s.Term != l.term) {
			stop(s.Node, at)
		}
		if s.Leader == s.Node && leading[s.Node] == nil {
			leading[s.Node] = &lead{from: at, term: s.Term}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(leading)) {
		stop(id, end)
	}
}

// outageAfter is when the node's first outage or pause after from began,
// if before end, else end.
func (rec *recorder) outageAfter(node string, from, end time.Duration) time.Duration {
	for _, s := range rec.nodeLane(node).Spans {
		if s.Class != "disk" && s.From >= from && s.From < end {
			end = s.From
		}
	}
	return end
}

// addGroups marks each assignment a member received, on its group's lane.
func (rec *recorder) addGroups(events []jepsen.GroupEvent) {
	for _, e := range events {
		if e.Kind != jepsen.GroupAssigned {
			continue
		}
		lane := rec.t.Lane("groups", e.Group)
		lane.Points = append(lane.Points, jepsen.Point{At: time.Duration(e.Virtual), Class: "generation",
			Label: fmt.Sprintf("%s generation %d: %s owns %v", e.Protocol, e.Generation, e.Member, e.Partitions)})
	}
}
