package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/service"
)

type validateOptions struct {
	ioStreams
	g              *globals
	file           string
	discover       bool
	trustWorkspace bool
}

func newValidateCommand(g *globals, runF func(context.Context, *validateOptions) error) *cobra.Command {
	o := &validateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a workflow without running it",
		Long: `Check a workflow file: YAML syntax, unknown keys, step ids, references between
steps, inputs and expressions. Errors name the file, line and column.

With --discover, also connect to the servers the steps use and check that each
tool exists (naming the ones that do) and that literal arguments match the
tool's input schema. Nothing is called.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.file = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runValidate(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.discover, "discover", false, "connect to the servers and check tools and arguments")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only: --discover may start the servers its files define")
	return cmd
}

func runValidate(ctx context.Context, o *validateOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	wf, err := svc.Validate(ctx, service.ValidateRequest{File: o.file, Discover: o.discover, TrustWorkspace: o.trustWorkspace})
	if err != nil {
		return err
	}
	v := map[string]any{"file": o.file, "valid": true, "workflow": wf.Name, "steps": len(wf.Steps), "discovered": o.discover}
	return o.g.printer(o.Out).print(v, func(w io.Writer) error {
		checked := "checked"
		if o.discover {
			checked = "checked against the servers"
		}
		_, err := fmt.Fprintf(w, "%s: workflow %q is valid (%d steps, %s)\n", o.file, wf.Name, len(wf.Steps), checked)
		return err
	})
}
