package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// kcatPath finds kcat. A missing kcat skips the test, or fails it under
// SLUICE_REQUIRE_CLIENTS=1, as .ci/run sets it (see missingClient).
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		missingClient(t, "kcat is not installed (apt-get install kcat)")
	}
	return path
}

func runKcat(t *testing.T, kcat, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "kcat %v\nstderr:\n%s", args, stderr)
	return string(out)
}

func TestKcatMetadataProduceConsume(t *testing.T) {
	kcat := kcatPath(t)
	addr := freePort(t)
	b := startBroker(t, addr, t.TempDir())

	// Produce keyed records (librdkafka auto-creates the topic through
	// Metadata), acks=all.
	runKcat(t, kcat, "k1:alpha\nk2:beta\nk3:gamma\n",
		"-b", addr, "-P", "-t", "kcat-topic", "-K:", "-X", "topic.request.required.acks=-1")

	meta := runKcat(t, kcat, "", "-b", addr, "-L", "-t", "kcat-topic")
	require.Contains(t, meta, `topic "kcat-topic" with 1 partitions`)
	require.Contains(t, meta, "leader 1")

	out := runKcat(t, kcat, "", "-b", addr, "-C", "-t", "kcat-topic", "-o", "beginning", "-e", "-q", "-f", "%o %k %s\n")
	require.Equal(t, "0 k1 alpha\n1 k2 beta\n2 k3 gamma\n", out)

	// From an offset, and after a restart.
	b.stop()
	startBroker(t, addr, b.dataDir)
	out = runKcat(t, kcat, "", "-b", addr, "-C", "-t", "kcat-topic", "-o", "1", "-e", "-q", "-f", "%o %s\n")
	require.Equal(t, "1 beta\n2 gamma\n", out)
}
