package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// CallRequest makes one journaled tool call.
type CallRequest struct {
	Server, Tool string
	// ArgsJSON is the whole arguments object as JSON ("" for none).
	ArgsJSON string
	// Args are KEY=VALUE pairs applied on top of ArgsJSON: VALUE is a string
	// unless the tool's input schema says the argument is a number,
	// integer, boolean, array or object, when it is read as JSON.
	Args []string
	// Workflow, when set, is a workflow file whose servers are used too.
	Workflow string
	// WorkflowSource, when set, is that workflow's text: Workflow then
	// only names it (in errors), and no file is read.
	WorkflowSource []byte
	// TrustWorkspace trusts the workspace for this call only.
	TrustWorkspace bool
	// Events receives the call's progress.
	Events func(engine.Event)
}

// Call makes one tools/call, journaled like a workflow step and under the
// same replay rule: it is a run of its own (a one-step workflow built by
// workflow.Call), so the journal lists it and Resume continues it. The
// arguments are typed by the tool's input schema and checked against it
// before anything is journaled.
func (s *Service) Call(ctx context.Context, req CallRequest) (*Report, error) {
	set, err := s.serverSet(req.Workflow, req.WorkflowSource)
	if err != nil {
		return nil, err
	}
	if _, err := set.Lookup(req.Server); err != nil {
		_, err = s.leftOut(req.Server, err)
		return nil, err
	}
	// The tool is discovered on the session the call will use.
	x := s.prepare(set, nil, s.o.Workspace, req.TrustWorkspace)
	defer x.close()
	sess, err := x.pool.Session(ctx, req.Server)
	if err != nil {
		return nil, err
	}
	tool, err := sess.Tool(ctx, req.Tool)
	if err != nil {
		return nil, invalid("%v", err)
	}
	args, err := ToolArguments(tool, req.ArgsJSON, req.Args)
	if err != nil {
		return nil, invalid("%v", err)
	}
	b, _ := json.Marshal(args)
	if err := tool.Validate(b); err != nil {
		return nil, &invalidError{msg: err.Error(), fields: map[string]string{"server": req.Server, "tool": req.Tool}}
	}
	wf, err := workflow.Call(req.Server, req.Tool, args, set)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	run, err := s.track(ctx, nil, req.Events, func(ctx context.Context, events func(engine.Event), creating func(journal.ID)) (*journal.Run, error) {
		e := s.engine(x, events)
		e.Creating = creating
		return e.Run(ctx, wf, map[string]any{}, s.o.Workspace)
	})
	if err != nil {
		return nil, journalFailed(err)
	}
	return s.report(run.ID, true)
}

// ToolArguments builds a tool's arguments from a JSON object and KEY=VALUE
// pairs applied on top, each VALUE typed by the tool's input schema.
func ToolArguments(t upstream.Tool, argsJSON string, pairs []string) (map[string]any, error) {
	args := map[string]any{}
	if argsJSON != "" {
		if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
			return nil, fmt.Errorf("--args: not a JSON object: %v", err)
		}
	}
	var schema struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(t.InputSchema, &schema)
	for _, kv := range pairs {
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
