package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/servers"
)

type runOptions struct {
	inputs         []string
	trustWorkspace bool
}

func (o *runOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&o.inputs, "input", "i", nil, "workflow input as key=value (repeatable)")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only (allows replay of calls the tool declares safe on trusted servers)")
}

func newRunCommand(g *globals) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow",
		Long: `Run a workflow file. Each step's tools/call is journaled before it is sent.

` + exitCodesHelp,
		Example: `  mcpflow run examples/workflows/hello.yaml
  mcpflow run deploy.yaml --input version=1.4.2 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorkflow(cmd.Context(), g, o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runWorkflow(ctx context.Context, g *globals, o *runOptions, file string, stdout, stderr io.Writer) error {
	external, err := g.external()
	if err != nil {
		return err
	}
	wf, err := loadWorkflow(file, external)
	if err != nil {
		return err
	}
	inputs, err := wf.ParseInputs(o.inputs)
	if err != nil {
		return err
	}
	j, err := g.openJournal()
	if err != nil {
		return err
	}
	defer j.Close()

	pool := servers.NewPool(wf.Servers, &servers.Options{Workspace: g.workspace})
	defer pool.Close()
	progress := progressFor(g, stdout)
	defer progress.close()
	eng := newEngine(j, pool, g.trustFunc(wf, o.trustWorkspace), progress.event)
	run, err := eng.Run(ctx, wf, inputs, g.workspace)
	progress.close()
	if err != nil {
		return err
	}
	if g.output == "table" {
		printOutputs(stdout, run.Outputs)
	}
	if g.output != "table" {
		invs, err := j.RunInvocations(run.ID)
		if err != nil {
			return err
		}
		stored, err := j.Run(run.ID)
		if err != nil {
			return err
		}
		if err := g.writeObject(stdout, runView(stored, invs)); err != nil {
			return err
		}
	}
	if run.Status == journal.RunBlocked {
		reportBlocked(stderr, j, run)
	}
	return &exitError{code: statusCode(run.Status)}
}

// newEngine wires the engine to the journal, the server pool and the trust
// gates.
func newEngine(j *journal.Journal, pool *servers.Pool, trust func(string) journal.Trust, events func(engine.Event)) *engine.Engine {
	e := &engine.Engine{Journal: j, Trust: trust, Events: events}
	e.UsePool(pool)
	return e
}

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	case d > time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
