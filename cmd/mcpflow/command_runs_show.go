package main

import (
	"context"
	"io"

	"github.com/mcpflow/mcpflow/api"
	"github.com/spf13/cobra"
)

type runsShowOptions struct {
	ioStreams
	g   *globals
	run string
}

func newRunsShowCommand(g *globals, runF func(context.Context, *runsShowOptions) error) *cobra.Command {
	o := &runsShowOptions{g: g}
	return &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show a run: its steps, states, timings, attempts and the audit trail of resolutions",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.run = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runRunsShow(o)
		},
	}
}

func runRunsShow(o *runsShowOptions) error {
	svc, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.RunDetail(o.run)
	if err != nil {
		return err
	}
	return o.g.printer(o.Out).print(api.RunOf(rep.Run, rep.Invocations), func(w io.Writer) error {
		return showRun(w, o.g.times, rep.Run, rep.Invocations)
	})
}
