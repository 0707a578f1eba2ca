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
	g          *globals
	as         journal.ApprovalState
	run, step  string
	reason     string
	noContinue bool
}

func newApproveCommand(g *globals, runF func(context.Context, *approvalOptions) error) *cobra.Command {
	return newApprovalCommand(g, journal.ApprovalApproved, runF, &cobra.Command{
		Use:   "approve RUN_ID STEP [--reason TEXT] [--no-continue]",
		Short: "Approve a step that waits for approval, or one further on; the run goes on",
		Long: `Approve a step whose approve: stopped its run, and continue the run: the step runs
(every item of a for_each) and the run goes on to its end or to the next step that
waits. It goes on in mcpflow server when one serves the journal (this command
follows it there); otherwise here, printed as 'mcpflow resume' prints it, and
this command exits as resume does. --no-continue only records the decision:
'mcpflow resume RUN_ID' continues the run later.

A step the run has not reached yet may be approved in advance: the run goes
through it without stopping when it gets there. Who (the OS user), when, why and
whether in advance are journaled, and shown by 'mcpflow runs show'. A decision
is final.

` + exitCodesHelp,
		Example: `  mcpflow approve 01a2375e-c529 deploy --reason "change ticket 4711"
  mcpflow approve 01a2375e-c529 announce    # a later step, in advance
  mcpflow approve 01a2375e-c529 deploy --no-continue && mcpflow resume 01a2375e-c529`,
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
		return runApproval(cmd.Context(), o)
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", "why: kept in the audit trail")
	cmd.Flags().BoolVar(&o.noContinue, "no-continue", false, "only record the decision; 'mcpflow resume' continues the run")
	return cmd
}

// approvalResult is the stable JSON shape of approve and reject: the
// decision, and the run as its continuation left it (continued).
type approvalResult struct {
	RunID string `json:"run_id"`
	api.Approval
	Continued bool `json:"continued"`
	// NotContinued says why a run the decision leaves nothing to wait
	// for did not go on.
	NotContinued string   `json:"not_continued,omitempty"`
	Run          *api.Run `json:"run,omitempty"`
}

// verb is the command's name.
func (o *approvalOptions) verb() string {
	if o.as == journal.ApprovalRejected {
		return "reject"
	}
	return "approve"
}

func runApproval(ctx context.Context, o *approvalOptions) error {
	svc, done, err := continuing(o.g, o.noContinue, o.verb(), o.Err)
	if err != nil {
		return err
	}
	defer done()
	p := o.g.printer(o.Out)
	cols := runColumns(svc, o.run)
	progress := progressFor(o.g, o.Out, cols)
	defer progress.close()
	req := service.ApproveRequest{Run: o.run, Step: o.step, As: o.as, Reason: o.reason, By: osUser(), NoContinue: o.noContinue,
		Events: progress.event}
	req.Decided = func(rep *service.ApproveReport) {
		if !p.structured() {
			fmt.Fprintln(o.Out, decisionLine(rep))
		}
	}
	rep, err := svc.Approve(ctx, req)
	progress.close()
	if handled, err := followDetached(o.g, o.ioStreams, svc, err, cols); handled {
		return err
	}
	if err != nil {
		return err
	}
	a, run := rep.Approval, rep.Run.ID
	res := approvalResult{RunID: run.String(), Approval: api.ApprovalOf(a), Continued: rep.Continued != nil}
	if rep.NotContinued != nil {
		res.NotContinued = rep.NotContinued.Error()
	}
	if c := rep.Continued; c != nil {
		r := api.RunOf(c.Run, c.Invocations)
		res.Run = &r
	}
	err = p.print(res, func(w io.Writer) error {
		if c := rep.Continued; c != nil {
			if !c.Acted {
				fmt.Fprintf(w, "run %s is %s: nothing to resume\n", c.Run.ID, c.Run.Status)
			}
			printOutputs(w, c.Run.Outputs)
			return nil
		}
		if rep.NotContinued != nil {
			fmt.Fprintf(o.Err, "mcpflow: run %s did not go on: %v\n", run.Short(), rep.NotContinued)
		}
		_, err := fmt.Fprint(w, approvalNext(rep, o.noContinue))
		return err
	})
	return continuedEnd(o.Err, rep.Continued, err)
}

// decisionLine says what was decided, by whom and why.
func decisionLine(rep *service.ApproveReport) string {
	a := rep.Approval
	in, why := "", ""
	if a.InAdvance {
		in = " in advance"
	}
	if a.Reason != "" {
		why = ": " + a.Reason
	}
	return fmt.Sprintf("step %s of run %s %s%s by %s%s", a.Step, rep.Run.ID.Short(), a.State, in, a.By, why)
}

// approvalNext says what comes next for a run a decision did not continue:
// the resume that continues it, or what it waits for now.
func approvalNext(rep *service.ApproveReport, noContinue bool) string {
	a, run := rep.Approval, rep.Run
	id := run.ID.Short()
	if rep.Continues {
		if !noContinue && rep.NotContinued == nil {
			return "the run goes on in the process that runs it\n"
		}
		next := "the step runs"
		if a.State == journal.ApprovalRejected {
			next = "the step fails without sending anything"
		}
		return fmt.Sprintf("next: mcpflow resume %s (%s)\n", id, next)
	}
	out := ""
	if a.InAdvance && !a.Reached() {
		when := "the run goes through step " + a.Step + " without stopping when it gets there"
		if a.State == journal.ApprovalRejected {
			when = "step " + a.Step + " fails without sending anything when the run gets there"
		}
		out = when + "\n"
	}
	switch p := run.PendingApprovals(); {
	case len(p) > 0:
		out += fmt.Sprintf("next: the run waits for approval of step %s: mcpflow approve %s %s\n", p[0].Step, id, p[0].Step)
	case run.Status != journal.RunRunning && run.Status != journal.RunSucceeded:
		out += fmt.Sprintf("next: the run is %s: mcpflow resume %s\n", run.Status, id)
	}
	return out
}
