package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/service"
)

type runsListOptions struct {
	ioStreams
	g      *globals
	status string
	limit  int
}

func newRunsListCommand(g *globals, runF func(context.Context, *runsListOptions) error) *cobra.Command {
	o := &runsListOptions{g: g}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runRunsList(o)
		},
	}
	cmd.Flags().StringVar(&o.status, "status", "", "only runs in this status: running, succeeded, failed, blocked, cancelled")
	cmd.Flags().IntVar(&o.limit, "limit", 50, "at most this many (0: all)")
	return cmd
}

func runRunsList(o *runsListOptions) error {
	if o.status != "" {
		// Checked before the journal is opened: a typo is a usage error
		// even where nothing has run yet.
		if _, err := service.ParseRunStatus(o.status); err != nil {
			return err
		}
	}
	svc, done, err := o.g.service(readJournal)
	if err != nil {
		return err
	}
	defer done()
	runs, err := svc.Runs(service.RunQuery{Status: o.status, Limit: o.limit})
	if err != nil {
		return err
	}
	views := make([]runObject, len(runs))
	for i := range runs {
		views[i] = runView(&runs[i].Run, runs[i].Invocations)
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		if len(runs) == 0 {
			_, err := fmt.Fprintln(w, "no runs match")
			return err
		}
		t := newTable(w, "ID", "WORKFLOW", "STATUS", "STEPS", "STARTED", "DURATION", "WAITING FOR")
		now := time.Now()
		for i, r := range runs {
			t.row(r.Run.ID.Short(), r.Run.Workflow, r.Run.Status.String(), fmt.Sprint(len(views[i].Steps)), ago(now, r.Run.StartedAt), duration(r.Run), waitingFor(&r.Run, r.Invocations))
		}
		return t.flush()
	})
}
