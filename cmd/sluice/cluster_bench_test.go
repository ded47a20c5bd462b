package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicsRaw sends one CreateTopics for one topic to nd alone and
// returns the topic's error (nil once the creation is acknowledged), or
// the connection's.
func createTopicsRaw(ctx context.Context, nd *clusterNode, name string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := rawRequest(ctx, nd.addr, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return fmt.Errorf("CreateTopics answered %d topics", len(r.Topics))
	}
	return kerr.ErrorForCode(r.Topics[0].ErrorCode)
}

// attemptTimeout is how long createUntilAcked waits for one attempt's
// answer before it tries the next node, as a client retrying against the
// survivors would; SLUICE_BENCH_ATTEMPT_TIMEOUT changes it (at most 60 s,
// rawRequest's own bound).
var attemptTimeout = 2 * time.Second

// slowAttempt is an attempt that took too long: a node that answers at
// once, or forwards to a live controller, takes milliseconds.
const slowAttempt = time.Second

func init() {
	if v := os.Getenv("SLUICE_BENCH_ATTEMPT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "SLUICE_BENCH_ATTEMPT_TIMEOUT=%q: want a positive duration\n", v)
			os.Exit(2)
		}
		attemptTimeout = d
	}
}

// createUntilAcked creates the topic, retrying against the running nodes in
// turn (each on a connection of its own, so that no client backoff is
// measured) until one acknowledges it, and returns how many attempts took
// slowAttempt or longer (answered or not). A retry that finds the topic
// counts: an earlier attempt of unknown outcome created it.
func (c *testCluster) createUntilAcked(ctx context.Context, name string, partitions int32) (slow int, err error) {
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		nodes := c.running()
		if len(nodes) == 0 {
			return slow, errors.New("no node runs")
		}
		nd := nodes[attempt%len(nodes)]
		t0 := time.Now()
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := createTopicsRaw(actx, nd, name, partitions)
		cancel()
		if os.Getenv("SLUICE_BENCH_DEBUG") != "" {
			fmt.Printf("create %s attempt %d on node %d: %v after %v\n", name, attempt, nd.id, err, time.Since(t0))
		}
		if err == nil || attempt > 0 && errors.Is(err, kerr.TopicAlreadyExists) {
			return slow, nil
		}
		if time.Since(t0) >= slowAttempt {
			slow++
		}
		last = err
		time.Sleep(5 * time.Millisecond)
	}
	return slow, fmt.Errorf("%w (last error %v)", ctx.Err(), last)
}

func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkClusterFailover measures, over SLUICE_BENCH_KILLS (default 20)
// kill -9s of the active controller of a three-node cluster, the time from
// the kill to the first acknowledged CreateTopics, sent to the survivors
// in turn on fresh connections (no client backoff) until one acknowledges
// it. After each kill the node is restarted, and the next kill waits until
// it serves and its Metadata lists every topic created so far. Target: p50
// under 1 s (controller.quorum.election.timeout.ms is 500 ms).
//
// An attempt is given up on after 2 s (SLUICE_BENCH_ATTEMPT_TIMEOUT); the
// table counts the kills after which one took a second or more (none in
// the runs of session 5: a request that reaches the newly elected leader
// before it is the active controller is served there once it is, and a
// forwarded request waits no longer than its own TimeoutMillis).
// SLUICE_BENCH_DEBUG=1 prints every attempt and the controller after each
// kill.
//
//	go test -run '^$' -bench ClusterFailover -benchtime 1x ./cmd/sluice
func BenchmarkClusterFailover(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	kills := 20
	if v := os.Getenv("SLUICE_BENCH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SLUICE_BENCH_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	for range b.N {
		c := newCluster(b, 3)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		topics := map[string]int{}
		var failover, catchUp []time.Duration
		var victims []int32
		var hung []int // kills after which some attempt was slow
		for k := range kills {
			name := fmt.Sprintf("before-%02d", k)
			if _, err := c.createUntilAcked(ctx, name, 1); err != nil {
				b.Fatalf("create %s: %v", name, err)
			}
			topics[name] = 1
			victim := c.activeController(ctx)
			victims = append(victims, victim.id)
			start := time.Now()
			c.kill(victim)
			name = fmt.Sprintf("after-%02d", k)
			slow, err := c.createUntilAcked(ctx, name, 1)
			if err != nil {
				b.Fatalf("kill %d: create %s: %v", k, name, err)
			}
			if slow > 0 {
				hung = append(hung, k)
			}
			failover = append(failover, time.Since(start))
			if os.Getenv("SLUICE_BENCH_DEBUG") != "" {
				fmt.Printf("kill %d: node %d killed, node %d now controls\n", k, victim.id, c.activeController(ctx).id)
			}
			topics[name] = 1
			restart := time.Now()
			c.start(victim)
			c.waitListening(victim, time.Minute)
			c.waitTopics(ctx, victim, topics)
			catchUp = append(catchUp, time.Since(restart))
		}
		cancel()
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		w := os.Stdout
		fmt.Fprintf(w, "\nBenchmarkClusterFailover: %d kill -9s of the active controller of 3 combined nodes (election timeout 500 ms); killed %v\n",
			kills, victims)
		fmt.Fprintf(w, "%-42s %8s %8s %8s\n", "", "p50 ms", "p90 ms", "max ms")
		for _, row := range []struct {
			name string
			ds   []time.Duration
			want string
		}{
			{"kill -9 to first acked CreateTopics", failover, "(target p50 < 1000)"},
			{"restart to serving and caught up", catchUp, ""},
		} {
			fmt.Fprintf(w, "%-42s %8.0f %8.0f %8.0f %s\n", row.name, ms(percentile(row.ds, 0.5)),
				ms(percentile(row.ds, 0.9)), ms(slices.Max(row.ds)), row.want)
		}
		fmt.Fprintf(w, "kills after which an attempt took %v or more (unanswered after %v: the next node is tried): %d of %d %v\n",
			slowAttempt, attemptTimeout, len(hung), kills, hung)
		b.ReportMetric(ms(percentile(failover, 0.5)), "failover-p50-ms")
		b.ReportMetric(ms(slices.Max(failover)), "failover-max-ms")
		b.ReportMetric(ms(percentile(catchUp, 0.5)), "catchup-p50-ms")
	}
}

// checkpointSize returns the size of nd's newest metadata snapshot
// (__cluster_metadata-0/*.checkpoint), and its name; 0 and "" if none.
func checkpointSize(b *testing.B, nd *clusterNode) (int64, string) {
	files, err := filepath.Glob(filepath.Join(nd.dir, "__cluster_metadata-0", "*.checkpoint"))
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	var newest string
	var newestIndex uint64
	for _, f := range files {
		idx, err := strconv.ParseUint(strings.SplitN(filepath.Base(f), "-", 2)[0], 10, 64)
		if err != nil {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			continue
		}
		if newest == "" || idx > newestIndex {
			newest, newestIndex, size = filepath.Base(f), idx, st.Size()
		}
	}
	return size, newest
}

// rssMiB reads nd's resident set (VmRSS) from /proc.
func rssMiB(b *testing.B, nd *clusterNode) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", nd.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// envInt reads a positive integer from the environment, def if unset.
func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", key, v)
	}
	return n
}

// fdCount is how many file descriptors nd's process holds.
func fdCount(nd *clusterNode) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", nd.cmd.Process.Pid))
	return len(fds)
}

// BenchmarkClusterMetadataScale builds a metadata image of 100,000
// partitions (SLUICE_BENCH_TOPICS topics, default 100, of
// SLUICE_BENCH_TOPIC_PARTITIONS partitions, default 1,000) in a cluster of
// three combined nodes and as many broker-only nodes
// (SLUICE_BENCH_BROKER_ONLY) as it takes for each broker to hold its
// partitions' logs open within this machine's per-process open-file limit
// (3 descriptors a partition, within two thirds of the limit; 20,000
// here: 22 broker-only nodes), one
// topic per CreateTopics, while one voter (not the controller) is down,
// with metadata.log.max.record.bytes.between.snapshots at 256 KiB so that
// snapshots are taken. It reports:
//
//   - records applied per second: the records a restarted node (kill -9)
//     decoded and applied from its own log after its snapshot, over the
//     time it spent on them (its "broker started" log line);
//   - records per second from CreateTopics to acknowledgement: the topics'
//     records (one TopicRecord and one PartitionRecord per partition) over
//     the time from the first CreateTopics to the last acknowledgement
//     (each is committed by the quorum and applied on the controller before
//     it is acknowledged, and the partitions' logs are created on their
//     brokers meanwhile, which is most of the time), beside its floor on
//     this disk: the partition directories one writer creates per second,
//     with the files a new log has, each synced;
//   - the newest snapshot's size on disk (__cluster_metadata-0/*.checkpoint);
//   - catch-up: the time from restarting the node that was down until its
//     Metadata lists every partition;
//   - restart: the time from restarting a node that had it all (kill -9,
//     then start) until it serves and its Metadata lists every partition;
//     it loads the snapshot, replays the log after it, registers once its
//     old incarnation's session has run out (broker.session.timeout.ms,
//     9 s: DUPLICATE_BROKER_REGISTRATION until then, as in Kafka) and opens
//     its partitions; and a clean restart (SIGTERM, then start), which
//     waits for no session;
//   - RSS growth per partition on the controller (the image, the broker's
//     own partition state and its open logs; the image alone is measured by
//     raftmeta's TestImageMemoryPerPartition).
//
// Targets: at least 200,000 records/s, a restart that loads the snapshot
// in under 1 s.
//
//	go test -run '^$' -bench ClusterMetadataScale -benchtime 1x ./cmd/sluice
func BenchmarkClusterMetadataScale(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	topics := envInt(b, "SLUICE_BENCH_TOPICS", 100)
	perTopic := envInt(b, "SLUICE_BENCH_TOPIC_PARTITIONS", 1000)
	partitions := topics * perTopic
	// Every partition a broker leads holds three descriptors open (segment,
	// offset and time indexes), and this machine's limit is per process:
	// the partitions are spread over enough broker-only nodes besides the
	// three voters that none needs more than it may open. Those held take
	// at most two thirds of the limit; the rest is for the descriptors a
	// restart holds for a moment (a directory sync for each recovering
	// partition, thousands at once).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	perBroker := (int(min(lim.Cur, 1<<20)) - 2000) * 2 / 3 / 3
	brokerOnly := envInt(b, "SLUICE_BENCH_BROKER_ONLY", max(0, (partitions+perBroker-1)/perBroker-3))
	if per := partitions / (3 + brokerOnly) * 3; per > int(lim.Cur)-2000 {
		b.Fatalf("%d partitions over %d brokers need about %d open files each, above this machine's limit of %d: "+
			"raise SLUICE_BENCH_BROKER_ONLY or ulimit -n, or lower SLUICE_BENCH_TOPICS", partitions, 3+brokerOnly, per, lim.Cur)
	}
	for range b.N {
		c := newClusterShape(b, 3, brokerOnly, "metadata.log.max.record.bytes.between.snapshots=262144")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		ctl := c.activeController(ctx)
		var down, other *clusterNode
		for _, nd := range c.nodes[:3] {
			switch {
			case nd == ctl:
			case down == nil:
				down = nd
			default:
				other = nd
			}
		}
		c.kill(down)
		rssBefore := rssMiB(b, ctl)

		want := map[string]int{}
		start := time.Now()
		for i := range topics {
			name := fmt.Sprintf("scale-%03d", i)
			if _, err := c.createUntilAcked(ctx, name, int32(perTopic)); err != nil {
				b.Fatalf("create %s: %v", name, err)
			}
			want[name] = perTopic
		}
		createTime := time.Since(start)
		records := topics * (1 + perTopic)
		rssAfter := rssMiB(b, ctl)
		fdsCtl := fdCount(ctl)

		// Every running node has it all; then the snapshot.
		for _, nd := range c.running() {
			c.waitTopics(ctx, nd, want)
		}

		restart := time.Now()
		c.start(down)
		c.waitListening(down, 5*time.Minute)
		catchUpListen := time.Since(restart)
		c.waitTopics(ctx, down, want)
		catchUp := time.Since(restart)

		// The node restarted next must have a snapshot to load.
		snapBytes, snapName := checkpointSize(b, other)
		for deadline := time.Now().Add(time.Minute); snapBytes == 0; {
			if time.Now().After(deadline) {
				b.Fatalf("node %d took no snapshot", other.id)
			}
			time.Sleep(100 * time.Millisecond)
			snapBytes, snapName = checkpointSize(b, other)
		}
		c.kill(other)
		restart = time.Now()
		c.start(other)
		c.waitListening(other, 5*time.Minute)
		restartListen := time.Since(restart)
		c.waitTopics(ctx, other, want)
		restartAll := time.Since(restart)
		// From the restarted node's own log: the snapshot is decoded into
		// the image between these two lines.
		recovered := logTime(b, other, "metadata quorum storage recovered")
		opened := logTime(b, other, "newRaft ")
		unfenced := logTime(b, other, "broker fencing changed")
		serving := logTime(b, other, "broker started")
		startLine := logTime(b, other, "=== start")
		replayed, replaySeconds := logApplied(b, other)

		// A clean restart: SIGTERM (a controlled shutdown), then start.
		c.stop(other)
		restart = time.Now()
		c.start(other)
		c.waitListening(other, 5*time.Minute)
		c.waitTopics(ctx, other, want)
		cleanRestart := time.Since(restart)
		cancel()

		rate := float64(records) / createTime.Seconds()
		floor := partitionCreateFloor(b, 1000)
		perPartition := (rssAfter - rssBefore) * (1 << 20) / float64(partitions)
		s := func(d time.Duration) float64 { return d.Seconds() }
		w := os.Stdout
		fmt.Fprintf(w, "\nBenchmarkClusterMetadataScale: %d topics of %d partitions (%d), one CreateTopics each, 3 combined nodes and %d broker-only, node %d down meanwhile\n",
			topics, perTopic, partitions, brokerOnly, down.id)
		fmt.Fprintf(w, "  %-52s %12.0f (target >= 200000)\n", "restarted node: records applied per second", float64(replayed)/replaySeconds)
		fmt.Fprintf(w, "  %-52s %12d in %.3f s, decoded and applied from its log\n", "  its log: records replayed at start", replayed, replaySeconds)
		fmt.Fprintf(w, "  %-52s %12.0f (each partition's log opened on its broker)\n", "records per second, CreateTopics to acknowledgement", rate)
		fmt.Fprintf(w, "  %-52s %12.0f (floor: a partition's directory and 4 files, each synced, one at a time)\n", "  raw partition directories created per second", floor)
		fmt.Fprintf(w, "  %-52s %12.2f\n", "seconds to create them all", s(createTime))
		fmt.Fprintf(w, "  %-52s %12d %s of node %d\n", "newest snapshot, bytes", snapBytes, snapName, other.id)
		fmt.Fprintf(w, "  %-52s %12.1f\n", "snapshot bytes per partition", float64(snapBytes)/float64(partitions))
		fmt.Fprintf(w, "  %-52s %12.2f\n", "node that was down: s to listening", s(catchUpListen))
		fmt.Fprintf(w, "  %-52s %12.2f\n", "node that was down: s to every partition listed", s(catchUp))
		fmt.Fprintf(w, "  %-52s %12.2f (its old session must run out first, as in Kafka)\n", "restarted node (kill -9): s to listening", s(restartListen))
		fmt.Fprintf(w, "  %-52s %12.2f\n", "restarted node: s to every partition listed", s(restartAll))
		fmt.Fprintf(w, "  %-52s %12.3f (target < 1)\n", "  its log: snapshot decoded into the image, s", s(opened.Sub(recovered)))
		fmt.Fprintf(w, "  %-52s %12.3f\n", "  its log: process start to metadata open, s", s(opened.Sub(startLine)))
		fmt.Fprintf(w, "  %-52s %12.3f\n", "  its log: process start to unfenced, s", s(unfenced.Sub(startLine)))
		fmt.Fprintf(w, "  %-52s %12.3f\n", "  its log: unfenced to serving (partitions opened), s", s(serving.Sub(unfenced)))
		fmt.Fprintf(w, "  %-52s %12.2f\n", "restarted after SIGTERM: s to every partition listed", s(cleanRestart))
		fmt.Fprintf(w, "  %-52s %12.0f (%.0f -> %.0f MiB)\n", "controller RSS growth, bytes per partition", perPartition, rssBefore, rssAfter)
		fmt.Fprintf(w, "  %-52s %12d\n", "controller's open file descriptors", fdsCtl)
		b.ReportMetric(float64(replayed)/replaySeconds, "applied-records/s")
		b.ReportMetric(rate, "created-records/s")
		b.ReportMetric(float64(snapBytes), "snapshot-bytes")
		b.ReportMetric(s(catchUp), "catchup-s")
		b.ReportMetric(s(restartListen), "restart-listen-s")
		b.ReportMetric(s(restartAll), "restart-all-s")
		b.ReportMetric(s(cleanRestart), "clean-restart-s")
		b.ReportMetric(perPartition, "rss-B/partition")
		b.ReportMetric(s(opened.Sub(recovered)), "snapshot-load-s")
	}
}

// partitionCreateFloor is the physical floor of opening partitions here:
// how many per second one writer creates, one after another, what a new
// partition's log is on disk (its directory; segment, offset index, time
// index and partition.metadata files; each file and the directory synced).
func partitionCreateFloor(b *testing.B, n int) float64 {
	dir := b.TempDir()
	start := time.Now()
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("floor-%d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex", "partition.metadata"} {
			f, err := os.Create(filepath.Join(d, name))
			if err == nil && name == "partition.metadata" {
				_, err = f.Write([]byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"))
			}
			if err == nil {
				err = f.Sync()
			}
			if err == nil {
				err = f.Close()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		df, err := os.Open(d)
		if err == nil {
			err = df.Sync()
			df.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// latestLog is the lines of nd's log since its latest start.
func latestLog(b *testing.B, nd *clusterNode) []string {
	data, err := os.ReadFile(nd.logPath)
	if err != nil {
		b.Fatal(err)
	}
	text := string(data)
	return strings.Split(text[strings.LastIndex(text, "=== start "):], "\n")
}

// logApplied reads, from the "broker started" line of nd's latest
// incarnation, how many metadata records it applied from its log while it
// started and the seconds it spent decoding and applying them.
func logApplied(b *testing.B, nd *clusterNode) (records int, seconds float64) {
	var err error
	for _, line := range latestLog(b, nd) {
		if !strings.Contains(line, "broker started") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "metadata_records_applied="); ok {
				records, err = strconv.Atoi(v)
			} else if v, ok := strings.CutPrefix(f, "metadata_apply_seconds="); ok {
				seconds, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				b.Fatalf("node %d's log: %q: %v", nd.id, line, err)
			}
		}
		if seconds <= 0 {
			b.Fatalf("node %d's log: %q: no apply time", nd.id, line)
		}
		return records, seconds
	}
	b.Fatalf("node %d's log has no \"broker started\" line since its last start", nd.id)
	return 0, 0
}

// logTime is the time of the first line containing what in the log of nd's
// latest incarnation (the node's own clock; "=== start" is the test's line
// before it started the process).
func logTime(b *testing.B, nd *clusterNode, what string) time.Time {
	for _, line := range latestLog(b, nd) {
		if !strings.Contains(line, what) {
			continue
		}
		if v, ok := strings.CutPrefix(line, "=== start "); ok {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				b.Fatalf("node %d's log: %q: %v", nd.id, line, err)
			}
			return t
		}
		if v, ok := strings.CutPrefix(line, "time="); ok {
			t, err := time.Parse(time.RFC3339Nano, strings.Fields(v)[0])
			if err != nil {
				b.Fatalf("node %d's log: %q: %v", nd.id, line, err)
			}
			return t
		}
	}
	b.Fatalf("node %d's log has no line with %q since its last start", nd.id, what)
	return time.Time{}
}
