package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/jepsen/simrun"
)

func newSimMinimizeCommand() *cobra.Command {
	var (
		seed   uint64
		shape  shapeFlags
		budget int
		save   string
	)
	cmd := &cobra.Command{
		Use:   "minimize --seed N [the flags of the failing sim run] [--budget R] [--save FILE]",
		Short: "Shrink a failing seed's faults, workload and duration while the same violation appears; print the replay command of the smallest run",
		Long: `minimize runs a failing seed, then smaller and smaller runs of it, keeping
each one that still shows the same violation (the same checker, on the same
partition or topic): the safety phase halved, the fault kinds taken out (all
of them first), the workload cut to one producer, one consumer, one
partition, no groups, then single fault draws skipped (halves first). It
prints every try, then the smallest failing run's summary and the command
that replays it. --save FILE writes that command as a regression case:
make test replays every file under cmd/sluice/testdata/sim-regressions and
requires it to pass, so the bug it found stays fixed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := shape.configFor(cmd, seed)
			if err != nil {
				return err
			}
			if budget < 1 || budget > 10000 {
				return fmt.Errorf("--budget %d: want 1 to 10000 runs", budget)
			}
			if save != "" {
				if err := checkWritable(filepath.Dir(save)); err != nil {
					return fmt.Errorf("--save %s: %w", save, err)
				}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "minimizing: %s\n", replayCommand(cfg))
			m, err := simrun.Minimize(cfg, budget, func(change string, s simrun.Summary, kept bool) {
				verdict := "passes"
				switch {
				case kept:
					verdict = "same violation: kept"
				case !s.OK():
					verdict = "another violation: " + findingsString(s.Findings())
				}
				fmt.Fprintf(w, "  try %-40s %s\n", change+":", verdict)
			})
			if errors.Is(err, simrun.ErrPasses) {
				return fmt.Errorf("seed %d passes (%s): there is no violation to minimize", seed, m.Summary.Line())
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "violation: %s\n", m.Finding)
			fmt.Fprintf(w, "smallest of %d runs: %s\n", m.Runs, m.Summary.Line())
			fmt.Fprintf(w, "replay: %s\n", replayCommand(m.Smallest))
			if save != "" {
				if err := os.WriteFile(save, []byte(regressionCase(m)), 0o644); err != nil {
					return fmt.Errorf("--save: %w", err)
				}
				fmt.Fprintf(w, "saved as a regression case: %s\n", save)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "the failing seed")
	shape.register(cmd)
	cmd.Flags().IntVar(&budget, "budget", 200, "the most runs to try, the first included")
	cmd.Flags().StringVar(&save, "save", "", "write the smallest run's replay command to FILE as a regression case")
	_ = cmd.MarkFlagRequired("seed")
	return cmd
}

func findingsString(fs []simrun.Finding) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.String()
	}
	return strings.Join(names, ", ")
}

// regressionCase is a regression file's text: comments saying what the
// run found, then the sim run arguments that replay it.
func regressionCase(m simrun.Minimized) string {
	return fmt.Sprintf("# A regression case written by sluice sim minimize: this run once showed\n# %s. make test replays it (cmd/sluice TestSimRegressions) and requires it to pass.\n# It failed as: %s\n%s\n",
		m.Finding, m.Summary.Line(), replayCommand(m.Smallest))
}
