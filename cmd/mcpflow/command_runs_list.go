package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/service"
)

type runsListOptions struct {
	ioStreams
	g                               *globals
	status, workflow, since, cursor string
	limit                           int
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
	cmd.Flags().StringVar(&o.workflow, "workflow", "", "only runs of the workflow of this name")
	cmd.Flags().StringVar(&o.since, "since", "", "only runs started since: a duration (90m, 24h, 7d) or a date (2026-12-01, RFC 3339)")
	cmd.Flags().IntVar(&o.limit, "limit", 50, "at most this many (0: all)")
	cmd.Flags().StringVar(&o.cursor, "cursor", "", "start after this run (the last id of the previous page), going back in time")
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
	since, err := sinceFlag(o.since)
	if err != nil {
		return err
	}
	q := service.RunQuery{Status: o.status, Workflow: o.workflow, Since: since, Cursor: o.cursor, Limit: o.limit}
	svc, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	runs, err := svc.Runs(q)
	if err != nil {
		return err
	}
	views := make([]api.Run, len(runs))
	for i := range runs {
		views[i] = api.RunOf(&runs[i].Run, runs[i].Invocations)
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		if len(runs) == 0 {
			_, err := fmt.Fprintln(w, "no runs match")
			return err
		}
		t := newTable(w, "ID", "WORKFLOW", "STATUS", "STEPS", "STARTED", "DURATION", "WAITING FOR")
		now := time.Now()
		for i, r := range runs {
			t.row(r.Run.ID.Short(), r.Run.Workflow, r.Run.Status.String(), fmt.Sprint(len(views[i].Steps)), o.g.times.ago(now, r.Run.StartedAt), duration(&r.Run, r.Invocations), waitingFor(&r.Run, r.Invocations))
		}
		if err := t.flush(); err != nil {
			return err
		}
		count := func() (service.Count, error) { return svc.CountRuns(q) }
		return noteCut(o.Err, len(runs), o.limit, count, "runs", runs[len(runs)-1].Run.ID.String(), o.cursor != "")
	})
}
