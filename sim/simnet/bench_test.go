package simnet

import (
	"testing"
	"time"
)

// BenchmarkStream measures how fast the simulator moves bytes over one
// connection: each iteration writes 16KiB and runs the network until it is
// delivered.
func BenchmarkStream(b *testing.B) {
	w := newWorld(b, 1)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	p := make([]byte, 16<<10)
	sr.onData = func([]byte) { sr.data = sr.data[:0] } // keep memory flat
	events := w.s.Delivered()
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.conn.Write(p); err != nil {
			b.Fatal(err)
		}
		if i%8 == 7 {
			w.run(10 * time.Millisecond)
		}
	}
	w.run(time.Second)
	b.ReportMetric(float64(w.s.Delivered()-events)/float64(b.N), "events/write")
}
