package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The real-process acceptance tests of replication: three `sluice serve`
// nodes (combined broker and controller), topics of replication factor 3,
// and franz-go as the client, as a user would run them.

// replicationConfig shortens the broker session (Kafka's default is 9 s)
// so that a killed leader is fenced, and its partitions fail over, within
// a few seconds.
var replicationConfig = []string{
	"broker.session.timeout.ms=3000",
	"broker.heartbeat.interval.ms=500",
}

// partitionOf asks the cluster, through kadm, for one partition's leader,
// replicas and ISR.
func partitionOf(ctx context.Context, adm *kadm.Client, topic string, partition int32) (kadm.PartitionDetail, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return kadm.PartitionDetail{}, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return kadm.PartitionDetail{}, fmt.Errorf("metadata lists no topic %s", topic)
	}
	if td.Err != nil {
		return kadm.PartitionDetail{}, td.Err
	}
	pd, ok := td.Partitions[partition]
	if !ok {
		return kadm.PartitionDetail{}, fmt.Errorf("metadata lists no partition %s-%d", topic, partition)
	}
	return pd, pd.Err
}

// waitFullISR polls kadm's Metadata until every partition of topic has a
// leader and every replica in its ISR, and returns the last answer. It
// fails the test after timeout, saying what the ISR was.
func waitFullISR(ctx context.Context, tb testing.TB, adm *kadm.Client, topic string, timeout time.Duration) kadm.TopicDetail {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td := md.Topics[topic]
			full := td.Err == nil && len(td.Partitions) > 0
			var states []string
			for _, pd := range td.Partitions.Sorted() {
				states = append(states, fmt.Sprintf("%d: leader %d replicas %v isr %v err %v",
					pd.Partition, pd.Leader, pd.Replicas, pd.ISR, pd.Err))
				full = full && pd.Err == nil && pd.Leader >= 0 && sameMembers(pd.ISR, pd.Replicas)
			}
			if full {
				return td
			}
			last = strings.Join(states, "; ")
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			tb.Fatalf("%s: the ISR did not hold every replica within %v: %s", topic, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sameMembers(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// ack is the producer's outcome for one record of the numbered stream.
type ack struct {
	seq       int // the record's number, its value
	partition int32
	offset    int64
	err       error
	sent, at  time.Time // when it was produced, when its outcome came
}

// numberedStream produces the records 0, 1, 2, ... to the partitions of a
// topic in turn (record n to partition n mod partitions), asynchronously,
// a window of them in flight, and keeps every outcome.
type numberedStream struct {
	mu   sync.Mutex
	acks []ack // in the order the producer reported them
	sent int

	stop chan struct{}
	done chan struct{}
}

func startNumberedStream(ctx context.Context, pr *kgo.Client, topic string, partitions int32) *numberedStream {
	s := &numberedStream{stop: make(chan struct{}), done: make(chan struct{})}
	const window = 32
	inflight := make(chan struct{}, window)
	go func() {
		defer close(s.done)
		for seq := 0; ; seq++ {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case inflight <- struct{}{}:
			}
			r := &kgo.Record{Topic: topic, Partition: int32(seq) % partitions, Value: []byte(strconv.Itoa(seq))}
			s.mu.Lock()
			s.sent++
			s.mu.Unlock()
			sent := time.Now()
			pr.Produce(ctx, r, func(r *kgo.Record, err error) {
				<-inflight
				s.mu.Lock()
				s.acks = append(s.acks, ack{seq: seq, partition: r.Partition, offset: r.Offset, err: err, sent: sent, at: time.Now()})
				s.mu.Unlock()
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return s
}

// acked counts the records acknowledged (without an error) so far.
func (s *numberedStream) acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.acks {
		if a.err == nil {
			n++
		}
	}
	return n
}

// waitAcked waits until n more records than before are acknowledged.
func (s *numberedStream) waitAcked(ctx context.Context, tb testing.TB, more int, what string) {
	tb.Helper()
	want := s.acked() + more
	for s.acked() < want {
		if ctx.Err() != nil {
			s.mu.Lock()
			var errs []string
			for _, a := range s.acks[max(0, len(s.acks)-5):] {
				errs = append(errs, fmt.Sprintf("%d: %v", a.seq, a.err))
			}
			s.mu.Unlock()
			tb.Fatalf("%s: %d of %d records acknowledged (%v); the last outcomes: %v", what, s.acked(), want, ctx.Err(), errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// end stops producing, waits for the outcome of every record sent, and
// returns the outcomes.
func (s *numberedStream) end(ctx context.Context, tb testing.TB, pr *kgo.Client) []ack {
	tb.Helper()
	close(s.stop)
	<-s.done
	require.NoError(tb, pr.Flush(ctx), "flushing the producer")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(tb, s.acks, s.sent, "records sent and outcomes reported")
	return slices.Clone(s.acks)
}

// offsetLog is what a consumer read of one partition: the value at each
// offset. A second read of an offset (a consumer may read again after a
// failover) must find the same value.
type offsetLog struct {
	mu        sync.Mutex
	values    map[int64]string
	conflicts []string
}

func (l *offsetLog) add(offset int64, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.values[offset]; ok && old != value {
		l.conflicts = append(l.conflicts, fmt.Sprintf("offset %d read as %q, then as %q", offset, old, value))
	}
	l.values[offset] = value
}

func (l *offsetLog) has(end int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for o := range end {
		if _, ok := l.values[o]; !ok {
			return false
		}
	}
	return true
}

// partitionLogs are a consumer's reads of a topic's partitions.
type partitionLogs map[int32]*offsetLog

func newPartitionLogs(partitions int32) partitionLogs {
	logs := partitionLogs{}
	for p := range partitions {
		logs[p] = &offsetLog{values: map[int64]string{}}
	}
	return logs
}

// has reports whether every partition was read up to its end.
func (logs partitionLogs) has(ends map[int32]int64) bool {
	for p, end := range ends {
		if !logs[p].has(end) {
			return false
		}
	}
	return true
}

// consumeInto reads topic's partitions (those of logs) from their start
// into logs until stop is closed, on a goroutine whose end the returned
// channel tells; fetch errors are logged (the client retries them).
func consumeInto(ctx context.Context, tb testing.TB, addrs []string, topic string, logs partitionLogs, stop <-chan struct{}) <-chan struct{} {
	co, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(tb, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer co.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
			fs := co.PollFetches(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				if err != context.DeadlineExceeded {
					tb.Logf("consumer: fetch %s-%d: %v", t, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if l := logs[r.Partition]; l != nil {
					l.add(r.Offset, string(r.Value))
				} else {
					tb.Errorf("consumer: a record of %s-%d, a partition the topic does not have", r.Topic, r.Partition)
				}
			})
		}
	}()
	return done
}

// readAll reads topic's partitions from their start with a fresh consumer
// until it has every offset below each one's end.
func readAll(ctx context.Context, tb testing.TB, addrs []string, topic string, ends map[int32]int64) partitionLogs {
	tb.Helper()
	logs := newPartitionLogs(int32(len(ends)))
	stop := make(chan struct{})
	done := consumeInto(ctx, tb, addrs, topic, logs, stop)
	for !logs.has(ends) {
		if ctx.Err() != nil {
			for p, end := range ends {
				l := logs[p]
				l.mu.Lock()
				tb.Logf("partition %d: read %d of the %d offsets below the last acknowledged record's end", p, len(l.values), end)
				l.mu.Unlock()
			}
			tb.Fatalf("the partitions were not read up to their ends: %v", ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	<-done
	return logs
}

// checkStream checks a read of the partition against the producer's
// outcomes: every acknowledged record is at the offset its acknowledgment
// named, exactly once, and the stream's numbers rise with the offset (no
// record is written twice, none out of order). Records without an
// acknowledgment may be there or not.
func checkStream(tb testing.TB, acks []ack, l *offsetLog) {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(tb, l.conflicts, "offsets read with two values: records read, then lost")
	offsets := make([]int64, 0, len(l.values))
	for o := range l.values {
		offsets = append(offsets, o)
	}
	slices.Sort(offsets)
	at := map[int]int64{} // the offsets each number was read at
	prev, prevOffset := -1, int64(-1)
	for _, o := range offsets {
		seq, err := strconv.Atoi(l.values[o])
		require.NoError(tb, err, "offset %d holds %q, not a number of the stream", o, l.values[o])
		if first, dup := at[seq]; dup {
			tb.Fatalf("record %d is in the log twice, at offsets %d and %d: the idempotent producer's retry was appended again", seq, first, o)
		}
		at[seq] = o
		if seq < prev {
			tb.Fatalf("record %d at offset %d follows record %d at offset %d: out of order", seq, o, prev, prevOffset)
		}
		prev, prevOffset = seq, o
	}
	for _, a := range acks {
		if a.err != nil {
			continue
		}
		o, ok := at[a.seq]
		require.True(tb, ok, "record %d was acknowledged at offset %d and is not in the log (offset %d holds %q)",
			a.seq, a.offset, a.offset, l.values[a.offset])
		require.Equal(tb, a.offset, o, "record %d was acknowledged at offset %d but read at %d", a.seq, a.offset, o)
	}
}

// TestReplicatedPartitionSurvivesItsLeadersKill: three real processes, a
// topic of replication factor 3 and min.insync.replicas=2, franz-go's
// idempotent acks=all producer writing a numbered stream over its three
// partitions while a consumer reads them. Mid-stream the leader of
// partition 0 is kill -9'd (a follower of the other two, and the leader of
// one of them, since leaders are spread); the producer keeps going through the failover (the client
// retries), the killed node restarts with its configuration and data and
// rejoins the ISR, and the stream goes on; twice, the second time killing
// the leader the first failover elected. Every acknowledged record is read
// back exactly once, at its acknowledged offset and in order, by the
// consumer that read through the failovers and by a fresh one, records
// produced after the restarts too, and every replica's segment files hold
// the same batches below the last acknowledged offset.
func TestReplicatedPartitionSurvivesItsLeadersKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const topic, partitions = "replicated", int32(3)
	c := newCluster(t, 3, replicationConfig...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// kgo answers kadm's Metadata from a cache up to MetadataMinAge old
	// (5 s by default), which the ISR polls would otherwise wait out.
	adm := c.adminClient(kgo.MetadataMinAge(50 * time.Millisecond))
	minISR := "2"
	created, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	waitFullISR(ctx, t, adm, topic, 20*time.Second)

	pr, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	require.NoError(t, err)
	defer pr.Close()
	live := newPartitionLogs(partitions)
	stopLive := make(chan struct{})
	liveDone := consumeInto(ctx, t, c.addrs(), topic, live, stopLive)
	stream := startNumberedStream(ctx, pr, topic, partitions)
	stream.waitAcked(ctx, t, 200, "before the kill")
	// Two rounds, each arming one moment (FoundationDB's habit: make the
	// rare moment common). The first pauses both followers (SIGSTOP, well
	// inside every timeout) before it kills the leader: a record it
	// acknowledged meanwhile would be on its disk alone, so acks=all may
	// acknowledge none but those its followers had before. The second kills the leader the first elected,
	// so that the node restarted in the first is in the ISR that
	// acknowledges after it, and pauses only the follower that will not
	// succeed it: its heir then holds records the producer has no answer
	// for and retries, which the heir's producer state must recognize.
	// Killed at an unarmed moment, a broker acknowledging before its
	// followers had the records was caught 1 time of 2, and one whose
	// followers kept no producer state 2 of 6.
	var kills, rejoins []time.Time
	for round := range 2 {
		killedAt, rejoinedAt := killLeaderAndRestart(ctx, t, c, adm, stream, topic, round == 0)
		kills, rejoins = append(kills, killedAt), append(rejoins, rejoinedAt)
		t.Logf("round %d done", round+1)
	}
	acks := stream.end(ctx, t, pr)

	// How the producer saw it: after each kill, the first acknowledgment
	// in each partition of a record produced after the kill (partition 0's
	// is its failover; the others', which the victim followed, wait for
	// the victim to leave their ISR); the records that failed; the ones
	// acknowledged after the last restart.
	var failed []string
	ends, afterRejoin := map[int32]int64{}, 0
	for p := range partitions {
		ends[p] = 0
	}
	firstAfterKill := make([][]time.Time, len(kills)) // [kill][partition]
	for i := range kills {
		firstAfterKill[i] = make([]time.Time, partitions)
	}
	for _, a := range acks {
		if a.err != nil {
			failed = append(failed, fmt.Sprintf("%d: %v", a.seq, a.err))
			continue
		}
		ends[a.partition] = max(ends[a.partition], a.offset+1)
		for i, k := range kills {
			first := &firstAfterKill[i][a.partition]
			if a.sent.After(k) && (first.IsZero() || a.at.Before(*first)) {
				*first = a.at
			}
		}
		if a.at.After(rejoins[len(rejoins)-1]) {
			afterRejoin++
		}
	}
	var failovers []string
	for i, k := range kills {
		var byPartition []string
		for p, first := range firstAfterKill[i] {
			byPartition = append(byPartition, fmt.Sprintf("%d: %v", p, first.Sub(k).Round(time.Millisecond)))
		}
		failovers = append(failovers, fmt.Sprintf("kill %d: %s", i+1, strings.Join(byPartition, ", ")))
	}
	t.Logf("%d records sent, %d acknowledged, %d failed %v; the first acknowledgment of a record produced after each kill, by partition: %s",
		len(acks), len(acks)-len(failed), len(failed), failed[:min(len(failed), 5)], strings.Join(failovers, "; "))
	require.Positive(t, afterRejoin, "no record acknowledged after the killed node rejoined")

	// The consumer that read through the failovers, once it has caught up,
	// and a fresh one reading everything once the killed node is back.
	for caughtUp := time.Now().Add(15 * time.Second); !live.has(ends) && time.Now().Before(caughtUp); {
		time.Sleep(20 * time.Millisecond)
	}
	close(stopLive)
	<-liveDone
	fresh := readAll(ctx, t, c.addrs(), topic, ends)
	for p := range partitions {
		var packs []ack
		for _, a := range acks {
			if a.partition == p {
				packs = append(packs, a)
			}
		}
		t.Run(fmt.Sprintf("partition %d", p), func(t *testing.T) {
			require.Positive(t, ends[p], "nothing acknowledged")
			t.Run("live consumer", func(t *testing.T) {
				require.True(t, live[p].has(ends[p]), "the live consumer did not read every offset below %d", ends[p])
				checkStream(t, packs, live[p])
			})
			checkStream(t, packs, fresh[p])
			// Every acknowledged record is on every replica's disk (the
			// killed nodes' included, since the ISR they rejoined
			// acknowledged the last ones): the three logs below the end are
			// the same batches, byte for byte, as followers store their
			// leader's batches verbatim.
			var logs [][]storedBatch
			for _, nd := range c.nodes {
				logs = append(logs, storedBatches(t, filepath.Join(nd.dir, fmt.Sprintf("%s-%d", topic, p)), ends[p]))
			}
			for i := range logs[1:] {
				requireSameBatches(t, c.nodes[0].id, logs[0], c.nodes[i+1].id, logs[i+1], ends[p])
			}
		})
	}
	for _, nd := range c.nodes {
		require.True(t, nd.running(), "node %d exited: %v", nd.id, nd.err)
	}
}

// storedBatch is one record batch of a partition's segment file.
type storedBatch struct {
	segment    string
	baseOffset int64
	lastOffset int64
	raw        []byte
}

// storedBatches reads the batches of a partition directory's segments
// (Kafka's layout: <base offset>.log files of batches back to back) that
// end below end. Segments are read while the node runs: every batch below
// the high watermark is synced, and nothing writes them again.
func storedBatches(tb testing.TB, dir string, end int64) []storedBatch {
	tb.Helper()
	segments, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(tb, err)
	require.NotEmpty(tb, segments, "no segment in %s", dir)
	sort.Strings(segments) // names are zero-padded base offsets
	var out []storedBatch
	for _, seg := range segments {
		b, err := os.ReadFile(seg)
		require.NoError(tb, err)
		for pos := 0; len(b)-pos >= 61; { // a batch header is 61 bytes
			length := int(binary.BigEndian.Uint32(b[pos+8:]))
			if length == 0 || len(b)-pos < 12+length {
				break // preallocated or still being written
			}
			raw := b[pos : pos+12+length]
			base := int64(binary.BigEndian.Uint64(raw))
			last := base + int64(binary.BigEndian.Uint32(raw[23:]))
			if last >= end {
				return out
			}
			out = append(out, storedBatch{filepath.Base(seg), base, last, raw})
			pos += len(raw)
		}
	}
	return out
}

// requireSameBatches checks that two replicas hold the same batches below
// end, and that they cover every offset from the first to end.
func requireSameBatches(tb testing.TB, idA int32, a []storedBatch, idB int32, b []storedBatch, end int64) {
	tb.Helper()
	for i := range max(len(a), len(b)) {
		require.Less(tb, i, len(a), "node %d's log ends at batch %d (offset %d); node %d's goes on", idA, i, b[min(i, len(b)-1)].baseOffset, idB)
		require.Less(tb, i, len(b), "node %d's log ends at batch %d (offset %d); node %d's goes on", idB, i, a[min(i, len(a)-1)].baseOffset, idA)
		x, y := a[i], b[i]
		if x.baseOffset != y.baseOffset || x.lastOffset != y.lastOffset || !bytes.Equal(x.raw, y.raw) {
			tb.Fatalf("batch %d differs: node %d's %s holds offsets %d-%d (leader epoch %d, %d bytes), node %d's %s holds %d-%d (leader epoch %d, %d bytes)",
				i, idA, x.segment, x.baseOffset, x.lastOffset, int32(binary.BigEndian.Uint32(x.raw[12:])), len(x.raw),
				idB, y.segment, y.baseOffset, y.lastOffset, int32(binary.BigEndian.Uint32(y.raw[12:])), len(y.raw))
		}
	}
	require.NotEmpty(tb, a)
	require.Equal(tb, end-1, a[len(a)-1].lastOffset, "node %d's batches end below the last acknowledged offset", idA)
	for i := 1; i < len(a); i++ {
		require.Equal(tb, a[i-1].lastOffset+1, a[i].baseOffset, "node %d: a gap in the offsets before batch %d", idA, i)
	}
}

// TestReplicatedTopicShowsReplicasAndISR: a topic of replication factor 3
// on three real processes lists every node as a replica and in the ISR of
// each partition, to kadm's Metadata and to kcat -L, with the partitions'
// leaders spread over the three.
func TestReplicatedTopicShowsReplicasAndISR(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := c.adminClient(kgo.MetadataMinAge(50 * time.Millisecond))
	createReplicatedTopic(ctx, t, adm, "shown", 3)
	td := waitFullISR(ctx, t, adm, "shown", 20*time.Second)
	leaders := map[int32]bool{}
	for _, pd := range td.Partitions.Sorted() {
		require.ElementsMatch(t, []int32{1, 2, 3}, pd.Replicas, "partition %d's replicas", pd.Partition)
		require.Contains(t, pd.Replicas, pd.Leader, "partition %d's leader", pd.Partition)
		leaders[pd.Leader] = true
	}
	require.Len(t, leaders, 3, "the three partitions' leaders: %v", td.Partitions.Sorted())

	kcat, err := exec.LookPath("kcat")
	if err != nil {
		// As kcatPath: CI installs kcat, so there its absence fails.
		require.Empty(t, os.Getenv("CI"), "kcat is not installed; .ci/run must install it")
		t.Log("kcat is not installed: kadm's view alone is checked")
		return
	}
	meta := runKcat(t, kcat, "", "-b", c.nodes[0].addr, "-L", "-t", "shown")
	require.Contains(t, meta, `topic "shown" with 3 partitions`)
	for _, pd := range td.Partitions.Sorted() {
		// kcat prints the lists in the broker's order.
		line := fmt.Sprintf("partition %d, leader %d, replicas: %s, isrs: %s", pd.Partition, pd.Leader, joinIDs(pd.Replicas), joinIDs(pd.ISR))
		require.Contains(t, meta, line, "kcat -L:\n%s", meta)
	}
}

func nodeIDs(nodes []*clusterNode) []int32 {
	var ids []int32
	for _, nd := range nodes {
		ids = append(ids, nd.id)
	}
	return ids
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// killLeaderAndRestart kill -9s the leader of topic's partition 0 after
// pausing for a moment its followers (pauseHeir) or the one of them that
// will not succeed it, waits for the stream to go on through the failover,
// restarts the killed node with its configuration and data, waits for it
// to rejoin the ISR and for the stream to go on again. It returns when it
// killed the leader and when the ISR was whole again.
func killLeaderAndRestart(ctx context.Context, t *testing.T, c *testCluster, adm *kadm.Client, stream *numberedStream, topic string, pauseHeir bool) (killedAt, rejoinedAt time.Time) {
	t.Helper()
	before, err := partitionOf(ctx, adm, topic, 0)
	require.NoError(t, err)
	require.True(t, sameMembers(before.ISR, before.Replicas), "the ISR %v is not whole", before.ISR)
	require.True(t, before.Leader >= 1 && int(before.Leader) <= len(c.nodes), "%s-0 has leader %d", topic, before.Leader)
	victim := c.nodes[before.Leader-1]
	// When the victim is also the active controller, the failover waits
	// for a new one, which gives every broker a full session first.
	controller := c.activeController(ctx)
	// The controller elects the first replica, in replica order, of the
	// ISR left (raftmeta/controller_elect.go).
	heir := int32(-1)
	var paused []*clusterNode
	for _, id := range before.Replicas {
		if id == victim.id {
			continue
		}
		if heir < 0 {
			heir = id
			if !pauseHeir {
				continue
			}
		}
		paused = append(paused, c.nodes[id-1])
	}
	acked := stream.acked()
	for _, nd := range paused {
		require.NoError(t, nd.cmd.Process.Signal(syscall.SIGSTOP))
	}
	time.Sleep(100 * time.Millisecond)
	c.kill(victim)
	killedAt = time.Now()
	ackedPaused := stream.acked() - acked
	for _, nd := range paused {
		require.NoError(t, nd.cmd.Process.Signal(syscall.SIGCONT))
	}
	t.Logf("killed node %d at %s, the leader of %s-0 (epoch %d, replicas %v, isr %v; the active controller is node %d), after %d acknowledged records, "+
		"%d of them answered during the pause of node(s) %v",
		victim.id, killedAt.UTC().Format("15:04:05.000"), topic, before.LeaderEpoch, before.Replicas, before.ISR, controller.id,
		stream.acked(), ackedPaused, nodeIDs(paused))
	stream.waitAcked(ctx, t, 200, "after the kill")
	after, err := partitionOf(ctx, adm, topic, 0)
	require.NoError(t, err)
	require.NotEqual(t, victim.id, after.Leader, "the killed node still leads")
	if after.Leader != heir {
		t.Logf("node %d leads, not node %d: the controller's choice is not the one this test arms its moment for", after.Leader, heir)
	}
	t.Logf("node %d leads %s-0 (epoch %d, isr %v)", after.Leader, topic, after.LeaderEpoch, after.ISR)

	c.start(victim)
	c.waitListening(victim, 30*time.Second)
	restartedAt := time.Now()
	td := waitFullISR(ctx, t, adm, topic, 30*time.Second)
	rejoinedAt = time.Now()
	t.Logf("node %d back in the ISR %v %v after it listened", victim.id, td.Partitions[0].ISR, rejoinedAt.Sub(restartedAt).Round(time.Millisecond))
	stream.waitAcked(ctx, t, 200, "after the restart")
	return killedAt, rejoinedAt
}

// failureRecorder is a testing.TB whose failures are recorded, not
// reported: for checking that a checker fails.
type failureRecorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *failureRecorder) Helper() {}
func (r *failureRecorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *failureRecorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}
func (r *failureRecorder) FailNow() { r.failed = true; runtime.Goexit() }

// checkFails runs check against a failureRecorder on a goroutine of its
// own (FailNow ends it) and reports whether it failed, and how.
func checkFails(t *testing.T, check func(tb testing.TB)) (bool, string) {
	r := &failureRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failed, r.msg
}

// TestCheckStreamCatchesLossDuplicatesAndDisorder: the acceptance test's
// checker passes a log that holds every acknowledged record once, in
// order, with unacknowledged ones among them or missing, and fails each
// broken variant.
func TestCheckStreamCatchesLossDuplicatesAndDisorder(t *testing.T) {
	acks := []ack{{seq: 0, offset: 0}, {seq: 1, err: errors.New("timed out")}, {seq: 2, offset: 2}, {seq: 3, offset: 3}}
	read := func(values ...string) *offsetLog {
		l := &offsetLog{values: map[int64]string{}}
		for o, v := range values {
			if v != "" {
				l.add(int64(o), v)
			}
		}
		return l
	}
	good := map[string]*offsetLog{
		"the unacknowledged record written": read("0", "1", "2", "3"),
		"and more after the last ack":       read("0", "1", "2", "3", "4"),
	}
	for name, l := range good {
		failed, msg := checkFails(t, func(tb testing.TB) { checkStream(tb, acks, l) })
		require.False(t, failed, "%s: %s", name, msg)
	}
	conflict := read("0", "1", "2", "3")
	conflict.add(2, "7")
	bad := map[string]*offsetLog{
		"an acknowledged record lost":          read("0", "1", "", "3"),
		"an acknowledged record moved":         read("0", "2", "3", "4"),
		"a record written twice":               read("0", "1", "2", "3", "3"),
		"an unacknowledged record twice":       read("0", "1", "1", "2", "3"),
		"records out of order":                 read("0", "2", "1", "3"),
		"an offset read with two values":       conflict,
		"a value that is not the stream's one": read("0", "x", "2", "3"),
	}
	for name, l := range bad {
		failed, _ := checkFails(t, func(tb testing.TB) { checkStream(tb, acks, l) })
		require.True(t, failed, "%s: the check passed", name)
	}
}
