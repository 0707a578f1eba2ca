package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mcpflow's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := version
			if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			return g.printer(cmd.OutOrStdout()).print(map[string]any{"version": v, "journal_schema": journal.SchemaVersion}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "mcpflow %s (journal schema %d)\n", v, journal.SchemaVersion)
				return err
			})
		},
	}
}
