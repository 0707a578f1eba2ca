package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/trust"
)

func newTrustAddCommand(g *globals, runF func(*trustOptions) error) *cobra.Command {
	return trustCommand(g, "add [DIR]", "Trust a directory (default: the workspace) and everything under it", runF, runTrustAdd)
}

func runTrustAdd(o *trustOptions) error {
	store := o.g.trustStore()
	if err := store.Add(o.dir); err != nil {
		return err
	}
	canon, _ := trust.CanonicalPath(o.dir)
	_, err := fmt.Fprintf(o.Out, "trusted %s (kept in %s)\n", canon, store.Path())
	return err
}
