package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/workflow"
)

type resumeOptions struct {
	runOptions
	all bool
}

func newResumeCommand(g *globals) *cobra.Command {
	o := &resumeOptions{}
	cmd := &cobra.Command{
		Use:   "resume RUN_ID | --all",
		Short: "Continue a run from the journal after a crash, a failure or a resolution",
		Long: `Continue a run from where the journal says it stopped. The workflow definition
and inputs come from the journal, not from the file on disk. Completed steps are
never called again. A call that was in flight when mcpflow died is treated like a
lost connection: it is re-sent only when the replay rule clears it, otherwise it
becomes outcome_unknown and the run stays blocked until you resolve it with
'mcpflow journal resolve'. Resuming a run that succeeded changes nothing.

Secret inputs are never journaled: pass them again with --input.

` + exitCodesHelp,
		Example: `  mcpflow resume 01a2375e-c529
  mcpflow resume --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (o.all && len(args) == 0) || (!o.all && len(args) == 1) {
				return nil
			}
			return usageError("give one RUN_ID or --all")
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return resume(cmd.Context(), g, o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringArrayVarP(&o.inputs, "input", "i", nil, "a secret input as key=value (the journal keeps every other input)")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only")
	cmd.Flags().BoolVar(&o.all, "all", false, "resume every run that did not succeed")
	return cmd
}

func resume(ctx context.Context, g *globals, o *resumeOptions, args []string, stdout, stderr io.Writer) error {
	j, err := g.openJournal()
	if err != nil {
		return err
	}
	defer j.Close()
	var ids []journal.ID
	if o.all {
		for _, st := range []journal.RunStatus{journal.RunRunning, journal.RunFailed, journal.RunCancelled, journal.RunBlocked} {
			runs, err := j.Runs(journal.RunFilter{Status: st})
			if err != nil {
				return err
			}
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) == 0 {
			fmt.Fprintln(stdout, "no runs to resume")
			return nil
		}
	} else {
		id, err := j.FindRun(args[0])
		if err != nil {
			return usageError("%v (list runs with 'mcpflow journal list')", err)
		}
		ids = []journal.ID{id}
	}
	worst := exitOK
	for _, id := range ids {
		code, err := resumeOne(ctx, g, o, j, id, stdout, stderr)
		if err != nil {
			return err
		}
		worst = max(worst, code)
	}
	return &exitError{code: worst}
}

func resumeOne(ctx context.Context, g *globals, o *resumeOptions, j *journal.Journal, id journal.ID, stdout, stderr io.Writer) (int, error) {
	stored, err := j.Run(id)
	if err != nil {
		return 0, err
	}
	// The run belongs to the workspace it started in: its servers'
	// configuration, its workspace trust and its servers' working directory
	// come from there, whichever directory resume is called from.
	if stored.Workspace != "" && stored.Workspace != g.workspace {
		if st, err := os.Stat(stored.Workspace); err != nil || !st.IsDir() {
			return 0, fmt.Errorf("run %s belongs to workspace %s, which no longer exists", id.Short(), stored.Workspace)
		}
		rg := *g
		rg.workspace = stored.Workspace
		g = &rg
	}
	external, err := g.external()
	if err != nil {
		return 0, err
	}
	wf, err := workflow.Load(stored.Source, stored.Definition, external)
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", id.Short(), err)
	}
	secrets, err := wf.ParseSecretInputs(o.inputs)
	if err != nil {
		return 0, err
	}
	pool := servers.NewPool(wf.Servers, &servers.Options{Workspace: g.workspace})
	defer pool.Close()
	progress := progressFor(g, stdout)
	defer progress.close()
	eng := newEngine(j, pool, g.trustFunc(wf, o.trustWorkspace), progress.event)
	before := stored.Status
	run, err := eng.Resume(ctx, id, secrets, external)
	progress.close()
	if err != nil {
		return 0, err
	}
	// Resume writes nothing when there is nothing to do (a run that
	// succeeded, or one still blocked on an unresolved outcome).
	cur, err := j.Run(run.ID)
	if err != nil {
		return 0, err
	}
	untouched := cur.Status == before && cur.UpdatedAt.Equal(stored.UpdatedAt)
	if g.output == "table" && !untouched {
		printOutputs(stdout, run.Outputs)
	}
	if untouched && g.output == "table" {
		fmt.Fprintf(stdout, "run %s is %s: nothing to resume\n", run.ID, run.Status)
	}
	if g.output != "table" {
		invs, err := j.RunInvocations(run.ID)
		if err != nil {
			return 0, err
		}
		latest, err := j.Run(run.ID)
		if err != nil {
			return 0, err
		}
		if err := g.writeObject(stdout, runView(latest, invs)); err != nil {
			return 0, err
		}
	}
	if run.Status == journal.RunBlocked {
		reportBlocked(stderr, j, run)
	}
	return statusCode(run.Status), nil
}

// reportBlocked says why a run is blocked and what to do: each invocation
// waiting for an operator, and the commands that resolve it and continue.
func reportBlocked(w io.Writer, j *journal.Journal, run *journal.Run) {
	msg := "an invocation's outcome is unknown"
	if run.Error != nil {
		msg = run.Error.Error()
	}
	fmt.Fprintf(w, "mcpflow: run %s is blocked: %s\n", run.ID.Short(), msg)
	invs, _ := j.RunInvocations(run.ID)
	example := "ID"
	for _, inv := range invs {
		switch inv.State {
		case journal.StateOutcomeUnknown, journal.StateAborted, journal.StateTimedOut:
			fmt.Fprintf(w, "  waiting for you: invocation %s, step %s, %s/%s (%s)\n", inv.ID.Short(), stepName(&inv), inv.Server, inv.Tool, inv.State)
			example = inv.ID.Short()
		}
	}
	fmt.Fprintf(w, "  inspect:  mcpflow runs show %s\n", run.ID.Short())
	fmt.Fprintf(w, "  resolve:  mcpflow journal resolve %s --as completed --result FILE | --as failed --reason TEXT | --as retry --reason TEXT\n", example)
	fmt.Fprintf(w, "  continue: mcpflow resume %s\n", run.ID.Short())
}
