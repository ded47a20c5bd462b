package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

func TestSimRunDeterminism(t *testing.T) {
	var traces []string
	for range 2 {
		out, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "3s")
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 1, "one summary line: %q", out)
		m := summaryLine.FindStringSubmatch(lines[0])
		require.NotNil(t, m, "summary line: %q", lines[0])
		require.Equal(t, "11", m[1])
		traces = append(traces, lines[0])
	}
	require.Equal(t, traces[0], traces[1], "the same seed printed two different runs")
}

func TestSimRunWritesArtifacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, _, err := runSluice("sim", "run", "--seed", "11", "--duration", "2s", "--out", dir)
	require.NoError(t, err)
	for _, name := range []string{"history.jsonl", "summary.txt", "linearizability-jepsen-0.html"} {
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

var clusterLine = regexp.MustCompile(`^seed=(\d+) time=\S+ events=\d+ ops=\d+ result=(ok|violation) trace=([0-9a-f]+) nodes=3 clients=\d+ .*injected=\S+$`)

func TestSimRunClusterDeterminism(t *testing.T) {
	var lines []string
	for range 2 {
		out, _, err := runSluice("sim", "run", "--nodes", "3", "--meta-only", "--seed", "5", "--duration", "3s")
		require.NoError(t, err)
		line := strings.TrimSuffix(out, "\n")
		require.Regexp(t, clusterLine, line)
		lines = append(lines, line)
	}
	require.Equal(t, lines[0], lines[1], "the same seed printed two different cluster runs")
}

func TestSimClusterWritesMetaArtifacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, _, err := runSluice("sim", "run", "--nodes", "3", "--meta-only", "--seed", "5", "--duration", "2s", "--out", dir)
	require.NoError(t, err)
	for _, name := range []string{"meta-history.jsonl", "summary.txt"} {
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
	require.Greater(t, len(lines), 3)
	require.Contains(t, lines[0], "trace hash", "a header first")
	summary := summaryLine.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, summary, "the summary last: %q", lines[len(lines)-1])
	entries := lines[1 : len(lines)-1]
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
