package log

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/osenv"
)

// Benchmarks run the log over the real OS (osenv) in a temporary directory,
// on a loop goroutine of their own, as the broker does.
//
//	go test -run '^$' -bench . -benchtime 2s ./log

// osNode is a loop and an osenv node over a temporary directory.
type osNode struct {
	tb   testing.TB
	dir  string
	loop *osenv.Loop
	node *osenv.Node
	env  env.Env
}

func newOSNode(tb testing.TB, dir string) *osNode {
	loop := osenv.NewLoop()
	node, err := osenv.New(osenv.Config{Dir: dir, Loop: loop})
	if err != nil {
		tb.Fatal(err)
	}
	go loop.Run()
	n := &osNode{tb: tb, dir: dir, loop: loop, node: node, env: node.Env()}
	tb.Cleanup(n.stop)
	return n
}

func (n *osNode) stop() {
	n.loop.Stop()
	<-n.loop.Done()
	n.node.Close()
}

// do runs f on the loop and waits for it.
func (n *osNode) do(f func()) {
	done := make(chan struct{})
	n.loop.Post(func() { f(); close(done) })
	<-done
}

// await runs start on the loop and waits for the callback it is given.
func (n *osNode) await(start func(done func(error))) error {
	ch := make(chan error, 1)
	n.loop.Post(func() { start(func(err error) { ch <- err }) })
	return <-ch
}

func (n *osNode) config(dir string) Config {
	return Config{FS: n.env.FS, Clock: n.env.Clock, Loop: n.env.Loop, Dir: dir}
}

func (n *osNode) open(cfg Config) *Log {
	var l *Log
	var err error
	n.do(func() { l, err = Open(cfg) })
	if err != nil {
		n.tb.Fatal(err)
	}
	if err := n.await(l.Ready); err != nil {
		n.tb.Fatal(err)
	}
	return l
}

// benchBatch is 1 KiB records in a batch of 16 KiB of values.
func benchBatch() []byte {
	return spec(values(16, 1024, "bench")...).at(time.Now().UnixMilli()).build()
}

// BenchmarkAppend appends 16 KiB batches of 1 KiB records as the leader, with
// no flush, through osenv to a temporary directory.
func BenchmarkAppend(b *testing.B) {
	n := newOSNode(b, b.TempDir())
	l := n.open(n.config("bench-0"))
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	var err error
	n.do(func() {
		for i := 0; i < b.N && err == nil; i++ {
			binary.BigEndian.PutUint64(batch, 0) // a producer's batch has base offset 0
			_, err = l.AppendLeader(batch, 0)
		}
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRawWrite writes the same bytes as BenchmarkAppend with plain
// sequential os.File writes: the ceiling BenchmarkAppend is measured against.
func BenchmarkRawWrite(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead fetches 1 MiB at a time from a 256 MiB log and copies the
// batches out, checking each (the simulator's path; production sends the
// same ranges with sendfile).
func BenchmarkRead(b *testing.B) {
	n := newOSNode(b, b.TempDir())
	cfg := n.config("bench-0")
	cfg.SegmentBytes = 64 << 20
	l := n.open(cfg)
	batch := benchBatch()
	n.do(func() {
		for size := 0; size < 256<<20; size += len(batch) {
			binary.BigEndian.PutUint64(batch, 0)
			if _, err := l.AppendLeader(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	end := l.LogEndOffset()
	buf := make([]byte, 0, 2<<20)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	var err error
	n.do(func() {
		offset := int64(0)
		for i := 0; i < b.N && err == nil; i++ {
			var recs Records
			recs, err = l.Read(offset, 1<<20, end, true)
			if err == nil {
				buf, err = recs.AppendTo(buf[:0])
			}
			offset = recs.NextOffset()
			if offset >= end {
				offset = 0
			}
		}
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
}

// fillLog appends size bytes of 16 KiB batches.
func fillLog(tb testing.TB, n *osNode, l *Log, size int64) {
	batch := benchBatch()
	n.do(func() {
		for total := int64(0); total < size; total += int64(len(batch)) {
			binary.BigEndian.PutUint64(batch, 0)
			if _, err := l.AppendLeader(batch, 0); err != nil {
				tb.Fatal(err)
			}
		}
	})
}

// BenchmarkReopenClean opens a 2 GiB log (1 GiB segments) after a clean
// shutdown: no segment is scanned.
func BenchmarkReopenClean(b *testing.B) {
	n := newOSNode(b, b.TempDir())
	cfg := n.config("bench-0")
	l := n.open(cfg)
	fillLog(b, n, l, 2<<30)
	if err := n.await(l.Close); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l := n.open(cfg)
		b.StopTimer()
		if l.LogEndOffset() == 0 {
			b.Fatal("empty log")
		}
		if err := n.await(l.Close); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkReopenAfterCrash opens a 2 GiB log whose last 32 MiB were written
// after the last checkpoint, as a process that died leaves it: the tail
// after the recovery point is scanned, nothing before it.
func BenchmarkReopenAfterCrash(b *testing.B) {
	n := newOSNode(b, b.TempDir())
	cfg := n.config("bench-0")
	l := n.open(cfg)
	fillLog(b, n, l, 2<<30)
	if err := n.await(func(done func(error)) { l.Flush(l.LogEndOffset(), done) }); err != nil {
		b.Fatal(err)
	}
	if err := n.await(l.Checkpoint); err != nil {
		b.Fatal(err)
	}
	fillLog(b, n, l, 32<<20)
	want := l.LogEndOffset()
	n.do(l.closeFiles) // the process dies: no clean close
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l := n.open(cfg)
		b.StopTimer()
		if l.LogEndOffset() != want {
			b.Fatalf("log end %d after recovery, want %d", l.LogEndOffset(), want)
		}
		n.do(l.closeFiles)
		b.StartTimer()
	}
}
