package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/groups/assign"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group benchmarks: three combined `sluice serve` nodes on 127.0.0.1,
// __consumer_offsets at its defaults (50 partitions, replication factor 3),
// group.initial.rebalance.delay.ms set explicitly. Each starts a cluster of
// its own; together they take about a minute here.
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

// machineBusy reads the machine's busy and total CPU time (all cores,
// seconds) from /proc/stat: with this process's and the nodes' own, it
// tells how much of the two cores other programs took.
func machineBusy() (busy, total float64) {
	text, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(text), "\n")
	fields := strings.Fields(line)
	for i, f := range fields[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / 100, total / 100 // USER_HZ
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
// a follower's sync; and the fdatasyncs per second and CPU each of one and
// of three writers), and the cores the nodes, this process and other
// programs used; then, with the nodes gone, the ceiling: the same
// committers against the sink server, which answers every commit at once;
// and the protocol-free reference: against three replicating sinks
// (commitReference).
// The filesystem is synced before the measured run, so that the build's
// dirty pages do not turn the nodes' syncfs into per-file fdatasyncs (see
// osenv's groupSyncer). SLUICE_BENCH_PERF_DIR records a perf profile of
// each node instead of the counts. Target: at least 20,000 commits/s, p99
// under 20 ms. Missed here, by the nodes' CPU per commit (ARCHITECTURE.md
// section 5).
//
//	go test -run '^$' -bench GroupCommits -benchtime 1x ./cmd/sluice
func BenchmarkGroupCommits(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	nGroups := envInt(b, "SLUICE_BENCH_GROUPS", 600)
	committers := min(envInt(b, "SLUICE_BENCH_COMMITTERS", 64), nGroups) // each commits for groups of its own
	dur := envDuration(b, "SLUICE_BENCH_COMMIT_DUR", 10*time.Second)
	perfDir := os.Getenv("SLUICE_BENCH_PERF_DIR")
	bins := buildBenchServers(b)
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

		clients := commitClients(b, c.addrs(), committers)
		offsets := make([]int64, nGroups)
		// Warm-up: every group's first commit makes it a simple group, and
		// every client learns its groups' coordinators.
		if _, err := runCommitters(ctx, clients, groups, topic, offsets, 0); err != nil {
			b.Fatalf("warm-up: %v", err)
		}

		// As measureProduce: the build's and setup's dirty pages (some 50 MB
		// of binaries) would otherwise make every node's syncer see another
		// program's writeback and flush file by file.
		syscall.Sync()
		stops := make([]func() syscallCounts, len(c.nodes))
		for i, nd := range c.nodes {
			profile := ""
			if perfDir != "" {
				profile = filepath.Join(perfDir, fmt.Sprintf("commits-node-%d.perf", nd.id))
			}
			stops[i] = startPerfStat(b, nd.cmd.Process.Pid, profile)
		}
		cpu0, self0 := nodesCPU(b, c), selfCPUSeconds()
		busy0, total0 := machineBusy()
		start := time.Now()
		all, err := runCommitters(ctx, clients, groups, topic, offsets, dur)
		elapsed := time.Since(start)
		cpu1, self1 := nodesCPU(b, c), selfCPUSeconds()
		busy1, total1 := machineBusy()
		counts := make([]syscallCounts, len(c.nodes))
		for i, stop := range stops {
			counts[i] = stop()
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, cl := range clients {
			cl.Close()
		}
		for _, nd := range c.nodes {
			c.kill(nd) // the ceiling's run must not share the cores with them
		}
		ceiling := commitCeiling(ctx, b, bins.sink, groups, topic, committers, dur)
		reference := commitReference(ctx, b, bins.sink, groups, topic, committers, dur)
		floor := syncFloor(b, 3, 2*time.Second)
		rate3, cpu3 := syncRate(b, 3, time.Second)
		rate1, cpu1Sync := syncRate(b, 1, time.Second)
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
		fmt.Fprintf(w, "  %-44s %10.0f (p50 %.2f ms, p99 %.2f ms; the client's %.1f CPU µs per commit)\n", "ceiling: the same clients, a sink answering", ceiling.rate, ms(ceiling.p50), ms(ceiling.p99), ceiling.clientCPU)
		fmt.Fprintf(w, "  %-44s %10.0f (p50 %.2f ms, p99 %.2f ms; the sinks' %.1f and the client's %.1f CPU µs per commit)\n", "protocol-free: three replicating sinks", reference.rate, ms(reference.p50), ms(reference.p99), reference.serverCPU, reference.clientCPU)
		fmt.Fprintf(w, "  %-44s %10.2f\n", "commit latency p50, ms", ms(percentile(all, 0.5)))
		fmt.Fprintf(w, "  %-44s %10.2f (target < 20)\n", "commit latency p99, ms", ms(percentile(all, 0.99)))
		fmt.Fprintf(w, "  %-44s %10.2f\n", "commit latency max, ms", ms(slices.Max(all)))
		fmt.Fprintf(w, "  %-44s %10.2f / %.2f (p50 / p99; 1 KiB write+fdatasync, 3 writers)\n", "machine floor, ms", ms(floor.p50), ms(floor.p99))
		fmt.Fprintf(w, "  %-44s %10.0f / %.0f (1 / 3 writers; %.0f / %.0f CPU µs each)\n", "machine floor, fdatasyncs per second", rate1, rate3, cpu1Sync, cpu3)
		fmt.Fprintf(w, "  %-44s %10.3f (%s, all three nodes; %.0f per second)\n", "flushes per commit", flushes/n, perfAvailable(), flushes/elapsed.Seconds())
		for i, nd := range c.nodes {
			k := counts[i]
			fmt.Fprintf(w, "    node %d: per commit %.3f syncfs %.3f fdatasync %.3f fsync, %.1f context switches, %.1f CPU µs\n",
				nd.id, k.syncfs/n, k.fdatasync/n, k.fsync/n, k.switches/n, (cpu1[i]-cpu0[i])/n*1e6)
		}
		fmt.Fprintf(w, "  %-44s %10.1f (all three nodes; the client's %.1f)\n", "CPU microseconds per commit", cpu/n*1e6, (self1-self0)/n*1e6)
		machine := (busy1 - busy0) / (total1 - total0) * float64(runtime.NumCPU())
		fmt.Fprintf(w, "  %-44s %10.2f of %d (nodes %.2f, client %.2f, other programs %.2f)\n", "cores busy", machine, runtime.NumCPU(),
			cpu/elapsed.Seconds(), (self1-self0)/elapsed.Seconds(), machine-(cpu+self1-self0)/elapsed.Seconds())
		b.ReportMetric(rate, "commits/s")
		b.ReportMetric(ms(percentile(all, 0.5)), "commit-p50-ms")
		b.ReportMetric(ms(percentile(all, 0.99)), "commit-p99-ms")
		b.ReportMetric(flushes/n, "flushes/commit")
		b.ReportMetric(ceiling.rate, "ceiling-commits/s")
		b.ReportMetric(reference.rate, "rsink-commits/s")
	}
}

// commitClients makes n kgo clients of the cluster at addrs, closed when
// the benchmark ends.
func commitClients(b *testing.B, addrs []string, n int) []*kgo.Client {
	clients := make([]*kgo.Client, n)
	for i := range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		clients[i] = cl
	}
	return clients
}

// runCommitters has each client commit, one OffsetCommit per request, for
// its own groups (those whose index is its own modulo the clients) in turn,
// each commit one past the group's last in offsets: once for each group if
// dur is 0, else until dur has passed. It returns each commit's latency,
// or the first refusal.
func runCommitters(ctx context.Context, clients []*kgo.Client, groups []string, topic string, offsets []int64, dur time.Duration) ([]time.Duration, error) {
	took := make([][]time.Duration, len(clients))
	errs := make([]error, len(clients))
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := w; ; g += len(clients) {
				if g >= len(groups) {
					if dur == 0 {
						return
					}
					g = w
				}
				if dur > 0 && !time.Now().Before(end) {
					return
				}
				offsets[g]++
				t := time.Now()
				resp, err := clients[w].Request(ctx, simpleCommit(groups[g], topic, 0, offsets[g]))
				if err == nil {
					err = commitErr(resp)
				}
				if err != nil {
					errs[w] = fmt.Errorf("commit of %s at %d: %w", groups[g], offsets[g], err)
					return
				}
				took[w] = append(took[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	return slices.Concat(took...), errors.Join(errs...)
}

// commitFigures are what committers reached against some servers.
type commitFigures struct {
	rate, clientCPU float64 // commits/s, the client's CPU µs per commit
	serverCPU       float64 // the servers' CPU µs per commit, all of them
	p50, p99        time.Duration
}

// commitCeiling is what the same committers reach against the bench's sink
// server, which answers every OffsetCommit at once and stores nothing: the
// client's and loopback's share of the two cores, which no broker can beat
// here.
func commitCeiling(ctx context.Context, b *testing.B, sinkBin string, groups []string, topic string, committers int, dur time.Duration) commitFigures {
	sink := startChild(b, "sink", sinkBin)
	defer sink.kill()
	return commitAgainst(ctx, b, []*serverProc{sink}, groups, topic, committers, dur)
}

// commitReference is what the same committers reach against three
// replicating sinks (sinkserver -cluster): each group's offsets appended
// to its shard's file on the shard's leader, sent to both followers,
// synced by all three (syncs shared) before the answer, and nothing else:
// the work no replicated coordinator avoids, without a protocol.
func commitReference(ctx context.Context, b *testing.B, sinkBin string, groups []string, topic string, committers int, dur time.Duration) commitFigures {
	var pairs []string
	for range 3 {
		pairs = append(pairs, freeAddr(b)+"/"+freeAddr(b))
	}
	sinks := make([]*serverProc, 3)
	for i := range sinks {
		sinks[i] = startChild(b, fmt.Sprintf("rsink-%d", i), sinkBin, "-dir", b.TempDir(), "-cluster", strings.Join(pairs, ","), "-id", strconv.Itoa(i))
		defer sinks[i].kill()
	}
	return commitAgainst(ctx, b, sinks, groups, topic, committers, dur)
}

// commitAgainst runs the committers against servers (seeded with them
// all) after a warm-up commit per group.
func commitAgainst(ctx context.Context, b *testing.B, servers []*serverProc, groups []string, topic string, committers int, dur time.Duration) commitFigures {
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.addr)
	}
	clients := commitClients(b, addrs, committers)
	offsets := make([]int64, len(groups))
	if _, err := runCommitters(ctx, clients, groups, topic, offsets, 0); err != nil {
		b.Fatalf("warm-up against %s: %v", servers[0].name, err)
	}
	syscall.Sync()
	cpu := func() float64 {
		var sum float64
		for _, s := range servers {
			sum += s.cpuSeconds(b)
		}
		return sum
	}
	self0, server0, start := selfCPUSeconds(), cpu(), time.Now()
	all, err := runCommitters(ctx, clients, groups, topic, offsets, dur)
	elapsed, self, server := time.Since(start), selfCPUSeconds()-self0, cpu()-server0
	if err != nil {
		b.Fatalf("against %s: %v", servers[0].name, err)
	}
	for _, cl := range clients {
		cl.Close()
	}
	n := float64(len(all))
	return commitFigures{rate: n / elapsed.Seconds(), clientCPU: self / n * 1e6, serverCPU: server / n * 1e6,
		p50: percentile(all, 0.5), p99: percentile(all, 0.99)}
}

// BenchmarkGroupRebalance measures the rebalance of a group of
// SLUICE_BENCH_MEMBERS members (default 100) over a topic of as many
// partitions, from the first member's first request to every member
// holding its assignment, with the classic protocol and with KIP-848's.
// The members are raw ones, written with kmsg requests on a connection of
// their own each (100 kgo clients would spend the two cores the three
// nodes share on their own metadata, fetch and heartbeat loops):
//
//   - classic: JoinGroup (MEMBER_ID_REQUIRED, then again with the member
//     id, which waits for the join phase to end), then SyncGroup, the
//     leader's carrying a round-robin assignment ("range" named, as a
//     consumer group's protocol). The join phase of a new group lasts
//     group.initial.rebalance.delay.ms (3 s here), extended by another
//     delay while members keep joining, as Kafka's InitialDelayedJoin: the
//     table gives the delay that applies (the windows the joins fell in,
//     times 3 s) and the time beyond it.
//   - KIP-848: ConsumerGroupHeartbeat v1 (member ids made by the members,
//     KIP-1082): a join with the subscription, then heartbeats with what
//     it owns, at once after its assignment changed (as a client
//     acknowledges a reconciliation) and otherwise every
//     SLUICE_BENCH_HEARTBEAT (default 100 ms). A real client heartbeats
//     at the interval the broker gives (group.consumer.heartbeat.interval.ms,
//     5 s), and revoke-before-assign needs a heartbeat of the revoking
//     member and then one of the receiving member: that is up to two
//     intervals, the client's choice, not the broker's work, which is
//     what this measures. There is no initial delay.
//
// A member that is refused, or a group whose members do not end up
// holding every partition exactly once, fails the benchmark. Target: under
// 1 s beyond the delay.
//
//	go test -run '^$' -bench GroupRebalance -benchtime 1x ./cmd/sluice
func BenchmarkGroupRebalance(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	members := envInt(b, "SLUICE_BENCH_MEMBERS", 100)
	hbEvery := envDuration(b, "SLUICE_BENCH_HEARTBEAT", 100*time.Millisecond)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		c, offsetsPartitions := newGroupsCluster(b)
		adm := c.adminClient()
		const topic = "rebalanced"
		if err := createTopic(ctx, adm, topic, int32(members)); err != nil {
			b.Fatalf("create %s: %v", topic, err)
		}
		classicGroup, consumerGroup := "classic-rebalance", "consumer-rebalance"
		co := groupCoordinators(ctx, b, c, adm, offsetsPartitions, []string{classicGroup, consumerGroup})
		// The first write to a partition of a new __consumer_offsets waits
		// until its followers fetch it, up to replica.fetch.backoff.ms (1 s)
		// after the creation (a follower whose first fetch came before the
		// leader had the partition holds it back that long): a commit of
		// another group on each group's shard first, so that the rebalances
		// are measured on shards that serve.
		ready := time.Now()
		for _, g := range []string{classicGroup, consumerGroup} {
			warmShard(ctx, b, c.nodes[co[g]-1].addr, g, topic, int32(offsetsPartitions))
		}
		readyTook := time.Since(ready)
		cr := classicRebalance(ctx, b, c.nodes[co[classicGroup]-1].addr, classicGroup, topic, members)
		kr := consumerRebalance(ctx, b, c.nodes[co[consumerGroup]-1].addr, consumerGroup, topic, members, hbEvery)
		cancel()

		w := os.Stdout
		fmt.Fprintf(w, "\nBenchmarkGroupRebalance: %d raw members (kmsg requests, a connection each), a topic of %d partitions, group.initial.rebalance.delay.ms=%d (load average %s)\n",
			members, members, groupsBenchDelay.Milliseconds(), loadAverage())
		fmt.Fprintf(w, "  a commit on each group's shard, just after __consumer_offsets' creation, answered after %.0f ms\n", ms(readyTook))
		fmt.Fprintf(w, "  classic (coordinator node %d): first JoinGroup to every member's SyncGroup answered %7.0f ms\n", co[classicGroup], ms(cr.total))
		fmt.Fprintf(w, "    members joined within %.0f ms of the first; initial delay that applies: %d x %d = %d ms\n",
			ms(cr.joinSpread), cr.windows, groupsBenchDelay.Milliseconds(), cr.windows*groupsBenchDelay.Milliseconds())
		fmt.Fprintf(w, "    %-56s %7.0f ms (target < 1000)\n", "beyond the delay (first JoinGroup to all assigned, less it)", ms(cr.beyond))
		fmt.Fprintf(w, "    %-56s %7.0f ms\n", "  of which the first MEMBER_ID_REQUIRED round trip", ms(cr.firstTrip))
		fmt.Fprintf(w, "    %-56s %7.0f ms\n", "  the last JoinGroup answer after the delay's end", ms(cr.joinedBeyond))
		fmt.Fprintf(w, "  KIP-848 (coordinator node %d, heartbeats every %v and at once after a change): %d heartbeats\n",
			co[consumerGroup], hbEvery, kr.heartbeats)
		fmt.Fprintf(w, "    %-56s %7.0f ms (target < 1000; no initial delay)\n", "first heartbeat to every member holding its partition", ms(kr.total))
		fmt.Fprintf(w, "    %-56s %7.2f ms\n", "heartbeat latency p50", ms(kr.p50))
		fmt.Fprintf(w, "    %-56s %7.2f ms\n", "heartbeat latency p99", ms(kr.p99))
		b.ReportMetric(ms(cr.beyond), "classic-beyond-delay-ms")
		b.ReportMetric(ms(kr.total), "kip848-rebalance-ms")
	}
}

// warmShard commits, as a simple consumer, an offset of topic for a group
// of group's shard (another group, found by the shard hash) at addr, its
// coordinator, until it is accepted.
func warmShard(ctx context.Context, b *testing.B, addr, group, topic string, partitions int32) {
	shard := assign.ShardFor(group, partitions)
	other := ""
	for i := 0; other == ""; i++ {
		if name := fmt.Sprintf("warm-%d", i); assign.ShardFor(name, partitions) == shard {
			other = name
		}
	}
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		req := simpleCommit(other, topic, 0, 1)
		req.SetVersion(8)
		resp, err := rawRequest(ctx, addr, req)
		if err == nil {
			err = commitErr(resp)
		}
		if err == nil {
			return
		}
		last = err
	}
	b.Fatalf("a commit of %s (the shard of %s) never accepted: %v", other, group, last)
}

// classicRun is what classicRebalance measured.
type classicRun struct {
	total        time.Duration // first JoinGroup sent to the last SyncGroup answer
	joinSpread   time.Duration // first join (with a member id) to the last
	windows      int64         // initial delays the joins imply
	beyond       time.Duration // first JoinGroup sent to the last assignment, less the delays
	firstTrip    time.Duration // first JoinGroup sent to the first MEMBER_ID_REQUIRED answer
	joinedBeyond time.Duration // first join to the last JoinGroup answer, less the delays
}

// classicMember is one raw classic member's timeline and assignment.
type classicMember struct {
	start, joined, answered, assigned time.Time
	partitions                        []int32
}

// classicRebalance runs members raw classic members of a new group at
// once against its coordinator at addr and checks that every partition of
// topic (members of them) went to exactly one member.
func classicRebalance(ctx context.Context, b *testing.B, addr, group, topic string, members int) classicRun {
	out := make([]classicMember, members)
	errs := make([]error, members)
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runClassicMember(ctx, addr, group, topic, i, &out[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("classic members: %v", err)
	}
	owner := map[int32]int{}
	for i, m := range out {
		if len(m.partitions) == 0 {
			b.Fatalf("classic member %d was assigned nothing", i)
		}
		for _, p := range m.partitions {
			if prev, ok := owner[p]; ok {
				b.Fatalf("partition %d assigned to members %d and %d", p, prev, i)
			}
			owner[p] = i
		}
	}
	if len(owner) != members {
		b.Fatalf("%d of %d partitions assigned", len(owner), members)
	}
	first, last := out[0], out[0]
	var joins []time.Time
	for _, m := range out {
		first.start = minTime(first.start, m.start)
		first.joined = minTime(first.joined, m.joined)
		last.joined = maxTime(last.joined, m.joined)
		last.answered = maxTime(last.answered, m.answered)
		last.assigned = maxTime(last.assigned, m.assigned)
		joins = append(joins, m.joined)
	}
	if os.Getenv("SLUICE_BENCH_DEBUG") != "" {
		var firstTrip []time.Duration
		for _, m := range out {
			firstTrip = append(firstTrip, m.joined.Sub(m.start))
		}
		fmt.Printf("classic: first JoinGroup answered (MEMBER_ID_REQUIRED) after min %v p50 %v max %v; first sent %v before the first answer\n",
			slices.Min(firstTrip), percentile(firstTrip, 0.5), slices.Max(firstTrip), first.joined.Sub(first.start))
	}
	windows := initialDelayWindows(joins, groupsBenchDelay, classicRebalanceTimeout)
	delay := time.Duration(windows) * groupsBenchDelay
	return classicRun{
		total:        last.assigned.Sub(first.start),
		joinSpread:   last.joined.Sub(first.joined),
		windows:      windows,
		beyond:       last.assigned.Sub(first.start) - delay,
		firstTrip:    first.joined.Sub(first.start),
		joinedBeyond: last.answered.Sub(first.joined) - delay,
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// classicRebalanceTimeout is the raw classic members' rebalance timeout,
// which bounds the initial delay's extensions.
const classicRebalanceTimeout = 60 * time.Second

// initialDelayWindows is how many initial delays a new classic group's
// join phase lasts for members joining at joins, as Kafka's
// InitialDelayedJoin runs it: the first join starts a delay; when it ends,
// another starts if a member joined during it, while the rebalance timeout
// has time left.
func initialDelayWindows(joins []time.Time, delay, rebalanceTimeout time.Duration) int64 {
	s := slices.Clone(joins)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	end := s[0].Add(delay)
	remaining := max(rebalanceTimeout-delay, 0)
	windows := int64(1)
	for next := 1; remaining > 0; windows++ {
		joined := false
		for ; next < len(s) && !s[next].After(end); next++ {
			joined = true
		}
		if !joined {
			break
		}
		end = end.Add(min(delay, remaining))
		remaining = max(remaining-delay, 0)
	}
	return windows
}

// runClassicMember is one raw classic member: JoinGroup (twice: the first
// gets the member id), SyncGroup (the leader assigning partitions round
// robin over the members in member id order), its times and partitions
// into m.
func runClassicMember(ctx context.Context, addr, group, topic string, i int, m *classicMember) error {
	kc, err := dialKafka(ctx, addr, fmt.Sprintf("classic-%03d", i))
	if err != nil {
		return err
	}
	defer kc.close()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join := func(memberID string) (*kmsg.JoinGroupResponse, error) {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(9)
		req.Group, req.MemberID, req.ProtocolType = group, memberID, "consumer"
		req.SessionTimeoutMillis = 45000
		req.RebalanceTimeoutMillis = int32(classicRebalanceTimeout.Milliseconds())
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		resp, err := kc.request(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.JoinGroupResponse), nil
	}
	m.start = time.Now()
	resp, err := join("")
	if err != nil {
		return fmt.Errorf("member %d: JoinGroup: %w", i, err)
	}
	if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		return fmt.Errorf("member %d: first JoinGroup answered %v, member id %q", i, kerr.ErrorForCode(resp.ErrorCode), resp.MemberID)
	}
	m.joined = time.Now()
	if resp, err = join(resp.MemberID); err != nil {
		return fmt.Errorf("member %d: JoinGroup: %w", i, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("member %d: JoinGroup: %w", i, err)
	}
	m.answered = time.Now()
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(5)
	sync.Group, sync.Generation, sync.MemberID = group, resp.Generation, resp.MemberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), resp.Protocol
	if resp.LeaderID == resp.MemberID {
		sync.GroupAssignment = roundRobin(topic, resp.Members)
	}
	sresp, err := kc.request(ctx, sync)
	if err != nil {
		return fmt.Errorf("member %d: SyncGroup: %w", i, err)
	}
	sr := sresp.(*kmsg.SyncGroupResponse)
	if err := kerr.ErrorForCode(sr.ErrorCode); err != nil {
		return fmt.Errorf("member %d: SyncGroup: %w", i, err)
	}
	m.assigned = time.Now()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(sr.MemberAssignment); err != nil {
		return fmt.Errorf("member %d: assignment: %w", i, err)
	}
	for _, t := range a.Topics {
		if t.Topic == topic {
			m.partitions = append(m.partitions, t.Partitions...)
		}
	}
	return nil
}

// roundRobin assigns topic's partitions (as many as there are members)
// round robin over the members in member id order.
func roundRobin(topic string, members []kmsg.JoinGroupResponseMember) []kmsg.SyncGroupRequestGroupAssignment {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	var out []kmsg.SyncGroupRequestGroupAssignment
	for i, id := range ids {
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic, []int32{int32(i)}
		a.Topics = append(a.Topics, at)
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a.AppendTo(nil)
		out = append(out, ga)
	}
	return out
}

// consumerRun is what consumerRebalance measured.
type consumerRun struct {
	total      time.Duration // first heartbeat sent to the last member holding its partitions
	heartbeats int
	p50, p99   time.Duration // heartbeat latency
}

// consumerGroupState is every raw KIP-848 member's assignment, as its
// heartbeats' answers gave it.
type consumerGroupState struct {
	mu       sync.Mutex
	owned    [][]int32
	changed  []time.Time // when each member's assignment last changed
	start    time.Time   // the first heartbeat sent
	took     []time.Duration
	stopping atomic.Bool
}

// settled says whether every member holds partitions partitions over
// members each (rounded down or up) and together each partition exactly
// once, and if so when the last of them got its own.
func (s *consumerGroupState) settled(partitions int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int32]bool{}
	var last time.Time
	lo := partitions / len(s.owned)
	for i, ps := range s.owned {
		if len(ps) < lo || len(ps) > lo+1 {
			return last, false
		}
		for _, p := range ps {
			if seen[p] {
				return last, false
			}
			seen[p] = true
		}
		last = maxTime(last, s.changed[i])
	}
	return last, len(seen) == partitions
}

// consumerRebalance runs members raw KIP-848 members of a new group at
// once against its coordinator at addr until every partition of topic
// (members of them) is held by exactly one member, each holding one.
func consumerRebalance(ctx context.Context, b *testing.B, addr, group, topic string, members int, hbEvery time.Duration) consumerRun {
	s := &consumerGroupState{owned: make([][]int32, members), changed: make([]time.Time, members)}
	errs := make([]error, members)
	var wg sync.WaitGroup
	s.start = time.Now()
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runConsumerMember(ctx, addr, group, topic, i, hbEvery, s)
		}()
	}
	deadline := time.Now().Add(time.Minute)
	var done time.Time
	for {
		at, ok := s.settled(members)
		if ok {
			done = at
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stopping.Store(true)
			wg.Wait()
			b.Fatalf("KIP-848 members not all assigned within a minute: %v", errors.Join(errs...))
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.stopping.Store(true)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("KIP-848 members: %v", err)
	}
	return consumerRun{total: done.Sub(s.start), heartbeats: len(s.took), p50: percentile(s.took, 0.5), p99: percentile(s.took, 0.99)}
}

// newMemberID is a KIP-1082 member id: a random UUID in Kafka's base64.
func newMemberID() string {
	var id [16]byte
	rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// runConsumerMember is one raw KIP-848 member: it joins, heartbeats with
// what it owns (at once after a change, else every hbEvery) until s is
// stopping, then leaves.
func runConsumerMember(ctx context.Context, addr, group, topic string, i int, hbEvery time.Duration, s *consumerGroupState) error {
	kc, err := dialKafka(ctx, addr, fmt.Sprintf("consumer-%03d", i))
	if err != nil {
		return err
	}
	defer kc.close()
	memberID, epoch := newMemberID(), int32(0)
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	heartbeat := func(leave bool) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		req.Group, req.MemberID, req.MemberEpoch = group, memberID, epoch
		switch {
		case leave:
			req.MemberEpoch = -1
		case epoch == 0:
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{topic}
			req.Topics = owned
		default:
			req.Topics = owned
		}
		t := time.Now()
		resp, err := kc.request(ctx, req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		s.mu.Lock()
		s.took = append(s.took, time.Since(t))
		s.mu.Unlock()
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			return nil, fmt.Errorf("member %d: heartbeat at epoch %d: %w %s", i, req.MemberEpoch, err, msg)
		}
		return r, nil
	}
	for !s.stopping.Load() {
		r, err := heartbeat(false)
		if err != nil {
			return err
		}
		epoch = r.MemberEpoch
		changed := false
		if r.Assignment != nil {
			var next []kmsg.ConsumerGroupHeartbeatRequestTopic
			var ps []int32
			for _, t := range r.Assignment.Topics {
				rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				rt.TopicID, rt.Partitions = t.TopicID, slices.Sorted(slices.Values(t.Partitions))
				next = append(next, rt)
				ps = append(ps, rt.Partitions...)
			}
			sort.Slice(next, func(a, b int) bool { return string(next[a].TopicID[:]) < string(next[b].TopicID[:]) })
			if !sameOwned(owned, next) {
				changed = true
				owned = next
				if owned == nil {
					owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				}
				s.mu.Lock()
				s.owned[i], s.changed[i] = ps, time.Now()
				s.mu.Unlock()
			}
		}
		if !changed {
			time.Sleep(hbEvery)
		}
	}
	_, err = heartbeat(true)
	return err
}

func sameOwned(a, b []kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
		return x.TopicID == y.TopicID && slices.Equal(x.Partitions, y.Partitions)
	})
}

// BenchmarkGroupCoordinatorFailover measures, over SLUICE_BENCH_GROUP_KILLS
// (default 5) kill -9s of the node coordinating a group, how long a
// franz-go group consumer (kgo, default settings: the classic protocol,
// cooperative-sticky, autocommit) takes to consume again, while a producer
// keeps sending a record every 3 ms (acks=all, round robin over the
// topic's 3 partitions, replication factor 3; each record carries the time
// it was produced). From each kill:
//
//   - to the first record produced after the kill that the group consumes
//     (the task's figure; partitions the dead node did not lead may never
//     have stopped);
//   - to such a record consumed on every partition (the partitions the
//     dead node led move first: broker.session.timeout.ms, 2 s);
//   - to the new coordinator answering the group's OffsetFetch (a raw
//     FindCoordinator, then OffsetFetch, to the survivors every 10 ms):
//     the coordinator failover itself.
//
// The killed node is restarted between kills, and the next kill waits for
// full ISRs and for the group to consume on every partition. The group not
// consuming again within a minute fails the benchmark. Target: under 5 s.
//
//	go test -run '^$' -bench GroupCoordinatorFailover -benchtime 1x ./cmd/sluice
func BenchmarkGroupCoordinatorFailover(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes")
	}
	kills := envInt(b, "SLUICE_BENCH_GROUP_KILLS", 5)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		c, offsetsPartitions := newGroupsCluster(b)
		adm := c.adminClient()
		const topic, group, partitions = "failover-consumed", "failover-group", 3
		resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			b.Fatalf("create %s: %v", topic, err)
		}
		groupCoordinators(ctx, b, c, adm, offsetsPartitions, []string{group})
		waitTopicPartitions(ctx, b, c.nodes, topic, partitions, fullISR)

		produced := startTimedProducer(ctx, b, c.addrs(), topic, partitions)
		consumer := startTimedConsumer(ctx, b, c.addrs(), group, topic, partitions)
		var first, every, moved, leaders, acked, ackedEvery []time.Duration
		var victims []int32
		var ctlKills []int // kills of the active controller too
		var led []int
		for k := range kills {
			waitTopicPartitions(ctx, b, c.nodes, topic, partitions, fullISR)
			waitTopicPartitions(ctx, b, c.nodes, offsetsTopic, offsetsPartitions, fullISR)
			consumer.waitAfter(b, time.Now(), time.Minute, "the group to consume on every partition before the kill")
			co, ok := adm.FindGroupCoordinators(ctx, group)[group]
			if !ok || co.Err != nil || co.NodeID < 1 || int(co.NodeID) > len(c.nodes) {
				b.Fatalf("kill %d: coordinator of %s: %v %+v", k, group, co.Err, co)
			}
			victim := c.nodes[co.NodeID-1]
			parts, err := partitionsOn(ctx, victim, topic)
			if err != nil {
				b.Fatal(err)
			}
			leads := 0
			for _, p := range parts {
				if p.leader == victim.id {
					leads++
				}
			}
			var survivors []*clusterNode
			for _, nd := range c.nodes {
				if nd != victim {
					survivors = append(survivors, nd)
				}
			}
			if victim == c.activeController(ctx) {
				ctlKills = append(ctlKills, k)
			}
			start := time.Now()
			produced.mark(start)
			c.kill(victim)
			var movedAt, leadersAt time.Time
			var movedErr, leadersErr error
			var probes sync.WaitGroup
			probes.Add(2)
			go func() {
				defer probes.Done()
				movedAt, movedErr = waitCoordinatorMoved(ctx, c, survivors, group, victim.id)
			}()
			go func() {
				defer probes.Done()
				leadersAt, leadersErr = waitLeadersMoved(ctx, survivors, topic, partitions, victim.id)
			}()
			times := consumer.waitAfter(b, start, time.Minute, fmt.Sprintf("kill %d (node %d): the group to consume again", k, victim.id))
			probes.Wait()
			if err := errors.Join(movedErr, leadersErr); err != nil {
				b.Fatalf("kill %d (node %d): %v", k, victim.id, err)
			}
			ackedAt := produced.acked(b, time.Minute)
			first = append(first, slices.MinFunc(times, time.Time.Compare).Sub(start))
			every = append(every, slices.MaxFunc(times, time.Time.Compare).Sub(start))
			moved = append(moved, movedAt.Sub(start))
			leaders = append(leaders, leadersAt.Sub(start))
			acked = append(acked, slices.MinFunc(ackedAt, time.Time.Compare).Sub(start))
			ackedEvery = append(ackedEvery, slices.MaxFunc(ackedAt, time.Time.Compare).Sub(start))
			victims, led = append(victims, victim.id), append(led, leads)
			if os.Getenv("SLUICE_BENCH_DEBUG") != "" {
				fmt.Printf("kill %d: node %d (leader of %d of %d partitions): first %v, every partition %v, coordinator moved %v, leaders moved %v, acked %v / %v\n",
					k, victim.id, leads, partitions, first[k], every[k], moved[k], leaders[k], acked[k], ackedEvery[k])
			}
			c.start(victim)
			c.waitListening(victim, time.Minute)
		}
		n, failed := produced.stop()
		cancel()
		consumer.close()

		w := os.Stdout
		fmt.Fprintf(w, "\nBenchmarkGroupCoordinatorFailover: %d kill -9s of the coordinator of a kgo group consumer (default settings), 3 partitions rf 3, a record every 3 ms (%d produced, %d failed); killed %v, leading %v of the partitions; kills %v were of the active controller too\n",
			kills, n, failed, victims, led, ctlKills)
		fmt.Fprintf(w, "  %-52s %8s %8s\n", "from kill -9", "p50 ms", "max ms")
		for _, row := range []struct {
			name string
			ds   []time.Duration
			want string
		}{
			{"to the first later record consumed", first, "(target < 5000)"},
			{"to a later record consumed on every partition", every, "(target < 5000)"},
			{"to the new coordinator answering OffsetFetch", moved, ""},
			{"to the first later record acknowledged (acks=all)", acked, ""},
			{"to a later record acknowledged on every partition", ackedEvery, ""},
			{"to the dead node's partitions led by others", leaders, ""},
		} {
			fmt.Fprintf(w, "  %-52s %8.0f %8.0f %s\n", row.name, ms(percentile(row.ds, 0.5)), ms(slices.Max(row.ds)), row.want)
		}
		b.ReportMetric(ms(percentile(first, 0.5)), "first-p50-ms")
		b.ReportMetric(ms(slices.Max(first)), "first-max-ms")
		b.ReportMetric(ms(percentile(every, 0.5)), "every-p50-ms")
		b.ReportMetric(ms(slices.Max(every)), "every-max-ms")
		b.ReportMetric(ms(percentile(moved, 0.5)), "coordinator-p50-ms")
	}
}

// timedProducer produces a record every 3 ms, round robin over a topic's
// partitions, each value the time it was produced (Unix ns), and notes
// when the first record produced after a mark was acknowledged. Not
// idempotent: the killed node may be the active controller, and
// InitProducerId fails until its successor is known.
type timedProducer struct {
	cl        *kgo.Client
	done      chan struct{}
	stopping  context.CancelFunc
	n, failed atomic.Int64
	mu        sync.Mutex
	markAt    time.Time
	ackAt     []time.Time // per partition: zero until a record produced after markAt is acknowledged
}

func startTimedProducer(ctx context.Context, b *testing.B, addrs []string, topic string, partitions int32) *timedProducer {
	// The producer refreshes its metadata at most every 100 ms (kgo's
	// default is 5 s): the records of a dead leader's partitions reach
	// the new leader as soon as it is known, so that the figures are the
	// consumer's.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	tp := &timedProducer{cl: cl, done: make(chan struct{}), stopping: cancel, ackAt: make([]time.Time, partitions)}
	go func() {
		defer close(tp.done)
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for i := int32(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			at := time.Now()
			tp.n.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Value: binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())), Partition: i % partitions},
				func(r *kgo.Record, err error) {
					if err != nil {
						tp.failed.Add(1)
						return
					}
					now := time.Now()
					tp.mu.Lock()
					if at.After(tp.markAt) && tp.ackAt[r.Partition].IsZero() {
						tp.ackAt[r.Partition] = now
					}
					tp.mu.Unlock()
				})
		}
	}()
	return tp
}

func (tp *timedProducer) mark(at time.Time) {
	tp.mu.Lock()
	tp.markAt = at
	clear(tp.ackAt)
	tp.mu.Unlock()
}

// acked waits for a record produced after the mark to be acknowledged on
// every partition and returns when each was.
func (tp *timedProducer) acked(b *testing.B, timeout time.Duration) []time.Time {
	deadline := time.Now().Add(timeout)
	for {
		tp.mu.Lock()
		at := slices.Clone(tp.ackAt)
		tp.mu.Unlock()
		if !slices.ContainsFunc(at, time.Time.IsZero) {
			return at
		}
		if time.Now().After(deadline) {
			b.Fatalf("no record produced after the kill acknowledged within %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// stop stops producing, waits for the records sent and says how many
// were produced and how many failed.
func (tp *timedProducer) stop() (int64, int64) {
	tp.stopping()
	<-tp.done
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp.cl.Flush(fctx)
	tp.cl.Close()
	return tp.n.Load(), tp.failed.Load()
}

// timedConsumer is a kgo group consumer at default settings that notes,
// per partition, when it first consumed a record produced after a mark.
type timedConsumer struct {
	cl   *kgo.Client
	done chan struct{}

	mu    sync.Mutex
	mark  time.Time
	after []time.Time // per partition: zero until a record produced after mark is consumed
}

func startTimedConsumer(ctx context.Context, b *testing.B, addrs []string, group, topic string, partitions int) *timedConsumer {
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic)}
	if age := os.Getenv("SLUICE_BENCH_METADATA_MIN_AGE"); age != "" {
		// Not the default: to see what kgo's 5 s minimum between metadata
		// refreshes costs after a leader moves.
		opts = append(opts, kgo.MetadataMinAge(envDuration(b, "SLUICE_BENCH_METADATA_MIN_AGE", 0)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	tc := &timedConsumer{cl: cl, done: make(chan struct{}), after: make([]time.Time, partitions)}
	go func() {
		defer close(tc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			now := time.Now()
			tc.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) != 8 || int(r.Partition) >= len(tc.after) {
					return
				}
				at := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				if at.After(tc.mark) && tc.after[r.Partition].IsZero() {
					tc.after[r.Partition] = now
				}
			})
			tc.mu.Unlock()
		}
	}()
	return tc
}

// waitAfter marks mark and waits until a record produced after it has
// been consumed on every partition, then returns when each was; the
// group not consuming again within timeout fails the benchmark.
func (tc *timedConsumer) waitAfter(b *testing.B, mark time.Time, timeout time.Duration, what string) []time.Time {
	tc.mu.Lock()
	tc.mark = mark
	clear(tc.after)
	tc.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		tc.mu.Lock()
		done := !slices.ContainsFunc(tc.after, time.Time.IsZero)
		out := slices.Clone(tc.after)
		tc.mu.Unlock()
		if done {
			return out
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: partitions consumed again at %v (zero: never) within %v", what, out, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func (tc *timedConsumer) close() {
	tc.cl.Close()
	<-tc.done
}

// waitCoordinatorMoved asks the survivors, every 10 ms, for group's
// coordinator and that coordinator for the group's offsets, until a node
// other than victim answers them, and returns when (an error after a
// minute without).
func waitCoordinatorMoved(ctx context.Context, c *testCluster, survivors []*clusterNode, group string, victim int32) (time.Time, error) {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		for _, nd := range survivors {
			rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			last = offsetFetchAnswered(rctx, c, nd, group, victim)
			cancel()
			if last == nil {
				return time.Now(), nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("the coordinator of %s did not move from node %d within a minute: %v", group, victim, last)
}

// waitLeadersMoved waits until the Metadata of every survivor shows every
// partition of topic led by a survivor, and returns when (an error after
// a minute without).
func waitLeadersMoved(ctx context.Context, survivors []*clusterNode, topic string, partitions int, victim int32) (time.Time, error) {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		last = nil
		for _, nd := range survivors {
			parts, err := partitionsOn(ctx, nd, topic)
			if err == nil && len(parts) != partitions {
				err = fmt.Errorf("node %d lists %d partitions", nd.id, len(parts))
			}
			for i := 0; err == nil && i < len(parts); i++ {
				if parts[i].leader <= 0 || parts[i].leader == victim {
					err = fmt.Errorf("node %d: partition %d led by %d", nd.id, i, parts[i].leader)
				}
			}
			if err != nil {
				last = err
				break
			}
		}
		if last == nil {
			return time.Now(), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("%s: partitions not led by survivors within a minute: %v", topic, last)
}

// offsetFetchAnswered asks nd for group's coordinator and, if that is not
// victim, asks it for the group's offsets; nil if it answered them.
func offsetFetchAnswered(ctx context.Context, c *testCluster, nd *clusterNode, group string, victim int32) error {
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorKeys = []string{group}
	resp, err := rawRequest(ctx, nd.addr, find)
	if err != nil {
		return err
	}
	fr := resp.(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) != 1 {
		return fmt.Errorf("FindCoordinator answered %d coordinators", len(fr.Coordinators))
	}
	co := fr.Coordinators[0]
	if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
		return err
	}
	if co.NodeID == victim || co.NodeID < 1 || int(co.NodeID) > len(c.nodes) {
		return fmt.Errorf("node %d names node %d", nd.id, co.NodeID)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(8)
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	fetch.Groups = append(fetch.Groups, rg)
	resp, err = rawRequest(ctx, c.nodes[co.NodeID-1].addr, fetch)
	if err != nil {
		return err
	}
	or := resp.(*kmsg.OffsetFetchResponse)
	if len(or.Groups) != 1 {
		return fmt.Errorf("OffsetFetch answered %d groups", len(or.Groups))
	}
	return kerr.ErrorForCode(or.Groups[0].ErrorCode)
}

// TestInitialDelayWindows: the delay the classic rebalance figure is read
// against is Kafka's InitialDelayedJoin: one delay for a member alone,
// another for each delay during which a member joined, within the
// rebalance timeout.
func TestInitialDelayWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		joins   []time.Time
		timeout time.Duration
		want    int64
	}{
		{"alone", at(0), time.Minute, 1},
		{"all at once", at(0, 0, 0), time.Minute, 2},
		{"within the first delay", at(0, 1, 2999, 3000), time.Minute, 2},
		{"one in the second delay", at(0, 10, 3001), time.Minute, 3},
		{"a gap of a whole delay ends it", at(0, 10, 6001), time.Minute, 2},
		{"the rebalance timeout bounds it", at(0, 10, 3001, 6001, 9001), 7 * time.Second, 3},
	} {
		if got := initialDelayWindows(tc.joins, 3*time.Second, tc.timeout); got != tc.want {
			t.Errorf("%s: %d delays, want %d", tc.name, got, tc.want)
		}
	}
}

// TestCommitErrReportsARefusal: a refused commit is an error, which fails
// the commit benchmark.
func TestCommitErrReportsARefusal(t *testing.T) {
	resp := simpleCommit("g", "t", 0, 1).ResponseKind().(*kmsg.OffsetCommitResponse)
	rt := kmsg.NewOffsetCommitResponseTopic()
	rp := kmsg.NewOffsetCommitResponseTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	if err := commitErr(resp); err != nil {
		t.Fatalf("an accepted commit: %v", err)
	}
	resp.Topics[0].Partitions[0].ErrorCode = kerr.UnknownMemberID.Code
	if err := commitErr(resp); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("a refused commit: %v", err)
	}
	resp.Topics = nil
	if err := commitErr(resp); err == nil {
		t.Fatal("an answer without the partition passed")
	}
}

// TestSettledNeedsEveryPartitionOnce: the KIP-848 rebalance ends only when
// every member holds its share and no partition is held twice.
func TestSettledNeedsEveryPartitionOnce(t *testing.T) {
	now := time.Now()
	s := &consumerGroupState{owned: [][]int32{{0}, {1}, {2}}, changed: []time.Time{now, now.Add(time.Second), now}}
	if at, ok := s.settled(3); !ok || !at.Equal(now.Add(time.Second)) {
		t.Fatalf("settled %v at %v, want true at the last change", ok, at)
	}
	for _, owned := range [][][]int32{{{0}, {0}, {2}}, {{0, 1}, {}, {2}}, {{0}, {1}, {}}} {
		s.owned = owned
		if _, ok := s.settled(3); ok {
			t.Errorf("%v settled", owned)
		}
	}
}
