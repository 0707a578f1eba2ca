package main

import (
	"fmt"
	"strconv"
	"strings"
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
		newJournalImportCommand(g, nil),
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
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration such as 24h or 7d, or a date such as 2026-12-01", s)
}
