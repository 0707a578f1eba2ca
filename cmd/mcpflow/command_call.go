package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/workflow"
)

type callOptions struct {
	args           []string
	argsJSON       string
	trustWorkspace bool
	workflow       string
}

func newCallCommand(g *globals) *cobra.Command {
	o := &callOptions{}
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
--arg values are applied on top.

` + exitCodesHelp,
		Example: `  mcpflow call demo greet --arg name=Ada --workflow examples/workflows/hello.yaml
  mcpflow call files read_text_file --args '{"path": "README.md"}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, o, args[0], args[1], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.args, "arg", "a", nil, "argument as KEY=VALUE (repeatable)")
	f.StringVar(&o.argsJSON, "args", "", "all arguments as a JSON object")
	f.BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only")
	f.StringVar(&o.workflow, "workflow", "", "also use the servers this workflow file declares")
	return cmd
}

func call(ctx context.Context, g *globals, o *callOptions, server, tool string, stdout, stderr io.Writer) error {
	set, err := g.serverSet(o.workflow)
	if err != nil {
		return err
	}
	srv, err := set.Lookup(server)
	if err != nil {
		return usageError("%v", err)
	}
	pool := servers.NewPool(servers.Set{server: srv}, &servers.Options{Workspace: g.workspace})
	defer pool.Close()
	sess, err := pool.Session(ctx, server)
	if err != nil {
		return err
	}
	t, err := sess.Tool(ctx, tool)
	if err != nil {
		return usageError("%v", err)
	}
	args, err := callArguments(o, t)
	if err != nil {
		return usageError("%v", err)
	}
	if b, _ := json.Marshal(args); t.Validate(b) != nil {
		return usageError("%v (see 'mcpflow servers tools %s')", t.Validate(b), server)
	}
	src, err := callWorkflow(server, tool, args)
	if err != nil {
		return err
	}
	wf, err := workflow.Load(fmt.Sprintf("call %s %s", server, tool), src, set)
	if err != nil {
		return err
	}
	j, err := g.openJournal()
	if err != nil {
		return err
	}
	defer j.Close()
	eng := newEngine(j, pool, g.trustFunc(wf, o.trustWorkspace), nil)
	run, err := eng.Run(ctx, wf, map[string]any{}, g.workspace)
	if err != nil {
		return err
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		return err
	}
	if run, err = j.Run(run.ID); err != nil {
		return err
	}
	if g.output != "table" {
		var inv *journal.Invocation
		if len(invs) > 0 {
			inv = &invs[len(invs)-1]
		}
		view := map[string]any{"run": runView(run, invs), "invocation": nil}
		if inv != nil {
			view["invocation"] = invView(inv, true)
		}
		if err := g.writeObject(stdout, view); err != nil {
			return err
		}
	} else if len(invs) > 0 && invs[len(invs)-1].Result != nil {
		printResult(stdout, invs[len(invs)-1].Result)
	}
	switch {
	case run.Status == journal.RunBlocked:
		reportBlocked(stderr, j, run)
	case run.Error != nil && g.output == "table":
		fmt.Fprintf(stderr, "mcpflow: %s\n", run.Error.Error())
	}
	return &exitError{code: statusCode(run.Status)}
}

// callArguments builds the arguments from --args and --arg, typed by the
// tool's input schema.
func callArguments(o *callOptions, t servers.Tool) (map[string]any, error) {
	args := map[string]any{}
	if o.argsJSON != "" {
		if err := json.Unmarshal([]byte(o.argsJSON), &args); err != nil {
			return nil, fmt.Errorf("--args: not a JSON object: %v", err)
		}
	}
	var schema struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(t.InputSchema, &schema)
	for _, kv := range o.args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--arg %q: expected KEY=VALUE", kv)
		}
		typ, _ := schema.Properties[k].Type.(string)
		switch typ {
		case "", "string":
			args[k] = v
		default:
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				return nil, fmt.Errorf("--arg %s: the tool expects %s, and %q is not JSON", k, typ, v)
			}
			args[k] = x
		}
	}
	return args, nil
}

// callWorkflow is the one-step workflow a call runs as; it is journaled
// like any definition, so resume can continue it. It names the server
// without copying its entry: the entry's trust is read from the current
// configuration at every decision, and its env and headers (which may hold
// credentials) stay out of the journal.
func callWorkflow(server, tool string, args map[string]any) ([]byte, error) {
	def := map[string]any{
		"name":  "call " + server + " " + tool,
		"steps": []any{map[string]any{"id": "call", "server": server, "tool": tool, "with": literal(args)}},
	}
	return yaml.Marshal(def)
}

// literal escapes every ${{ in v, at any depth, so that arguments given on
// the command line are sent as given and never evaluated.
func literal(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "${{", "${{ '${{' }}")
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = literal(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = literal(e)
		}
		return out
	}
	return v
}

func printResult(w io.Writer, r *journal.Result) {
	var content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Content, &content)
	printed := false
	for _, c := range content {
		if c.Type == "text" {
			fmt.Fprintln(w, c.Text)
			printed = true
		}
	}
	if !printed && len(r.StructuredContent) > 0 {
		fmt.Fprintln(w, string(r.StructuredContent))
	}
}
