package main

import (
	"bufio"
	"context"
	"time"

	"github.com/spf13/cobra"
)

type journalExportOptions struct {
	ioStreams
	g       *globals
	since   string
	decrypt bool
}

func newJournalExportCommand(g *globals, runF func(context.Context, *journalExportOptions) error) *cobra.Command {
	o := &journalExportOptions{g: g}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write every invocation record as JSON Lines to stdout, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalExport(o)
		},
	}
	cmd.Flags().StringVar(&o.since, "since", "", "only invocations created since: a duration (24h) or a date")
	cmd.Flags().BoolVar(&o.decrypt, "decrypt", false, "write arguments and results decrypted (needs the journal's key); secret values are then in the output")
	return cmd
}

func runJournalExport(o *journalExportOptions) error {
	var t time.Time
	if o.since != "" {
		var err error
		if t, err = parseSince(o.since, time.Now()); err != nil {
			return usageError("--since: %v", err)
		}
	}
	svc, done, err := o.g.service(readJournal)
	if err != nil {
		return err
	}
	defer done()
	w := bufio.NewWriter(o.Out)
	if err := svc.Export(w, t, o.decrypt); err != nil {
		return err
	}
	return w.Flush()
}
