package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/spf13/cobra"
)

type journalExportOptions struct {
	ioStreams
	g       *globals
	since   string
	decrypt bool
	archive bool
}

func newJournalExportCommand(g *globals, runF func(context.Context, *journalExportOptions) error) *cobra.Command {
	o := &journalExportOptions{g: g}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write every invocation record as JSON Lines to stdout, oldest first",
		Long: `Write every invocation record as JSON Lines to stdout, oldest first: one
invocation object per line, with its attempts, decisions and resolutions, its
arguments and result sealed unless --decrypt.

--archive writes the whole journal instead — every run record (with its
approvals), then every invocation record, each line {"run": …} or
{"invocation": …} — for 'mcpflow journal import' into another journal: from the
bbolt file to PostgreSQL, or back.`,
		Example: `  mcpflow journal export --since 7d > last-week.jsonl
  mcpflow journal export --archive > journal.archive.jsonl
  mcpflow --journal postgres://mcpflow@db/mcpflow journal import journal.archive.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalExport(o)
		},
	}
	cmd.Flags().StringVar(&o.since, "since", "", "only invocations created since: a duration (24h) or a date")
	cmd.Flags().BoolVar(&o.archive, "archive", false, "write every run and every invocation, for 'mcpflow journal import' into another journal")
	cmd.Flags().BoolVar(&o.decrypt, "decrypt", false, "write arguments and results decrypted (needs the journal's key); secret values are then in the output")
	return cmd
}

func runJournalExport(o *journalExportOptions) error {
	t, err := sinceFlag(o.since)
	if err != nil {
		return err
	}
	if o.archive && (o.since != "" || len(o.g.fields) > 0 || o.g.jqExpr != "") {
		return usageError("--archive writes the whole journal, as stored: it takes no --since, --json or --jq")
	}
	svc, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	w := bufio.NewWriter(o.Out)
	if o.archive {
		if err := svc.Archive(w, o.decrypt); err != nil {
			return err
		}
		return w.Flush()
	}
	var out io.Writer = w
	p := o.g.printer(w)
	if len(p.fields) > 0 || p.jq != nil {
		// Each record goes through --json and --jq as it streams, as
		// one invocation object.
		p.format = "jsonl"
		out = &lineFilter{each: func(line []byte) error {
			return p.filteredAs(json.RawMessage(line), journal.Invocation{})
		}}
	}
	if err := svc.Export(out, t, o.decrypt); err != nil {
		return err
	}
	return w.Flush()
}

// lineFilter is a writer that hands each complete line to each.
type lineFilter struct {
	buf  []byte
	each func(line []byte) error
}

func (f *lineFilter) Write(b []byte) (int, error) {
	f.buf = append(f.buf, b...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if err := f.each(f.buf[:i]); err != nil {
			return 0, err
		}
		f.buf = f.buf[i+1:]
	}
}
