package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/mcpflow/mcpflow/door"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mcpflow's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := versionOf()
			return g.printer(cmd.OutOrStdout()).print(map[string]any{"version": v, "journal_schema": door.SchemaVersion}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, versionLine())
				return err
			})
		},
	}
}

// versionOf is mcpflow's version: the one set at build time, else the
// module's (go install …@v1.2.3), else dev with the VCS revision it was
// built from, when the build recorded it ("dev+abc123def456", "+dirty"
// for uncommitted changes).
func versionOf() string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			v += "+" + s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			defer func() { v += "+dirty" }()
		}
	}
	return v
}

// versionLine is what version and --version print.
func versionLine() string {
	return fmt.Sprintf("mcpflow %s (journal schema %d)", versionOf(), door.SchemaVersion)
}
