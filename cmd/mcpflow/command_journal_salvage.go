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

type journalSalvageOptions struct {
	ioStreams
	g   *globals
	out string
}

func newJournalSalvageCommand(g *globals, runF func(context.Context, *journalSalvageOptions) error) *cobra.Command {
	o := &journalSalvageOptions{g: g}
	return &cobra.Command{
		Use:   "salvage OUT",
		Short: "Copy every readable record of a damaged journal into a new one",
		Long: `Copy every run and invocation of the journal that can still be read — each
record's checksum verified — into a new journal at OUT, with its indexes rebuilt,
and list what could not be copied. Writes that a crash left in the journal's log
(the file beside it ending in -wal) are copied too. The damaged journal and its
log are only read. Check the new one, then use it with --journal OUT, or move it
into place after moving the old journal and its log away.`,
		Example: `  mcpflow journal salvage .mcpflow/saved.db
  mcpflow --journal .mcpflow/saved.db journal check`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.out = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalSalvage(o)
		},
	}
}

func runJournalSalvage(o *journalSalvageOptions) error {
	if err := o.g.exclusive("journal salvage"); err != nil {
		return err
	}
	path := o.g.journalPath
	if journal.IsPostgres(path) {
		return usageError("journal salvage works on a bbolt file; a PostgreSQL journal is restored from the database's own backups")
	}
	if _, err := os.Stat(path); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("no journal at %s", path)}
	}
	key, err := o.g.journalKey(false)
	if err != nil {
		return err
	}
	rep, err := door.Salvage(path, o.out, key)
	if err != nil {
		return err
	}
	lost := make([]map[string]string, len(rep.Lost))
	for i, l := range rep.Lost {
		lost[i] = map[string]string{"kind": l.Kind, "key": l.Key, "reason": l.Reason}
	}
	v := map[string]any{"from": path, "to": o.out, "runs": rep.Runs, "invocations": rep.Invocations, "from_log": rep.FromLog, "lost": lost}
	return o.g.printer(o.Out).print(v, func(w io.Writer) error {
		fmt.Fprintf(w, "copied %d runs and %d invocations from %s to %s\n", rep.Runs, rep.Invocations, path, o.out)
		if rep.FromLog > 0 {
			fmt.Fprintf(w, "%d of those records were taken from its log, which held writes the file did not\n", rep.FromLog)
		}
		for _, l := range rep.Lost {
			fmt.Fprintf(w, "lost %s %s: %s\n", l.Kind, l.Key, l.Reason)
		}
		if len(rep.Lost) == 0 {
			fmt.Fprintln(w, "nothing was lost")
		}
		return nil
	})
}
