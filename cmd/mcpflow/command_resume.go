package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/advice"
	"github.com/mcpflow/mcpflow/api"
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
with --no-continue). A run blocked because a server needs a login goes on once
you log in ('mcpflow servers login NAME'): the refused call did not run, and
resume sends it. Resuming a run that succeeded, or one still waiting,
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

// reportBlocked says why a run is blocked and what to do, in the words
// every front end that quotes the CLI shares (advice.Blocked).
func reportBlocked(w io.Writer, rep *service.Report) { advice.Blocked(w, rep) }

// quoted is an approver's message as the blocked-run message shows it.
func quoted(msg string) string { return advice.Quoted(msg) }
