package main

import (
	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

func newDemoServerCommand() *cobra.Command {
	cfg := &demo.Config{}
	cmd := &cobra.Command{
		Use:   "demo-server",
		Short: "Serve the built-in demo MCP server (stdio by default)",
		Long: `Serve the built-in demo MCP server. Workflows reach it with 'builtin: demo',
which starts this command over stdio. Its tools cover every interesting
annotation shape and append each execution to a ledger file; fault flags make
it crash or drop connections at chosen moments, for trying out replay.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return demo.Serve(cmd.Context(), *cfg, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}
