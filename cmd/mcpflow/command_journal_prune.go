package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

type journalPruneOptions struct {
	ioStreams
	g      *globals
	before string
	dryRun bool
}

func newJournalPruneCommand(g *globals, runF func(context.Context, *journalPruneOptions) error) *cobra.Command {
	o := &journalPruneOptions{g: g}
	cmd := &cobra.Command{
		Use:   "prune --before DATE|AGE",
		Short: "Remove finished runs older than a date, with their invocations",
		Long: `Remove the runs that finished before a date, with their invocations. A running
run is never removed, nor a run with an invocation whose outcome nobody has
accounted for (intent, outcome_unknown, retry_approved). The file does not
shrink: run 'mcpflow journal compact' afterwards to reclaim the space.`,
		Example: `  mcpflow journal prune --before 2026-01-01
  mcpflow journal prune --before 2160h --dry-run   # older than 90 days`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalPrune(o)
		},
	}
	cmd.Flags().StringVar(&o.before, "before", "", "remove runs that finished before this date (2026-01-01, RFC 3339) or age (720h)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "only report what would be removed")
	return cmd
}

func runJournalPrune(o *journalPruneOptions) error {
	if o.before == "" {
		return usageError("--before is required: a date (2026-01-01) or an age (720h)")
	}
	t, err := parseSince(o.before, time.Now())
	if err != nil {
		return usageError("--before: %v", err)
	}
	if err := o.g.exclusive("journal prune"); err != nil {
		return err
	}
	svc, done, err := o.g.service(writeJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Prune(t, o.dryRun)
	if err != nil {
		return err
	}
	kept := make([]map[string]string, len(rep.Kept))
	for i, k := range rep.Kept {
		kept[i] = map[string]string{"run": k.ID.String(), "reason": k.Reason}
	}
	v := map[string]any{"dry_run": o.dryRun, "before": t, "runs": rep.Runs, "invocations": rep.Invocations, "kept": kept}
	return o.g.printer(o.Out).print(v, func(w io.Writer) error {
		verb := "removed"
		if o.dryRun {
			verb = "would remove"
		}
		fmt.Fprintf(w, "%s %d runs and %d invocations that finished before %s\n", verb, rep.Runs, rep.Invocations, t.Local().Format(time.RFC3339))
		for _, k := range rep.Kept {
			fmt.Fprintf(w, "kept run %s: %s\n", k.ID.Short(), k.Reason)
		}
		return nil
	})
}
