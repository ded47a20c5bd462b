package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/jepsen/simrun"
)

func newSimCompareCommand() *cobra.Command {
	var (
		seed  uint64
		shape shapeFlags
	)
	cmd := &cobra.Command{
		Use:   "compare --seed N [--nodes N [--broker-only K] | --swarm] [--set key=value ...] [--duration D]",
		Short: "Run a seed's workload without faults under configurations that must not change what clients see; exit 1 on a difference",
		Long: `compare runs the seed with no faults as a base, then under each variant of
its configuration that must not change what the clients see: for one
broker, fetches served by sendfile, by copy or every chunk from the file,
one or five produces in flight, 1 KiB or 1 MiB segments, an index entry
for every batch, a checkpoint every 500 ms; for a cluster, replication
factor 1 or 3, small or large metadata snapshot intervals, fetch paths.
Each variant must pass its own checks, and its producers must have been
told the same: for each producer and partition, one run's acknowledged
values the beginning of the other's, in order, and at the same offsets
where the partition has one producer. A difference is printed with the
variant's replay command.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := shape.configFor(cmd, seed)
			if err != nil {
				return err
			}
			choice, err := simrun.Choose(cfg)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			c := simrun.Compare(cfg, simrun.Variants(choice.Shape.Nodes > 1))
			fmt.Fprintf(w, "base:  %s\n", c.Base.Line())
			if !c.Base.OK() {
				fmt.Fprintln(cmd.ErrOrStderr(), c.Base.Details())
				return fmt.Errorf("seed %d: the base run without faults fails: %w", seed, errSimFailed)
			}
			differ := 0
			skipped := 0
			for _, v := range c.Variants {
				if v.Skipped != "" {
					fmt.Fprintf(w, "%-18s skipped: %s\n", v.Name, v.Skipped)
					skipped++
					continue
				}
				verdict := "same"
				if len(v.Differences) > 0 {
					verdict, differ = "DIFFERS", differ+1
				}
				fmt.Fprintf(w, "%-18s %s: %s\n", v.Name, verdict, v.Summary.Line())
				for _, d := range v.Differences {
					fmt.Fprintf(w, "  %s\n", d)
				}
				if len(v.Differences) > 0 {
					fmt.Fprintf(w, "  replay: %s\n", replayCommand(v.Config))
				}
			}
			fmt.Fprintf(w, "%d variants the same, %d differ\n", len(c.Variants)-differ-skipped, differ)
			if differ > 0 {
				return fmt.Errorf("seed %d: %d of %d variants differ: %w", seed, differ, len(c.Variants), errSimFailed)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "the seed whose workload is compared")
	shape.register(cmd)
	_ = cmd.MarkFlagRequired("seed")
	return cmd
}
