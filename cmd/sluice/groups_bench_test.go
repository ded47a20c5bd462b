package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group benchmarks: three combined `sluice serve` nodes on 127.0.0.1,
// __consumer_offsets at its defaults (50 partitions, replication factor 3),
// group.initial.rebalance.delay.ms set explicitly. Each starts a cluster of
// its own; together they take about two minutes here.
//
//	go test -run '^$' -bench Group -benchtime 1x ./cmd/sluice

// groupsBenchDelay is group.initial.rebalance.delay.ms in every group
// benchmark: Kafka's default, set explicitly so that the rebalance figures
// can be read against it.
const groupsBenchDelay = 3 * time.Second

// newGroupsCluster starts three nodes with group.initial.rebalance.delay.ms
// at groupsBenchDelay and offsets.topic.num.partitions at
// SLUICE_BENCH_OFFSETS_PARTITIONS (default 50, Kafka's), which it returns.
func newGroupsCluster(b *testing.B) (*testCluster, int) {
	partitions := envInt(b, "SLUICE_BENCH_OFFSETS_PARTITIONS", 50)
	return newCluster(b, 3, fmt.Sprintf("group.initial.rebalance.delay.ms=%d", groupsBenchDelay.Milliseconds()),
		fmt.Sprintf("offsets.topic.num.partitions=%d", partitions)), partitions
}

// envDuration reads a positive duration from the environment, def if
// unset.
func envDuration(b *testing.B, key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration", key, v)
	}
	return d
}

// waitTopicPartitions waits until the Metadata of every node of nodes
// shows each of topic's n partitions as ok says.
func waitTopicPartitions(ctx context.Context, b *testing.B, nodes []*clusterNode, topic string, n int, ok func(partitionState) bool) []partitionState {
	var last error
	for ctx.Err() == nil {
		var first []partitionState
		for _, nd := range nodes {
			parts, err := partitionsOn(ctx, nd, topic)
			if err == nil && len(parts) != n {
				err = fmt.Errorf("node %d lists %d partitions", nd.id, len(parts))
			}
			for i := 0; err == nil && i < len(parts); i++ {
				if !ok(parts[i]) {
					err = fmt.Errorf("node %d: partition %d has leader %d, ISR %v", nd.id, i, parts[i].leader, parts[i].isr)
				}
			}
			if err != nil {
				last, first = err, nil
				break
			}
			if first == nil {
				first = parts
			}
		}
		if first != nil {
			return first
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("%s: partitions never as wanted: %v (last: %v)", topic, ctx.Err(), last)
	return nil
}

const offsetsTopic = "__consumer_offsets"

func fullISR(p partitionState) bool { return p.leader > 0 && len(p.isr) == 3 }

// groupCoordinators asks (through adm, which retries until the offsets
// topic exists) for every group's coordinator, and waits until every
// partition of __consumer_offsets has a leader and a full ISR.
func groupCoordinators(ctx context.Context, b *testing.B, c *testCluster, adm *kadm.Client, offsetsPartitions int, groups []string) map[string]int32 {
	out := map[string]int32{}
	var last error
	for len(out) < len(groups) && ctx.Err() == nil {
		var missing []string
		for _, g := range groups {
			if _, ok := out[g]; !ok {
				missing = append(missing, g)
			}
		}
		for g, co := range adm.FindGroupCoordinators(ctx, missing...) {
			if co.Err != nil {
				last = co.Err
				continue
			}
			out[g] = co.NodeID
		}
		if len(out) < len(groups) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(out) < len(groups) {
		b.Fatalf("coordinators of %d of %d groups found: %v (last error %v)", len(out), len(groups), ctx.Err(), last)
	}
	waitTopicPartitions(ctx, b, c.nodes, offsetsTopic, offsetsPartitions, fullISR)
	return out
}

// simpleCommit is one OffsetCommit of one partition by a simple consumer:
// generation -1, no member id, as Kafka allows for a group with no members
// (kadm's CommitOffsets and kcat's -o stored commits are such).
func simpleCommit(group, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// commitErr is the error of a simpleCommit's response, nil if it was
// accepted.
func commitErr(resp kmsg.Response) error {
	r := resp.(*kmsg.OffsetCommitResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("OffsetCommit answered %d topics", len(r.Topics))
	}
	return kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode)
}

// BenchmarkGroupCommits measures offset commits per second across three
// nodes: SLUICE_BENCH_GROUPS groups (default 600, spread over the 50
// shards, so that every node coordinates some), SLUICE_BENCH_COMMITTERS
// concurrent committers (default 64, each a kgo client of its own, since
// a connection answers one request at a time), each sending one
// OffsetCommit of one partition per request (kgo.Client.Request, which
// routes it to the group's coordinator) for its own groups in turn, as a
// simple consumer (generation -1, no member), for SLUICE_BENCH_COMMIT_DUR
// (default 10 s). Every commit must be accepted. Beside the rate and the
// latency: the flushes the nodes made per commit (perf stat), their CPU
// per commit, and the machine's floor (a 1 KiB write and fdatasync, three
// writers at once; an acknowledged commit waits for the coordinator's and
// a follower's sync). SLUICE_BENCH_PERF_DIR records a perf profile of each
// node instead of the counts.
// Target: at least 20,000 commits/s, p99 under 20 ms.
//
//	go test -run '^$' -bench GroupCommits -benchtime 1x ./cmd/sluice
func BenchmarkGroupCommits(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	nGroups := envInt(b, "SLUICE_BENCH_GROUPS", 600)
	committers := envInt(b, "SLUICE_BENCH_COMMITTERS", 64)
	dur := envDuration(b, "SLUICE_BENCH_COMMIT_DUR", 10*time.Second)
	perfDir := os.Getenv("SLUICE_BENCH_PERF_DIR")
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		c, offsetsPartitions := newGroupsCluster(b)
		adm := c.adminClient()
		const topic = "committed"
		if err := createTopic(ctx, adm, topic, 1); err != nil {
			b.Fatalf("create %s: %v", topic, err)
		}
		var groups []string
		for i := range nGroups {
			groups = append(groups, fmt.Sprintf("commit-group-%04d", i))
		}
		coordinators := groupCoordinators(ctx, b, c, adm, offsetsPartitions, groups)
		perNode := map[int32]int{}
		for _, id := range coordinators {
			perNode[id]++
		}
		for _, nd := range c.nodes {
			if perNode[nd.id] == 0 {
				b.Fatalf("node %d coordinates none of %d groups: %v", nd.id, nGroups, perNode)
			}
		}

		clients := make([]*kgo.Client, committers)
		for i := range clients {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(30*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			clients[i] = cl
		}
		// Warm-up: every group's first commit makes it a simple group, and
		// every client learns its groups' coordinators.
		offsets := make([]int64, nGroups)
		var wg sync.WaitGroup
		var failed atomic.Int64
		var firstErr atomic.Value
		fail := func(err error) {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		}
		for w := range committers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g := w; g < nGroups; g += committers {
					offsets[g]++
					resp, err := clients[w].Request(ctx, simpleCommit(groups[g], topic, 0, offsets[g]))
					if err == nil {
						err = commitErr(resp)
					}
					if err != nil {
						fail(fmt.Errorf("warm-up commit of %s: %w", groups[g], err))
					}
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			b.Fatalf("%d warm-up commits refused, first: %v", failed.Load(), firstErr.Load())
		}

		stops := make([]func() syscallCounts, len(c.nodes))
		for i, nd := range c.nodes {
			profile := ""
			if perfDir != "" {
				profile = filepath.Join(perfDir, fmt.Sprintf("commits-node-%d.perf", nd.id))
			}
			stops[i] = startPerfStat(b, nd.cmd.Process.Pid, profile)
		}
		cpu0, self0 := nodesCPU(b, c), selfCPUSeconds()
		took := make([][]time.Duration, committers)
		start := time.Now()
		end := start.Add(dur)
		for w := range committers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g := w; time.Now().Before(end); g += committers {
					if g >= nGroups {
						g = w
					}
					offsets[g]++
					t := time.Now()
					resp, err := clients[w].Request(ctx, simpleCommit(groups[g], topic, 0, offsets[g]))
					if err == nil {
						err = commitErr(resp)
					}
					if err != nil {
						fail(fmt.Errorf("commit of %s at %d: %w", groups[g], offsets[g], err))
						return
					}
					took[w] = append(took[w], time.Since(t))
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		cpu1, self1 := nodesCPU(b, c), selfCPUSeconds()
		counts := make([]syscallCounts, len(c.nodes))
		for i, stop := range stops {
			counts[i] = stop()
		}
		if failed.Load() > 0 {
			b.Fatalf("%d commits refused, first: %v", failed.Load(), firstErr.Load())
		}
		all := slices.Concat(took...)
		floor := syncFloor(b, 3, 2*time.Second)
		cancel()

		n := float64(len(all))
		rate := n / elapsed.Seconds()
		var cpu, flushes float64
		for i := range c.nodes {
			cpu += cpu1[i] - cpu0[i]
			flushes += counts[i].flushes()
		}
		w := os.Stdout
		fmt.Fprintf(w, "\nBenchmarkGroupCommits: %d groups (coordinated by node 1/2/3: %d/%d/%d), %d committers (a kgo client each), one OffsetCommit (generation -1) per request, %v, __consumer_offsets %d partitions rf 3 (load average %s)\n",
			nGroups, perNode[1], perNode[2], perNode[3], committers, elapsed.Round(time.Millisecond), offsetsPartitions, loadAverage())
		fmt.Fprintf(w, "  %-44s %10.0f (target >= 20000)\n", "commits per second", rate)
		fmt.Fprintf(w, "  %-44s %10.2f\n", "commit latency p50, ms", ms(percentile(all, 0.5)))
		fmt.Fprintf(w, "  %-44s %10.2f (target < 20)\n", "commit latency p99, ms", ms(percentile(all, 0.99)))
		fmt.Fprintf(w, "  %-44s %10.2f\n", "commit latency max, ms", ms(slices.Max(all)))
		fmt.Fprintf(w, "  %-44s %10.2f / %.2f (p50 / p99; 1 KiB write+fdatasync, 3 writers)\n", "machine floor, ms", ms(floor.p50), ms(floor.p99))
		fmt.Fprintf(w, "  %-44s %10.3f (%s, all three nodes)\n", "flushes per commit", flushes/n, perfAvailable())
		for i, nd := range c.nodes {
			k := counts[i]
			fmt.Fprintf(w, "    node %d: per commit %.3f syncfs %.3f fdatasync %.3f fsync, %.1f context switches, %.1f CPU µs\n",
				nd.id, k.syncfs/n, k.fdatasync/n, k.fsync/n, k.switches/n, (cpu1[i]-cpu0[i])/n*1e6)
		}
		fmt.Fprintf(w, "  %-44s %10.1f (all three nodes; the client's %.1f)\n", "CPU microseconds per commit", cpu/n*1e6, (self1-self0)/n*1e6)
		fmt.Fprintf(w, "  %-44s %10.2f of 2 (nodes %.2f, client %.2f)\n", "cores busy", (cpu+self1-self0)/elapsed.Seconds(), cpu/elapsed.Seconds(), (self1-self0)/elapsed.Seconds())
		b.ReportMetric(rate, "commits/s")
		b.ReportMetric(ms(percentile(all, 0.5)), "commit-p50-ms")
		b.ReportMetric(ms(percentile(all, 0.99)), "commit-p99-ms")
		b.ReportMetric(flushes/n, "flushes/commit")
	}
}
