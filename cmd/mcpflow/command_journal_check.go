package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/spf13/cobra"
)

type journalCheckOptions struct {
	ioStreams
	g *globals
}

func newJournalCheckCommand(g *globals, runF func(context.Context, *journalCheckOptions) error) *cobra.Command {
	o := &journalCheckOptions{g: g}
	return &cobra.Command{
		Use:   "check",
		Short: "Verify the journal: the file, its indexes and every invariant",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalCheck(o)
		},
	}
}

func runJournalCheck(o *journalCheckOptions) error {
	svc, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	probs, err := svc.Check()
	if err != nil {
		return err
	}
	list := make([]string, len(probs))
	for i, p := range probs {
		list[i] = p.String()
	}
	err = o.g.printer(o.Out).print(map[string]any{"ok": len(probs) == 0, "problems": list}, func(w io.Writer) error {
		if len(probs) == 0 {
			_, err := fmt.Fprintf(w, "journal %s: OK\n", journal.Redact(o.g.journalPath))
			return err
		}
		for _, p := range list {
			fmt.Fprintln(w, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return &exitError{code: exitJournal, err: fmt.Errorf("journal check found %d problem(s)", len(probs))}
	}
	return nil
}
