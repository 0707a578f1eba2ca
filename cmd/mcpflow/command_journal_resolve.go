package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/internal/inputfile"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

type resolveOptions struct {
	ioStreams
	g                  *globals
	invocation         string
	as, result, reason string
}

func newJournalResolveCommand(g *globals, runF func(context.Context, *resolveOptions) error) *cobra.Command {
	o := &resolveOptions{g: g}
	cmd := &cobra.Command{
		Use:   "resolve INVOCATION_ID --as completed|failed|retry",
		Short: "Record an operator's decision on an invocation whose outcome is unknown",
		Long: `Record what happened to a call mcpflow could not know the outcome of
(outcome_unknown, aborted or timed_out), after you checked the real system:

  --as completed --result FILE   it ran; FILE holds its result as JSON
                                 ({"content": [...], "structuredContent": {...}}; - for stdin)
  --as failed --reason TEXT      it did not run, or its effect was undone; the run fails
  --as retry --reason TEXT       send it again on the next resume

Who (the OS user), when and why are journaled. Then run 'mcpflow resume RUN_ID'.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.invocation = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runResolve(o)
		},
	}
	cmd.Flags().StringVar(&o.as, "as", "", "completed, failed or retry")
	cmd.Flags().StringVar(&o.result, "result", "", "with --as completed: a JSON file holding the result (- for stdin)")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why: kept in the audit trail")
	return cmd
}

func runResolve(o *resolveOptions) error {
	req := service.ResolveRequest{Invocation: o.invocation, Reason: o.reason, By: osUser()}
	switch o.as {
	case "completed":
		req.As = journal.StateCompleted
	case "failed":
		req.As = journal.StateFailed
	case "retry":
		req.As = journal.StateRetryApproved
	default:
		return usageError("--as %q: want completed, failed or retry", o.as)
	}
	if req.As != journal.StateCompleted && o.reason == "" {
		return usageError("--as %s needs --reason TEXT: say why, for the audit trail", o.as)
	}
	if o.result != "" && req.As != journal.StateCompleted {
		return usageError("--result goes with --as completed")
	}
	if req.As == journal.StateCompleted {
		if o.result == "" {
			return usageError("--as completed needs --result FILE with the call's result as JSON (- for stdin)")
		}
		r, err := readResult(o.In, o.result)
		if err != nil {
			return usageError("--result: %v", err)
		}
		req.Result = r
		if req.Reason == "" {
			req.Reason = "operator supplied the result"
		}
	}
	svc, done, err := o.g.backend(writeJournal)
	if err != nil {
		return err
	}
	defer done()
	inv, err := svc.Resolve(req)
	if err != nil {
		return err
	}
	return o.g.printer(o.Out).print(api.InvocationDetailOf(inv, false), func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "invocation %s resolved as %s\nnext: mcpflow resume %s\n", inv.ID.Short(), inv.State, inv.RunID.Short())
		return err
	})
}

// maxResult bounds a result given to resolve.
const maxResult = 16 << 20

func readResult(stdin io.Reader, path string) (*journal.Result, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = inputfile.ReadReader(stdin, "standard input", maxResult)
	} else {
		b, err = inputfile.Read(path, maxResult)
	}
	if err != nil {
		return nil, err
	}
	res, err := api.ParseResult(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return res, nil
}

func osUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}
