package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

func newJournalCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "journal",
		Short: "Inspect the invocation journal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow journal list'")
		},
	}
	cmd.AddCommand(newJournalListCommand(g))
	return cmd
}

type journalListOptions struct {
	run, state, server, tool, since string
	limit                           int
	payload                         bool
}

func (o *journalListOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.run, "run", "", "only this run (id or unique prefix)")
	f.StringVar(&o.state, "state", "", "only this state: intent, completed, failed, outcome_unknown, aborted, timed_out, skipped, retry_approved")
	f.StringVar(&o.server, "server", "", "only this server")
	f.StringVar(&o.tool, "tool", "", "only this tool")
	f.StringVar(&o.since, "since", "", "only invocations created since: a duration (90m, 24h) or a date (2026-12-01, RFC 3339)")
	f.IntVar(&o.limit, "limit", 50, "at most this many (0: all)")
	f.BoolVar(&o.payload, "payload", false, "include arguments and results (JSON output)")
}

func newJournalListCommand(g *globals) *cobra.Command {
	o := &journalListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List invocations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			f := journal.Filter{Server: o.server, Tool: o.tool, Limit: o.limit}
			if o.run != "" {
				if f.Run, err = j.FindRun(o.run); err != nil {
					return usageError("--run: %v", err)
				}
			}
			if o.state != "" {
				if f.State, err = journal.ParseState(o.state); err != nil {
					return usageError("--state: %v", err)
				}
			}
			if o.since != "" {
				if f.Since, err = parseSince(o.since, time.Now()); err != nil {
					return usageError("--since: %v", err)
				}
			}
			invs, err := j.Invocations(f)
			if err != nil {
				return err
			}
			views := make([]invocationView, len(invs))
			for i := range invs {
				views[i] = invView(&invs[i], o.payload)
			}
			out := cmd.OutOrStdout()
			switch g.output {
			case "json":
				return writeJSON(out, views)
			case "jsonl":
				return writeJSONL(out, views)
			}
			if len(invs) == 0 {
				fmt.Fprintln(out, "no invocations match")
				return nil
			}
			t := newTable(out, "ID", "RUN", "STEP", "SERVER", "TOOL", "STATE", "ATTEMPTS", "CREATED")
			now := time.Now()
			for _, inv := range invs {
				t.row(inv.ID.Short(), inv.RunID.Short(), stepName(&inv), inv.Server, inv.Tool, inv.State.String(), fmt.Sprint(len(inv.Attempts)), ago(now, inv.CreatedAt))
			}
			return t.flush()
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func stepName(inv *journal.Invocation) string {
	if inv.Item >= 0 {
		return fmt.Sprintf("%s[%d]", inv.Step, inv.Item)
	}
	return inv.Step
}

// parseSince accepts a duration back from now or an absolute date/time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration such as 24h or a date such as 2026-12-01", s)
}
