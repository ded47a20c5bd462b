// Command sluice is Sluice's one binary. Each subcommand only wires packages
// together: the broker, the simulator and the checkers live in their own
// packages.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at link time by release builds (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Sluice: a Kafka-compatible message broker, single-node for now, tested by deterministic simulation",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newVersionCommand())
	root.AddCommand(newSimCommand(), newJepsenCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "sluice", version)
		},
	}
}
