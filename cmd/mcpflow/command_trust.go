package main

import (
	"github.com/spf13/cobra"
)

func newTrustCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Manage the workspaces you trust",
		Long: `Workspace trust is your decision that calls made from a directory may be
replayed after a lost connection, when the server is trusted (trust: true) and
the tool declares the call safe. It is kept in your own configuration
directory ($XDG_CONFIG_HOME/mcpflow or ~/.config/mcpflow) and never in a file
of the workspace: nothing a workflow or a config file says can grant it.

A trusted directory covers its subdirectories. Paths are stored absolute with
symlinks resolved. --trust-workspace on run, resume and call trusts the
workspace for that command only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow trust add [DIR]', 'remove [DIR]' or 'list'")
		},
	}
	cmd.AddCommand(newTrustAddCommand(g, nil), newTrustRemoveCommand(g, nil), newTrustListCommand(g, nil))
	return cmd
}

// trustOptions are the options of trust add, remove and list: one
// directory, the workspace by default.
type trustOptions struct {
	ioStreams
	g   *globals
	dir string
	// given: the directory was named on the command line.
	given bool
}

func trustCommand(g *globals, use, short string, runF, run func(*trustOptions) error) *cobra.Command {
	o := &trustOptions{g: g}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.dir, o.given = streams(cmd), g.workspace, len(args) == 1
			if o.given {
				o.dir = args[0]
			}
			if runF != nil {
				return runF(o)
			}
			return run(o)
		},
	}
}
