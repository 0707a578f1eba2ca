package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/advice"
	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/workflow"
)

// MetaRun is the key of a workflow tool's result _meta that holds the id
// of the run the call started.
const MetaRun = "mcpflow/run"

// callWorkflow runs t's workflow: a durable run through the backend, the
// path `mcpflow run` takes, inputs typed from the arguments.
func (s *Server) callWorkflow(t Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := arguments(req.Params.Arguments)
		if err != nil {
			return toolError(err.Error(), nil), nil
		}
		secrets := workflow.SecretValues(t.Workflow.SecretInputs(), args)
		b, release, err := s.o.Backend(ctx, true)
		if err != nil {
			return toolError(redact(err.Error(), secrets), nil), nil
		}
		defer release()
		run := service.RunRequest{File: t.File, InputValues: args}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			p := newProgress(len(t.Workflow.Steps))
			run.Events = func(ev engine.Event) {
				if v, total, msg, ok := p.next(ev); ok {
					// A client gone is no reason to stop the run.
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: v, Total: total, Message: msg})
				}
			}
		}
		rep, err := b.Run(ctx, run)
		if err != nil {
			return toolError(redact(err.Error(), secrets), map[string]any{"error": map[string]any{"code": service.CodeOf(err).Name}}), nil
		}
		r := runResult(rep)
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				t.Text = redact(t.Text, secrets)
			}
		}
		return r, nil
	}
}

// arguments are a call's arguments as input values: a JSON object, or
// nothing.
func arguments(raw any) (map[string]any, error) {
	var b []byte
	switch x := raw.(type) {
	case nil:
		return map[string]any{}, nil
	case json.RawMessage:
		b = x
	default:
		var err error
		if b, err = json.Marshal(x); err != nil {
			return nil, errors.New("arguments: want a JSON object of the workflow's inputs")
		}
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(b, &args); err != nil {
		return nil, errors.New("arguments: want a JSON object of the workflow's inputs")
	}
	if args == nil {
		args = map[string]any{}
	}
	return args, nil
}

// redact cuts the secret inputs' values out of msg.
func redact(msg string, secrets []string) string {
	return workflow.RedactValue(msg, secrets).(string)
}

// runResult is a run's end as a tool's result: the outputs for a run that
// succeeded; a tool error, with what to do, for any other.
func runResult(rep *service.Report) *mcp.CallToolResult {
	run := rep.Run
	meta := mcp.Meta{MetaRun: run.ID.String()}
	switch run.Status {
	case journal.RunSucceeded:
		out := run.Outputs
		if out == nil {
			out = map[string]any{}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		return &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: out}
	case journal.RunBlocked:
		var w strings.Builder
		advice.Blocked(&w, rep)
		r := toolError(strings.TrimRight(w.String(), "\n"), blockedOf(rep))
		r.Meta = meta
		return r
	case journal.RunFailed:
		msg := fmt.Sprintf("mcpflow: run %s failed", run.ID.Short())
		var e any
		if run.Error != nil {
			msg += ": " + run.Error.Error()
			e = run.Error
		}
		r := toolError(msg+"\n  inspect:  mcpflow runs show "+run.ID.Short(), map[string]any{"run": run.ID.String(), "status": run.Status.String(), "error": e})
		r.Meta = meta
		return r
	}
	id := run.ID.Short()
	r := toolError(fmt.Sprintf("mcpflow: run %s is %s; continue it with: mcpflow resume %s", id, run.Status, id), map[string]any{"run": run.ID.String(), "status": run.Status.String()})
	r.Meta = meta
	return r
}

// Waiting is one thing a blocked run waits for, as a tool error's
// structuredContent lists it.
type Waiting struct {
	Step string `json:"step"`
	Item *int   `json:"item,omitempty"`
	// Reason: approval (a gate), awaiting_input (a server's question), or
	// the state of a call whose outcome a person must resolve
	// (outcome_unknown, aborted, timed_out).
	Reason     string `json:"reason"`
	Invocation string `json:"invocation,omitempty"`
	Message    string `json:"message,omitempty"`
}

// blockedOf is a blocked run as data: the run, its status and what waits.
func blockedOf(rep *service.Report) map[string]any {
	return map[string]any{"run": rep.Run.ID.String(), "status": rep.Run.Status.String(), "waiting": waitingOf(rep)}
}

func waitingOf(rep *service.Report) []Waiting {
	out := []Waiting{}
	item := func(i int) *int {
		if i < 0 {
			return nil
		}
		return &i
	}
	for _, a := range rep.Run.PendingApprovals() {
		out = append(out, Waiting{Step: a.Step, Item: nil, Reason: "approval", Message: a.Message})
	}
	for _, inv := range rep.Waiting() {
		out = append(out, Waiting{Step: inv.Step, Item: item(inv.Item), Reason: inv.State.String(), Invocation: inv.ID.String()})
	}
	for _, inv := range rep.WaitingInput() {
		out = append(out, Waiting{Step: inv.Step, Item: item(inv.Item), Reason: api.AwaitingInput, Invocation: inv.ID.String(), Message: advice.Question(&inv)})
	}
	return out
}

// toolError is a tool error with msg, and data as structuredContent when
// not nil.
func toolError(msg string, data any) *mcp.CallToolResult {
	r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if data != nil {
		r.StructuredContent = data
	}
	return r
}
