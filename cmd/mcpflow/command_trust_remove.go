package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newTrustRemoveCommand(g *globals, runF func(*trustOptions) error) *cobra.Command {
	return trustCommand(g, "remove [DIR]", "Stop trusting a directory (default: the workspace)", runF, runTrustRemove)
}

func runTrustRemove(o *trustOptions) error {
	if err := o.g.trustStore().Remove(o.dir); err != nil {
		return err
	}
	_, err := fmt.Fprintf(o.Out, "no longer trusted: %s\n", o.dir)
	return err
}
