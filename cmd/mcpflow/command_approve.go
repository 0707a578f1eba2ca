package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// approvalOptions are the options of approve and reject, which differ only
// in the decision they journal.
type approvalOptions struct {
	ioStreams
	g         *globals
	as        journal.ApprovalState
	run, step string
	reason    string
}

func newApproveCommand(g *globals, runF func(context.Context, *approvalOptions) error) *cobra.Command {
	return newApprovalCommand(g, journal.ApprovalApproved, runF, &cobra.Command{
		Use:   "approve RUN_ID STEP [--reason TEXT]",
		Short: "Approve a step that waits for approval; resume then runs it",
		Long: `Approve a step whose approve: stopped its run. The run was blocked before anything
of the step was journaled or sent; after you approve it, 'mcpflow resume RUN_ID'
runs the step (every item of a for_each) and goes on. Who (the OS user), when and
why are journaled, and shown by 'mcpflow runs show'. A decision is final.`,
		Example: `  mcpflow approve 01a2375e-c529 deploy --reason "change ticket 4711"
  mcpflow resume 01a2375e-c529`,
	})
}

// newApprovalCommand builds approve or reject around cmd's texts.
func newApprovalCommand(g *globals, as journal.ApprovalState, runF func(context.Context, *approvalOptions) error, cmd *cobra.Command) *cobra.Command {
	o := &approvalOptions{g: g, as: as}
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) != 2 {
			return usageError("give RUN_ID and STEP, as the blocked run's message names them (blocked runs: mcpflow runs list --status blocked)")
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.ioStreams, o.run, o.step = streams(cmd), args[0], args[1]
		if runF != nil {
			return runF(cmd.Context(), o)
		}
		return runApproval(o)
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", "why: kept in the audit trail")
	return cmd
}

// approvalResult is the stable JSON shape of approve and reject.
type approvalResult struct {
	RunID string `json:"run_id"`
	api.Approval
}

func runApproval(o *approvalOptions) error {
	svc, done, err := o.g.backend(writeJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Approve(service.ApproveRequest{Run: o.run, Step: o.step, As: o.as, Reason: o.reason, By: osUser()})
	if err != nil {
		return err
	}
	a, run := rep.Approval, rep.Run.ID.Short()
	return o.g.printer(o.Out).print(approvalResult{RunID: rep.Run.ID.String(), Approval: api.ApprovalOf(a)}, func(w io.Writer) error {
		why := ""
		if a.Reason != "" {
			why = ": " + a.Reason
		}
		fmt.Fprintf(w, "step %s of run %s %s by %s%s\n", a.Step, run, a.State, a.By, why)
		next := "the step runs"
		if a.State == journal.ApprovalRejected {
			next = "the step fails without sending anything"
		}
		_, err := fmt.Fprintf(w, "next: mcpflow resume %s (%s)\n", run, next)
		return err
	})
}
