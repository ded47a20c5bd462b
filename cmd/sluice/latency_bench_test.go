package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkClusterLatency measures acks=all produce latency alone on three
// combined `sluice serve` nodes, as BenchmarkClusterReplication's latency
// figure (20,000 records/s, linger 0, 6 partitions, flush.messages=1) at
// replication factor 1 and 3, alternated SLUICE_BENCH_ROUNDS times
// (default 2), beside this machine's floor in the same run: the latency
// of a 1 KiB write and fdatasync with three writers syncing files of their
// own at once, which is what an rf=3 acknowledgement waits for at least
// once (the leader's and a follower's syncs overlap) on top of two
// loopback round trips.
//
//	go test -run '^$' -bench ClusterLatency -benchtime 1x ./cmd/sluice
func BenchmarkClusterLatency(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	dur := 5 * time.Second
	if v := os.Getenv("SLUICE_BENCH_LATENCY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("SLUICE_BENCH_LATENCY=%q: want a positive duration", v)
		}
		dur = d
	}
	rounds := envInt(b, "SLUICE_BENCH_ROUNDS", 2)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		values := randomValues(b)
		c := newCluster(b, 3)
		adm := c.adminClient()
		for _, rf := range []int16{1, 3} {
			createReplTopic(ctx, b, c, adm, fmt.Sprintf("latency-rf%d", rf), rf, "1")
		}
		fmt.Printf("latency at 20000 rec/s for %v, linger 0, acks=all, flush.messages=1 (load average %s)\n", dur, loadAverage())
		for round := range rounds {
			for _, rf := range []int16{1, 3} {
				l := measureLatencyTo(ctx, b, c.nodes[0].addr, fmt.Sprintf("latency-rf%d", rf), benchConfig{latencyDur: dur, latencyRate: 20000}, values, 0)
				fmt.Printf("  round %d rf=%d: p50 %5.1f ms  p99 %5.1f ms  p99.9 %5.1f ms\n", round+1, rf, ms(l.p50), ms(l.p99), ms(l.p999))
			}
			f := syncFloor(b, 3, 2*time.Second)
			fmt.Printf("  round %d floor, 1 KiB write+fdatasync, 3 writers: p50 %5.2f ms  p99 %5.2f ms  p99.9 %5.2f ms\n", round+1, ms(f.p50), ms(f.p99), ms(f.p999))
		}
		cancel()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// syncFloor times 1 KiB appends each followed by fdatasync, from writers
// goroutines on files of their own in one directory of the test's
// filesystem, for d.
func syncFloor(b *testing.B, writers int, d time.Duration) latency {
	took, _, _ := timedSyncs(b, writers, d)
	slices.Sort(took)
	at := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
	return latency{p50: at(0.5), p99: at(0.99), p999: at(0.999)}
}

// syncRate is the machine's flush floor: how many 1 KiB appends each
// followed by fdatasync writers goroutines (on files of their own) make
// per second together, for d, and the CPU each costs this process.
func syncRate(b *testing.B, writers int, d time.Duration) (perSecond, cpuMicros float64) {
	took, elapsed, cpu := timedSyncs(b, writers, d)
	n := float64(len(took))
	return n / elapsed.Seconds(), cpu / n * 1e6
}

// timedSyncs has writers goroutines append 1 KiB and fdatasync, each to a
// file of its own in a fresh directory, for d, and returns each append's
// time, how long they all took, and this process's CPU seconds meanwhile.
func timedSyncs(b *testing.B, writers int, d time.Duration) (took []time.Duration, elapsed time.Duration, cpu float64) {
	dir := b.TempDir()
	var mu sync.Mutex
	var wg sync.WaitGroup
	buf := make([]byte, 1024)
	self0, start := selfCPUSeconds(), time.Now()
	for w := range writers {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("sync-%d", w)))
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			var mine []time.Duration
			for end := start.Add(d); time.Now().Before(end); {
				t := time.Now()
				if _, err := f.Write(buf); err != nil {
					b.Error(err)
					return
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			took = append(took, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed, cpu = time.Since(start), selfCPUSeconds()-self0
	if len(took) == 0 {
		b.Fatal("sync floor: no samples")
	}
	return took, elapsed, cpu
}
