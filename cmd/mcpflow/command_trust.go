package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/trust"
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
	dirArg := func(args []string) string {
		if len(args) == 1 {
			return args[0]
		}
		return g.workspace
	}
	add := &cobra.Command{
		Use:   "add [DIR]",
		Short: "Trust a directory (default: the workspace) and everything under it",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store := g.trustStore()
			if err := store.Add(dirArg(args)); err != nil {
				return err
			}
			canon, _ := trust.CanonicalPath(dirArg(args))
			fmt.Fprintf(cmd.OutOrStdout(), "trusted %s (kept in %s)\n", canon, store.Path())
			return nil
		},
	}
	remove := &cobra.Command{
		Use:   "remove [DIR]",
		Short: "Stop trusting a directory (default: the workspace)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.trustStore().Remove(dirArg(args)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "no longer trusted: %s\n", dirArg(args))
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list [DIR]",
		Short: "List trusted directories, or say whether DIR is trusted",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store := g.trustStore()
			out := cmd.OutOrStdout()
			if len(args) == 1 {
				ok, by, err := store.Trusted(args[0])
				if err != nil {
					return err
				}
				if g.output != "table" {
					return g.writeObject(out, map[string]any{"path": args[0], "trusted": ok, "by": by})
				}
				if ok {
					fmt.Fprintf(out, "%s is trusted (by %s)\n", args[0], by)
				} else {
					fmt.Fprintf(out, "%s is not trusted\n", args[0])
				}
				return nil
			}
			dirs, err := store.List()
			if err != nil {
				return err
			}
			if g.output != "table" {
				if dirs == nil {
					dirs = []string{}
				}
				if g.output == "jsonl" {
					return writeJSONL(out, dirs)
				}
				return writeJSON(out, dirs)
			}
			if len(dirs) == 0 {
				fmt.Fprintln(out, "no trusted workspaces (mcpflow trust add [DIR] adds one)")
			}
			for _, d := range dirs {
				fmt.Fprintln(out, d)
			}
			return nil
		},
	}
	cmd.AddCommand(add, remove, list)
	return cmd
}
