package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/jepsen/simrun"
)

// runSluice runs the command line in process and returns stdout, stderr
// and the error Execute returned (main exits 1 on any).
func runSluice(args ...string) (string, string, error) {
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

var summaryLine = regexp.MustCompile(`^seed=(\d+) time=\S+ events=\d+ ops=\d+ result=(ok|violation) trace=([0-9a-f]+) partitions=\d+ .*faults=\S+ .*injected=\S+$`)

// choseLine is what sim run prints first: the seed's choices.
var choseLine = regexp.MustCompile(`^seed=(\d+) chose (nodes=\d+ .*)$`)

// runOutput splits sim run's output into what the seed chose and the
// summary line.
func runOutput(t *testing.T, out string) (chose []string, summary string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, "what the seed chose, then the summary: %q", out)
	chose = choseLine.FindStringSubmatch(lines[0])
	require.NotNil(t, chose, "first line: %q", lines[0])
	return chose, lines[1]
}

func TestSimRunDeterminism(t *testing.T) {
	var traces []string
	for range 2 {
		out, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "3s")
		require.NoError(t, err)
		chose, line := runOutput(t, out)
		m := summaryLine.FindStringSubmatch(line)
		require.NotNil(t, m, "summary line: %q", line)
		require.Equal(t, "11", m[1])
		require.Equal(t, "11", chose[1])
		options := strings.TrimPrefix(chose[2], "nodes=1 ")
		require.Contains(t, line, " trace="+m[3]+" "+options+" injected=", "the summary's options are what the seed chose")
		traces = append(traces, line)
	}
	require.Equal(t, traces[0], traces[1], "the same seed printed two different runs")
}

func TestSimRunWritesArtifacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "2s", "--out", dir)
	require.NoError(t, err)
	for _, name := range []string{"history.jsonl", "summary.txt", "linearizability-jepsen-0.html", "timeline.html"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Positive(t, info.Size(), name)
	}
}

func TestSimSweepEndsWithTheCounts(t *testing.T) {
	out, _, err := runSluice("sim", "sweep", "--seeds", "11-12", "--duration", "2s")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`^(\d+) passed, (\d+) failed$`).FindStringSubmatch(last)
	require.NotNil(t, m, "last line: %q", last)
	require.Equal(t, m[2] != "0", err != nil, "exit status and failure count disagree: %q", out)
	for i, l := range lines {
		if strings.Contains(l, "result=violation") {
			require.Regexp(t, `^  replay: sluice sim run --seed \d+ --duration 2s$`, lines[i+1])
		}
	}
}

// TestSimSweepInProcessesIsTheSameSweep: seeds run by worker processes
// are the runs one process makes, line for line (trace hashes included),
// and the probes and counts add up the same.
func TestSimSweepInProcessesIsTheSameSweep(t *testing.T) {
	sweepOf := func(parallel string) (lines []string, tail []string) {
		t.Helper()
		out, _, err := runSluice("sim", "sweep", "--seeds", "11-15", "--duration", "2s", "-v", "--parallel", parallel)
		all := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.GreaterOrEqual(t, len(all), 7, "output: %q", out)
		tail = all[len(all)-2:]
		if strings.HasPrefix(tail[0], "probes that never fired") {
			tail = all[len(all)-3:]
		}
		lines = all[:len(all)-len(tail)]
		require.Equal(t, strings.Contains(out, "result=violation"), err != nil, "output: %q", out)
		slices.Sort(lines) // workers report in the order they finish
		return lines, tail
	}
	oneLines, oneTail := sweepOf("1")
	manyLines, manyTail := sweepOf("3")
	require.Equal(t, oneLines, manyLines, "the seeds ran differently in worker processes")
	require.Equal(t, oneTail, manyTail)
	require.Regexp(t, `^5 passed, 0 failed$`, oneTail[len(oneTail)-1])
}

func TestSimRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "run"},
		{"sim", "run", "--seed", "1", "--duration", "0s"},
		{"sim", "sweep", "--seeds", "5-3"},
		{"sim", "sweep", "--seeds", "x"},
		{"sim", "sweep", "--seeds", "1-"},
		{"sim", "sweep"},
		{"sim", "run", "--seed", "1", "--nodes", "2"},
		{"sim", "sweep", "--seeds", "1-2", "--nodes", "0"},
		{"sim", "sweep", "--seeds", "1-2", "--parallel", "0"},
		{"sim", "sweep", "--seeds", "1-2", "--worker", "3/2"},
		{"sim", "run", "--seed", "1", "--nodes", "3", "--broker-only", "1"},
		{"sim", "sweep", "--seeds", "1-2", "--nodes", "5", "--broker-only", "-1"},
		{"sim", "run", "--seed", "1", "--swarm", "--nodes", "3"},
		{"sim", "sweep", "--seeds", "1-2", "--swarm", "--set", "producers=1"},
		// Swarm seed 2523 is one broker: a cluster's key is refused.
		{"sim", "run", "--seed", "2523", "--swarm", "--set", "rf=3"},
		{"sim", "minimize", "--seed", "2523", "--swarm", "--set", "rf=3"},
		{"sim", "run", "--seed", "1", "--set", "producers=99"},
		{"sim", "run", "--seed", "1", "--skip-faults", "3-1"},
		{"sim", "minimize", "--seed", "1", "--budget", "0"},
	} {
		_, _, err := runSluice(args...)
		require.Error(t, err, "%v", args)
	}
	first, last, err := parseSeedRange("7")
	require.NoError(t, err)
	require.Equal(t, [2]uint64{7, 7}, [2]uint64{first, last})
}

// An --out that cannot be written is refused before the seed runs (a run
// or a sweep may take long, and its artifacts are the point of --out).
func TestSimRefusesAnOutItCannotWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	readOnly := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.Mkdir(readOnly, 0o555))
	for _, out := range []string{filepath.Join(file, "sub"), readOnly} {
		if out == readOnly && os.Geteuid() == 0 {
			continue // root writes anywhere
		}
		for _, cmd := range [][]string{
			{"sim", "run", "--seed", "1", "--duration", "1h", "--out", out},
			{"sim", "sweep", "--seeds", "1-1000", "--out", out},
		} {
			stdout, _, err := runSluice(cmd...)
			require.ErrorContains(t, err, "--out "+out, "%v", cmd)
			require.Empty(t, stdout, "%v ran before refusing --out", cmd)
		}
	}
}

var clusterLine = regexp.MustCompile(`^seed=(\d+) time=\S+ events=\d+ ops=\d+ result=(ok|violation) trace=([0-9a-f]+) nodes=3 (meta_only=true )?clients=\d+ .*injected=\S+$`)

func TestSimRunClusterDeterminism(t *testing.T) {
	var lines []string
	for range 2 {
		out, _, err := runSluice("sim", "run", "--nodes", "3", "--meta-only", "--seed", "5", "--duration", "3s")
		require.NoError(t, err)
		chose, line := runOutput(t, out)
		require.Regexp(t, clusterLine, line)
		require.Contains(t, line, chose[2]+" injected=")
		lines = append(lines, line)
	}
	require.Equal(t, lines[0], lines[1], "the same seed printed two different cluster runs")
}

func TestSimClusterWritesMetaArtifacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, _, err := runSluice("sim", "run", "--nodes", "3", "--meta-only", "--seed", "5", "--duration", "2s", "--out", dir)
	require.NoError(t, err)
	for _, name := range []string{"meta-history.jsonl", "summary.txt", "timeline.html"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Positive(t, info.Size(), name)
	}
}

func TestSimSweepCluster(t *testing.T) {
	out, _, err := runSluice("sim", "sweep", "--nodes", "3", "--meta-only", "--seeds", "1-2", "--duration", "2s")
	require.NoError(t, err, out)
	require.Contains(t, out, "2 passed, 0 failed")
	require.Contains(t, out, "observe.applied_samples=2")
}

// TestSimSweepFailsWhenAWorkerFails: a worker that dies, or prints what is
// not a seed's result, fails the sweep and says which.
func TestSimSweepFailsWhenAWorkerFails(t *testing.T) {
	saved := sweepExecutable
	defer func() { sweepExecutable = saved }()
	for _, c := range []struct{ exe, want string }{
		{"/bin/false", "exit status 1"},
		{"/bin/echo", "printed"},
	} {
		sweepExecutable = func() (string, error) { return c.exe, nil }
		_, _, err := runSluice("sim", "sweep", "--seeds", "1-4", "--parallel", "2")
		require.ErrorContains(t, err, "sweep worker", c.exe)
		require.ErrorContains(t, err, c.want, c.exe)
	}
}

// TestSimRunTracePrintsWhatTheHashCovers: --trace prints one line per
// delivered event and folded fact, each with the running hash; the last
// hash is the summary's trace, and the events are the summary's count.
func TestSimRunTracePrintsWhatTheHashCovers(t *testing.T) {
	out, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "2s", "--trace")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Greater(t, len(lines), 4)
	require.Regexp(t, choseLine, lines[0], "what the seed chose first")
	require.Contains(t, lines[1], "trace hash", "then a header")
	summary := summaryLine.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, summary, "the summary last: %q", lines[len(lines)-1])
	entries := lines[2 : len(lines)-1]
	events := 0
	for _, l := range entries {
		f := strings.Fields(l)
		require.Len(t, f, 5, "entry %q", l)
		if f[1] != "-" {
			events++
		}
	}
	last := strings.Fields(entries[len(entries)-1])
	require.Equal(t, summary[3], last[4], "the last entry's hash is the summary's trace")
	m := regexp.MustCompile(` events=(\d+) `).FindStringSubmatch(lines[len(lines)-1])
	require.Equal(t, m[1], strconv.Itoa(events), "one entry per delivered event")
}

func TestSimSweepFailsWhenAWorkerCannotStart(t *testing.T) {
	saved := sweepExecutable
	defer func() { sweepExecutable = saved }()
	sweepExecutable = func() (string, error) { return filepath.Join(t.TempDir(), "missing"), nil }
	_, _, err := runSluice("sim", "sweep", "--seeds", "1-4", "--parallel", "2")
	require.ErrorContains(t, err, "start sweep worker 1 of 2")
}

// TestSimRegressions replays every regression case sim minimize saved
// under testdata/sim-regressions: each is a run that once showed a
// violation, and must pass now.
func TestSimRegressions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "sim-regressions", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			args, err := readRegressionCase(file)
			require.NoError(t, err)
			out, stderr, err := runSluice(args...)
			require.NoError(t, err, "%s\n%s%s", strings.Join(args, " "), out, stderr)
		})
	}
}

// readRegressionCase reads the sim run command of a regression file (the
// one line that is not a comment).
func readRegressionCase(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if args != nil || !strings.HasPrefix(line, "sluice sim run ") {
			return nil, fmt.Errorf("%s: want one line \"sluice sim run ...\" besides the comments, got %q", file, line)
		}
		args = strings.Fields(line)[1:]
	}
	if args == nil {
		return nil, fmt.Errorf("%s: no sluice sim run line", file)
	}
	return args, nil
}

// A swarm sweep runs every shape, each seed choosing its own, and a
// failure's replay command names --swarm.
func TestSimSweepSwarm(t *testing.T) {
	out, _, err := runSluice("sim", "sweep", "--swarm", "--seeds", "1-8", "--duration", "2s", "-v")
	require.NoError(t, err, out)
	require.Contains(t, out, "8 passed, 0 failed")
	shapes := map[string]bool{}
	for _, m := range regexp.MustCompile(`trace=[0-9a-f]+ (nodes=\d+)?`).FindAllStringSubmatch(out, -1) {
		shapes[m[1]] = true
	}
	require.GreaterOrEqual(t, len(shapes), 3, "seeds 1-8 chose one broker and clusters of two sizes: %v", shapes)
	cfg, err := (&shapeFlags{duration: 2 * time.Second, swarm: true}).config(newSimRunCommand())
	require.NoError(t, err)
	cfg.Seed = 5
	require.Equal(t, "sluice sim run --seed 5 --swarm --duration 2s", replayCommand(cfg))
}

// --set narrows what a seed chose, and the chose line shows it.
func TestSimRunAppliesSettings(t *testing.T) {
	out, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "2s", "--set", "faults=none", "--set", "producers=1")
	require.NoError(t, err)
	chose, line := runOutput(t, out)
	require.Contains(t, chose[2], " producers=1 ")
	require.Contains(t, chose[2], " faults=none ")
	require.Contains(t, line, "injected=none")
	_, _, err = runSluice("sim", "run", "--seed", "11", "--set", "partitions=0")
	require.ErrorContains(t, err, "setting partitions=0: want a whole number from 1 to 64")
}

func TestSimMinimizeRefusesAPassingSeed(t *testing.T) {
	_, _, err := runSluice("sim", "minimize", "--seed", "11", "--duration", "2s")
	require.ErrorContains(t, err, "seed 11 passes")
}

// The regression file minimize saves replays as its smallest run.
func TestRegressionCaseReplaysTheSmallestRun(t *testing.T) {
	cfg := simrun.Config{Seed: 3, Nodes: 3, Duration: 5 * time.Second, Set: []string{"faults=kill"}, SkipFaults: []int{0, 1, 2, 5}}
	file := filepath.Join(t.TempDir(), "case.txt")
	require.NoError(t, os.WriteFile(file, []byte(regressionCase(simrun.Minimized{Smallest: cfg})), 0o644))
	args, err := readRegressionCase(file)
	require.NoError(t, err)
	require.Equal(t, "run --seed 3 --nodes 3 --duration 5s --set faults=kill --skip-faults 0-2,5", strings.Join(args[1:], " "))
	require.NoError(t, os.WriteFile(file, []byte("# nothing\nsluice sim sweep --seeds 1-2\n"), 0o644))
	_, err = readRegressionCase(file)
	require.ErrorContains(t, err, "want one line")
}

// --until stops the run and prints the broker's state before the summary.
func TestSimRunUntilPrintsTheState(t *testing.T) {
	out, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "3s", "--until", "1s")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Regexp(t, choseLine, lines[0])
	require.Regexp(t, `^state at 1\.\d+s:$`, lines[1])
	require.Regexp(t, `^broker: running, incarnation \d+$`, lines[2])
	require.Contains(t, out, "  replica jepsen-0: ")
	require.Contains(t, lines[len(lines)-1], " result=stopped ")
	_, _, err = runSluice("sim", "run", "--seed", "11", "--until", "-1s")
	require.ErrorContains(t, err, "--until -1s")
}

// sim compare runs the base and every variant, one line each, and ends
// with the counts.
func TestSimCompare(t *testing.T) {
	out, _, err := runSluice("sim", "compare", "--seed", "11", "--duration", "3s")
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Regexp(t, `^base:  seed=11 .* injected=none$`, lines[0])
	require.Len(t, lines, 2+len(simrun.Variants(false)))
	for _, l := range lines[1 : len(lines)-1] {
		require.Regexp(t, `^\S+ +(same: seed=11 |skipped: )`, l)
	}
	require.Regexp(t, `^\d+ variants the same, 0 differ$`, lines[len(lines)-1])
}

// A cluster seed with consumer groups writes their history too, one JSON
// event a line.
func TestSimClusterWritesTheGroupHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, _, err := runSluice("sim", "run", "--nodes", "3", "--seed", "5", "--duration", "3s", "--out", dir)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "group-history.jsonl"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	require.Regexp(t, `^\{"time":1,"virtual":\d+,"kind":"\w+","group":"sim-group-\d+"`, first)
	for _, name := range []string{"history.jsonl", "meta-history.jsonl", "timeline.html"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
	}
}

// TestSimSweepGoesOnWhenASeedKillsItsWorker: a seed whose run grows a
// worker's heap past its limit fails, with its replay command, and a new
// worker runs the rest of that worker's seeds (a 1 MiB limit here, which
// every run passes).
func TestSimSweepGoesOnWhenASeedKillsItsWorker(t *testing.T) {
	out, _, err := runSluice("sim", "sweep", "--seeds", "1-3", "--nodes", "3", "--duration", "2s", "--parallel", "2", "--worker-heap-limit", "1")
	require.Error(t, err)
	for _, seed := range []string{"1", "2", "3"} {
		require.Contains(t, out, "seed="+seed+" result=died: the sweep worker running it ended: exit status 3", out)
		require.Contains(t, out, "seed "+seed+": the heap grew to ")
		require.Contains(t, out, "replay: sluice sim run --seed "+seed+" --nodes 3 --duration 2s")
	}
	require.Contains(t, out, "0 passed, 3 failed")
}
