package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/node"
	"github.com/stretchr/testify/require"
)

// exampleConfig is the example configuration that make run uses and
// README.md documents.
const exampleConfig = "config/server.properties"

// clusterConfigs are the three nodes make cluster starts.
var clusterConfigs = []string{
	"config/cluster/server-1.properties",
	"config/cluster/server-2.properties",
	"config/cluster/server-3.properties",
}

// loadExample reads an example file as sluice serve does (Validate
// included), and requires that it has no key sluice serve would ignore.
func loadExample(t *testing.T, file string) node.Config {
	t.Helper()
	cfg, unknown, err := loadConfig(serveOptions{configFile: file, nodeID: -1})
	require.NoError(t, err, file)
	require.Empty(t, unknown, "%s: keys sluice serve would ignore", file)
	return cfg
}

// Every example file parses and validates, with no key Sluice does not know.
func TestEveryExampleConfigParsesAndValidates(t *testing.T) {
	files, err := filepath.Glob("config/*.properties")
	require.NoError(t, err)
	more, err := filepath.Glob("config/*/*.properties")
	require.NoError(t, err)
	files = append(files, more...)
	require.ElementsMatch(t, append([]string{exampleConfig}, clusterConfigs...), files, "a new example file needs a test of what it means")
	for _, f := range files {
		loadExample(t, f)
	}
}

// The example configuration keeps make run as it was: Kafka's defaults, one
// listener on 127.0.0.1:9092, data in ./data, single-node mode.
func TestExampleConfigParsesWithKnownKeysOnly(t *testing.T) {
	cfg := loadExample(t, exampleConfig)
	require.Equal(t, node.DefaultConfig(), cfg)
	require.True(t, cfg.SingleNode())
	require.Equal(t, 1, cfg.BrokersMax())
}

// The three cluster files are three combined nodes of one static quorum on
// 127.0.0.1: the same voters in each, each node the voter at its own
// CONTROLLER listener, PLAINTEXT on 9092, 9094 and 9096, data in a
// directory of its own outside ./data, and a replication factor of three.
func TestClusterExampleIsThreeCombinedNodes(t *testing.T) {
	voters := []node.Voter{{ID: 1, Host: "127.0.0.1", Port: 9093}, {ID: 2, Host: "127.0.0.1", Port: 9095}, {ID: 3, Host: "127.0.0.1", Port: 9097}}
	for i, file := range clusterConfigs {
		n := int32(i + 1)
		cfg := loadExample(t, file)
		require.Equal(t, n, cfg.NodeID, file)
		require.Equal(t, node.Roles{Broker: true, Controller: true}, cfg.Roles(), file)
		require.Equal(t, voters, cfg.Voters(), file)
		require.Equal(t, 3, cfg.BrokersMax(), file)
		require.Equal(t, int16(1), cfg.DefaultReplicationFactor, file) // one replica per partition until replication exists
		ctrl, ok := cfg.AdvertisedControllerListener()
		require.True(t, ok, file)
		require.Equal(t, voters[i].Addr(), ctrl.Addr(), "%s: the node is the voter at its controller listener", file)
		plaintext := node.Listener{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9090 + 2*n}
		require.Equal(t, []node.Listener{plaintext}, cfg.BrokerListeners(), file)
		require.Equal(t, []node.Listener{plaintext}, cfg.Advertised(), file)
		require.Equal(t, fmt.Sprintf("data-cluster/node-%d", n), cfg.LogDir, file)
		require.False(t, strings.HasPrefix(filepath.Clean(cfg.LogDir), "data/"), "%s: not in make run's data directory", file)
	}
}

// fakeSluice stands in for the binary in tests of the cluster script: it
// prints the config it was given, exits with status FAKE_EXIT after a
// moment if its config is FAKE_FAIL's, and otherwise runs until SIGTERM,
// on which it says so and exits 0, as sluice serve does.
const fakeSluice = `#!/bin/sh
trap 'echo "stopped by SIGTERM"; exit 0' TERM
echo "serving $3"
case "$3" in
*"$FAKE_FAIL") sleep 0.3; echo "failing"; exit "$FAKE_EXIT" ;;
esac
while :; do sleep 0.05; done
`

// runClusterScript runs make cluster's script over fakeSluice; stop, if
// set, is called once every node has started.
func runClusterScript(t *testing.T, fail string, stop func(*exec.Cmd)) (string, int) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	require.NoError(t, os.WriteFile(bin, []byte(fakeSluice), 0o755))
	cmd := exec.Command("config/cluster/run", bin)
	cmd.Env = append(os.Environ(), "FAKE_FAIL="+fail, "FAKE_EXIT=3")
	out := &lockedOutput{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if stop != nil {
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), "serving") < 3 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		stop(cmd)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the cluster script did not exit; output:\n%s", out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// lockedOutput collects the script's output, which exec copies in a
// goroutine of its own, so that the test may look at it while it runs.
type lockedOutput struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *lockedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *lockedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// make cluster runs the three example files through the script beside them,
// every line prefixed by its node; SIGTERM to the script stops all three
// with one signal each, and it exits 0.
func TestClusterScriptStopsAllThreeOnSIGTERM(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	require.Contains(t, string(makefile), "cluster: build\n\tcmd/sluice/config/cluster/run ./$(BIN)\n")

	out, code := runClusterScript(t, "none", func(cmd *exec.Cmd) {
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	})
	require.Equal(t, 0, code, out)
	for n := 1; n <= 3; n++ {
		prefix := fmt.Sprintf("[node-%d] ", n)
		require.Contains(t, out, prefix+"serving config/cluster/server-"+fmt.Sprint(n)+".properties", out)
		require.Equal(t, 1, strings.Count(out, prefix+"stopped by SIGTERM"), out)
	}
}

// One node that fails stops the others, and the script exits with its
// status.
func TestClusterScriptStopsTheOthersWhenOneFails(t *testing.T) {
	out, code := runClusterScript(t, "server-2.properties", nil)
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "[node-2] failing")
	require.Contains(t, out, "[cluster] node-2 exited with status 3; stopping the others")
	require.Contains(t, out, "[node-1] stopped by SIGTERM")
	require.Contains(t, out, "[node-3] stopped by SIGTERM")
}
