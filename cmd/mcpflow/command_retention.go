package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

func newJournalPruneCommand(g *globals) *cobra.Command {
	var before string
	var dryRun bool
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
			if before == "" {
				return usageError("--before is required: a date (2026-01-01) or an age (720h)")
			}
			t, err := parseSince(before, time.Now())
			if err != nil {
				return usageError("--before: %v", err)
			}
			j, err := g.openJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			rep, err := j.Prune(t, dryRun)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				kept := make([]map[string]string, len(rep.Kept))
				for i, k := range rep.Kept {
					kept[i] = map[string]string{"run": k.ID.String(), "reason": k.Reason}
				}
				return g.writeObject(out, map[string]any{"dry_run": dryRun, "before": t, "runs": rep.Runs, "invocations": rep.Invocations, "kept": kept})
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(out, "%s %d runs and %d invocations that finished before %s\n", verb, rep.Runs, rep.Invocations, t.Local().Format(time.RFC3339))
			for _, k := range rep.Kept {
				fmt.Fprintf(out, "kept run %s: %s\n", k.ID.Short(), k.Reason)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "remove runs that finished before this date (2026-01-01, RFC 3339) or age (720h)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only report what would be removed")
	return cmd
}

func newJournalCompactCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the journal file to reclaim the space of pruned records",
		Long: `Rewrite the journal into a fresh file and replace the old one atomically. Nothing
is lost; the journal must not be in use by another mcpflow process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(g.journalPath); os.IsNotExist(err) {
				return &exitError{code: exitFailed, err: fmt.Errorf("no journal at %s", g.journalPath)}
			}
			before, after, err := journal.Compact(g.journalPath)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.writeObject(cmd.OutOrStdout(), map[string]any{"path": g.journalPath, "bytes_before": before, "bytes_after": after})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compacted %s: %d → %d bytes\n", g.journalPath, before, after)
			return nil
		},
	}
}
