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

type journalListOptions struct {
	ioStreams
	g                               *globals
	run, state, server, tool, since string
	cursor                          string
	limit                           int
	payload                         bool
}

func newJournalListCommand(g *globals, runF func(context.Context, *journalListOptions) error) *cobra.Command {
	o := &journalListOptions{g: g}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List invocations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalList(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.run, "run", "", "only this run (id or unique prefix)")
	f.StringVar(&o.state, "state", "", "only this state: intent, completed, tool_error, failed, outcome_unknown, aborted, timed_out, skipped, retry_approved")
	f.StringVar(&o.server, "server", "", "only this server")
	f.StringVar(&o.tool, "tool", "", "only this tool")
	f.StringVar(&o.since, "since", "", "only invocations created since: a duration (90m, 24h) or a date (2026-12-01, RFC 3339)")
	f.IntVar(&o.limit, "limit", 50, "at most this many (0: all)")
	f.StringVar(&o.cursor, "cursor", "", "start after this invocation (the last id of the previous page), going back in time")
	f.BoolVar(&o.payload, "payload", false, "include arguments and results (JSON output)")
	return cmd
}

func runJournalList(o *journalListOptions) error {
	since, err := sinceFlag(o.since)
	if err != nil {
		return err
	}
	q := service.InvocationQuery{Run: o.run, State: o.state, Server: o.server, Tool: o.tool, Since: since, Cursor: o.cursor, Limit: o.limit}
	svc, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	invs, err := svc.Invocations(q)
	if err != nil {
		return err
	}
	views := make([]api.Invocation, len(invs))
	for i := range invs {
		views[i] = api.InvocationOf(&invs[i], o.payload)
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		if len(invs) == 0 {
			_, err := fmt.Fprintln(w, "no invocations match")
			return err
		}
		t := newTable(w, "ID", "RUN", "STEP", "SERVER", "TOOL", "STATE", "ATTEMPTS", "CREATED", "ERROR")
		now := time.Now()
		for _, inv := range invs {
			t.row(inv.ID.Short(), inv.RunID.Short(), stepName(&inv), inv.Server, toolText(&inv), stateText(&inv), fmt.Sprint(len(inv.Attempts)), o.g.times.ago(now, inv.CreatedAt), errorText(&inv))
		}
		if err := t.flush(); err != nil {
			return err
		}
		count := func() (service.Count, error) { return svc.CountInvocations(q) }
		return noteCut(o.Err, len(invs), o.limit, count, "invocations", invs[len(invs)-1].ID.String(), o.cursor != "")
	})
}
