package simrun

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
)

// Shape is a run's cluster: how many nodes, how many of them broker-only,
// and whether the data workload runs beside the metadata clients.
type Shape struct {
	Nodes, BrokerOnly int
	MetaOnly          bool
}

func (s Shape) String() string {
	out := fmt.Sprintf("nodes=%d", max(s.Nodes, 1))
	if s.BrokerOnly > 0 {
		out += fmt.Sprintf(" broker_only=%d", s.BrokerOnly)
	}
	if s.MetaOnly {
		out += " meta_only=true"
	}
	return out
}

// ChooseShape is the shape a swarm seed (Config.Swarm) runs: one broker in
// a third of the seeds, else a KRaft cluster of 3 to 5 nodes, a quarter of
// the larger ones with broker-only nodes, a tenth with the metadata
// clients alone. It draws from the "shape" stream only, so every other
// choice of the seed is what the same seed would choose with that shape
// named on the command line.
func ChooseShape(seed uint64) Shape {
	r := rng.New(seed).Fork("shape")
	switch x := r.Float64(); {
	case x < 0.33:
		return Shape{Nodes: 1}
	case x < 0.66:
		return Shape{Nodes: 3, MetaOnly: r.Chance(0.1)}
	case x < 0.83:
		s := Shape{Nodes: 4, MetaOnly: r.Chance(0.1)}
		if r.Chance(0.5) {
			s.BrokerOnly = 1
		}
		return s
	default:
		s := Shape{Nodes: 5, MetaOnly: r.Chance(0.1)}
		if r.Chance(0.5) {
			s.BrokerOnly = 1 + r.Intn(2)
		}
		return s
	}
}

// Choice is everything a run's seed decided before the run starts: its
// shape and the options of that shape (Options for one broker, Cluster
// for a cluster), with the configuration's settings applied.
type Choice struct {
	Shape   Shape
	Options Options
	Cluster ClusterOptions
}

// String is the choice on one line, key=value pairs as the summary line
// prints them; each key of the options is one Config.Set accepts.
func (c Choice) String() string {
	if c.Shape.Nodes <= 1 {
		return c.Shape.String() + " " + c.Options.String()
	}
	return c.Cluster.String()
}

// Choose resolves what cfg will run: the shape (the seed's, with Swarm),
// the options the seed chooses for it (or cfg.Options), then cfg.Set
// applied in order. An error names the setting that cannot apply.
func Choose(cfg Config) (Choice, error) {
	shape := Shape{Nodes: max(cfg.Nodes, 1), BrokerOnly: cfg.BrokerOnly, MetaOnly: cfg.MetaOnly}
	if cfg.Swarm {
		shape = ChooseShape(cfg.Seed)
	}
	c := Choice{Shape: shape}
	if shape.Nodes <= 1 {
		c.Options = ChooseOptions(cfg.Seed)
		if cfg.Options != nil {
			c.Options = *cfg.Options
		}
	} else {
		c.Cluster = ChooseClusterOptions(cfg.Seed, shape.Nodes)
		c.Cluster.BrokerOnly, c.Cluster.MetaOnly = shape.BrokerOnly, shape.MetaOnly
		if shape.MetaOnly {
			// The metadata clients alone: no data topic, producers,
			// consumers, groups or reassignments.
			c.Cluster.Partitions, c.Cluster.Producers, c.Cluster.Consumers = 0, 0, 0
			c.Cluster.Groups, c.Cluster.Moves, c.Cluster.IdempotentProducers = nil, false, 0
		}
		if cfg.noFaults {
			c.Cluster.Faults = nil
		}
	}
	for _, kv := range cfg.Set {
		if err := c.set(kv); err != nil {
			return c, err
		}
	}
	c.Cluster.IdempotentProducers = min(c.Cluster.IdempotentProducers, c.Cluster.Producers)
	return c, nil
}

// A setting overrides one of a seed's choices: the minimizer's shrinks,
// and a user's narrowing of a failing seed.
type setting struct {
	key string
	set func(c *Choice, v string) error
}

// SettingKeys lists the keys Config.Set accepts for one broker (cluster
// false) or for a cluster.
func SettingKeys(cluster bool) []string {
	var keys []string
	for _, s := range settingsFor(cluster) {
		keys = append(keys, s.key)
	}
	return keys
}

func settingsFor(cluster bool) []setting {
	if cluster {
		return clusterSettings
	}
	return brokerSettings
}

var brokerSettings = []setting{
	{"partitions", func(c *Choice, v string) error { return setInt(&c.Options.Partitions, v, 1, 64) }},
	{"producers", func(c *Choice, v string) error { return setInt(&c.Options.Producers, v, 0, 16) }},
	{"consumers", func(c *Choice, v string) error { return setInt(&c.Options.Consumers, v, 0, 16) }},
	{"batch", func(c *Choice, v string) error { return setInt(&c.Options.BatchMax, v, 1, 64) }},
	{"inflight", func(c *Choice, v string) error { return setInt(&c.Options.InFlight, v, 1, maxInFlight) }},
	{"think", func(c *Choice, v string) error { return setDuration(&c.Options.Think, v, 0) }},
	{"every", func(c *Choice, v string) error { return setDuration(&c.Options.FaultEvery, v, time.Millisecond) }},
	{"deleterecords", func(c *Choice, v string) error { return setBool(&c.Options.DeleteRecords, v) }},
	{"faults", func(c *Choice, v string) error {
		return setFaults(&c.Options.Faults, v, append(slices.Clone(allFaults), laterFaults...))
	}},
	{"fetchpath", func(c *Choice, v string) error {
		switch v {
		case "sendfile":
			c.Options.CopyFetch, c.Options.SendSmallChunks = false, false
		case "sendfile-all":
			c.Options.CopyFetch, c.Options.SendSmallChunks = false, true
		case "copy":
			c.Options.CopyFetch, c.Options.SendSmallChunks = true, false
		default:
			return errors.New("want sendfile, sendfile-all or copy")
		}
		return nil
	}},
	{"segment", func(c *Choice, v string) error { return setInt(&c.Options.SegmentBytes, v, 1024, 1<<30) }},
	{"indexinterval", func(c *Choice, v string) error { return setInt(&c.Options.IndexIntervalBytes, v, 0, 1<<20) }},
	{"checkpoint", func(c *Choice, v string) error { return setDuration(&c.Options.CheckpointInterval, v, 0) }},
}

var clusterSettings = []setting{
	{"clients", func(c *Choice, v string) error { return setInt(&c.Cluster.Clients, v, 0, 8) }},
	{"partitions", func(c *Choice, v string) error { return setInt(&c.Cluster.Partitions, v, 1, 16) }},
	{"producers", func(c *Choice, v string) error { return setInt(&c.Cluster.Producers, v, 0, 8) }},
	{"consumers", func(c *Choice, v string) error { return setInt(&c.Cluster.Consumers, v, 0, 8) }},
	{"idempotent", func(c *Choice, v string) error { return setInt(&c.Cluster.IdempotentProducers, v, 0, 8) }},
	{"acks1", func(c *Choice, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return errors.New("want a share from 0 to 1")
		}
		c.Cluster.LeaderAcks = f
		return nil
	}},
	{"moves", func(c *Choice, v string) error { return setBool(&c.Cluster.Moves, v) }},
	{"voterchanges", func(c *Choice, v string) error { return setBool(&c.Cluster.VoterChanges, v) }},
	{"rebalance", func(c *Choice, v string) error { return setDuration(&c.Cluster.RebalanceEvery, v, time.Second) }},
	{"groups", func(c *Choice, v string) error {
		if v == "none" {
			v = "0"
		}
		n := len(c.Cluster.Groups)
		if err := setInt(&n, v, 0, len(c.Cluster.Groups)); err != nil {
			return err
		}
		c.Cluster.Groups = c.Cluster.Groups[:n]
		if n == 0 {
			c.Cluster.Groups = nil
		}
		return nil
	}},
	{"every", func(c *Choice, v string) error { return setDuration(&c.Cluster.FaultEvery, v, time.Millisecond) }},
	{"rf", func(c *Choice, v string) error {
		if err := setInt(&c.Cluster.ReplicationFactor, v, 1, min(3, c.Shape.Nodes)); err != nil {
			return err
		}
		if c.Cluster.PageCache && c.Cluster.ReplicationFactor < 2 {
			return errors.New("a page-cache seed's acknowledgements lean on replicas: want 2 or more")
		}
		c.Cluster.MinInSync = min(c.Cluster.MinInSync, c.Cluster.ReplicationFactor)
		return nil
	}},
	{"fetchpath", func(c *Choice, v string) error {
		switch v {
		case "sendfile", "sendfile-all":
			c.Cluster.SendSmallChunks = v == "sendfile-all"
			return nil
		}
		return errors.New("want sendfile or sendfile-all")
	}},
	{"snapshots", func(c *Choice, v string) error { return setInt(&c.Cluster.SnapshotBytes, v, 1024, 1<<30) }},
	{"think", func(c *Choice, v string) error { return setDuration(&c.Cluster.Think, v, time.Millisecond) }},
	{"snapshotevery", func(c *Choice, v string) error { return setDuration(&c.Cluster.SnapshotInterval, v, time.Second) }},
	{"faults", func(c *Choice, v string) error {
		allowed := append(slices.Clone(clusterFaults), FaultPowerLoss)
		if c.Cluster.PageCache {
			// Such a seed's contract excludes what loses page caches.
			allowed = slices.DeleteFunc(allowed, func(f Fault) bool { return f == FaultCrash || f == FaultPowerLoss })
		}
		return setFaults(&c.Cluster.Faults, v, allowed)
	}},
}

func (c *Choice) set(kv string) error {
	key, value, ok := strings.Cut(kv, "=")
	settings := settingsFor(c.Shape.Nodes > 1)
	i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key })
	if !ok || i < 0 {
		return fmt.Errorf("setting %q: want key=value with a key of %s", kv, strings.Join(SettingKeys(c.Shape.Nodes > 1), ", "))
	}
	if err := settings[i].set(c, value); err != nil {
		return fmt.Errorf("setting %s=%s: %v", key, value, err)
	}
	return nil
}

func setInt[T ~int | ~int32 | ~int64](dst *T, v string, lo, hi T) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return fmt.Errorf("want a whole number from %d to %d", lo, hi)
	}
	*dst = T(n)
	return nil
}

func setDuration(dst *time.Duration, v string, least time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < least || d > time.Hour {
		return fmt.Errorf("want a duration from %s to 1h", least)
	}
	*dst = d
	return nil
}

func setBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true or false")
	}
	*dst = b
	return nil
}

func setFaults(dst *[]Fault, v string, allowed []Fault) error {
	if v == "none" || v == "" {
		*dst = nil
		return nil
	}
	var fs []Fault
	for _, name := range strings.Split(v, ",") {
		f := Fault(name)
		if !slices.Contains(allowed, f) {
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = string(a)
			}
			return fmt.Errorf("fault %q is not one this run can inject: %s", name, strings.Join(names, ","))
		}
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	*dst = fs
	return nil
}

// skipsDraw says the nemesis's fault draw k injects nothing
// (Config.SkipFaults), and logs that it does not.
func (cfg Config) skipsDraw(k int, logf func(string, ...any)) bool {
	if !slices.Contains(cfg.SkipFaults, k) {
		return false
	}
	logf("fault draw %d skipped", k)
	return true
}
