package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/servers"
)

// Journal is what the engine needs of the journal. *journal.Journal
// implements it; every write is durable when it returns.
type Journal interface {
	CreateRun(*journal.Run) error
	SetRunStatus(journal.ID, journal.RunStatus, *journal.Error) error
	Begin(*journal.Invocation) (journal.Intent, error)
	Again(journal.ID, journal.NextAttempt) (journal.Intent, error)
	Finish(journal.Intent, journal.Outcome) error
	Decide(journal.ID, journal.Decision, journal.State, *journal.Error) error
	Skip(*journal.Invocation) error
	Interrupted(journal.ID, journal.Outcome) error
	Run(journal.ID) (*journal.Run, error)
	Invocation(journal.ID) (*journal.Invocation, error)
	RunInvocations(journal.ID) ([]journal.Invocation, error)
}

var _ Journal = (*journal.Journal)(nil)

// Session is a connection to one MCP server. *servers.Session implements it.
type Session interface {
	Tool(ctx context.Context, name string) (servers.Tool, error)
	Call(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, progress func(progress, total float64, message string)) (*mcp.CallToolResult, error)
}

var _ Session = (*servers.Session)(nil)

// Engine runs workflows. Set the fields, then call Run; an Engine may run
// many workflows concurrently.
type Engine struct {
	Journal Journal
	// Connect returns the session for a server, connecting on first use.
	Connect func(ctx context.Context, server string) (Session, error)
	// Reconnect drops a broken session and connects afresh.
	Reconnect func(ctx context.Context, server string, old Session) (Session, error)
	// Trust returns the current trust for a server: its configuration's
	// trust and the workspace trust gate, read afresh on every call.
	Trust func(server string) journal.Trust
	// Events receives progress; it must not block for long. Optional.
	Events func(Event)
	// Now is the clock for elapsed times. Default time.Now.
	Now func() time.Time
	// ResultLimit caps the bytes of a result or of arguments kept in the
	// journal (a digest of the whole is kept). Default 64 KiB.
	ResultLimit int
	// Backoff is the base delay between reconnect tries. Default 100ms.
	Backoff time.Duration
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	RunStarted EventKind = iota + 1
	StepStarted
	StepProgress
	StepFinished
	RunFinished
)

// Event reports progress of a run.
type Event struct {
	Kind       EventKind
	Run        journal.ID
	Workflow   string
	Step       string
	Tool       string
	Server     string
	Invocation journal.ID
	State      journal.State
	Attempt    int
	// Progress and Total come from notifications/progress (Total 0 when unknown).
	Progress, Total float64
	Message         string
	// Text is a completed call's text content (StepFinished).
	Text    string
	Elapsed time.Duration
	Status  journal.RunStatus
	// Err is the step's or the run's error, if any.
	Err *journal.Error
}

func (e *Engine) emit(ev Event) {
	if e.Events != nil {
		e.Events(ev)
	}
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) limit() int {
	if e.ResultLimit > 0 {
		return e.ResultLimit
	}
	return 64 << 10
}

// Run errors are journaled with these codes.
const (
	CodeToolError         = "MCPFLOW_TOOL_ERROR"
	CodeServerError       = "MCPFLOW_SERVER_ERROR"
	CodeRejected          = "MCPFLOW_REJECTED"
	CodeServerUnavailable = "MCPFLOW_SERVER_UNAVAILABLE"
	CodeExpression        = "MCPFLOW_EXPRESSION"
	CodeUnknownTool       = "MCPFLOW_UNKNOWN_TOOL"
	CodeAborted           = "MCPFLOW_ABORTED"
	CodeTimedOut          = "MCPFLOW_TIMED_OUT"
	CodeJournal           = "MCPFLOW_JOURNAL"
)

// Run executes wf with inputs (already typed by ParseInputs) and returns the
// final run record. A run that failed, was blocked or was cancelled is not an
// error: see the returned status. An error means the journal could not be
// written, and the run's state is whatever was journaled before.
func (e *Engine) Run(ctx context.Context, wf *Workflow, inputs map[string]any, workspace string) (*journal.Run, error) {
	run := &journal.Run{
		Workflow:   wf.Name,
		Definition: wf.Source,
		Source:     wf.Path,
		Inputs:     wf.redactInputs(inputs),
		Workspace:  workspace,
	}
	if err := e.Journal.CreateRun(run); err != nil {
		return nil, err
	}
	e.emit(Event{Kind: RunStarted, Run: run.ID, Workflow: wf.Name})
	r := &runner{e: e, wf: wf, run: run, scope: scope{"inputs": inputs, "steps": map[string]any{}}}
	return r.execute(ctx)
}

// runner is the state of one run in progress.
type runner struct {
	e     *Engine
	wf    *Workflow
	run   *journal.Run
	scope scope
	start time.Time
	// prior holds the newest journaled invocation of each step (resume).
	prior map[string]*journal.Invocation
}

func (r *runner) execute(ctx context.Context) (*journal.Run, error) {
	r.start = r.e.now()
	status, runErr := journal.RunSucceeded, (*journal.Error)(nil)
	for _, st := range r.wf.Steps {
		var res stepResult
		var err error
		if inv, ok := r.prior[st.ID]; ok {
			res, err = r.resumeStep(ctx, st, inv)
		} else {
			res, err = r.step(ctx, st)
		}
		if err != nil {
			return r.finish(journal.RunFailed, &journal.Error{Code: CodeJournal, Message: err.Error()}, err)
		}
		if res.status != journal.RunSucceeded {
			status, runErr = res.status, res.err
			break
		}
		r.scope["steps"].(map[string]any)[st.ID] = res.value
	}
	return r.finish(status, runErr, nil)
}

func (r *runner) finish(status journal.RunStatus, runErr *journal.Error, cause error) (*journal.Run, error) {
	if err := r.e.Journal.SetRunStatus(r.run.ID, status, runErr); err != nil {
		return nil, errors.Join(cause, err)
	}
	r.run.Status, r.run.Error = status, runErr
	r.e.emit(Event{Kind: RunFinished, Run: r.run.ID, Workflow: r.wf.Name, Status: status, Err: runErr, Elapsed: r.e.now().Sub(r.start)})
	return r.run, cause
}

// stepResult is what one step produced: the value later expressions see as
// steps.ID, or the run status it ends the run with.
type stepResult struct {
	value  map[string]any
	status journal.RunStatus
	err    *journal.Error
	// state is the invocation's state when the step ended early.
	state journal.State
}

func failed(code, format string, args ...any) stepResult {
	return stepResult{status: journal.RunFailed, err: &journal.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// stepValue is what expressions see of a completed call.
func stepValue(res *mcp.CallToolResult) map[string]any {
	v := map[string]any{"isError": res.IsError, "text": resultText(res)}
	var content any
	if b, err := json.Marshal(res.Content); err == nil {
		_ = json.Unmarshal(b, &content)
	}
	v["content"] = content
	var structured any
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(b, &structured)
		}
	}
	v["structuredContent"] = structured
	return v
}

func resultText(res *mcp.CallToolResult) string {
	var out string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if out != "" {
				out += "\n"
			}
			out += t.Text
		}
	}
	return out
}

// redactInputs replaces secret inputs' values for the journal.
func (w *Workflow) redactInputs(inputs map[string]any) map[string]any {
	out := make(map[string]any, len(inputs))
	for k, v := range inputs {
		if in := w.input(k); in != nil && in.Secret {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// Redacted stands in for a secret value in the journal and in output.
const Redacted = "[redacted]"
