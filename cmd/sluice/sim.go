package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/jepsen/simrun"
)

// errSimFailed is returned (and so exits 1) when a simulated run fails; the
// summary and the details have been printed already.
var errSimFailed = errors.New("simulation found a violation")

func newSimCommand() *cobra.Command {
	sim := &cobra.Command{
		Use:   "sim",
		Short: "Run the broker and its clients through seeded faults in the simulator, and check what the clients saw",
		Long: `sim runs a single-node broker with deterministic Kafka clients in one simulated
world: a safety phase with the faults the seed chose, then a liveness phase
without faults that must converge, then a check of the clients' history
(porcupine and Kafka's invariants). With --nodes N (3 or more) it runs a
KRaft cluster of N combined nodes instead, with metadata clients creating,
deleting and describing topics, and checks the metadata history and the
quorum (one leader per term, applied logs that agree, converged images). The same seed always gives the same run,
byte for byte: the trace hash printed shows it.`,
	}
	sim.PersistentPreRun = func(*cobra.Command, []string) {
		// A simulated run's heap is small (tens of MB) and mostly garbage
		// between events: collecting a quarter as often made sweeps ~30%
		// faster for ~40% more peak memory (5-node seeds 1-6: 1.33 s at
		// 34 MB -> 0.94 s at 48 MB). GOGC, if set, still decides.
		if _, set := os.LookupEnv("GOGC"); !set {
			debug.SetGCPercent(400)
		}
	}
	sim.AddCommand(newSimRunCommand(), newSimSweepCommand(), newSimMinimizeCommand(), newSimCompareCommand())
	return sim
}

// shapeFlags are the flags that say what a seed runs, shared by every sim
// command: the cluster's shape (or --swarm), the safety phase, and the
// settings that override the seed's choices.
type shapeFlags struct {
	duration   time.Duration
	nodes      int
	brokers    int
	metaOnly   bool
	swarm      bool
	set        []string
	skipFaults string
}

func (f *shapeFlags) register(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.duration, "duration", simrun.DefaultDuration, "virtual time of the safety phase (the liveness phase follows)")
	cmd.Flags().IntVar(&f.nodes, "nodes", 1, "1 runs one broker with the data workload; 3 or more a KRaft cluster with the metadata workload")
	cmd.Flags().IntVar(&f.brokers, "broker-only", 0, brokerOnlyUsage)
	cmd.Flags().BoolVar(&f.metaOnly, "meta-only", false, "with --nodes 3 or more: the metadata clients alone, no producers or consumers")
	cmd.Flags().BoolVar(&f.swarm, "swarm", false, "let each seed choose its shape too: one broker, or 3 to 5 nodes, some broker-only (instead of --nodes)")
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "override one of the seed's choices, key=value as the summary line prints it (repeatable; an unknown key is refused with the list of keys)")
	cmd.Flags().StringVar(&f.skipFaults, "skip-faults", "", "fault draws that inject nothing, numbered from 0 (\"0-3,7\"), as sim minimize prints them")
}

// config checks the flags and returns the runs they describe, for every
// seed of a sweep (seed 0): --set then needs a shape, since each swarm
// seed chooses its own and the keys differ between one broker and a
// cluster.
func (f *shapeFlags) config(cmd *cobra.Command) (simrun.Config, error) {
	cfg, err := f.parse(cmd)
	if err != nil || len(cfg.Set) == 0 {
		return cfg, err
	}
	if cfg.Swarm {
		return cfg, errors.New("--set needs one shape for every seed: name it with --nodes instead of --swarm")
	}
	if _, err := simrun.Choose(cfg); err != nil {
		return cfg, fmt.Errorf("--set: %w", err)
	}
	return cfg, nil
}

// configFor checks the flags and returns the run of one seed. Its shape
// is known even under --swarm, so --set goes with --swarm here: a
// minimized swarm seed is replayed that way.
func (f *shapeFlags) configFor(cmd *cobra.Command, seed uint64) (simrun.Config, error) {
	cfg, err := f.parse(cmd)
	if err != nil {
		return cfg, err
	}
	cfg.Seed = seed
	if len(cfg.Set) > 0 {
		if _, err := simrun.Choose(cfg); err != nil {
			return cfg, fmt.Errorf("--set: %w", err)
		}
	}
	return cfg, nil
}

// parse checks the flags but --set's keys.
func (f *shapeFlags) parse(cmd *cobra.Command) (simrun.Config, error) {
	if err := checkDuration(f.duration); err != nil {
		return simrun.Config{}, err
	}
	if f.swarm && (cmd.Flags().Changed("nodes") || cmd.Flags().Changed("broker-only") || cmd.Flags().Changed("meta-only")) {
		return simrun.Config{}, errors.New("--swarm lets each seed choose its shape: leave out --nodes, --broker-only and --meta-only")
	}
	if !f.swarm {
		if err := checkNodes(f.nodes, f.brokers); err != nil {
			return simrun.Config{}, err
		}
	}
	skips, err := simrun.ParseDraws(f.skipFaults)
	if err != nil {
		return simrun.Config{}, fmt.Errorf("--skip-faults: %w", err)
	}
	return simrun.Config{Duration: f.duration, Nodes: f.nodes, BrokerOnly: f.brokers, MetaOnly: f.metaOnly, Swarm: f.swarm,
		Set: f.set, SkipFaults: skips}, nil
}

// runArgs are the arguments of sim run that replay cfg.
func runArgs(cfg simrun.Config) []string {
	return append([]string{"--seed", strconv.FormatUint(cfg.Seed, 10)}, shapeArgs(cfg)...)
}

// shapeArgs are the flags (shapeFlags) that give every seed cfg's shape,
// duration and settings.
func shapeArgs(cfg simrun.Config) []string {
	var args []string
	switch {
	case cfg.Swarm:
		args = append(args, "--swarm")
	case cfg.Nodes > 1:
		args = append(args, "--nodes", strconv.Itoa(cfg.Nodes))
		if cfg.BrokerOnly > 0 {
			args = append(args, "--broker-only", strconv.Itoa(cfg.BrokerOnly))
		}
		if cfg.MetaOnly {
			args = append(args, "--meta-only")
		}
	}
	args = append(args, "--duration", cfg.Duration.String())
	for _, kv := range cfg.Set {
		args = append(args, "--set", kv)
	}
	if len(cfg.SkipFaults) > 0 {
		args = append(args, "--skip-faults", simrun.FormatDraws(cfg.SkipFaults))
	}
	return args
}

// replayCommand is the command line that runs cfg alone.
func replayCommand(cfg simrun.Config) string {
	return "sluice sim run " + strings.Join(runArgs(cfg), " ")
}

func newSimRunCommand() *cobra.Command {
	var (
		seed     uint64
		shape    shapeFlags
		out      string
		logNodes bool
		trace    bool
		until    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run --seed N [--nodes N [--broker-only K] | --swarm] [--set key=value ...] [--duration D] [--trace] [--until T] [--out DIR]",
		Short: "Run one seed: print what it chose, then its summary line; exit 1 on a violation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := shape.configFor(cmd, seed)
			if err != nil {
				return err
			}
			if err := checkWritable(out); err != nil {
				return err
			}
			if until < 0 {
				return fmt.Errorf("--until %s: want a virtual time from the run's start", until)
			}
			cfg.Timeline, cfg.Until = out != "", until
			choice, err := simrun.Choose(cfg)
			if err != nil {
				return err
			}
			// What the seed chose comes first: a long run shows it at once.
			fmt.Fprintf(cmd.OutOrStdout(), "seed=%d chose %s\n", seed, choice)
			if logNodes {
				cfg.Log, cfg.LogLevel = cmd.ErrOrStderr(), slog.LevelDebug
			}
			if trace {
				bw := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<20)
				defer bw.Flush()
				cfg.Trace = bw
				fmt.Fprintf(bw, "%15s %-10s %-28s %-16s %-16s\n", "virtual time", "node", "event (or folded fact)", "digest (value)", "trace hash")
			}
			s := simrun.Run(cfg)
			if w, ok := cfg.Trace.(*bufio.Writer); ok {
				w.Flush() // the trace, then the summary
			}
			if s.Stopped > 0 {
				fmt.Fprint(cmd.OutOrStdout(), s.State)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Line())
			if out != "" {
				if err := writeSimArtifacts(out, s); err != nil {
					return err
				}
			}
			if !s.OK() {
				fmt.Fprintln(cmd.ErrOrStderr(), s.Details())
				return fmt.Errorf("seed %d: %w", seed, errSimFailed)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "the seed that decides everything in the run")
	shape.register(cmd)
	cmd.Flags().StringVar(&out, "out", "", "write the history, porcupine's visualization and the summary to this directory")
	cmd.Flags().BoolVar(&logNodes, "log", false, "write every node's logs and the faults injected, in virtual time, to stderr")
	cmd.Flags().BoolVar(&trace, "trace", false, "print every event the trace hash covers (virtual time, node, kind, payload digest, running hash), then the summary")
	cmd.Flags().DurationVar(&until, "until", 0, "stop at this virtual time and print each node's state (quorum, image, replicas with high watermark and log end, groups); the history is left unchecked")
	_ = cmd.MarkFlagRequired("seed")
	return cmd
}

func newSimSweepCommand() *cobra.Command {
	var (
		seeds    string
		shape    shapeFlags
		out      string
		verbose  bool
		parallel int
		worker   string
		heapMiB  uint64
	)
	cmd := &cobra.Command{
		Use:   "sweep --seeds A-B [--nodes N [--broker-only K] | --swarm] [--set key=value ...] [--duration D] [--parallel P] [--out DIR]",
		Short: "Run seeds A to B, in P processes at once; print how to replay each failure; exit 1 if any failed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			first, last, err := parseSeedRange(seeds)
			if err != nil {
				return err
			}
			base, err := shape.config(cmd)
			if err != nil {
				return err
			}
			if parallel < 1 || parallel > 256 {
				return fmt.Errorf("--parallel %d: want 1 to 256 processes", parallel)
			}
			if err := checkWritable(out); err != nil {
				return err
			}
			base.Timeline = out != "" // drawn for every seed; written for the failures
			if worker != "" {
				return sweepWorker(cmd.OutOrStdout(), base, first, last, worker, out, heapMiB<<20)
			}
			t := &sweepTally{w: cmd.OutOrStdout(), base: base, verbose: verbose, fired: map[string]int{}}
			if n := last - first + 1; parallel > 1 && n > 1 {
				err = sweepInProcesses(cmd.Context(), t, first, last, min(uint64(parallel), n), out, heapMiB)
			} else {
				err = sweepHere(t, first, last, out)
			}
			if err != nil {
				return err
			}
			return t.report()
		},
	}
	cmd.Flags().StringVar(&seeds, "seeds", "", "the seeds to run, A-B inclusive (or one seed)")
	shape.register(cmd)
	cmd.Flags().StringVar(&out, "out", "", "write each failed seed's artifacts to DIR/seed-N")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every seed's summary line, not only the failures'")
	cmd.Flags().IntVar(&parallel, "parallel", runtime.NumCPU(), "processes running seeds at once (a process runs one seed at a time)")
	cmd.Flags().StringVar(&worker, "worker", "", "internal: run the seeds of worker I of P (I/P) and print each result as JSON")
	_ = cmd.Flags().MarkHidden("worker")
	cmd.Flags().Uint64Var(&heapMiB, "worker-heap-limit", workerHeapLimitMiB, "internal: the heap, in MiB, past which a worker gives its seed up")
	_ = cmd.Flags().MarkHidden("worker-heap-limit")
	_ = cmd.MarkFlagRequired("seeds")
	return cmd
}

// seedResult is what a sweep learns of one seed: all a worker process
// tells its parent.
type seedResult struct {
	Seed   uint64   `json:"seed"`
	OK     bool     `json:"ok"`
	Line   string   `json:"line"`
	Probes []string `json:"probes"` // the probes that fired
}

func resultOf(s simrun.Summary) seedResult {
	r := seedResult{Seed: s.Seed, OK: s.OK(), Line: s.Line()}
	for _, c := range s.Probes {
		r.Probes = append(r.Probes, c.Name)
	}
	return r
}

// runSeed runs one seed of a sweep, writing its artifacts to
// out/seed-N if it fails and out is set.
func runSeed(base simrun.Config, seed uint64, out string) (seedResult, error) {
	cfg := base
	cfg.Seed = seed
	s := simrun.Run(cfg)
	if !s.OK() && out != "" {
		if err := writeSimArtifacts(filepath.Join(out, fmt.Sprintf("seed-%d", seed)), s); err != nil {
			return seedResult{}, err
		}
	}
	return resultOf(s), nil
}

// sweepHere runs the seeds one at a time in this process: each run swaps
// crypto/rand's reader, so two worlds never run at once in a process.
func sweepHere(t *sweepTally, first, last uint64, out string) error {
	for seed := first; ; seed++ {
		r, err := runSeed(t.base, seed, out)
		if err != nil {
			return err
		}
		t.add(r)
		if seed == last {
			return nil
		}
	}
}

// sweepWorker runs the seeds of worker i of p (first+i, first+i+p, ...)
// and prints each one's result as a JSON line for the parent sweep. A
// seed whose run grows the heap past heapLimit bytes ends the worker
// (workerHeapExit, the seed named on stderr): the parent counts the seed
// as failed and goes on without it, where the kernel's OOM killer would
// have taken the machine's memory first (swarm seed 5463: porcupine's
// search grew past 24 GB).
func sweepWorker(w io.Writer, base simrun.Config, first, last uint64, worker, out string, heapLimit uint64) error {
	var i, p uint64
	if _, err := fmt.Sscanf(worker, "%d/%d", &i, &p); err != nil || p == 0 || i >= p {
		return fmt.Errorf("--worker %q: want I/P with I < P", worker)
	}
	var running atomic.Uint64
	over := func(heap uint64) {
		fmt.Fprintf(os.Stderr, "seed %d: the heap grew to %d MiB, past the worker's limit of %d MiB\n",
			running.Load(), heap>>20, heapLimit>>20)
		os.Exit(workerHeapExit)
	}
	stop := watchHeap(heapLimit, over)
	defer stop()
	enc := json.NewEncoder(w)
	for seed := first + i; seed <= last && seed >= first; seed += p {
		running.Store(seed)
		r, err := runSeed(base, seed, out)
		if err != nil {
			return err
		}
		if heap := heapBytes(); heap > heapLimit {
			over(heap) // a seed too short for the watch to see it
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// workerHeapLimitMiB bounds a sweep worker's heap by default: a run's heap
// is tens of MB, its check's rarely hundreds.
const workerHeapLimitMiB = 4096

// watchHeap calls over, from a goroutine of its own, once the live heap
// passes limit, checking every 200 ms until the returned stop is called.
func watchHeap(limit uint64, over func(heap uint64)) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if heap := heapBytes(); heap > limit {
					over(heap)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// heapBytes is the heap's objects now, live or not yet swept.
func heapBytes() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// sweepExecutable is the program a parallel sweep starts its workers
// from: this one (tests point it at the built binary).
var sweepExecutable = os.Executable

// workerDeathsMax bounds how many workers a sweep starts again after they
// died in the middle of a seed: more is a broken program, not a seed.
const workerDeathsMax = 8

// workerEnd is how a worker process ended: err nil once it ran its share;
// running is the seed it was running when it died.
type workerEnd struct {
	i, running uint64
	err        error
	died       bool // ended by a signal or its heap guard in the middle of a seed (diedOfItsSeed)
}

// sweepInProcesses runs the seeds in p worker processes of this program,
// each taking every p-th seed, and tallies their results as they come.
// Each seed's run is the same as in one process (the trace hash says so);
// only the order in which failures are printed depends on timing. A worker
// that dies in the middle of a seed (killed, out of memory) fails that
// seed, with its replay command, and a new worker takes the rest of its
// share. Any other end of a worker ends the sweep with its error.
func sweepInProcesses(ctx context.Context, t *sweepTally, first, last, p uint64, out string, heapMiB uint64) error {
	exe, err := sweepExecutable()
	if err != nil {
		return fmt.Errorf("find this program to start the sweep's workers: %w", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// Interrupted, the sweep kills its workers (exec.CommandContext) and
	// ends with an error, instead of leaving them to finish their seeds.
	signalled, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(signalled)
	defer cancel() // a worker still running when this returns is killed
	results := make(chan seedResult)
	ends := make(chan workerEnd, p)
	// start runs worker i's share of the seeds from seed from on: the
	// seeds this sweep would, with its flags, as a replay of each seed
	// gives them.
	start := func(i, from uint64) error {
		args := append([]string{"sim", "sweep", "--seeds", fmt.Sprintf("%d-%d", from, last), "--parallel", "1"}, shapeArgs(t.base)...)
		if out != "" {
			args = append(args, "--out", out)
		}
		args = append(args, "--worker", fmt.Sprintf("0/%d", p), "--worker-heap-limit", strconv.FormatUint(heapMiB, 10))
		cmd := exec.CommandContext(ctx, exe, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			return fmt.Errorf("start sweep worker %d of %d: %w", i+1, p, err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			end := workerEnd{i: i, running: from}
			for sc.Scan() {
				var r seedResult
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					end.err = fmt.Errorf("sweep worker %d of %d printed %q: %w", i+1, p, sc.Text(), err)
					break
				}
				end.running = r.Seed + p
				results <- r
			}
			io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); end.err == nil && err != nil {
				end.died = end.running <= last && diedOfItsSeed(err)
				end.err = fmt.Errorf("%w%s", err, indented(strings.TrimSpace(stderr.String())))
			}
			ends <- end
		}()
		return nil
	}
	var failure error
	running := uint64(0)
	for i := range p {
		if err := start(i, first+i); err != nil {
			failure = err // the workers started already are killed, and waited for below
			cancel()
			break
		}
		running++
	}
	seen := map[uint64]bool{}
	deaths := 0
	for running > 0 {
		select {
		case r := <-results:
			if !seen[r.Seed] && r.Seed >= first && r.Seed <= last {
				seen[r.Seed] = true
				t.add(r)
			}
		case end := <-ends:
			running--
			switch {
			case end.err == nil || failure != nil || ctx.Err() != nil:
			case end.died && deaths < workerDeathsMax:
				deaths++
				seen[end.running] = true
				t.add(seedResult{Seed: end.running, Line: fmt.Sprintf("seed=%d result=died: the sweep worker running it ended: %v", end.running, end.err)})
				if next := end.running + p; next <= last {
					if err := start(end.i, next); err != nil {
						failure = err
						cancel()
					} else {
						running++
					}
				}
			default:
				failure = fmt.Errorf("sweep worker %d of %d: %w", end.i+1, p, end.err)
				cancel()
			}
		}
	}
	if signalled.Err() != nil {
		return fmt.Errorf("sweep interrupted after %d of %d seeds", len(seen), last-first+1)
	}
	if failure != nil {
		return failure
	}
	if n := uint64(len(seen)); n != last-first+1 {
		return fmt.Errorf("the sweep's workers reported %d of the %d seeds", n, last-first+1)
	}
	return nil
}

// diedOfItsSeed says a worker's exit is its seed's doing: the heap guard's
// exit status 3, or a signal (the kernel's OOM killer, an operator's kill).
// Any other error of a worker is the sweep's: it ends it.
func diedOfItsSeed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ee.ExitCode() == workerHeapExit || ok && ws.Signaled()
}

// workerHeapExit is the exit status of a worker whose seed grew the heap
// past its limit.
const workerHeapExit = 3

// indented is text on lines of their own, indented, for an error that
// quotes a process's output (nothing for none).
func indented(text string) string {
	if text == "" {
		return ""
	}
	return "\n    " + strings.ReplaceAll(text, "\n", "\n    ")
}

// sweepTally counts a sweep's results, printing each failure (and, if
// verbose, every seed) as it comes, and then the probes and the counts.
type sweepTally struct {
	w              io.Writer
	base           simrun.Config
	verbose        bool
	passed, failed int
	fired          map[string]int // probe -> seeds it fired in
}

func (t *sweepTally) add(r seedResult) {
	for _, name := range r.Probes {
		t.fired[name]++
	}
	if r.OK {
		t.passed++
		if t.verbose {
			fmt.Fprintln(t.w, r.Line)
		}
		return
	}
	t.failed++
	fmt.Fprintln(t.w, r.Line)
	cfg := t.base
	cfg.Seed = r.Seed
	fmt.Fprintf(t.w, "  replay: %s\n", replayCommand(cfg))
}

// report prints the probes and the counts, and says whether any seed
// failed.
func (t *sweepTally) report() error {
	var never, reached []string
	known := simrun.KnownProbes()
	switch {
	case t.base.Swarm:
		// Every shape's probes: a long swarm sweep reaches them all.
		for _, name := range simrun.KnownClusterProbes(false) {
			if !slices.Contains(known, name) {
				known = append(known, name)
			}
		}
	case t.base.Nodes > 1:
		known = simrun.KnownClusterProbes(t.base.MetaOnly)
	}
	for _, name := range known {
		if t.fired[name] == 0 {
			never = append(never, name)
		}
		reached = append(reached, fmt.Sprintf("%s=%d", name, t.fired[name]))
	}
	fmt.Fprintf(t.w, "probes (seeds that reached each, of %d): %s\n", t.passed+t.failed, strings.Join(reached, " "))
	if len(never) > 0 {
		fmt.Fprintf(t.w, "probes that never fired: %s\n", strings.Join(never, ", "))
	}
	fmt.Fprintf(t.w, "%d passed, %d failed\n", t.passed, t.failed)
	if t.failed > 0 {
		return fmt.Errorf("%d of %d seeds: %w", t.failed, t.passed+t.failed, errSimFailed)
	}
	return nil
}

// parseSeedRange reads "A-B" (inclusive, A <= B) or a single seed.
func parseSeedRange(s string) (first, last uint64, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	first, err = strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("--seeds %q: want A-B, two seeds with A <= B", s)
	}
	last = first
	if isRange {
		last, err = strconv.ParseUint(b, 10, 64)
		if err != nil || last < first {
			return 0, 0, fmt.Errorf("--seeds %q: want A-B, two seeds with A <= B", s)
		}
	}
	return first, last, nil
}

// checkNodes refuses a node count the simulator cannot run: a quorum of two
// survives no fault, and is no cluster run.
const brokerOnlyUsage = "with --nodes N: the last K nodes are broker-only (raft learners), the first N-K the voters (at least 3)"

func checkNodes(n, brokerOnly int) error {
	if n != 1 && (n < 3 || n > 9) {
		return fmt.Errorf("--nodes %d: want 1 (one broker) or 3 to 9 (a cluster)", n)
	}
	if brokerOnly != 0 && (brokerOnly < 0 || n-brokerOnly < 3) {
		return fmt.Errorf("--broker-only %d: want 0 to %d, leaving at least 3 of the %d nodes voters", brokerOnly, max(n-3, 0), n)
	}
	return nil
}

func checkDuration(d time.Duration) error {
	if d <= 0 || d > 24*time.Hour {
		return fmt.Errorf("--duration %s: want a virtual time above zero and at most 24h", d)
	}
	return nil
}

// checkWritable makes sure the artifacts of a run can be written to dir
// (creating it), before a run that may take long: an --out that cannot be
// written fails at once, not after the seed has run.
func checkWritable(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".sluice-write-check-*")
	if err != nil {
		return fmt.Errorf("--out %s cannot be written: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// writeSimArtifacts writes a run's history, porcupine's visualization of
// each partition, the timeline (if the run drew one) and the summary to
// dir.
func writeSimArtifacts(dir string, s simrun.Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	summary := s.Line() + "\n" + s.Details() + "\n"
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644); err != nil {
		return err
	}
	create := func(name string) (io.Writer, error) { return os.Create(filepath.Join(dir, name)) }
	if s.Timeline != nil {
		if err := jepsen.WriteTimelineArtifact(*s.Timeline, create); err != nil {
			return err
		}
	}
	if len(s.GroupHistory) > 0 {
		if err := jepsen.WriteGroupArtifacts(s.GroupHistory, create); err != nil {
			return err
		}
	}
	if s.Nodes > 1 {
		if err := jepsen.WriteMetaArtifacts(s.MetaHistory, jepsen.MetaConfig{Config: jepsen.Config{Timeout: simrun.DefaultCheckTimeout}}, create); err != nil {
			return err
		}
		if len(s.History) == 0 {
			return nil
		}
	}
	return jepsen.WriteArtifacts(s.History, jepsen.Config{Timeout: simrun.DefaultCheckTimeout}, create)
}
