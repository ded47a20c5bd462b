package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// leftoverNodes lists the processes a jepsen run started that still run.
func leftoverNodes(t *testing.T) []string {
	t.Helper()
	var left []string
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "sluice-jepsen-") && strings.Contains(string(b), "serve") {
			left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}

// A short real run through kills, pauses and restarts keeps every
// acknowledged record, writes its files, and leaves nothing running; the
// same run with its final reads made to drop a record fails.
func TestJepsenRunnerChecksARealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	dir := filepath.Join(t.TempDir(), "out")
	out, stderr, err := runSluice("jepsen", "--duration", "8s", "--fault-every", "1s", "--seed", "3", "--out", dir)
	require.NoError(t, err, "%s%s", out, stderr)
	require.Regexp(t, `^seed=3 time=\S+ ops=\d+ result=ok nodes=3 network=(netns|loopback) partitions=3 producers=3 consumers=2 faults=kill,stop,restart(,partition)?(,diskfull)? every=1s injected=\S+\n$`, out)
	history, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	require.Contains(t, string(history), `"kind":"ok","op"`, "operations completed")
	require.Regexp(t, `"client":10[12],"type":"fetch"`, string(history), "the consumers fetched during the faults")
	for _, name := range []string{"history.jsonl", "summary.txt", "timeline.html", "linearizability-jepsen-0.html", "n1.log"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Positive(t, info.Size(), name)
	}
	require.Empty(t, leftoverNodes(t))
	require.Empty(t, leftoverNamespaces(t))

	out, stderr, err = runSluice("jepsen", "--duration", "4s", "--fault-every", "1s", "--seed", "3", "--sabotage-drop-final")
	require.ErrorIs(t, err, errSimFailed, out)
	require.Contains(t, out, "result=violation")
	require.Contains(t, stderr, "lost-write")
	require.Empty(t, leftoverNodes(t))

	require.Empty(t, leftoverNamespaces(t))
	_, _, err = runSluice("jepsen", "--nodes", "2")
	require.ErrorContains(t, err, "--nodes 2")
	_, _, err = runSluice("jepsen", "--faults", "meteor")
	require.ErrorContains(t, err, `"meteor"`)
}

// leftoverNamespaces lists this process's jepsen namespaces still there.
func leftoverNamespaces(t *testing.T) []string {
	t.Helper()
	entries, _ := os.ReadDir("/var/run/netns")
	var left []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("sj%d-", os.Getpid())) {
			left = append(left, e.Name())
		}
	}
	return left
}

// Partitions need the namespaces: one way and both, between nodes and
// from the clients; full disks a small filesystem per node. The run still
// keeps every acknowledged record and leaves nothing behind.
func TestJepsenRunnerPartitionsInNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	if err := netnsAvailable(); err != nil {
		_, _, err := runSluice("jepsen", "--network", "netns", "--duration", "1s")
		require.ErrorContains(t, err, "--network netns")
		t.Skipf("no network namespaces here: %v", err)
	}
	for _, fault := range []string{"partition", "diskfull"} {
		out, stderr, err := runSluice("jepsen", "--network", "netns", "--faults", fault, "--duration", "8s", "--fault-every", "500ms", "--seed", "5")
		require.NoError(t, err, "%s%s", out, stderr)
		require.Contains(t, out, " network=netns ")
		require.Regexp(t, `injected=`+fault+`:\d+`, out)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), "sluice-jepsen-", "a node's small disk is still mounted")
	require.Empty(t, leftoverNodes(t))
	require.Empty(t, leftoverNamespaces(t))
	_, _, err = runSluice("jepsen", "--network", "loopback", "--faults", "partition")
	require.ErrorContains(t, err, "needs --network netns")
}
