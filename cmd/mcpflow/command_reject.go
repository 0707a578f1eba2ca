package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

func newRejectCommand(g *globals, runF func(context.Context, *approvalOptions) error) *cobra.Command {
	return newApprovalCommand(g, journal.ApprovalRejected, runF, &cobra.Command{
		Use:   "reject RUN_ID STEP [--reason TEXT] [--no-continue]",
		Short: "Reject a step that waits for approval, or one further on; the step fails without sending anything",
		Long: `Reject a step whose approve: stopped its run, and continue the run: nothing of the
step was journaled or sent, and nothing will be; the step fails with
MCPFLOW_APPROVAL_REJECTED (naming you), so the run fails — unless the step has
continue_on_error, when later steps see steps.STEP.isError and the run goes on.
It goes on where approve continues a run (mcpflow server, or here, printed as
'mcpflow resume' prints it); --no-continue only records the decision.

A step the run has not reached yet may be rejected in advance: it fails when the
run gets there. Who (the OS user), when and why are journaled. A decision is
final.

` + exitCodesHelp,
		Example: `  mcpflow reject 01a2375e-c529 deploy --reason "not during the freeze"
  mcpflow reject 01a2375e-c529 deploy --no-continue`,
	})
}
