package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests build the real binary and drive it with franz-go, as a user
// would. They share one build.

var sluiceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	// SLUICE_BUILD_FLAGS=-race runs the real-process tests and benchmarks
	// against a broker built with the race detector.
	args := append([]string{"build", "-o", sluiceBin}, strings.Fields(os.Getenv("SLUICE_BUILD_FLAGS"))...)
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	// A parallel sweep's workers are this program: the built one, not the
	// test binary.
	sweepExecutable = func() (string, error) { return sluiceBin, nil }
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// broker is a running `sluice serve` process.
type broker struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	dataDir string
	stderr  *bytes.Buffer
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func startBroker(t *testing.T, addr, dataDir string, extra ...string) *broker {
	t.Helper()
	args := append([]string{"serve", "--listeners", "PLAINTEXT://" + addr, "--log-dir", dataDir}, extra...)
	cmd := exec.Command(sluiceBin, args...)
	b := &broker{t: t, cmd: cmd, addr: addr, dataDir: dataDir, stderr: &bytes.Buffer{}}
	cmd.Stderr = b.stderr
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("broker did not listen on %s: %v\nstderr:\n%s", addr, err, b.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return b
}

// stop sends SIGTERM and waits for a clean exit.
func (b *broker) stop() {
	b.t.Helper()
	require.NoError(b.t, b.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(b.t, err, "stderr:\n%s", b.stderr)
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		b.t.Fatalf("broker did not exit after SIGTERM\nstderr:\n%s", b.stderr)
	}
}

func TestServeWithFranzGo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	addr, dataDir := freePort(t), t.TempDir()
	b := startBroker(t, addr, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	adm := kadm.NewClient(admin)
	created, err := adm.CreateTopic(ctx, 3, 1, nil, "orders")
	if err == nil {
		require.NoError(t, created.Err)
	} else {
		// CreateTopics may not be served yet by this build: fall back to
		// auto-creation through Metadata.
		t.Logf("CreateTopics: %v; relying on auto-creation", err)
	}
	admin.Close()

	const n = 10000
	start := time.Now().Add(-time.Minute)
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("orders"), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	produceErrs := make(chan error, n)
	for i := 0; i < n; i++ {
		r := &kgo.Record{
			Key:       []byte(fmt.Sprintf("key-%d", i%17)),
			Value:     []byte(fmt.Sprintf("value-%05d", i)),
			Headers:   []kgo.RecordHeader{{Key: "seq", Value: []byte(fmt.Sprint(i))}},
			Timestamp: start.Add(time.Duration(i) * time.Millisecond),
		}
		producer.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				produceErrs <- err
			}
		})
	}
	require.NoError(t, producer.Flush(ctx))
	producer.Close()
	close(produceErrs)
	for err := range produceErrs {
		t.Fatalf("produce: %v", err)
	}

	readAll := func() map[int32][]*kgo.Record {
		consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer consumer.Close()
		byPartition := map[int32][]*kgo.Record{}
		got := 0
		for got < n {
			fetches := consumer.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumed %d of %d", got, n)
			fetches.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			fetches.EachRecord(func(r *kgo.Record) {
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
				got++
			})
		}
		return byPartition
	}
	check := func(byPartition map[int32][]*kgo.Record) {
		total := 0
		for p, recs := range byPartition {
			last := -1
			for i, r := range recs {
				require.Equal(t, int64(i), r.Offset, "partition %d", p)
				seq := 0
				fmt.Sscan(string(r.Headers[0].Value), &seq)
				require.Greater(t, seq, last, "partition %d out of order", p)
				require.Equal(t, fmt.Sprintf("value-%05d", seq), string(r.Value))
				require.Equal(t, fmt.Sprintf("key-%d", seq%17), string(r.Key))
				last = seq
			}
			total += len(recs)
		}
		require.Equal(t, n, total)
	}
	first := readAll()
	check(first)

	// ListOffsets by timestamp: the record produced at start+5000ms.
	admin, err = kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	adm = kadm.NewClient(admin)
	target := start.Add(5000 * time.Millisecond).UnixMilli()
	listed, err := adm.ListOffsetsAfterMilli(ctx, target, "orders")
	require.NoError(t, err)
	for p, recs := range first {
		lo, ok := listed.Lookup("orders", p)
		require.True(t, ok)
		require.NoError(t, lo.Err)
		// The first record at or after the target timestamp.
		want := int64(len(recs))
		for i, r := range recs {
			if r.Timestamp.UnixMilli() >= target {
				want = int64(i)
				break
			}
		}
		require.Equal(t, want, lo.Offset, "partition %d", p)
	}
	admin.Close()

	b.stop()
	if strings.Contains(b.stderr.String(), "level=ERROR") {
		t.Fatalf("broker logged errors:\n%s", b.stderr)
	}
	startBroker(t, addr, dataDir)
	check(readAll())
}

// TestServeRefusesADataDirectoryInUse: a second sluice serve on a data
// directory in use exits at once with an error naming the directory and
// the holder's pid, and the first goes on serving with its metadata
// intact; once the first is killed (kill -9, no clean shutdown), its lock
// dies with it and a new broker starts there and serves what it stored.
func TestServeRefusesADataDirectoryInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	addr, dataDir := freePort(t), t.TempDir()
	first := startBroker(t, addr, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce := func(value string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DefaultProduceTopic("locked"), kgo.AllowAutoTopicCreation())
		require.NoError(t, err)
		defer cl.Close()
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr())
	}
	consume := func(n int) []string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("locked"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cl.Close()
		var got []string
		for len(got) < n {
			fetches := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumed %q of %d", got, n)
			fetches.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got
	}
	produce("before")

	second := exec.Command(sluiceBin, "serve", "--listeners", "PLAINTEXT://"+freePort(t), "--log-dir", dataDir)
	var stderr bytes.Buffer
	second.Stderr = &stderr
	require.NoError(t, second.Start())
	exited := make(chan error, 1)
	go func() { exited <- second.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "the second broker exited cleanly; stderr:\n%s", &stderr)
		require.NotZero(t, exit.ExitCode())
	case <-time.After(20 * time.Second):
		second.Process.Kill()
		t.Fatalf("the second broker on %s did not exit; stderr:\n%s", dataDir, &stderr)
	}
	msg := stderr.String()
	require.Contains(t, msg, "log.dirs "+dataDir+" is in use by another broker", "stderr:\n%s", msg)
	require.Contains(t, msg, fmt.Sprintf("already locked by pid %d ", first.cmd.Process.Pid), "stderr:\n%s", msg)

	produce("during")
	require.Equal(t, []string{"before", "during"}, consume(2))

	require.NoError(t, first.cmd.Process.Kill())
	first.cmd.Wait()
	third := startBroker(t, addr, dataDir)
	produce("after")
	require.Equal(t, []string{"before", "during", "after"}, consume(3))
	third.stop()
}

// TestServeClosesIdleAndStalledConnections checks connections.max.idle.ms
// and sluice.request.read.timeout.ms on real sockets and the real clock:
// a connection stopped inside a request frame is closed after the read
// timeout, a quiet one after the idle timeout, and neither sooner.
func TestServeClosesIdleAndStalledConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const idle, read = 3 * time.Second, 500 * time.Millisecond
	addr := freePort(t)
	b := startBroker(t, addr, t.TempDir(),
		"--override", fmt.Sprintf("connections.max.idle.ms=%d", idle.Milliseconds()),
		"--override", fmt.Sprintf("sluice.request.read.timeout.ms=%d", read.Milliseconds()))
	frame := wire.AppendRequest(nil, 1, "raw", kmsg.NewPtrApiVersionsRequest())

	// closedAfter writes p, reads whatever comes back until the broker
	// closes the connection, and returns how long that took and what was
	// read.
	closedAfter := func(p []byte) (time.Duration, []byte) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetReadDeadline(time.Now().Add(idle+10*time.Second)))
		start := time.Now()
		_, err = c.Write(p)
		require.NoError(t, err)
		got, err := io.ReadAll(c)
		require.NoError(t, err, "the broker did not close the connection")
		return time.Since(start), got
	}

	stalled, got := closedAfter(frame[:7])
	require.Empty(t, got)
	require.GreaterOrEqual(t, stalled, read-50*time.Millisecond, "closed before sluice.request.read.timeout.ms")
	require.Less(t, stalled, idle, "a partial request waited for the idle timeout")

	quiet, got := closedAfter(frame)
	require.NotEmpty(t, got, "no answer to ApiVersions")
	require.GreaterOrEqual(t, quiet, idle-50*time.Millisecond, "closed before connections.max.idle.ms")
	require.Less(t, quiet, idle+5*time.Second)

	b.stop()
	require.Contains(t, b.stderr.String(), "closing connection: request read timed out")
}

// metadata.log.dir in a directory of its own: the metadata log is written
// there (and only there), the directory is locked, and a restart finds the
// topics it holds.
func TestServeWithAMetadataLogDirOfItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	addr, dataDir, metaDir := freePort(t), t.TempDir(), filepath.Join(t.TempDir(), "meta")
	b := startBroker(t, addr, dataDir, "--override", "metadata.log.dir="+metaDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	created, err := kadm.NewClient(admin).CreateTopic(ctx, 2, 1, nil, "orders")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	admin.Close()
	b.stop()

	_, err = os.Stat(filepath.Join(metaDir, "__cluster_metadata-0"))
	require.NoError(t, err, "no metadata log in metadata.log.dir")
	_, err = os.Stat(filepath.Join(dataDir, "__cluster_metadata-0"))
	require.ErrorIs(t, err, os.ErrNotExist, "a metadata log in log.dirs too")
	_, err = os.Stat(filepath.Join(dataDir, "orders-0"))
	require.NoError(t, err, "the partitions are in log.dirs")

	b = startBroker(t, addr, dataDir, "--override", "metadata.log.dir="+metaDir)
	// A second broker on another log.dirs but the same metadata.log.dir is
	// refused by its lock.
	stderr := serveRefuses(t, "--override", "metadata.log.dir="+metaDir)
	require.Contains(t, stderr, "metadata.log.dir "+metaDir+" is in use by another broker")
	admin, err = kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer admin.Close()
	topics, err := kadm.NewClient(admin).ListTopics(ctx)
	require.NoError(t, err)
	require.True(t, topics.Has("orders"), "the restarted broker lost the topic: %v", topics.Names())
	b.stop()
}
