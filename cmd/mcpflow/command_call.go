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

type callOptions struct {
	ioStreams
	g              *globals
	wait           bool
	server, tool   string
	args           []string
	argsJSON       string
	trustWorkspace bool
	workflow       string
}

func newCallCommand(g *globals, runF func(context.Context, *callOptions) error) *cobra.Command {
	o := &callOptions{g: g}
	cmd := &cobra.Command{
		Use:   "call SERVER TOOL [--arg KEY=VALUE]... [--args JSON]",
		Short: "Make one journaled tool call, under the same replay policy as a workflow step",
		Long: `Make one tools/call, journaled like a workflow step (intent before the call,
outcome after; outcome_unknown if the connection is lost and the tool is not safe
to replay). The call is a run of its own: 'mcpflow runs list' shows it and
'mcpflow resume' continues it.

--arg KEY=VALUE sets one argument; VALUE is a string unless the tool's input
schema says the argument is a number, integer, boolean, array or object, in
which case it is read as JSON. --args takes the whole arguments object as JSON;
--arg values are applied on top. Arguments are sent exactly as given: "${{" in
them is text, never an expression.

The result's content is printed for people: text as it is, images and audio as
[image/png 5.3 KB], resource links as [link URI "title"], embedded resources
as their URI and MIME type and the first lines of their text; -o json prints
the result exactly as journaled. While the call runs, a terminal on stderr
shows its progress (elapsed time, a bar fed by the server's progress
notifications).

` + exitCodesHelp,
		Example: `  mcpflow call demo greet --arg name=Ada --workflow examples/workflows/hello.yaml
  mcpflow call files read_text_file --args '{"path": "README.md"}'`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.server, o.tool = streams(cmd), args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.g.whileHeld(cmd.Context(), o.ioStreams, o.wait, func() error { return runCall(cmd.Context(), o) })
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.args, "arg", "a", nil, "argument as KEY=VALUE (repeatable)")
	f.StringVar(&o.argsJSON, "args", "", "all arguments as a JSON object")
	f.BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only")
	f.StringVar(&o.workflow, "workflow", "", "also use the servers this workflow file declares")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "when another command holds the journal, wait for it to end instead of failing")
	return cmd
}

func runCall(ctx context.Context, o *callOptions) error {
	svc, done, err := o.g.owner("mcpflow call "+o.server+" "+o.tool, o.Err)
	if err != nil {
		return err
	}
	defer done()
	if l, ok := svc.(*service.Local); ok { // through a server, its environment serves its servers
		if set, err := l.ServerSet(o.workflow); err == nil {
			if err := askInputs(ctx, o.ioStreams, set, []string{o.server}); err != nil {
				return err
			}
		}
	}
	progress := callProgressFor(o.g, o.Err)
	defer progress.close()
	rep, err := svc.Call(ctx, service.CallRequest{Server: o.server, Tool: o.tool, ArgsJSON: o.argsJSON, Args: o.args, Workflow: o.workflow, TrustWorkspace: o.trustWorkspace, Events: progress.event})
	progress.close()
	// Interrupted while mcpflow server makes the call, the call is
	// cancelled, as Ctrl-C cancels one made here.
	rep, err = afterInterrupt(o.ioStreams, svc, err, rep, true, func() progressSink { return callProgressFor(o.g, o.Err) })
	if err != nil {
		return err
	}
	var inv *journal.Invocation
	if n := len(rep.Invocations); n > 0 {
		inv = &rep.Invocations[n-1]
	}
	view := map[string]any{"run": api.RunOf(rep.Run, rep.Invocations), "invocation": nil}
	if inv != nil {
		view["invocation"] = api.InvocationOf(inv, true)
	}
	err = o.g.printer(o.Out).print(view, func(w io.Writer) error {
		if inv != nil && inv.Result != nil {
			printResult(w, inv.Result)
		}
		return nil
	})
	// The call's outcome stands, output closed by its reader or not.
	if err := ignoreClosedOutput(err); err != nil {
		return err
	}
	switch {
	case rep.Run.Status == journal.RunBlocked:
		reportBlocked(o.Err, rep)
	case rep.Run.Error != nil && !o.g.printer(o.Out).structured():
		fmt.Fprintf(o.Err, "mcpflow: %s\n", rep.Run.Error.Error())
	}
	return &exitError{code: statusCode(rep.Run.Status)}
}
