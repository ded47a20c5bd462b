package quorum

import (
	"testing"
	"time"
)

// BenchmarkQuorumApply measures entries applied per second (of the real
// clock, and of the simulated one) on a 3-node simulated quorum, the
// leader keeping 64 proposals of 100 bytes in flight: the cost of the
// driver, raft, the storage's encoding and checksums and the simulator
// together, not of any real disk or network.
func BenchmarkQuorumApply(b *testing.B) {
	cfg := quietSimConfig(3, 3)
	cfg.node.SnapshotEntries = 5000
	cfg.node.CompactionMargin = 1000
	cfg.node.SegmentBytes = 1 << 20
	c := newSimCluster(b, 1, cfg)
	l := c.waitLeader(b)
	data := make([]byte, 100)
	applied := 0
	var propose func()
	propose = func() {
		l.qn.Propose(data, func(err error) {
			if err != nil {
				b.Fatalf("proposal failed: %v", err)
			}
			applied++
			if applied+64 <= b.N {
				propose()
			}
		})
	}
	b.ResetTimer()
	start := c.w.Now()
	l.sn.Post(func() {
		for range min(64, b.N) {
			propose()
		}
	})
	if !c.w.RunUntil(func() bool { return applied >= b.N }, time.Hour) {
		b.Fatalf("applied %d of %d", applied, b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(b.N)/(c.w.Now()-start).Seconds(), "entries/virtual-s")
	c.requireNoViolations(b, 1)
}
