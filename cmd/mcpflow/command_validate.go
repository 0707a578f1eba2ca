package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/workflow"
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
steps, inputs and expressions. Every error is reported at once, one a line, sorted
by position; each names the file, line and column.

With --discover, also connect to the servers the steps use and check that each
tool exists (naming the ones that do) and that literal arguments match the
tool's input schema; that a literal resource URI is one the server lists or one
of its templates'; and that each prompt exists and is given the arguments it
requires and none it does not take. Those errors join the same list. Nothing is
called or read.

With -o json, the result is {file, valid, workflow, steps, discovered, errors},
errors a list of {file, line, column, message}.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.file = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runValidate(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.discover, "discover", false, "connect to the servers and check tools, resources, prompts and arguments")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only: --discover may start the servers its files define")
	return cmd
}

// validationError is one error of validate -o json; line and column are 0
// for an error about the file as a whole.
type validationError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

func runValidate(ctx context.Context, o *validateOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	p := o.g.printer(o.Out)
	wf, err := svc.Validate(ctx, service.ValidateRequest{File: o.file, Discover: o.discover, TrustWorkspace: o.trustWorkspace})
	if err != nil {
		if list := validationErrors(err); list != nil && p.structured() {
			// The errors as data on stdout; as text on stderr, as always.
			v := map[string]any{"file": o.file, "valid": false, "discovered": o.discover, "errors": list}
			if perr := p.print(v, nil); perr != nil {
				return perr
			}
		}
		return err
	}
	v := map[string]any{"file": o.file, "valid": true, "workflow": wf.Name, "steps": len(wf.Steps), "discovered": o.discover, "errors": []validationError{}}
	return p.print(v, func(w io.Writer) error {
		checked := "checked"
		if o.discover {
			checked = "checked against the servers"
		}
		_, err := fmt.Fprintf(w, "%s: workflow %q is valid (%d steps, %s)\n", o.file, wf.Name, len(wf.Steps), checked)
		return err
	})
}

// validationErrors lists the errors of an invalid workflow; nil for any
// other error (a servers file that does not load, an untrusted workspace).
func validationErrors(err error) []validationError {
	var errs workflow.Errors
	var one *workflow.PosError
	switch {
	case errors.As(err, &errs):
	case errors.As(err, &one):
		errs = workflow.Errors{one}
	default:
		return nil
	}
	list := make([]validationError, len(errs))
	for i, e := range errs {
		list[i] = validationError{File: e.File, Line: e.Line, Column: e.Column, Message: e.Msg}
	}
	return list
}
