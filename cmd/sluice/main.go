// Command sluice is Sluice's one binary. Each subcommand only wires packages
// together: the broker, the simulator and the checkers live in their own
// packages.
package main

import (
	"errors"
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
		Short:         "Sluice: a Kafka-compatible, replicated message broker tested by deterministic simulation",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newVersionCommand())
	return root
}

// errBrokerNotBuilt is what serve says until the broker lands: plainly, and
// with a non-zero exit, so no one mistakes it for a running broker.
var errBrokerNotBuilt = errors.New("the broker is not built yet: `serve` arrives with the wire server and the node (issue 4); `make test` runs what exists")

func newServeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run a broker (not yet available)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errBrokerNotBuilt
		},
	}
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
