package main

import (
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
	require.Regexp(t, `^seed=3 time=\S+ ops=\d+ result=ok nodes=3 partitions=3 producers=3 faults=kill,stop,restart every=1s injected=\S+\n$`, out)
	for _, name := range []string{"history.jsonl", "summary.txt", "timeline.html", "linearizability-jepsen-0.html", "n1.log"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Positive(t, info.Size(), name)
	}
	require.Empty(t, leftoverNodes(t))

	out, stderr, err = runSluice("jepsen", "--duration", "4s", "--fault-every", "1s", "--seed", "3", "--sabotage-drop-final")
	require.ErrorIs(t, err, errSimFailed, out)
	require.Contains(t, out, "result=violation")
	require.Contains(t, stderr, "lost-write")
	require.Empty(t, leftoverNodes(t))

	_, _, err = runSluice("jepsen", "--nodes", "2")
	require.ErrorContains(t, err, "--nodes 2")
	_, _, err = runSluice("jepsen", "--faults", "meteor")
	require.ErrorContains(t, err, `"meteor"`)
}
