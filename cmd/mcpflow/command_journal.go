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
	cmd.AddCommand(
		newJournalListCommand(g, nil),
		newJournalShowCommand(g, nil),
		newJournalResolveCommand(g, nil),
		newJournalExportCommand(g, nil),
		newJournalCheckCommand(g, nil),
		newJournalPruneCommand(g, nil),
		newJournalCompactCommand(g, nil),
		newJournalSalvageCommand(g, nil),
	)
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
