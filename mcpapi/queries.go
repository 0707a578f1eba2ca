package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/advice"
	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// runStatuses are the statuses list_runs filters on.
var runStatuses = []string{
	journal.RunRunning.String(), journal.RunSucceeded.String(), journal.RunFailed.String(),
	journal.RunBlocked.String(), journal.RunCancelled.String(),
}

// readOnly are the hints of a tool that only reads the journal.
func readOnly(title string) *mcp.ToolAnnotations {
	f := false
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f}
}

const (
	defaultLimit = 20
	maxLimit     = 200
)

func listRunsTool() *mcp.Tool {
	return &mcp.Tool{
		Name:        ToolListRuns,
		Title:       "List runs",
		Description: "Lists mcpflow runs in the journal, newest first: id, workflow, status, when started and finished, and the error of a run that did not succeed.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"status":   map[string]any{"type": "string", "enum": runStatuses, "description": "only runs with this status"},
				"workflow": map[string]any{"type": "string", "description": "only runs of the workflow of this name"},
				"limit":    map[string]any{"type": "integer", "minimum": 1, "maximum": maxLimit, "default": defaultLimit, "description": "how many runs at most"},
			},
			"additionalProperties": false,
		},
		Annotations: readOnly("List runs"),
	}
}

func showRunTool() *mcp.Tool {
	return &mcp.Tool{
		Name:        ToolShowRun,
		Title:       "Show a run",
		Description: "Shows one mcpflow run by id (or a unique prefix of it): its status, inputs (secret ones redacted), outputs, steps with their states, and, for a blocked run, what waits and the command the user must type.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"run": map[string]any{"type": "string", "minLength": 1, "description": "the run id, or a unique prefix of it"},
			},
			"required":             []string{"run"},
			"additionalProperties": false,
		},
		Annotations: readOnly("Show a run"),
	}
}

// RunLine is one run as list_runs lists it.
type RunLine struct {
	ID         string         `json:"id"`
	Workflow   string         `json:"workflow"`
	Status     string         `json:"status"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt *time.Time     `json:"finished_at"`
	Error      *journal.Error `json:"error"`
}

func (s *Server) listRuns(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Status   string `json:"status"`
		Workflow string `json:"workflow"`
		Limit    *int   `json:"limit"`
	}
	if err := strictArgs(req.Params.Arguments, &in); err != nil {
		return toolError(err.Error(), nil), nil
	}
	limit := defaultLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > maxLimit {
		return toolError(fmt.Sprintf("limit %d: want 1 to %d", limit, maxLimit), nil), nil
	}
	if in.Status != "" {
		if _, err := journal.ParseRunStatus(in.Status); err != nil {
			return toolError(fmt.Sprintf("status %q: want one of %s", in.Status, strings.Join(runStatuses, ", ")), nil), nil
		}
	}
	b, release, err := s.o.Backend(ctx, false)
	if err != nil {
		return toolError(err.Error(), nil), nil
	}
	defer release()
	runs, err := b.Runs(service.RunQuery{Status: in.Status, Workflow: in.Workflow, Limit: limit})
	if err != nil {
		return toolError(err.Error(), nil), nil
	}
	lines := make([]RunLine, len(runs))
	var text strings.Builder
	for i, r := range runs {
		lines[i] = RunLine{ID: r.Run.ID.String(), Workflow: r.Run.Workflow, Status: r.Run.Status.String(), StartedAt: r.Run.StartedAt, FinishedAt: r.Run.FinishedAt, Error: r.Run.Error}
		fmt.Fprintf(&text, "%s  %s  %s  started %s", r.Run.ID, r.Run.Workflow, r.Run.Status, r.Run.StartedAt.UTC().Format(time.RFC3339))
		if r.Run.Error != nil {
			fmt.Fprintf(&text, "  %s", r.Run.Error.Code)
		}
		text.WriteByte('\n')
	}
	if len(runs) == 0 {
		text.WriteString("no runs\n")
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(text.String(), "\n")}},
		StructuredContent: map[string]any{"runs": lines},
	}, nil
}

func (s *Server) showRun(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Run string `json:"run"`
	}
	if err := strictArgs(req.Params.Arguments, &in); err != nil {
		return toolError(err.Error(), nil), nil
	}
	if strings.TrimSpace(in.Run) == "" {
		return toolError("run: give a run id (list_runs lists them)", nil), nil
	}
	b, release, err := s.o.Backend(ctx, false)
	if err != nil {
		return toolError(err.Error(), nil), nil
	}
	defer release()
	rep, err := b.RunDetail(in.Run)
	if err != nil {
		return toolError(err.Error(), nil), nil
	}
	v := api.RunOf(rep.Run, rep.Invocations)
	var text strings.Builder
	fmt.Fprintf(&text, "run %s  %s  %s\n", rep.Run.ID, rep.Run.Workflow, rep.Run.Status)
	if rep.Run.Error != nil {
		fmt.Fprintf(&text, "error: %s\n", rep.Run.Error)
	}
	for _, st := range v.Steps {
		name := st.Step
		if st.Item != nil {
			name = fmt.Sprintf("%s[%d]", st.Step, *st.Item)
		}
		state := st.State
		if st.ToolError {
			state = api.ToolError
		}
		fmt.Fprintf(&text, "  step %s  %s  %s\n", name, api.Target(journal.Method(st.Method), st.Server, st.Tool), state)
	}
	if rep.Run.Status == journal.RunBlocked {
		advice.Blocked(&text, rep)
	}
	if rep.Run.Status == journal.RunSucceeded && len(rep.Run.Outputs) > 0 {
		o, _ := json.MarshalIndent(rep.Run.Outputs, "", "  ")
		fmt.Fprintf(&text, "outputs: %s\n", o)
	}
	data := map[string]any{"run": v, "waiting": waitingOf(rep)}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(text.String(), "\n")}},
		StructuredContent: data,
	}, nil
}

// strictArgs decodes a call's arguments into v, refusing a member it does
// not have.
func strictArgs(raw any, v any) error {
	var b []byte
	switch x := raw.(type) {
	case nil:
		return nil
	case json.RawMessage:
		b = x
	default:
		var err error
		if b, err = json.Marshal(x); err != nil {
			return fmt.Errorf("arguments: %v", err)
		}
	}
	if t := strings.TrimSpace(string(b)); t == "" || t == "null" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %v", err)
	}
	return nil
}
