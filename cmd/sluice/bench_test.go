package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkBroker measures sluice serve beside its anchors in one run, with
// one load: one node, 6 partitions, 1 KiB random (incompressible) values,
// acks=all, and franz-go's kgo with its default batching (10 ms linger,
// snappy tried and dropped when it does not shrink a batch, 64 KiB sticky
// partitioning, one produce request in flight per broker).
//
//   - sluice: the real `sluice serve` process.
//   - kfake: franz-go's in-memory fake broker (benchservers/kfakeserver), in a
//     process of its own so that its CPU and RSS are read from /proc the
//     same way.
//   - sink: a server that acknowledges every batch and stores nothing
//     (benchservers/sinkserver): the producing client's ceiling.
//   - dsink: the same server storing durably (-dir): it checks each batch's
//     CRC, appends it to a file per partition and syncs before it
//     acknowledges; the least CPU a broker that acknowledges only durable
//     records can spend per GB.
//   - synth: kfake answering every fetch with canned 1 KiB random records:
//     the consuming client's ceiling.
//   - loopback: a plain TCP stream between two goroutines, 64 KiB writes.
//
// Each broker is sent SLUICE_BENCH_MB MiB (default 1024) in two halves; its
// peak RSS (VmHWM) after each half shows whether memory grows with the data.
// The same bytes are then consumed from the start. Produce latency (from the
// Produce call to its promise) is sampled at a fixed 20,000 records/s for
// SLUICE_BENCH_LATENCY (default 5s), once with the default linger and once
// with linger 0: with the default, the client itself holds most records for
// up to 10 ms, so the broker's own latency shows only in the second.
//
// SLUICE_BENCH_ONLY=sluice (or a comma-separated list of sink, dsink, synth,
// sluice, kfake) measures only those, to iterate on one; the ratios of the
// others then read zero.
//
// Set SLUICE_BENCH_PERF=dir to record `perf record -g` profiles of sluice and
// kfake while they take the first half of the produce load and the consume
// load, and of the durable sink while it takes its produce load (this slows
// them); with SLUICE_BENCH_PERF_STAT=1 as well, `perf stat`
// counts of syscalls, context switches and page faults instead.
//
//	go test -run '^$' -bench Broker -benchtime 1x ./cmd/sluice
func BenchmarkBroker(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes and moves gigabytes")
	}
	cfg := benchConfigFromEnv(b)
	bins := buildBenchServers(b)
	for range b.N {
		r := runBench(b, cfg, bins)
		r.report(b, cfg)
	}
}

type benchConfig struct {
	records     int             // records produced to, and consumed from, each broker
	latencyDur  time.Duration   // how long each latency run samples
	latencyRate int             // records per second in latency runs
	perfDir     string          // where perf profiles of sluice go; "" for none
	only        map[string]bool // the servers to measure; nil for all
}

// measures says whether the run includes the server named name.
func (cfg benchConfig) measures(name string) bool { return cfg.only == nil || cfg.only[name] }

const (
	benchValueBytes = 1024
	benchPartitions = 6
	benchTopic      = "bench"
	latencyTopic    = "latency"
)

func benchConfigFromEnv(b *testing.B) benchConfig {
	cfg := benchConfig{records: 1024 << 10, latencyDur: 5 * time.Second, latencyRate: 20000}
	if v := os.Getenv("SLUICE_BENCH_MB"); v != "" {
		mb, err := strconv.Atoi(v)
		if err != nil || mb < 2 {
			b.Fatalf("SLUICE_BENCH_MB=%q: want a number of MiB >= 2", v)
		}
		cfg.records = mb << 10
	}
	if v := os.Getenv("SLUICE_BENCH_LATENCY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("SLUICE_BENCH_LATENCY=%q: want a positive duration", v)
		}
		cfg.latencyDur = d
	}
	cfg.perfDir = os.Getenv("SLUICE_BENCH_PERF")
	if v := os.Getenv("SLUICE_BENCH_ONLY"); v != "" {
		cfg.only = map[string]bool{}
		for _, name := range strings.Split(v, ",") {
			if !slices.Contains([]string{"sink", "dsink", "synth", "sluice", "kfake"}, name) {
				b.Fatalf("SLUICE_BENCH_ONLY=%q: %q is not one of sink, dsink, synth, sluice, kfake", v, name)
			}
			cfg.only[name] = true
		}
	}
	return cfg
}

// perfPath is where a perf profile named name goes, or "" for none.
func (cfg benchConfig) perfPath(name string) string {
	if cfg.perfDir == "" {
		return ""
	}
	return filepath.Join(cfg.perfDir, name+".data")
}

type benchBins struct{ sink, kfake string }

// buildBenchServers builds the test-only servers in benchservers.
func buildBenchServers(b *testing.B) benchBins {
	dir := b.TempDir()
	bins := benchBins{sink: filepath.Join(dir, "sinkserver"), kfake: filepath.Join(dir, "kfakeserver")}
	for bin, pkg := range map[string]string{bins.sink: "./benchservers/sinkserver", bins.kfake: "./benchservers/kfakeserver"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			b.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return bins
}

// brokerFigures are one broker's results. Zero means not measured.
type brokerFigures struct {
	produceMBps    float64
	consumeMBps    float64
	rawConsumeMBps float64 // with a bare fetch loop instead of kgo's consumer
	produceCPUPerG float64 // broker CPU seconds per GB (1e9 value bytes) produced
	clientCPUPerG  float64 // the producing client's (this process's) CPU seconds per GB
	consumeCPUPerG float64
	rssHalfMB      float64 // VmHWM after the first half of the data
	rssFullMB      float64 // VmHWM after all of it
	latDefault     latency // at latencyRate, default linger
	latNoLinger    latency // at latencyRate, linger 0
}

type latency struct{ p50, p99, p999 time.Duration }

type benchResult struct {
	loopbackMBps float64
	sink         brokerFigures
	dsink        brokerFigures
	synth        brokerFigures
	sluice       brokerFigures
	kfake        brokerFigures
	loadBefore   string
	loadAfter    string
}

func runBench(b *testing.B, cfg benchConfig, bins benchBins) benchResult {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	values := randomValues(b)
	var r benchResult
	r.loadBefore = loadAverage()
	r.loopbackMBps = loopbackMBps(b, 4<<30)

	if cfg.measures("sink") {
		sink := startChild(b, "sink", bins.sink)
		r.sink.produceMBps, r.sink.produceCPUPerG, r.sink.clientCPUPerG = measureProduce(ctx, b, sink, cfg.records, values, "")
		r.sink.latDefault = measureLatency(ctx, b, sink.addr, cfg, values, -1)
		r.sink.latNoLinger = measureLatency(ctx, b, sink.addr, cfg, values, 0)
		sink.kill()
	}
	if cfg.measures("dsink") {
		dsink := startChild(b, "dsink", bins.sink, "-dir", b.TempDir())
		r.dsink.produceMBps, r.dsink.produceCPUPerG, r.dsink.clientCPUPerG = measureProduce(ctx, b, dsink, cfg.records, values, cfg.perfPath("dsink-produce"))
		r.dsink.latNoLinger = measureLatency(ctx, b, dsink.addr, cfg, values, 0)
		dsink.kill()
	}
	if cfg.measures("synth") {
		synth := startChild(b, "synth", bins.kfake, "-synthetic")
		createTopics(ctx, b, synth.addr)
		r.synth.consumeMBps, r.synth.consumeCPUPerG = measureConsume(ctx, b, synth, cfg.records, "")
		synth.kill()
	}
	if cfg.measures("sluice") {
		sluice := startSluice(b)
		r.sluice = measureBroker(ctx, b, sluice, cfg, values)
		sluice.kill()
	}
	if cfg.measures("kfake") {
		kfake := startChild(b, "kfake", bins.kfake)
		r.kfake = measureBroker(ctx, b, kfake, cfg, values)
		kfake.kill()
	}
	r.loadAfter = loadAverage()
	return r
}

// measureBroker runs the whole load against a broker that stores data.
func measureBroker(ctx context.Context, b *testing.B, s *serverProc, cfg benchConfig, values []byte) brokerFigures {
	createTopics(ctx, b, s.addr)
	var f brokerFigures
	half := cfg.records / 2
	mbA, cpuA, clientA := measureProduce(ctx, b, s, half, values, cfg.perfPath(s.name+"-produce"))
	f.rssHalfMB = s.peakRSSMB(b)
	mbB, cpuB, clientB := measureProduce(ctx, b, s, cfg.records-half, values, "")
	f.rssFullMB = s.peakRSSMB(b)
	// Combine the halves by time and by CPU over all the bytes.
	secs := float64(half)/mbA + float64(cfg.records-half)/mbB
	f.produceMBps = float64(cfg.records) / secs
	f.produceCPUPerG = (cpuA*float64(half) + cpuB*float64(cfg.records-half)) / float64(cfg.records)
	f.clientCPUPerG = (clientA*float64(half) + clientB*float64(cfg.records-half)) / float64(cfg.records)
	f.consumeMBps, f.consumeCPUPerG = measureConsume(ctx, b, s, cfg.records, cfg.perfPath(s.name+"-consume"))
	f.rawConsumeMBps = measureRawConsume(ctx, b, s, cfg.records)
	f.latDefault = measureLatency(ctx, b, s.addr, cfg, values, -1)
	f.latNoLinger = measureLatency(ctx, b, s.addr, cfg, values, 0)
	return f
}

// randomValues returns a pool of random bytes; record i's value is a 1 KiB
// window of it, so values are incompressible and need no per-record
// allocation.
func randomValues(b *testing.B) []byte {
	values := make([]byte, 64<<20)
	if _, err := rand.Read(values); err != nil {
		b.Fatal(err)
	}
	return values
}

func valueAt(values []byte, i int) []byte {
	windows := len(values)/benchValueBytes - 1
	off := (i%windows)*benchValueBytes + i%benchValueBytes
	return values[off : off+benchValueBytes : off+benchValueBytes]
}

func createTopics(ctx context.Context, b *testing.B, addr string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, benchPartitions, 1, nil, benchTopic, latencyTopic)
	if err != nil {
		b.Fatalf("create topics on %s: %v", addr, err)
	}
	if err := resp.Error(); err != nil {
		b.Fatalf("create topics on %s: %v", addr, err)
	}
}

// measureProduce produces n records to the bench topic and returns MB/s
// (1e6 value bytes a second), the server's CPU seconds per 1e9 value bytes,
// and the client's (this process's, which does nothing else meanwhile).
func measureProduce(ctx context.Context, b *testing.B, s *serverProc, n int, values []byte, perfPath string) (float64, float64, float64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.DefaultProduceTopic(benchTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: valueAt(values, 0)}).FirstErr(); err != nil {
		b.Fatalf("%s: warm-up produce: %v", s.name, err)
	}
	// Whatever an earlier measurement (or benchmark: make bench runs the
	// log's first) left dirty in the page cache would otherwise be written
	// back inside this one's syncs: sluice and the durable sink sync the
	// whole filesystem.
	syscall.Sync()
	defer s.perf(b, perfPath)()
	var failed atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	cpu0, self0 := s.cpuSeconds(b), selfCPUSeconds()
	start := time.Now()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: valueAt(values, i+1)}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatalf("%s: flush: %v", s.name, err)
	}
	elapsed := time.Since(start).Seconds()
	cpu, self := s.cpuSeconds(b)-cpu0, selfCPUSeconds()-self0
	if failed.Load() > 0 {
		b.Fatalf("%s: %d of %d records failed, first: %v", s.name, failed.Load(), n, firstErr.Load())
	}
	valueBytes := float64(n) * benchValueBytes
	return valueBytes / elapsed / 1e6, cpu / (valueBytes / 1e9), self / (valueBytes / 1e9)
}

// selfCPUSeconds returns this process's user plus system CPU time so far.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// measureConsume reads n records of the bench topic from the start and
// returns MB/s and the server's CPU seconds per 1e9 value bytes.
func measureConsume(ctx context.Context, b *testing.B, s *serverProc, n int, perfPath string) (float64, float64) {
	defer s.perf(b, perfPath)()
	cpu0 := s.cpuSeconds(b)
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics(benchTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	got, valueBytes := 0, 0
	for got < n {
		fetches := cl.PollRecords(ctx, n-got)
		if err := ctx.Err(); err != nil {
			b.Fatalf("%s: consumed %d of %d records: %v", s.name, got, n, err)
		}
		fetches.EachError(func(t string, p int32, err error) { b.Fatalf("%s: fetch %s/%d: %v", s.name, t, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			valueBytes += len(r.Value)
		})
	}
	elapsed := time.Since(start).Seconds()
	cpu := s.cpuSeconds(b) - cpu0
	if valueBytes != n*benchValueBytes {
		b.Fatalf("%s: consumed %d value bytes in %d records, want %d each", s.name, valueBytes, n, benchValueBytes)
	}
	return float64(valueBytes) / elapsed / 1e6, cpu / (float64(valueBytes) / 1e9)
}

// measureRawConsume reads the bench topic from the start with bare Fetch
// requests, one at a time as kgo's consumer sends them and with its limits
// (1 MiB a partition), but without decoding a record: batches are only
// walked by their headers to find the next offset. It returns MB/s of record
// batch bytes: what the broker can serve when the client is not the limit.
func measureRawConsume(ctx context.Context, b *testing.B, s *serverProc, n int) float64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, benchTopic)
	if err != nil || topics.Error() != nil {
		b.Fatalf("%s: list topics: %v %v", s.name, err, topics.Error())
	}
	topicID := topics[benchTopic].ID // Fetch v13 and above name topics by id
	offsets := make([]int64, benchPartitions)
	var records, batchBytes int64
	start := time.Now()
	for records < int64(n) {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 50<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = benchTopic, topicID
		for p, off := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, 1<<20
			rp.LogStartOffset = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatalf("%s: raw fetch: %v", s.name, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					b.Fatalf("%s: raw fetch %d: %v", s.name, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				batches := p.RecordBatches
				batchBytes += int64(len(batches))
				for len(batches) >= 61 {
					size := 12 + int(binary.BigEndian.Uint32(batches[8:12]))
					if size > len(batches) {
						break // a partial batch at the end (KIP-74)
					}
					base := int64(binary.BigEndian.Uint64(batches))
					last := base + int64(binary.BigEndian.Uint32(batches[23:27]))
					records += last + 1 - offsets[p.Partition]
					offsets[p.Partition] = last + 1
					batches = batches[size:]
				}
			}
		}
	}
	return float64(batchBytes) / time.Since(start).Seconds() / 1e6
}

// measureLatency produces at cfg.latencyRate records a second for
// cfg.latencyDur and returns percentiles of the time from each Produce call
// to its promise. linger < 0 keeps the client's default.
func measureLatency(ctx context.Context, b *testing.B, addr string, cfg benchConfig, values []byte, linger time.Duration) latency {
	return measureLatencyTo(ctx, b, addr, latencyTopic, cfg, values, linger)
}

// measureLatencyTo is measureLatency producing to topic.
func measureLatencyTo(ctx context.Context, b *testing.B, addr, topic string, cfg benchConfig, values []byte, linger time.Duration) latency {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}
	if linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(linger))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: valueAt(values, 0)}).FirstErr(); err != nil {
		b.Fatalf("latency warm-up produce to %s: %v", addr, err)
	}
	syscall.Sync() // as measureProduce: an earlier run's dirty pages are not this one's to flush
	n := int(cfg.latencyDur.Seconds() * float64(cfg.latencyRate))
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	interval := time.Second / time.Duration(cfg.latencyRate)
	start := time.Now()
	for i := 0; i < n; {
		// Send every record whose time has come, then nap; records leave in
		// bursts no longer than the nap, at the rate on average.
		due := min(n, int(time.Since(start)/interval)+1)
		for ; i < due; i++ {
			wg.Add(1)
			idx, sent := i, time.Now()
			cl.Produce(ctx, &kgo.Record{Value: valueAt(values, idx)}, func(_ *kgo.Record, err error) {
				took[idx] = time.Since(sent)
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		time.Sleep(200 * time.Microsecond)
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("latency run against %s: %d of %d records failed", addr, failed.Load(), n)
	}
	slices.Sort(took)
	at := func(q float64) time.Duration { return took[min(n-1, int(q*float64(n)))] }
	return latency{p50: at(0.5), p99: at(0.99), p999: at(0.999)}
}

// loopbackMBps streams total bytes over a loopback TCP connection in 64 KiB
// writes and returns MB/s.
func loopbackMBps(b *testing.B, total int) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	errs := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			errs <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for sent := 0; sent < total; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	start := time.Now()
	read, err := io.CopyBuffer(io.Discard, io.LimitReader(c, int64(total)), buf)
	elapsed := time.Since(start).Seconds()
	if err != nil || read != int64(total) {
		b.Fatalf("loopback: read %d of %d bytes: %v", read, total, err)
	}
	if err := <-errs; err != nil {
		b.Fatalf("loopback writer: %v", err)
	}
	return float64(total) / elapsed / 1e6
}

func loadAverage() string {
	text, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(text))
	return strings.Join(fields[:min(3, len(fields))], " ")
}

// serverProc is a server under test running as a child process.
type serverProc struct {
	name   string
	cmd    *exec.Cmd
	addr   string
	done   chan struct{} // closed once the process has been waited for
	killed atomic.Bool   // set before the benchmark kills it
}

// startChild starts a benchservers server that prints "listening <addr>" first.
func startChild(b *testing.B, name, bin string, args ...string) *serverProc {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	s := startProc(b, name, cmd)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if !ok {
			b.Fatalf("%s: first line %q, want \"listening <addr>\"", name, line)
		}
		s.addr = addr
	case <-time.After(30 * time.Second):
		b.Fatalf("%s did not say where it listens", name)
	}
	return s
}

// startSluice starts `sluice serve` with its data in a fresh directory.
func startSluice(b *testing.B) *serverProc {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(sluiceBin, "serve", "--listeners", "PLAINTEXT://"+addr, "--log-dir", b.TempDir(), "--log-level", "warn")
	cmd.Stderr = os.Stderr
	s := startProc(b, "sluice", cmd)
	s.addr = addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("sluice did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startProc starts cmd and makes sure it dies: with the benchmark's cleanup,
// and with the test process itself (Pdeathsig) should that be killed.
func startProc(b *testing.B, name string, cmd *exec.Cmd) *serverProc {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	s := &serverProc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if !s.killed.Load() {
			// Its clients would retry until the benchmark's timeout; a
			// server that died has no figures worth waiting for.
			fmt.Fprintf(os.Stderr, "BenchmarkBroker: %s exited while measured: %v\n", name, err)
			os.Exit(2)
		}
		close(s.done)
	}()
	b.Cleanup(s.kill)
	return s
}

func (s *serverProc) kill() {
	s.killed.Store(true)
	s.cmd.Process.Kill()
	<-s.done
}

// cpuSeconds returns the process's user plus system CPU time so far.
func (s *serverProc) cpuSeconds(b *testing.B) float64 {
	secs, err := procCPUSeconds(s.cmd.Process.Pid)
	if err != nil {
		b.Fatalf("%s: %v", s.name, err)
	}
	return secs
}

// procCPUSeconds returns process pid's user plus system CPU time so far,
// from /proc/<pid>/stat.
func procCPUSeconds(pid int) (float64, error) {
	text, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesized command name start at field 3 (state);
	// utime and stime are fields 14 and 15, in clock ticks.
	_, rest, _ := strings.Cut(string(text), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc stat %q", text)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat utime %q stime %q", fields[11], fields[12])
	}
	return float64(utime+stime) / clockTicksPerSecond, nil
}

// clockTicksPerSecond is USER_HZ, 100 on every Linux the Go runtime supports.
const clockTicksPerSecond = 100

// peakRSSMB returns the process's peak resident set (VmHWM) in MiB.
func (s *serverProc) peakRSSMB(b *testing.B) float64 {
	text, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s: %v", s.name, err)
	}
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatalf("%s: VmHWM %q", s.name, v)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatalf("%s: no VmHWM in /proc status", s.name)
	return 0
}

// perf starts `perf record -g` writing to path on the process, unless
// path is "", and returns what stops it.
func (s *serverProc) perf(b *testing.B, path string) func() {
	if path == "" {
		return func() {}
	}
	args := []string{"record", "-F", "999", "-g", "-o", path}
	if os.Getenv("SLUICE_BENCH_PERF_STAT") != "" {
		// Counts instead of samples: syscalls, context switches and page
		// faults per GB tell where a broker's overhead comes from.
		args = []string{"stat", "-e", "raw_syscalls:sys_enter,syscalls:sys_enter_syncfs,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_read,context-switches,page-faults", "-o", path + ".txt"}
	}
	cmd := exec.Command("perf", append(args, "-p", strconv.Itoa(s.cmd.Process.Pid))...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("perf: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // let it attach
	return func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
}

// report prints the table and reports each figure and its ratio to its
// anchor as benchmark metrics.
func (r benchResult) report(b *testing.B, cfg benchConfig) {
	const p99Target = 5 * time.Millisecond
	gb := float64(cfg.records) * benchValueBytes / 1e9
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	w := os.Stdout
	fmt.Fprintf(w, "\nBenchmarkBroker: %.2f GB of 1 KiB random values, %d partitions, acks=all, kgo defaults; latency at %d rec/s for %v\n",
		gb, benchPartitions, cfg.latencyRate, cfg.latencyDur)
	fmt.Fprintf(w, "load average before %s, after %s; loopback TCP %.0f MB/s\n", r.loadBefore, r.loadAfter, r.loopbackMBps)
	fmt.Fprintf(w, "%-8s %9s %9s %9s %9s %8s %8s %16s %16s\n", "", "prod MB/s", "cons MB/s", "prod s/GB", "cons s/GB",
		"RSS½ MiB", "RSS MiB", "p50/99/99.9 ms", "linger0 ms")
	for _, row := range []struct {
		name string
		f    brokerFigures
	}{{"sink", r.sink}, {"dsink", r.dsink}, {"synth", r.synth}, {"sluice", r.sluice}, {"kfake", r.kfake}} {
		f := row.f
		fmt.Fprintf(w, "%-8s %9.0f %9.0f %9.2f %9.2f %8.0f %8.0f %5.1f/%4.1f/%5.1f %5.1f/%4.1f/%5.1f\n", row.name,
			f.produceMBps, f.consumeMBps, f.produceCPUPerG, f.consumeCPUPerG, f.rssHalfMB, f.rssFullMB,
			ms(f.latDefault.p50), ms(f.latDefault.p99), ms(f.latDefault.p999),
			ms(f.latNoLinger.p50), ms(f.latNoLinger.p99), ms(f.latNoLinger.p999))
	}
	s, k := r.sluice, r.kfake
	ratios := []struct {
		name        string
		value, want float64
		op          string
	}{
		{"sluice produce / client ceiling (sink)", s.produceMBps / r.sink.produceMBps, 0.8, ">="},
		{"kfake  produce / client ceiling (sink)", k.produceMBps / r.sink.produceMBps, 0, ""},
		{"sluice produce CPU s/GB (absolute)", s.produceCPUPerG, 0.5, "<="},
		{"sluice produce CPU s/GB / kfake's", s.produceCPUPerG / k.produceCPUPerG, 0, ""},
		{"durable sink CPU s/GB (the floor)", r.dsink.produceCPUPerG, 0, ""},
		{"sluice produce CPU s/GB / durable sink's", s.produceCPUPerG / r.dsink.produceCPUPerG, 0, ""},
		{"durable sink produce / client ceiling", r.dsink.produceMBps / r.sink.produceMBps, 0, ""},
		{"client CPU s/GB producing to the sink", r.sink.clientCPUPerG, 0, ""},
		{"client CPU s/GB producing to sluice", s.clientCPUPerG, 0, ""},
		{"sluice consume / loopback", s.consumeMBps / r.loopbackMBps, 0.5, ">="},
		{"kfake  consume / loopback", k.consumeMBps / r.loopbackMBps, 0, ""},
		{"client consume ceiling (synth) / loopback", r.synth.consumeMBps / r.loopbackMBps, 0, ""},
		{"sluice consume, bare fetch loop / loopback", s.rawConsumeMBps / r.loopbackMBps, 0, ""},
		{"sluice p99 / 5 ms (linger 0)", float64(s.latNoLinger.p99) / float64(p99Target), 1, "<"},
		{"sluice p99 / 5 ms (default linger)", float64(s.latDefault.p99) / float64(p99Target), 1, "<"},
		{"  of which the client's own (sink p99)", float64(r.sink.latDefault.p99) / float64(p99Target), 0, ""},
		{"  and sluice's (p99 over the sink's)", float64(s.latDefault.p99-r.sink.latDefault.p99) / float64(p99Target), 1, "<"},
		{"dsink  p99 / 5 ms (linger 0)", float64(r.dsink.latNoLinger.p99) / float64(p99Target), 0, ""},
		{"kfake  p99 / 5 ms (default linger)", float64(k.latDefault.p99) / float64(p99Target), 0, ""},
		{"sluice RSS full / half data", s.rssFullMB / s.rssHalfMB, 1, "~"},
		{"kfake  RSS full / half data", k.rssFullMB / k.rssHalfMB, 0, ""},
		{"sluice RSS MiB per GB stored", s.rssFullMB / gb, 0, ""},
		{"kfake  RSS MiB per GB stored", k.rssFullMB / gb, 0, ""},
	}
	for _, q := range ratios {
		target := ""
		if q.op != "" {
			target = fmt.Sprintf("(target %s %g)", q.op, q.want)
		}
		fmt.Fprintf(w, "  %-42s %7.3f %s\n", q.name, q.value, target)
	}

	metric := func(v float64, unit string) { b.ReportMetric(v, unit) }
	metric(r.loopbackMBps, "loopback-MB/s")
	for _, row := range []struct {
		name string
		f    brokerFigures
	}{{"sink", r.sink}, {"dsink", r.dsink}, {"sluice", r.sluice}, {"kfake", r.kfake}} {
		metric(row.f.produceMBps, row.name+"-produce-MB/s")
		metric(row.f.produceCPUPerG, row.name+"-produce-cpu-s/GB")
		metric(ms(row.f.latDefault.p50), row.name+"-p50-ms")
		metric(ms(row.f.latDefault.p99), row.name+"-p99-ms")
		metric(ms(row.f.latDefault.p999), row.name+"-p99.9-ms")
		metric(ms(row.f.latNoLinger.p99), row.name+"-linger0-p99-ms")
	}
	metric(r.synth.consumeMBps, "synth-consume-MB/s")
	for _, row := range []struct {
		name string
		f    brokerFigures
	}{{"sluice", r.sluice}, {"kfake", r.kfake}} {
		metric(row.f.consumeMBps, row.name+"-consume-MB/s")
		metric(row.f.rssHalfMB, row.name+"-rss-half-MiB")
		metric(row.f.rssFullMB, row.name+"-rss-MiB")
	}
	metric(s.produceMBps/r.sink.produceMBps, "sluice-produce/ceiling")
	metric(s.produceCPUPerG/k.produceCPUPerG, "sluice-cpu/kfake-cpu")
	metric(s.consumeMBps/r.loopbackMBps, "sluice-consume/loopback")
	metric(float64(s.latDefault.p99)/float64(p99Target), "sluice-p99/5ms")
	metric(float64(s.latNoLinger.p99)/float64(p99Target), "sluice-linger0-p99/5ms")
	metric(s.rssFullMB/s.rssHalfMB, "sluice-rss-full/half")
}
