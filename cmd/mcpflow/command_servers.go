package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/upstream"
)

func newServersCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "servers",
		Short: "List configured MCP servers and their tools, resources and prompts",
		Long: `List the MCP servers configured in the workspace's mcpflow.yaml (and its
imports), in --servers FILE, and — with --workflow FILE — in a workflow.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow servers list', 'mcpflow servers tools NAME', 'mcpflow servers resources NAME', 'mcpflow servers prompts NAME' or 'mcpflow servers login NAME'")
		},
	}
	var workflow string
	cmd.PersistentFlags().StringVar(&workflow, "workflow", "", "also the servers a workflow file declares")
	cmd.AddCommand(newServersListCommand(g, &workflow, nil), newServersToolsCommand(g, &workflow, nil),
		newServersResourcesCommand(g, &workflow, nil), newServersPromptsCommand(g, &workflow, nil),
		newServersLoginCommand(g, &workflow), newServersLogoutCommand(g, &workflow))
	return cmd
}

// target is where the server is, as it would be started now: defaults of
// unset variables applied, values of set ones not shown
// (upstream.Server.Displayed).
func target(s *upstream.Server) string {
	s = s.Displayed(os.LookupEnv)
	switch {
	case s.Builtin != "":
		return "builtin " + s.Builtin
	case s.URL != "":
		return s.URL
	}
	return strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
}

func trustWord(b bool) string {
	if b {
		return "trusted"
	}
	return "-"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
