package sim

import (
	"testing"
)

// BenchmarkWorldCounterd measures the whole simulated world (node loops,
// timers, simfs syncs, simnet connections) running counterd on three to five nodes
// without faults: what a cluster-level event costs, beside
// sched.BenchmarkTrivialEvents' bare scheduler.
func BenchmarkWorldCounterd(b *testing.B) {
	var events uint64
	for i := range b.N {
		run := newCounterRun(uint64(i))
		run.mix = nil
		run.safety()
		events += run.w.Events()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/run")
}
