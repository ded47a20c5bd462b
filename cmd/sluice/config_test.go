package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveRefuses runs `sluice serve` with args and returns what it printed on
// stderr; the process must exit with an error of its own, before anything
// listens.
func serveRefuses(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, append([]string{"serve", "--listeners", "PLAINTEXT://" + freePort(t), "--log-dir", t.TempDir()}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "sluice serve %v did not exit; stderr:\n%s", args, stderr.String())
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "sluice serve %v: want a failed exit, got %v; stderr:\n%s", args, err, stderr.String())
	return stderr.String()
}

// Values that Kafka refuses, or that Sluice refuses where Kafka would take
// a typo for "unlimited", stop the broker at start with the key and the
// value in the message.
func TestServeRefusesBadValuesByName(t *testing.T) {
	for _, kv := range []string{
		"log.retention.ms=-5",
		"log.retention.hours=-2",
		"log.retention.minutes=0",
		"log.retention.bytes=-7",
		"log.roll.ms=-1",
		"log.roll.ms=0",
		"log.roll.hours=0",
	} {
		stderr := serveRefuses(t, "--override", kv)
		key, value, _ := strings.Cut(kv, "=")
		require.Contains(t, stderr, key, kv)
		require.Contains(t, stderr, value, kv)
	}
}

// The user's report: default.replication.factor=3 on a single broker was
// accepted, then every auto-created topic failed silently (kcat -P hung).
// A cluster of this configuration has one broker, so the start is refused,
// saying what to set.
func TestServeRefusesAReplicationFactorTheClusterCannotHave(t *testing.T) {
	dir := t.TempDir()
	stderr := serveRefuses(t, "--log-dir", dir, "--override", "default.replication.factor=3")
	require.Contains(t, stderr, "default.replication.factor=3")
	require.Contains(t, stderr, "set default.replication.factor=1")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "refused before it touched the data directory")
}

// A KRaft configuration Kafka would refuse stops sluice serve at start,
// naming the key, before anything touches the data directory.
func TestServeRefusesAKRaftConfigurationByName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--override", "process.roles=brokr"}, []string{"process.roles", `unknown role "brokr"`}},
		{[]string{"--override", "process.roles=broker,controller"}, []string{"controller.quorum.voters", "controller.quorum.bootstrap.servers"}},
		{[]string{"--override", "controller.quorum.voters=1@127.0.0.1:9093"}, []string{"controller.quorum.voters is set but process.roles is not"}},
		{[]string{"--config", "config/cluster/server-1.properties", "--node-id", "4"}, []string{"node.id 4 must be one of the voters"}},
		// serveRefuses's --listeners overrides the file's, CONTROLLER and all.
		{[]string{"--config", "config/cluster/server-1.properties"}, []string{"config listeners", "controller listener CONTROLLER"}},
		{[]string{"--override", "metadata.log.dir=/"}, []string{"metadata.log.dir=/", "holds log.dirs"}},
	} {
		dir := t.TempDir()
		stderr := serveRefuses(t, append([]string{"--log-dir", dir}, tc.args...)...)
		for _, w := range tc.want {
			require.Contains(t, stderr, w, tc.args)
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "refused before it touched the data directory")
	}
}

// The user's report: log.retention.ms=-1 with 1 KiB segments and a retention
// pass every second kept 20 of 200 records produced with kcat. -1 is
// Kafka's "keep forever".
func TestKcatRetentionMinusOneKeepsEverything(t *testing.T) {
	kcat := kcatPath(t)
	addr := freePort(t)
	startBroker(t, addr, t.TempDir(),
		"--override", "log.retention.ms=-1",
		"--override", "log.segment.bytes=1024",
		"--override", "log.retention.check.interval.ms=1000")
	var in strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&in, "%0100d\n", i)
	}
	// One record per batch, so that 200 batches fill many segments.
	runKcat(t, kcat, in.String(), "-b", addr, "-P", "-t", "forever",
		"-X", "batch.num.messages=1", "-X", "topic.request.required.acks=-1")
	time.Sleep(3 * time.Second) // three retention passes
	out := runKcat(t, kcat, "", "-b", addr, "-C", "-t", "forever", "-o", "beginning", "-e", "-q")
	require.Equal(t, 200, strings.Count(out, "\n"), "records left of 200")
	require.Equal(t, in.String(), out)
}

// The user's report: a second broker on the same directory corrupted the
// metadata journal, and every later start failed with "the frame at 1834
// fails its checksum ... the journal is corrupt", naming neither the file
// nor a way out. The message names the journal as the operator knows it
// (under log.dirs), the offset, and what to do.
func TestServeNamesTheCorruptMetadataLog(t *testing.T) {
	kcat := kcatPath(t)
	addr, dataDir := freePort(t), t.TempDir()
	b := startBroker(t, addr, dataDir)
	for _, topic := range []string{"a", "b", "c", "d", "e"} {
		runKcat(t, kcat, "x\n", "-b", addr, "-P", "-t", topic)
	}
	b.stop()

	segments, err := filepath.Glob(filepath.Join(dataDir, "__cluster_metadata-0", "*.log"))
	require.NoError(t, err)
	require.Len(t, segments, 1)
	segment := segments[0]
	data, err := os.ReadFile(segment)
	require.NoError(t, err)
	at := len(data) / 3 // inside a frame with whole frames after it
	data[at] ^= 0x20
	require.NoError(t, os.WriteFile(segment, data, 0o644))

	stderr := serveRefuses(t, "--log-dir", dataDir)
	require.Contains(t, stderr, filepath.Base(segment))
	require.Contains(t, stderr, "restore")
	require.Contains(t, stderr, "Do not move the log aside on a controller")
	after, err := os.ReadFile(segment)
	require.NoError(t, err)
	require.Equal(t, data, after, "the log is left as it was")
	t.Log(stderr)
}
