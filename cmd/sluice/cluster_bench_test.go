package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// survivors would.
const attemptTimeout = 2 * time.Second

// createUntilAcked creates the topic, retrying against the running nodes in
// turn (each on a connection of its own, so that no client backoff is
// measured) until one acknowledges it, and returns how many attempts went
// unanswered for attemptTimeout. A retry that finds the topic counts: an
// earlier attempt of unknown outcome created it.
func (c *testCluster) createUntilAcked(ctx context.Context, name string, partitions int32) (unanswered int, err error) {
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		nodes := c.running()
		if len(nodes) == 0 {
			return unanswered, errors.New("no node runs")
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
			return unanswered, nil
		}
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			unanswered++
		}
		last = err
		time.Sleep(5 * time.Millisecond)
	}
	return unanswered, fmt.Errorf("%w (last error %v)", ctx.Err(), last)
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
		var hung []int // kills after which some attempt went unanswered
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
			unanswered, err := c.createUntilAcked(ctx, name, 1)
			if err != nil {
				b.Fatalf("kill %d: create %s: %v", k, name, err)
			}
			if unanswered > 0 {
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
		fmt.Fprintf(w, "kills after which an attempt went unanswered for %v (and the next node was tried): %d of %d %v\n",
			attemptTimeout, len(hung), kills, hung)
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
