package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
)

type journalCompactOptions struct {
	ioStreams
	g *globals
}

func newJournalCompactCommand(g *globals, runF func(context.Context, *journalCompactOptions) error) *cobra.Command {
	o := &journalCompactOptions{g: g}
	return &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the journal file to reclaim the space of pruned records",
		Long: `Rewrite the journal into a fresh file and replace the old one atomically. Nothing
is lost; the journal must not be in use by another mcpflow process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalCompact(o)
		},
	}
}

// runJournalCompact replaces the journal file itself: it works on the path,
// with no journal open.
func runJournalCompact(o *journalCompactOptions) error {
	if err := o.g.exclusive("journal compact"); err != nil {
		return err
	}
	path := o.g.journalPath
	if journal.IsPostgres(path) {
		return usageError("journal compact works on a bbolt file; PostgreSQL reclaims space itself (autovacuum, or VACUUM FULL)")
	}
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return &exitError{code: exitFailed, err: fmt.Errorf("no journal at %s", path)}
	}
	before, after, err := door.Compact(path)
	if err != nil {
		return err
	}
	return o.g.printer(o.Out).print(map[string]any{"path": path, "bytes_before": before, "bytes_after": after}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "compacted %s: %d → %d bytes\n", path, before, after)
		return err
	})
}
