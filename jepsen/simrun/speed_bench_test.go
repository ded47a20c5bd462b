package simrun

import (
	"testing"
	"time"
)

// BenchmarkSimSpeed measures the simulator as a user meets it: simulated
// seconds per wall second for a three-node cluster with replication
// factor 3 under about 1,000 client operations per simulated second
// (eight producers and eight consumers, each one operation at a time, with
// the seed's faults), and seeds per minute for 60-second runs of the
// default cluster mix. The target: at least 50 simulated seconds a
// wall second at 1,000 operations a simulated second.
func BenchmarkSimSpeed(b *testing.B) {
	b.Run("rf3-busy", func(b *testing.B) {
		var sim time.Duration
		ops := 0
		for i := 0; i < b.N; i++ {
			s := Run(Config{Seed: uint64(i + 1), Nodes: 3, Duration: 20 * time.Second,
				Set: []string{"rf=3", "producers=4", "consumers=4", "think=4ms", "groups=none", "faults=none"}})
			if !s.OK() {
				b.Fatalf("%s\n%s", s.Line(), s.Details())
			}
			sim += s.Time
			ops += s.Ops
		}
		wall := b.Elapsed()
		b.ReportMetric(sim.Seconds()/wall.Seconds(), "sim-s/wall-s")
		b.ReportMetric(float64(ops)/sim.Seconds(), "ops/sim-s")
	})
	b.Run("cluster-60s", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s := Run(Config{Seed: uint64(i + 1), Nodes: 3, Duration: 60 * time.Second})
			if !s.OK() {
				b.Fatalf("%s\n%s", s.Line(), s.Details())
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Minutes(), "seeds/min")
	})
}
