package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/workflow"
)

func newValidateCommand(g *globals) *cobra.Command {
	var discover bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a workflow without running it",
		Long: `Check a workflow file: YAML syntax, unknown keys, step ids, references between
steps, inputs and expressions. Errors name the file, line and column.

With --discover, also connect to the servers the steps use and check that each
tool exists (naming the ones that do) and that literal arguments match the
tool's input schema. Nothing is called.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return validate(cmd.Context(), g, args[0], discover, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&discover, "discover", false, "connect to the servers and check tools and arguments")
	return cmd
}

func validate(ctx context.Context, g *globals, file string, discover bool, w io.Writer) error {
	external, err := g.external()
	if err != nil {
		return err
	}
	wf, err := loadWorkflow(file, external)
	if err != nil {
		return err
	}
	if discover {
		pool := servers.NewPool(wf.Servers, &servers.Options{Workspace: g.workspace})
		defer pool.Close()
		var problems []error
		for _, st := range wf.Steps {
			sess, err := pool.Session(ctx, st.Server)
			if err != nil {
				problems = append(problems, fmt.Errorf("step %s: server %q: %v", st.ID, st.Server, err))
				continue
			}
			tool, err := sess.Tool(ctx, st.Tool)
			if err != nil {
				problems = append(problems, fmt.Errorf("step %s: %v", st.ID, err))
				continue
			}
			if err := workflow.CheckLiteralArguments(st, tool); err != nil {
				problems = append(problems, fmt.Errorf("step %s: %v", st.ID, err))
			}
		}
		if len(problems) > 0 {
			return &exitError{code: exitUsage, err: fmt.Errorf("%s: %w", file, errors.Join(problems...))}
		}
	}
	if g.output != "table" {
		return g.writeObject(w, map[string]any{"file": file, "valid": true, "workflow": wf.Name, "steps": len(wf.Steps), "discovered": discover})
	}
	checked := "checked"
	if discover {
		checked = "checked against the servers"
	}
	fmt.Fprintf(w, "%s: workflow %q is valid (%d steps, %s)\n", file, wf.Name, len(wf.Steps), checked)
	return nil
}
