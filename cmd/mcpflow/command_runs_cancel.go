package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

type runsCancelOptions struct {
	ioStreams
	g      *globals
	run    string
	reason string
}

func newRunsCancelCommand(g *globals, runF func(context.Context, *runsCancelOptions) error) *cobra.Command {
	o := &runsCancelOptions{g: g}
	cmd := &cobra.Command{
		Use:   "cancel RUN_ID [--reason TEXT]",
		Short: "Cancel a run going in mcpflow server",
		Long: `Cancel a run that goes in 'mcpflow server': no new call is sent, a call in flight
is aborted and journaled under the replay rule, and the run ends cancelled
('mcpflow resume' continues it). The command returns once the server took the
request; 'mcpflow runs watch RUN_ID' follows the run to its end.

Without a server, a run goes only in the command that started it: cancel it with
Ctrl-C there.`,
		Example: `  mcpflow runs cancel 01a2375e-c529 --reason "wrong inputs"`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.run = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runRunsCancel(o)
		},
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", "why: the run's error says it")
	return cmd
}

func runRunsCancel(o *runsCancelOptions) error {
	b, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := b.RunDetail(o.run)
	if err != nil {
		return err
	}
	if rep.Run.Status != journal.RunRunning {
		return &exitError{code: exitFailed, err: fmt.Errorf("run %s is %s: nothing to cancel", rep.Run.ID.Short(), rep.Run.Status)}
	}
	reason := o.reason
	if reason == "" {
		reason = "cancelled by " + osUser()
	}
	if err := b.Cancel(rep.Run.ID.String(), reason); err != nil {
		return err
	}
	id := rep.Run.ID
	return o.g.printer(o.Out).print(map[string]any{"run": id.String(), "cancelling": true}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "cancelling run %s: no new call is sent, a call in flight is aborted\nfollow it: mcpflow runs watch %s\n", id.Short(), id.Short())
		return err
	})
}
