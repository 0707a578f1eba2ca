package api

import (
	"encoding/json"
	"time"
)

// The HTTP API's requests and answers: what `mcpflow server` (and any
// process that owns a journal) reads and writes, and what the client
// package sends and reads back, the same structs on both sides.

// RunList is a page of runs, newest first; NextCursor continues it.
type RunList struct {
	Runs       []Run   `json:"runs"`
	NextCursor *string `json:"next_cursor"`
	// Total, with ?count=true, is how many runs the query matches.
	Total *Count `json:"total,omitempty"`
}

// Count is how many items a query matches: N, or at least N when More
// (counting stops at 10,000).
type Count struct {
	N    int  `json:"n"`
	More bool `json:"more"`
}

// RunDetail is a run with everything the journal holds of it: every
// invocation in detail, the path its definition was read from and the
// definition itself (the workflow's text as it was when the run started),
// the names of its secret inputs, its trace.
type RunDetail struct {
	Run
	Source      string             `json:"source"`
	Definition  string             `json:"definition"`
	Secrets     []string           `json:"secrets"`
	UpdatedAt   time.Time          `json:"updated_at"`
	TraceParent string             `json:"trace_parent,omitempty"`
	Invocations []InvocationDetail `json:"invocations"`
}

// InvocationList is a page of invocations, newest first.
type InvocationList struct {
	Invocations []Invocation `json:"invocations"`
	NextCursor  *string      `json:"next_cursor"`
	// Total, with ?count=true, is how many invocations the query matches.
	Total *Count `json:"total,omitempty"`
}

// Started answers a request that started (or resumed) a run.
type Started struct {
	Run string `json:"run"`
}

// SubmitRequest starts a workflow, with inputs: typed values, and
// KEY=VALUE pairs typed by the workflow's declarations (pairs win). The
// workflow is Source, its YAML text, named File; or, without Source, the
// file File inside the server's workspace (absolute, or relative to it)
// — the server reads no file outside it.
type SubmitRequest struct {
	File   string         `json:"file"`
	Source string         `json:"source,omitempty"`
	Inputs map[string]any `json:"inputs"`
	Pairs  []string       `json:"input_pairs,omitempty"`
	// Queue hands the run to whichever worker claims it first, when the
	// journal is shared by workers (PostgreSQL); otherwise, and without
	// it, the run goes in this server (and its events come from here).
	Queue bool `json:"queue,omitempty"`
}

// ResumeRequest continues a run.
type ResumeRequest struct {
	// RetryFailed sends again the calls that failed or returned a tool
	// error (journaled as the approval of By).
	RetryFailed bool `json:"retry_failed"`
	// Untrusted resumes without workspace trust a run that was started
	// with --trust-workspace (the API never grants trust).
	Untrusted bool `json:"untrusted"`
	// Secrets are the run's secret inputs as KEY=VALUE (the journal keeps
	// every other input, never a secret one).
	Secrets []string `json:"secrets,omitempty"`
}

// CancelRequest cancels a run going in this server.
type CancelRequest struct {
	Reason string `json:"reason"`
}

// DecisionRequest approves or rejects a step that waits for approval, or
// one further on, in advance.
type DecisionRequest struct {
	Step   string `json:"step"`
	Reason string `json:"reason"`
	// NoContinue only records the decision; otherwise the server
	// continues the run when the decision leaves it nothing to wait for.
	NoContinue bool `json:"no_continue,omitempty"`
}

// Decided answers an approval or a rejection: the decision as journaled,
// with the run's full id, and what became of the run.
type Decided struct {
	RunID string `json:"run_id"`
	Approval
	// Continued: the server continues the run (its events follow on the
	// stream, from run_started).
	Continued bool `json:"continued"`
	// NotContinued says why a run the decision leaves nothing to wait
	// for was not continued (resume it once the cause is fixed).
	NotContinued *ErrorBody `json:"not_continued,omitempty"`
}

// AnswerRequest answers a question a server asked during a step's call
// (POST /api/runs/{id}/answer).
type AnswerRequest struct {
	Step string `json:"step"`
	// Item picks a for_each item (omitted: the only one waiting).
	Item *int `json:"item,omitempty"`
	// Key picks the question when the call asked several.
	Key string `json:"key,omitempty"`
	// Action is accept (the default), decline or cancel.
	Action string `json:"action,omitempty"`
	// Content is the answer's fields, typed; Fields are NAME=VALUE pairs
	// typed by the question's schema (as mcpflow answer --field sends).
	Content map[string]any `json:"content,omitempty"`
	Fields  []string       `json:"fields,omitempty"`
	// NoContinue only records the answer.
	NoContinue bool `json:"no_continue,omitempty"`
}

// Answered answers an AnswerRequest: the answer as journaled (secret
// fields redacted), and what became of the run.
type Answered struct {
	RunID      string          `json:"run_id"`
	Invocation string          `json:"invocation"`
	Key        string          `json:"key"`
	Response   json.RawMessage `json:"response"`
	By         string          `json:"by"`
	At         time.Time       `json:"at"`
	// Continued: the server continues the run (its events follow).
	Continued    bool       `json:"continued"`
	NotContinued *ErrorBody `json:"not_continued,omitempty"`
}

// CallRequest makes one journaled tool call (a run of its own, as `mcpflow
// call` makes it).
type CallRequest struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Arguments is the whole arguments object; Args are KEY=VALUE pairs
	// applied on top, typed by the tool's input schema.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Args      []string        `json:"args,omitempty"`
	// Workflow is a workflow whose servers are used too: a file in the
	// server's workspace (absolute, or relative to it), or, with
	// WorkflowSource, the name of that text.
	Workflow       string `json:"workflow,omitempty"`
	WorkflowSource string `json:"workflow_source,omitempty"`
}

// ResolveRequest is an operator's decision on an invocation whose outcome
// mcpflow could not know.
type ResolveRequest struct {
	// As is completed (with Result), failed, or retry.
	As     string          `json:"as"`
	Reason string          `json:"reason"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Health is what GET /api/health answers: whether the process serves,
// and, when it is a command that holds the journal for one run, who it is
// (pid, command, run).
type Health struct {
	OK       bool              `json:"ok"`
	Stopping bool              `json:"stopping"`
	Owner    map[string]string `json:"owner,omitempty"`
}

// Resumable lists the runs that `resume --all` continues, by the
// service's rule (service.Service.Resumable).
type Resumable struct {
	Runs []string `json:"runs"`
}

// JournalCheck is the journal's verdict on itself.
type JournalCheck struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

// Error is the body of every error response: errors as data. Code is
// stable (the service's table of codes says what each stands for: its
// error, HTTP status and exit code); Message is for people; Fields say
// more, as data (a run's id, who holds a journal), for front ends to word
// their own advice.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is what an error response says.
type ErrorBody struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// ExportErrorTrailer is the trailer of an export that failed on the way.
const ExportErrorTrailer = "Mcpflow-Export-Error"

// ExportCodeTrailer is the code of that error (see Error).
const ExportCodeTrailer = "Mcpflow-Export-Error-Code"
