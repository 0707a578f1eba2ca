package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/service"
)

type resumeOptions struct {
	ioStreams
	g              *globals
	wait           bool
	run            string
	all            bool
	retryFailed    bool
	secrets        []string
	trustWorkspace bool
	untrusted      bool
}

func newResumeCommand(g *globals, runF func(context.Context, *resumeOptions) error) *cobra.Command {
	o := &resumeOptions{g: g}
	cmd := &cobra.Command{
		Use:   "resume RUN_ID | --all",
		Short: "Continue a run from the journal after a crash, a failure or a resolution",
		Long: `Continue a run from where the journal says it stopped. The workflow definition
and inputs come from the journal, not from the file on disk. Completed steps are
never called again. A call that was in flight when mcpflow died is treated like a
lost connection: it is re-sent only when the replay rule clears it, otherwise it
becomes outcome_unknown and the run stays blocked until you resolve it with
'mcpflow journal resolve'. A run blocked at a step with approve: stays blocked
until 'mcpflow approve' (the step runs) or 'mcpflow reject' (it fails, sending
nothing), which continue the run themselves (resume continues it after one
with --no-continue). Resuming a run that succeeded, or one still waiting,
changes nothing.

A run started with --trust-workspace keeps needing it: without the flag (or the
workspace in your trust store) resume refuses, or asks on a terminal, since every
call needing a replay would be decided workspace_not_trusted for good; --untrusted
confirms.

` + exitCodesHelp,
		Example: `  mcpflow resume 01a2375e-c529
  mcpflow resume 01a2375e-c529 --retry-failed
  mcpflow resume --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (o.all && len(args) == 0) || (!o.all && len(args) == 1) {
				return nil
			}
			return usageError("give one RUN_ID or --all")
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if len(args) == 1 {
				o.run = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.g.whileHeld(cmd.Context(), o.ioStreams, o.wait, func() error { return runResume(cmd.Context(), o) })
		},
	}
	cmd.Flags().StringArrayVarP(&o.secrets, "input", "i", nil, "a secret input as key=value (the journal keeps every other input)")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only")
	cmd.Flags().BoolVar(&o.untrusted, "untrusted", false, "resume without workspace trust a run that was started with --trust-workspace (asked on a terminal)")
	cmd.Flags().BoolVar(&o.all, "all", false, "resume every run that did not succeed")
	cmd.Flags().BoolVar(&o.retryFailed, "retry-failed", false, "send again the calls that failed or returned a tool error (journaled as your approval); completed steps are not run again")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "when another command holds the journal, wait for it to end instead of failing")
	return cmd
}

func runResume(ctx context.Context, o *resumeOptions) error {
	svc, done, err := o.g.owner("mcpflow resume", o.Err)
	if err != nil {
		return err
	}
	defer done()
	refs := []string{o.run}
	if o.all {
		ids, err := svc.Resumable()
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			fmt.Fprintln(o.Out, "no runs to resume")
			return nil
		}
		refs = refs[:0]
		for _, id := range ids {
			refs = append(refs, id.String())
		}
	}
	worst := exitOK
	for _, ref := range refs {
		code, err := resumeOne(ctx, o, svc, ref)
		if err != nil {
			return err
		}
		worst = max(worst, code)
	}
	return &exitError{code: worst}
}

func resumeOne(ctx context.Context, o *resumeOptions, svc service.API, ref string) (int, error) {
	req := service.ResumeRequest{Run: ref, Secrets: o.secrets, TrustWorkspace: o.trustWorkspace, Untrusted: o.untrusted, RetryFailed: o.retryFailed, By: osUser()}
	rep, err := resumeWith(ctx, o, svc, req)
	if errors.Is(err, service.ErrTrustFlagNeeded) {
		err = trustChoices(err, o.g.served())
	}
	if errors.Is(err, service.ErrTrustFlagNeeded) && interactive(o.ioStreams) {
		// The user is there to confirm, as the refusal asks.
		if !confirm(o.In, o.Err, err.Error()+"\nResume without workspace trust? [y/N] ") {
			return 0, &exitError{code: exitUsage, err: fmt.Errorf("run %s not resumed", ref)}
		}
		req.Untrusted = true
		rep, err = resumeWith(ctx, o, svc, req)
	}
	if err != nil {
		return 0, err
	}
	err = o.g.printer(o.Out).print(api.RunOf(rep.Run, rep.Invocations), func(w io.Writer) error {
		if !rep.Acted {
			// Nothing to do: a run that succeeded, or one still blocked on
			// an unresolved outcome.
			fmt.Fprintf(w, "run %s is %s: nothing to resume\n", rep.Run.ID, rep.Run.Status)
			return nil
		}
		printOutputs(w, rep.Run.Outputs)
		return nil
	})
	if err := ignoreClosedOutput(err); err != nil {
		return 0, err
	}
	reportEnd(o.Err, rep)
	return statusCode(rep.Run.Status), nil
}

// trustChoices words the choices of a run started with --trust-workspace
// that is resumed without it: through a server, the flag is not one.
func trustChoices(err error, served bool) error {
	ws := service.FieldsOf(err)["workspace"]
	if served {
		return fmt.Errorf("%w; trust the workspace (mcpflow trust add %s), or confirm with --untrusted", err, ws)
	}
	return fmt.Errorf("%w; resume with --trust-workspace, trust the workspace (mcpflow trust add %s), or confirm with --untrusted", err, ws)
}

// resumeWith resumes one run with live progress. Interrupted while
// following a run in mcpflow server, it asks whether to cancel it.
func resumeWith(ctx context.Context, o *resumeOptions, svc service.API, req service.ResumeRequest) (*service.Report, error) {
	cols := runColumns(svc, req.Run)
	progress := progressFor(o.g, o.Out, cols)
	defer progress.close()
	req.Events = progress.event
	rep, err := svc.Resume(ctx, req)
	progress.close()
	return afterInterrupt(o.ioStreams, svc, err, rep, false, func() progressSink { return progressFor(o.g, o.Out, cols) })
}

// reportBlocked says why a run is blocked and what to do: each invocation
// waiting for an operator and each step waiting for approval, and the
// commands that resolve, approve or reject them and continue (a decision
// continues the run itself).
func reportBlocked(w io.Writer, rep *service.Report) {
	run := rep.Run
	msg := "an invocation's outcome is unknown"
	if run.Error != nil {
		msg = run.Error.Error()
	}
	fmt.Fprintf(w, "mcpflow: run %s is blocked: %s\n", run.ID.Short(), msg)
	example := "ID"
	waiting := rep.Waiting()
	for _, inv := range waiting {
		fmt.Fprintf(w, "  waiting for you: invocation %s, step %s, %s (%s)\n", inv.ID.Short(), stepName(&inv), api.TargetOf(&inv), inv.State)
		if what := whatHappened(&inv); what != "" {
			fmt.Fprintf(w, "    what happened: %s\n", what)
		}
		if why := notReplayed(&inv); why != "" {
			fmt.Fprintf(w, "    not replayed: %s\n", why)
		}
		example = inv.ID.Short()
	}
	approvals := run.PendingApprovals()
	for _, a := range approvals {
		fmt.Fprintf(w, "  waiting for approval: step %s%s (nothing of it was journaled or sent)\n", a.Step, quoted(a.Message))
	}
	asking := rep.WaitingInput()
	for _, inv := range asking {
		fmt.Fprintf(w, "  waiting for your answer: step %s asks %s (the tool has not run)\n", stepName(&inv), questionText(&inv))
	}
	if len(asking) > 0 {
		fmt.Fprintf(w, "  inspect:  mcpflow runs show %s (the question and its fields)\n", run.ID.Short())
	} else {
		fmt.Fprintf(w, "  inspect:  mcpflow runs show %s\n", run.ID.Short())
	}
	if len(asking) > 0 {
		for _, inv := range asking {
			how := "--field NAME=VALUE... | --decline | --cancel"
			if strings.Contains(questionText(&inv), "--approve") {
				how = "--approve | --decline"
			}
			fmt.Fprintf(w, "  answer:   mcpflow answer %s %s %s\n", run.ID.Short(), inv.Step, how)
		}
		if len(waiting) == 0 && len(approvals) == 0 {
			fmt.Fprintln(w, "  an answer continues the run (with --no-continue: mcpflow resume "+run.ID.Short()+")")
			return
		}
	}
	if len(waiting) > 0 || len(approvals) == 0 && len(asking) == 0 {
		fmt.Fprintf(w, "  resolve:  mcpflow journal resolve %s --as completed --result FILE | --as failed --reason TEXT | --as retry --reason TEXT\n", example)
	}
	for _, a := range approvals {
		fmt.Fprintf(w, "  approve:  mcpflow approve %s %s [--reason TEXT]\n", run.ID.Short(), a.Step)
		fmt.Fprintf(w, "  reject:   mcpflow reject %s %s [--reason TEXT]\n", run.ID.Short(), a.Step)
	}
	if len(waiting) == 0 && len(approvals) > 0 {
		// A decision continues the run itself.
		fmt.Fprintf(w, "  either continues the run (with --no-continue: mcpflow resume %s)\n", run.ID.Short())
		return
	}
	fmt.Fprintf(w, "  continue: mcpflow resume %s\n", run.ID.Short())
}

// quoted is an approver's message as the blocked-run message shows it.
func quoted(msg string) string {
	if msg == "" {
		return ""
	}
	return fmt.Sprintf(": %q", msg)
}

// whatHappened says what became of a call whose outcome is unknown, before
// why it was not sent again: its newest attempt's failure, and how long
// that attempt went.
func whatHappened(inv *journal.Invocation) string {
	a := inv.LastAttempt()
	if a == nil || a.Failure == "" {
		return ""
	}
	took := ""
	if a.EndedAt != nil {
		took = " after " + a.EndedAt.Sub(a.SentAt).Round(100*time.Millisecond).String()
	}
	switch a.Failure {
	case replay.ClassTimedOut:
		return "the call timed out" + took + "; it may have run"
	case replay.ClassLost:
		return fmt.Sprintf("the connection to server %s was lost%s while the call was in flight; it may have run", inv.Server, took)
	case replay.ClassServerError:
		return "the server answered with an error" + took + "; the tool may have run"
	case replay.ClassAborted:
		return "interrupted" + took + " while the call was in flight; it may have run"
	}
	return strings.ReplaceAll(string(a.Failure), "_", " ") + took
}

// notReplayed says why the replay rule did not clear sending an invocation
// again, and what would, from its newest decision.
func notReplayed(inv *journal.Invocation) string {
	d := inv.LastDecision()
	if d == nil || (d.Verdict != "outcome_unknown" && d.Verdict != "not_retried") {
		return ""
	}
	switch d.Reason {
	case "server_not_trusted":
		return fmt.Sprintf("server %q is not trusted — set trust: true on its entry if its tools' declarations can be relied on", inv.Server)
	case "workspace_not_trusted":
		return "this workspace is not trusted — mcpflow trust add, or --trust-workspace for one command"
	case "no_annotations":
		return fmt.Sprintf("tool %s declares no annotations, so it is not known to be safe to repeat", inv.Tool)
	case "not_declared_idempotent_or_read_only":
		return fmt.Sprintf("tool %s declares neither idempotentHint: true nor readOnlyHint: true", inv.Tool)
	case "contradictory_read_only":
		return fmt.Sprintf("tool %s declares readOnlyHint: true with destructiveHint: true or idempotentHint: false", inv.Tool)
	case "malformed_annotations":
		return fmt.Sprintf("tool %s's annotations are malformed (see mcpflow servers tools %s)", inv.Tool, inv.Server)
	case "budget_spent":
		return "it was replayed as often as allowed already"
	case "tool_missing":
		return fmt.Sprintf("tool %s is no longer listed by server %s", inv.Tool, inv.Server)
	}
	return d.Reason
}
