package simrun

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A Finding is what a failed run found, told apart from other findings by
// the checker that found it and what it concerns (a partition, a topic;
// empty where the check names none): a smaller run shows "the same
// violation" when one of its findings equals it.
type Finding struct {
	Check   string
	Subject string
}

func (f Finding) String() string {
	if f.Subject == "" {
		return f.Check
	}
	return f.Check + " on " + f.Subject
}

// Findings lists what the run found wrong, in the order Details prints it:
// the run's own failures ("failure/liveness", "failure/groups", ...), the
// metadata and quorum checks', then the data history's.
func (s Summary) Findings() []Finding {
	var out []Finding
	for _, f := range s.Failures {
		out = append(out, Finding{Check: "failure/" + failureKind(f)})
	}
	if s.Meta.Err != nil {
		out = append(out, Finding{Check: "meta/malformed"})
	}
	for _, v := range s.Meta.Violations {
		out = append(out, Finding{Check: "meta/" + v.Check, Subject: v.Topic})
	}
	if s.Check.Err != nil {
		out = append(out, Finding{Check: "data/malformed"})
	}
	for _, v := range s.Check.Violations {
		subject := ""
		if v.Partition.Topic != "" {
			subject = v.Partition.String()
		}
		out = append(out, Finding{Check: "data/" + v.Check, Subject: subject})
	}
	return out
}

// failureKind is the first word of a run's failure, past "violation: ":
// "liveness", "durability", "groups", "panic", ...
func failureKind(f string) string {
	f = strings.TrimPrefix(f, "violation: ")
	end := strings.IndexAny(f, ": ")
	if end < 0 {
		return f
	}
	return f[:end]
}

// Minimized is what Minimize found: the smallest run it tried that still
// shows Finding.
type Minimized struct {
	Finding Finding
	// Smallest is the configuration that replays it, and Summary its run.
	Smallest Config
	Summary  Summary
	// Runs is how many runs the search took, the first included.
	Runs int
}

// ErrPasses is Minimize's answer for a run that shows no violation.
var ErrPasses = errors.New("the run passes: there is nothing to minimize")

// Minimize shrinks a failing run while the same violation (its first
// Finding) still appears: the safety phase halved as long as it holds,
// then the fault kinds taken out one at a time (all of them first), the
// workload cut down setting by setting, then single fault draws skipped,
// whole halves first, then smaller chunks (delta debugging), then the
// safety phase again. Each try is one run; it stops after budget runs and
// returns the smallest failing run found so far. progress, if set, hears
// of every try: what changed, and whether it still failed.
func Minimize(cfg Config, budget int, progress func(change string, s Summary, kept bool)) (Minimized, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultDuration
	}
	first := Run(cfg)
	m := &minimizer{best: cfg, bestRun: first, budget: budget - 1, runs: 1, progress: progress}
	if first.OK() {
		return Minimized{Smallest: cfg, Summary: first, Runs: 1}, ErrPasses
	}
	m.target = first.Findings()[0]
	choice, err := Choose(cfg)
	if err != nil {
		return Minimized{}, err
	}
	m.cluster = choice.Shape.Nodes > 1
	m.shrinkDuration()
	m.shrinkFaultKinds(choice)
	m.shrinkWorkload()
	m.skipDraws()
	m.shrinkDuration()
	return Minimized{Finding: m.target, Smallest: m.best, Summary: m.bestRun, Runs: m.runs}, nil
}

type minimizer struct {
	target   Finding
	cluster  bool
	best     Config
	bestRun  Summary
	budget   int
	runs     int
	progress func(string, Summary, bool)
}

// try runs c and keeps it if it still shows the target; false too once the
// budget is spent.
func (m *minimizer) try(change string, c Config) bool {
	if m.budget <= 0 || m.same(c) {
		return false
	}
	m.budget--
	m.runs++
	s := Run(c)
	kept := !s.OK() && slices.Contains(s.Findings(), m.target)
	if kept {
		m.best, m.bestRun = c, s
	}
	if m.progress != nil {
		m.progress(change, s, kept)
	}
	return kept
}

// same says c chooses what the best run does: a setting it adds changes
// nothing (a seed with one partition told partitions=1), and is not tried.
func (m *minimizer) same(c Config) bool {
	if !slices.Equal(c.SkipFaults, m.best.SkipFaults) || c.Duration != m.best.Duration {
		return false
	}
	a, errA := Choose(c)
	b, errB := Choose(m.best)
	return errA == nil && errB == nil && a.String() == b.String()
}

// with returns the best run's configuration with key set to value (the
// setting replacing any earlier one of the key).
func (m *minimizer) with(key, value string) Config {
	c := m.best
	c.Set = slices.DeleteFunc(slices.Clone(c.Set), func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	c.Set = append(c.Set, key+"="+value)
	return c
}

func (m *minimizer) shrinkDuration() {
	for m.best.Duration >= 2*time.Second {
		c := m.best
		c.Duration = (c.Duration / 2).Truncate(100 * time.Millisecond)
		if !m.try(fmt.Sprintf("duration %s", c.Duration), c) {
			break
		}
	}
}

func (m *minimizer) shrinkFaultKinds(choice Choice) {
	faults := choice.Options.Faults
	if m.cluster {
		faults = choice.Cluster.Faults
	}
	if len(faults) == 0 || m.try("faults none", m.with("faults", "none")) {
		return
	}
	for _, f := range slices.Clone(faults) {
		if len(faults) == 1 {
			return
		}
		rest := slices.DeleteFunc(slices.Clone(faults), func(g Fault) bool { return g == f })
		names := make([]string, len(rest))
		for i, g := range rest {
			names[i] = string(g)
		}
		if m.try("faults without "+string(f), m.with("faults", strings.Join(names, ","))) {
			faults = rest
		}
	}
}

// shrinkWorkload tries the workload's smallest values, one setting at a
// time.
func (m *minimizer) shrinkWorkload() {
	smallest := [][2]string{{"producers", "1"}, {"consumers", "1"}, {"partitions", "1"}, {"batch", "1"}, {"inflight", "1"}, {"deleterecords", "false"}}
	if m.cluster {
		smallest = [][2]string{{"groups", "none"}, {"moves", "false"}, {"clients", "0"}, {"producers", "1"}, {"consumers", "1"}, {"partitions", "1"}, {"acks1", "0"}}
	}
	for _, kv := range smallest {
		m.try(kv[0]+" "+kv[1], m.with(kv[0], kv[1]))
	}
}

// skipDraws takes fault draws out of the schedule, ddmin-style: chunks of
// the draws still injected, halves first, each skipped together when the
// violation survives without them, until single draws.
func (m *minimizer) skipDraws() {
	for chunk := max(m.bestRun.FaultDraws/2, 1); ; chunk = max(chunk/2, 1) {
		var live []int
		for k := range m.bestRun.FaultDraws {
			if !slices.Contains(m.best.SkipFaults, k) {
				live = append(live, k)
			}
		}
		for i := 0; i < len(live); i += chunk {
			part := live[i:min(i+chunk, len(live))]
			c := m.best
			c.SkipFaults = slices.Sorted(slices.Values(append(slices.Clone(c.SkipFaults), part...)))
			m.try(fmt.Sprintf("skip fault draws %s", FormatDraws(part)), c)
		}
		if chunk == 1 || m.budget <= 0 {
			return
		}
	}
}

// FormatDraws writes fault draw numbers as ranges: "0-3,7,9-12".
func FormatDraws(ks []int) string {
	ks = slices.Sorted(slices.Values(ks))
	var parts []string
	for i := 0; i < len(ks); {
		j := i
		for j+1 < len(ks) && ks[j+1] == ks[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ks[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ks[i], ks[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseDraws reads what FormatDraws writes.
func ParseDraws(s string) ([]int, error) {
	var ks []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		var lo, hi int
		if n, err := fmt.Sscanf(part, "%d-%d", &lo, &hi); err == nil && n == 2 && fmt.Sprintf("%d-%d", lo, hi) == part {
			if lo < 0 || hi < lo || hi-lo > 1<<20 {
				return nil, fmt.Errorf("fault draws %q: want A-B with 0 <= A <= B", part)
			}
			for k := lo; k <= hi; k++ {
				ks = append(ks, k)
			}
			continue
		}
		var k int
		if _, err := fmt.Sscanf(part, "%d", &k); err != nil || k < 0 || fmt.Sprint(k) != part {
			return nil, fmt.Errorf("fault draws %q: want numbers from 0, or ranges A-B", part)
		}
		ks = append(ks, k)
	}
	return slices.Compact(slices.Sorted(slices.Values(ks))), nil
}
