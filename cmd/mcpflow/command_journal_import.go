package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

type journalImportOptions struct {
	ioStreams
	g    *globals
	file string
}

func newJournalImportCommand(g *globals, runF func(context.Context, *journalImportOptions) error) *cobra.Command {
	o := &journalImportOptions{g: g}
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Write the records of an archive (journal export --archive) into this journal",
		Long: `Write every record of an archive made by 'mcpflow journal export --archive' into the
journal (--journal or MCPFLOW_JOURNAL): runs with their approvals, invocations with
their attempts, decisions and resolutions, exactly as they were. This moves a journal
between backends: from the bbolt file to PostgreSQL, or back. FILE - reads stdin.

A record the journal has already (same id) is left as it is, so an import that
stopped can be run again. Encrypted payloads stay encrypted: the journal must have
the key of the journal they came from (MCPFLOW_JOURNAL_KEY; the default key file is
per user, so one user's journals share it). A run that was running when it was
exported is resumed as after a crash: by 'mcpflow resume', or by a worker on
PostgreSQL.`,
		Example: `  mcpflow journal export --archive > archive.jsonl
  mcpflow --journal postgres://mcpflow@db/mcpflow journal import archive.jsonl`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.file = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalImport(o)
		},
	}
}

func runJournalImport(o *journalImportOptions) error {
	if !journal.IsPostgres(o.g.journalPath) {
		// The file has one writer.
		if err := o.g.exclusive("journal import"); err != nil {
			return err
		}
	}
	var in io.Reader = o.In
	if o.file != "-" {
		f, err := os.Open(o.file)
		if err != nil {
			return usageError("%v", err)
		}
		defer f.Close()
		in = f
	}
	svc, done, err := o.g.service(writeJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Import(in)
	where := journal.Redact(o.g.journalPath)
	if errors.Is(err, journal.ErrInvalid) {
		return fmt.Errorf("import %s into %s (imported: %d runs, %d invocations): %w\nfix the refused runs in %s and import it again: the runs imported are left as they are", o.file, where, rep.Runs, rep.Invocations, err, o.file)
	}
	if err != nil {
		return fmt.Errorf("import %s into %s (imported: %d runs, %d invocations): %w", o.file, where, rep.Runs, rep.Invocations, err)
	}
	return o.g.printer(o.Out).print(rep, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "imported %d runs and %d invocations into %s (%d records were there already)\n", rep.Runs, rep.Invocations, where, rep.Present)
		return err
	})
}
