package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	sim.AddCommand(newSimRunCommand(), newSimSweepCommand())
	return sim
}

func newSimRunCommand() *cobra.Command {
	var (
		seed     uint64
		duration time.Duration
		out      string
		logNodes bool
		nodes    int
		brokers  int
		metaOnly bool
	)
	cmd := &cobra.Command{
		Use:   "run --seed N [--nodes N [--broker-only K]] [--duration D] [--out DIR]",
		Short: "Run one seed and print its summary line; exit 1 on a violation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDuration(duration); err != nil {
				return err
			}
			if err := checkNodes(nodes, brokers); err != nil {
				return err
			}
			if err := checkWritable(out); err != nil {
				return err
			}
			cfg := simrun.Config{Seed: seed, Duration: duration, Nodes: nodes, BrokerOnly: brokers, MetaOnly: metaOnly}
			if logNodes {
				cfg.Log, cfg.LogLevel = cmd.ErrOrStderr(), slog.LevelDebug
			}
			s := simrun.Run(cfg)
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
	cmd.Flags().DurationVar(&duration, "duration", simrun.DefaultDuration, "virtual time of the safety phase (the liveness phase follows)")
	cmd.Flags().StringVar(&out, "out", "", "write the history, porcupine's visualization and the summary to this directory")
	cmd.Flags().IntVar(&nodes, "nodes", 1, "1 runs one broker with the data workload; 3 or more a KRaft cluster with the metadata workload")
	cmd.Flags().IntVar(&brokers, "broker-only", 0, brokerOnlyUsage)
	cmd.Flags().BoolVar(&metaOnly, "meta-only", false, "with --nodes 3 or more: the metadata clients alone, no producers or consumers")
	cmd.Flags().BoolVar(&logNodes, "log", false, "write every node's logs and the faults injected, in virtual time, to stderr")
	_ = cmd.MarkFlagRequired("seed")
	return cmd
}

func newSimSweepCommand() *cobra.Command {
	var (
		seeds    string
		duration time.Duration
		out      string
		verbose  bool
		nodes    int
		brokers  int
		metaOnly bool
	)
	cmd := &cobra.Command{
		Use:   "sweep --seeds A-B [--nodes N [--broker-only K]] [--duration D] [--out DIR]",
		Short: "Run seeds A to B one after another; print how to replay each failure; exit 1 if any failed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			first, last, err := parseSeedRange(seeds)
			if err != nil {
				return err
			}
			if err := checkDuration(duration); err != nil {
				return err
			}
			if err := checkNodes(nodes, brokers); err != nil {
				return err
			}
			if err := checkWritable(out); err != nil {
				return err
			}
			base := simrun.Config{Nodes: nodes, BrokerOnly: brokers, Duration: duration, MetaOnly: metaOnly}
			return sweep(cmd.OutOrStdout(), base, first, last, out, verbose)
		},
	}
	cmd.Flags().StringVar(&seeds, "seeds", "", "the seeds to run, A-B inclusive (or one seed)")
	cmd.Flags().DurationVar(&duration, "duration", simrun.DefaultDuration, "virtual time of each run's safety phase")
	cmd.Flags().StringVar(&out, "out", "", "write each failed seed's artifacts to DIR/seed-N")
	cmd.Flags().IntVar(&nodes, "nodes", 1, "the node count of every run (see sim run --nodes)")
	cmd.Flags().IntVar(&brokers, "broker-only", 0, brokerOnlyUsage)
	cmd.Flags().BoolVar(&metaOnly, "meta-only", false, "with --nodes 3 or more: the metadata clients alone")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every seed's summary line, not only the failures'")
	_ = cmd.MarkFlagRequired("seeds")
	return cmd
}

// sweep runs the seeds one at a time: each run swaps crypto/rand's reader,
// so two worlds never run at once in a process.
func sweep(w io.Writer, base simrun.Config, first, last uint64, out string, verbose bool) error {
	nodes, duration := base.Nodes, base.Duration
	passed, failed := 0, 0
	fired := make(map[string]int) // probe -> seeds it fired in
	for seed := first; ; seed++ {
		cfg := base
		cfg.Seed = seed
		s := simrun.Run(cfg)
		for _, c := range s.Probes {
			fired[c.Name]++
		}
		if s.OK() {
			passed++
			if verbose {
				fmt.Fprintln(w, s.Line())
			}
		} else {
			failed++
			fmt.Fprintln(w, s.Line())
			if nodes > 1 {
				flag := ""
				if base.MetaOnly {
					flag = " --meta-only"
				}
				if base.BrokerOnly > 0 {
					flag += fmt.Sprintf(" --broker-only %d", base.BrokerOnly)
				}
				fmt.Fprintf(w, "  replay: sluice sim run%s --nodes %d --seed %d --duration %s\n", flag, nodes, seed, duration)
			} else {
				fmt.Fprintf(w, "  replay: sluice sim run --seed %d --duration %s\n", seed, duration)
			}
			if out != "" {
				if err := writeSimArtifacts(filepath.Join(out, fmt.Sprintf("seed-%d", seed)), s); err != nil {
					return err
				}
			}
		}
		if seed == last {
			break
		}
	}
	var never, reached []string
	known := simrun.KnownProbes()
	if nodes > 1 {
		known = simrun.KnownClusterProbes(base.MetaOnly)
	}
	for _, name := range known {
		if fired[name] == 0 {
			never = append(never, name)
		}
		reached = append(reached, fmt.Sprintf("%s=%d", name, fired[name]))
	}
	fmt.Fprintf(w, "probes (seeds that reached each, of %d): %s\n", passed+failed, strings.Join(reached, " "))
	if len(never) > 0 {
		fmt.Fprintf(w, "probes that never fired: %s\n", strings.Join(never, ", "))
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d seeds: %w", failed, passed+failed, errSimFailed)
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
// each partition and the summary to dir.
func writeSimArtifacts(dir string, s simrun.Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	summary := s.Line() + "\n" + s.Details() + "\n"
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644); err != nil {
		return err
	}
	if s.Nodes > 1 {
		return jepsen.WriteMetaArtifacts(s.MetaHistory, jepsen.MetaConfig{Config: jepsen.Config{Timeout: simrun.DefaultCheckTimeout}}, func(name string) (io.Writer, error) {
			return os.Create(filepath.Join(dir, name))
		})
	}
	return jepsen.WriteArtifacts(s.History, jepsen.Config{Timeout: simrun.DefaultCheckTimeout}, func(name string) (io.Writer, error) {
		return os.Create(filepath.Join(dir, name))
	})
}
