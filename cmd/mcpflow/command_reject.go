package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

func newRejectCommand(g *globals, runF func(context.Context, *approvalOptions) error) *cobra.Command {
	return newApprovalCommand(g, journal.ApprovalRejected, runF, &cobra.Command{
		Use:   "reject RUN_ID STEP [--reason TEXT]",
		Short: "Reject a step that waits for approval; resume then fails it without sending anything",
		Long: `Reject a step whose approve: stopped its run. Nothing of the step was journaled or
sent, and nothing will be: after you reject it, 'mcpflow resume RUN_ID' fails the
step with MCPFLOW_APPROVAL_REJECTED (naming you), so the run fails — unless the
step has continue_on_error, when later steps see steps.STEP.isError. Who (the OS
user), when and why are journaled. A decision is final.`,
		Example: `  mcpflow reject 01a2375e-c529 deploy --reason "not during the freeze"
  mcpflow resume 01a2375e-c529`,
	})
}
