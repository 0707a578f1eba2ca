package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// Journal is what the engine needs of the journal. Every journal.Store
// implements it, and so does client.Journal (the journal another process
// holds, through its socket); every write is durable when it returns.
type Journal interface {
	CreateRun(*journal.Run) error
	// CreateRunLater, FinishLater and SkipLater queue a write to ride with
	// the next commit (see journal.Pending and durable.go); a journal may
	// commit it before it returns instead, its Pending done
	// (journal.Committed: client.Journal does).
	CreateRunLater(*journal.Run) (*journal.Pending, error)
	FinishLater(journal.Intent, journal.Outcome) (*journal.Pending, error)
	SkipLater(*journal.Invocation) (*journal.Pending, error)
	SetRunStatus(journal.ID, journal.RunStatus, *journal.Error) error
	EndRun(journal.ID, journal.RunStatus, *journal.Error, map[string]any) (*journal.Run, error)
	Begin(*journal.Invocation) (journal.Intent, error)
	Again(journal.ID, journal.NextAttempt) (journal.Intent, error)
	Finish(journal.Intent, journal.Outcome) error
	Decide(journal.ID, journal.Decision, journal.State, *journal.Error) error
	Skip(*journal.Invocation) error
	RequestApproval(run journal.ID, step, message string) (*journal.Approval, error)
	Interrupted(journal.ID, journal.Outcome) error
	// Ask journals what a server asks during a call; Answer, an answer
	// to it that the server gave itself (a URL elicitation completed).
	Ask(id journal.ID, attempt int, in journal.Input) error
	Answer(id journal.ID, attempt int, answers []journal.Answer) (*journal.Input, error)
	Run(journal.ID) (*journal.Run, error)
	Invocation(journal.ID) (*journal.Invocation, error)
	RunInvocations(journal.ID) ([]journal.Invocation, error)
	// Sealed reports whether payloads are encrypted at rest: the engine
	// then journals inputs, arguments, results and outputs faithfully,
	// secrets included; otherwise it redacts secret values from them.
	Sealed() bool
	// Digest is the digest of arguments the journal keeps (keyed when
	// Sealed).
	Digest([]byte) string
}

var _ Journal = journal.Store(nil)

// Session is a connection to one MCP server. Call takes the Intent that
// bolt.Store.Begin or Again returned: a tools/call cannot be sent
// without the proof that its intent is durable. MCP adapts a
// *upstream.Session.
type Session interface {
	Tool(ctx context.Context, name string) (upstream.Tool, error)
	Call(ctx context.Context, in journal.Intent, tool string, args json.RawMessage, progress func(progress, total float64, message string)) (*mcp.CallToolResult, error)
}

// ErrNoIntent is returned by a Session's Call given an Intent that did not
// come from the journal.
var ErrNoIntent = errors.New("no durable intent: a tools/call is sent only after its intent is journaled")

// MCP adapts a live server session to Session. Its Call refuses an Intent
// that is not durable, and sends the intent's idempotency key in _meta.
func MCP(s *upstream.Session) Session { return mcpSession{s} }

// SessionOf returns the server session behind an MCP adapter, or nil.
func SessionOf(s Session) *upstream.Session {
	if m, ok := s.(mcpSession); ok {
		return m.s
	}
	return nil
}

type mcpSession struct{ s *upstream.Session }

func (m mcpSession) Tool(ctx context.Context, name string) (upstream.Tool, error) {
	return m.s.Tool(ctx, name)
}

func (m mcpSession) Call(ctx context.Context, in journal.Intent, tool string, args json.RawMessage, progress func(float64, float64, string)) (*mcp.CallToolResult, error) {
	if !in.Valid() {
		return nil, ErrNoIntent
	}
	meta := map[string]any{MetaIdempotencyKey: in.IdempotencyKey}
	injectMeta(ctx, meta) // traceparent, tracestate, baggage: unprefixed (SEP-414)
	if f := forwardOf(ctx); f != nil {
		// The client's own _meta, under ours; its progress token is
		// replaced by the session's (progress comes back through f).
		for k, v := range f.Meta {
			if _, ours := meta[k]; !ours && k != "progressToken" {
				meta[k] = v
			}
		}
		id := in.ID
		f.invocation.Store(&id)
		f.sent.Store(true)
	}
	if c := in.Continuation; c != nil {
		// The answers to what the previous attempt's result asked for,
		// as journaled, with the server's state.
		return m.s.Continue(ctx, tool, args, meta, upstream.Continued{Responses: c.Responses, State: c.State}, progress)
	}
	return m.s.Call(ctx, tool, args, meta, progress)
}

// UsePool connects the engine's sessions through pool.
func (e *Engine) UsePool(pool *upstream.Pool) {
	e.Connect = func(ctx context.Context, name string) (Session, error) {
		s, err := pool.Session(ctx, name)
		if err != nil {
			return nil, err
		}
		return MCP(s), nil
	}
	e.ReconnectTimeout = func(name string) time.Duration {
		if srv, ok := pool.Set()[name]; ok {
			return srv.ReconnectTimeout
		}
		return 0
	}
	e.Reconnect = func(ctx context.Context, name string, old Session) (Session, error) {
		s, err := pool.Reconnect(ctx, name, SessionOf(old))
		if err != nil {
			return nil, err
		}
		return MCP(s), nil
	}
}

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
	// Creating, when set, is told a new run's id (Run) before its creation
	// is queued, so before anything can read the run from the journal: a
	// front end marks the run as going where it runs before another
	// request can find it running and take it for abandoned. Its
	// RunStarted comes once the creation is durable.
	Creating func(journal.ID)
	// Sample sends a server's sampling request to the provider the
	// workspace configures (nil: none; mcpflow then does not answer one).
	// Each request is journaled with the call that asked, and when
	// SampleApprove is set it first waits for an operator's approval.
	Sample        func(ctx context.Context, server string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	SampleApprove bool
	// Now is the clock for elapsed times. Default time.Now.
	Now func() time.Time
	// ResultLimit caps the bytes of a result or of arguments kept in the
	// journal (a digest of the whole is kept). Default 64 KiB.
	ResultLimit int
	// Backoff is the base delay between reconnect tries. Default 100ms.
	Backoff time.Duration
	// ReconnectTimeout is how long to keep reconnecting to a server after a
	// lost connection before a replay or a first delivery. Default
	// upstream.DefaultReconnectTimeout.
	ReconnectTimeout func(server string) time.Duration
	// Called, when set, is told of each tools/call attempt that was sent,
	// with its latency (metrics). It must not block.
	Called func(server, tool string, elapsed time.Duration)
	// Decided, when set, is told of each replay-rule decision journaled
	// (metrics). It must not block.
	Decided func(journal.Decision)
}

func (e *Engine) reconnectTimeout(server string) time.Duration {
	if e.ReconnectTimeout != nil {
		if d := e.ReconnectTimeout(server); d > 0 {
			return d
		}
	}
	return upstream.DefaultReconnectTimeout
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// RunStarted: the run is journaled (a new run's record commits with
	// its first write), or a resumed run goes on.
	RunStarted EventKind = iota + 1
	StepStarted
	StepProgress
	StepFinished
	RunFinished
)

// Event reports progress of a run.
type Event struct {
	Kind     EventKind
	Run      journal.ID
	Workflow string
	Step     string
	// Item is the for_each item index, or -1.
	Item int
	// Tool is what the step's request addresses: the tool's name, or (by
	// Method) the resource's URI or the prompt's name.
	Tool       string
	Method     journal.Method
	Server     string
	Invocation journal.ID
	State      journal.State
	Attempt    int
	// Progress and Total come from notifications/progress (Total 0 when unknown).
	Progress, Total float64
	Message         string
	// Text is a completed call's text content (StepFinished), exactly as
	// the tool sent it: its text items joined by newlines. Front ends
	// shorten it where they show it to people.
	Text string
	// Elapsed is a step's time (StepFinished, StepProgress); for
	// RunFinished, the run's wall time, from its start to its end,
	// resumes and all (api.TimingOf).
	Elapsed time.Duration
	// Work and Waited (RunFinished) are the time the run had a call in
	// flight, and the time it waited for an approval, an operator or a
	// resume (api.Timing).
	Work, Waited time.Duration
	Status       journal.RunStatus
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
	CodeResultTooLarge    = "MCPFLOW_RESULT_TOO_LARGE"
	CodeServerUnavailable = "MCPFLOW_SERVER_UNAVAILABLE"
	CodeExpression        = "MCPFLOW_EXPRESSION"
	CodeUnknownTool       = "MCPFLOW_UNKNOWN_TOOL"
	CodeInvalidArguments  = "MCPFLOW_INVALID_ARGUMENTS"
	CodeAborted           = "MCPFLOW_ABORTED"
	CodeTimedOut          = "MCPFLOW_TIMED_OUT"
	CodeJournal           = "MCPFLOW_JOURNAL"
	// CodeApprovalRequired blocks a run at a step with approve: until an
	// operator decides (mcpflow approve or reject).
	CodeApprovalRequired = "MCPFLOW_APPROVAL_REQUIRED"
	// CodeApprovalRejected fails a step an operator rejected.
	CodeApprovalRejected = "MCPFLOW_APPROVAL_REJECTED"
	// CodeLoginRequired blocks a run whose server wants a login mcpflow
	// cannot get without a person (login.go): once someone logs in, resume
	// runs the step again.
	CodeLoginRequired = "MCPFLOW_LOGIN_REQUIRED"
)

// Run executes wf with inputs (already typed by ParseInputs) and returns the
// run record as committed at its end. A run that failed, was blocked or was cancelled is not an
// error: see the returned status. An error means the journal could not be
// written, and the run's state is whatever was journaled before.
func (e *Engine) Run(ctx context.Context, wf *workflow.Workflow, inputs map[string]any, workspace string) (*journal.Run, error) {
	run := e.newRun(wf, inputs, workspace)
	ctx, span := tracer().Start(ctx, "mcpflow.run", trace.WithAttributes(attribute.String(AttrWorkflow, wf.Name)))
	run.TraceParent = traceParent(span) // a resumed run continues this trace
	// The run's creation rides with its first write.
	if e.Creating != nil {
		run.ID = newRunID(e.Journal)
		e.Creating(run.ID)
	}
	created, err := e.Journal.CreateRunLater(run)
	if err != nil {
		return nil, err
	}
	r := newRunner(e, wf, run, inputs, nil)
	r.queue(created, false)
	// Reported once the run is journaled: whoever learns its id (a
	// detached run, the API) can find it.
	r.emitDurable(Event{Kind: RunStarted, Run: run.ID, Workflow: wf.Name})
	out, err := r.execute(ctx)
	endRun(span, out, err)
	return out, err
}

// newRunID is a new run's id, made by j when it makes ids on request
// (journal.Writer.NewRunID, from the journal's clock), else here (the
// journal of another process, package client).
func newRunID(j Journal) journal.ID {
	if m, ok := j.(interface{ NewRunID() journal.ID }); ok {
		return m.NewRunID()
	}
	return journal.NewID()
}

// newRun is the record of a run of wf about to start.
func (e *Engine) newRun(wf *workflow.Workflow, inputs map[string]any, workspace string) *journal.Run {
	run := &journal.Run{
		Workflow:   wf.Name,
		Definition: wf.Source,
		Source:     wf.Path,
		Inputs:     wf.RedactInputs(inputs),
		Secrets:    wf.SecretInputs(),
		Workspace:  workspace,
	}
	if e.Journal.Sealed() {
		run.Inputs = inputs // encrypted at rest: kept faithfully, secrets too
	}
	return run
}

// Submit journals a run of wf that has not started: the record Run would
// create, running, with no invocation yet, for whoever resumes it (a
// worker sharing the journal) to start it from the journal alone. The run
// joins the trace of ctx, if any. Its secret inputs reach whoever starts
// it only through a Sealed journal.
func (e *Engine) Submit(ctx context.Context, wf *workflow.Workflow, inputs map[string]any, workspace string) (*journal.Run, error) {
	run := e.newRun(wf, inputs, workspace)
	run.TraceParent = traceParent(trace.SpanFromContext(ctx))
	if err := e.Journal.CreateRun(run); err != nil {
		return nil, err
	}
	return run, nil
}

// runner is the state of one run in progress.
type runner struct {
	e       *Engine
	j       scrubbing // the engine's journal as the run writes it: secrets scrubbed, one commit per step (durable.go)
	secrets []string  // values of secret inputs: never journaled or shown
	wf      *workflow.Workflow
	run     *journal.Run
	start   time.Time
	inputs  map[string]any
	env     map[string]string
	// prior holds the newest journaled invocation of each step and item
	// (resume).
	prior map[unitKey]*journal.Invocation

	// steps is what expressions see as steps.ID. Only execute writes it,
	// between steps, when no unit of the run is running: the units (a
	// step's fan-out items among them) read it without a lock, and
	// without a copy.
	steps map[string]any

	// dmu guards the queue of writes waiting for the next commit, the
	// events waiting for them, and the servers the run has used
	// (durable.go).
	dmu      sync.Mutex
	pending  []*journal.Pending
	outcomes int // how many of pending record a step's end
	held     []Event
	used     map[string]bool
	// live: a Live run, whose calls wait for their own outcomes (queued,
	// by invocation, until outcomeDurable takes them).
	live   bool
	queued map[journal.ID]*journal.Pending
	// lent holds the release of each session the run lent its secrets to
	// (secrets.go), until the run's end.
	lent map[secretHolder]func()
	// answerPoll is the first wait of a call for an answer before it
	// reads the journal again (0: answerPoll); tests set it.
	answerPoll time.Duration
}

// unit is one invocation's worth of a step: the step itself, or one item of
// its for_each.
type unit struct {
	*workflow.Step
	item      int // -1 without for_each
	itemValue any
	// target is what the unit's request addresses, as journaled: the
	// tool's name, the prompt's, or the resource's URI as evaluated
	// (secret values scrubbed).
	target string
}

// name is the unit as people see it: the step id, with [i] for an item.
func (u unit) name() string {
	if u.item >= 0 {
		return fmt.Sprintf("%s[%d]", u.ID, u.item)
	}
	return u.ID
}

type unitKey struct {
	step string
	item int
}

func newRunner(e *Engine, wf *workflow.Workflow, run *journal.Run, inputs map[string]any, prior map[unitKey]*journal.Invocation) *runner {
	env := map[string]string{}
	for _, name := range wf.Env {
		env[name] = os.Getenv(name) // a listed variable that is unset reads as ""
	}
	r := &runner{e: e, wf: wf, run: run, inputs: inputs, env: env, prior: prior, steps: map[string]any{}, used: map[string]bool{}}
	r.secrets = workflow.SecretValues(wf.SecretInputs(), inputs)
	r.j = scrubbing{Journal: e.Journal, r: r}
	return r
}

func (r *runner) vars(u unit) workflow.Vars {
	return workflow.Vars{Inputs: r.inputs, Steps: r.steps, Env: r.env, Item: u.itemValue, Index: max(u.item, 0), InLoop: u.item >= 0}
}

func (r *runner) execute(ctx context.Context) (*journal.Run, error) {
	defer r.returnSecrets()
	r.start = r.e.now()
	status, runErr := journal.RunSucceeded, (*journal.Error)(nil)
	for _, st := range r.wf.Steps {
		res, err := r.runStep(ctx, st)
		if err != nil {
			if taken := r.takenOver(ctx, err); taken != nil {
				return nil, taken
			}
			return r.finish(journal.RunFailed, &journal.Error{Code: CodeJournal, Message: err.Error()}, err)
		}
		value := res.value
		if res.status == journal.RunFailed && st.ContinueOnError {
			// Later steps see the failure as data.
			if value == nil {
				value = failedValue(res.err)
			}
			res.status = journal.RunSucceeded
		}
		if res.status != journal.RunSucceeded {
			status, runErr = res.status, res.err
			break
		}
		r.steps[st.ID] = value
	}
	if status == journal.RunSucceeded && len(r.wf.Outputs) > 0 {
		outputs, err := r.outputs(ctx)
		if err != nil {
			return r.finish(journal.RunFailed, &journal.Error{Code: CodeExpression, Message: err.Error()}, nil)
		}
		r.run.Outputs = outputs
	}
	if status == journal.RunCancelled && errors.Is(context.Cause(ctx), ErrStopping) {
		return r.stopped()
	}
	if taken := r.takenOver(ctx, nil); taken != nil {
		return nil, taken
	}
	if cause := context.Cause(ctx); status == journal.RunCancelled && runErr != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		// Cancelled with a reason (mcpflow runs cancel --reason): the run
		// says so.
		runErr = &journal.Error{Code: runErr.Code, Message: runErr.Message + " (cancelled: " + cause.Error() + ")"}
	}
	return r.finish(status, runErr, nil)
}

// ErrStopping, as the cause of a run's context, stops the run the way a
// crash would, but cleanly: no new call is sent, a call in flight is
// aborted and journaled so, and the run stays running in the journal, for
// the next start of the process that owns it (mcpflow server) to resume
// under the replay rule.
var ErrStopping = errors.New("mcpflow is stopping")

// stopped leaves the run running (see ErrStopping) once what it queued is
// committed.
// takenOver is the error of a run another worker took over (its lease
// lost: err, or the cause that stopped ctx, is journal.ErrLeaseLost), nil
// otherwise. Such a run's end is the other worker's to write: this one
// writes nothing more of it — not even as failed, which, were this process
// to hold the run again by then, its fence would let through.
func (r *runner) takenOver(ctx context.Context, err error) error {
	if errors.Is(err, journal.ErrLeaseLost) {
		return err
	}
	if errors.Is(context.Cause(ctx), journal.ErrLeaseLost) {
		return fmt.Errorf("run %s: %w", r.run.ID.Short(), journal.ErrLeaseLost)
	}
	return nil
}

func (r *runner) stopped() (*journal.Run, error) {
	if err := r.flush(); err != nil {
		return nil, err
	}
	return r.j.Run(r.run.ID)
}

// outputs evaluates the workflow's outputs; secret input values are redacted.
func (r *runner) outputs(ctx context.Context) (map[string]any, error) {
	out := make(map[string]any, len(r.wf.Outputs))
	for _, o := range r.wf.Outputs {
		v, err := o.Value.Eval(ctx, r.vars(unit{item: -1}))
		if err != nil {
			return nil, fmt.Errorf("output %s: %v", o.Name, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("output %s: %v", o.Name, err)
		}
		var redacted any
		if err := json.Unmarshal(r.redact(b), &redacted); err != nil {
			return nil, fmt.Errorf("output %s: %v", o.Name, err)
		}
		out[o.Name] = redacted
	}
	return out, nil
}

func failedValue(e *journal.Error) map[string]any {
	v := newValue(true, false)
	if e != nil {
		v["text"], v["error"] = e.Message, map[string]any{"code": e.Code, "message": e.Message}
	}
	return v
}

// runStep runs one step: its condition, then one invocation or one per
// for_each item.
func (r *runner) runStep(ctx context.Context, st *workflow.Step) (stepResult, error) {
	ctx, span := tracer().Start(ctx, "mcpflow.step")
	if span.IsRecording() { // with tracing off, no attribute is built
		span.SetAttributes(attribute.String(AttrStep, st.ID), attribute.String(AttrServer, st.Server))
		if st.Tool != "" {
			span.SetAttributes(attribute.String("gen_ai.tool.name", st.Tool))
		}
	}
	out, err := r.step(ctx, st)
	if span.IsRecording() {
		if out.status != journal.RunSucceeded {
			span.SetStatus(codes.Error, out.status.String())
		}
		if !out.invocation.IsZero() {
			span.SetAttributes(attribute.String(AttrInvocationID, out.invocation.String()), attribute.String(AttrState, out.state.String()))
		}
	}
	span.End()
	return out, err
}

func (r *runner) step(ctx context.Context, st *workflow.Step) (stepResult, error) {
	u := unit{Step: st, item: -1}
	if inv, ok := r.prior[unitKey{st.ID, -1}]; ok && st.ForEach == nil {
		// Resume: the condition was decided when the step first ran; its
		// journaled invocation, skipped or not, says what happened.
		if inv.State == journal.StateSkipped {
			return r.skip(u)
		}
		return r.unit(ctx, u)
	}
	if st.If != nil {
		ok, out := r.condition(ctx, u)
		if out != nil {
			return *out, nil
		}
		if !ok {
			return r.skip(u)
		}
	}
	if out, err := r.gate(st); out != nil || err != nil {
		return *out, err
	}
	if st.ForEach == nil {
		return r.unit(ctx, u)
	}
	v, err := st.ForEach.Eval(ctx, r.vars(u))
	if err != nil {
		return failed(CodeExpression, "step %s: for_each: %v", st.ID, err), nil
	}
	items, ok := v.([]any)
	if !ok {
		return failed(CodeExpression, "step %s: for_each yielded %s, not a list", st.ID, workflow.Text(v)), nil
	}
	return r.fanOut(ctx, st, items)
}

// gate is a step's approval gate, after its condition and before anything
// of it is journaled: a step without approve:, or one an operator
// approved (when the run got here, or in advance), goes on (nil).
// Otherwise the step ends without an intent: failed when it was rejected
// (continue_on_error applies), else blocked until an operator decides, with
// the request journaled first. The gate is read and the request recorded
// in one write (journal RequestApproval): a decision made in advance at the
// moment the run gets here is followed, never missed. One decision covers
// every item of a for_each. A step that has an invocation journaled passed
// its gate before: resume never reaches here for it without the approval.
func (r *runner) gate(st *workflow.Step) (*stepResult, error) {
	if !st.Approve {
		return nil, nil
	}
	a, err := r.j.RequestApproval(r.run.ID, st.ID, st.ApproveMessage)
	if err != nil {
		return &stepResult{}, err
	}
	switch a.State {
	case journal.ApprovalApproved:
		return nil, nil
	case journal.ApprovalRejected:
		out := failed(CodeApprovalRejected, "%s", rejectedText(st.ID, a))
		return &out, nil
	}
	msg := fmt.Sprintf("step %s waits for approval", st.ID)
	if st.ApproveMessage != "" {
		msg += ": " + st.ApproveMessage
	}
	return &stepResult{status: journal.RunBlocked, err: &journal.Error{Code: CodeApprovalRequired, Message: msg}}, nil
}

// rejectedText says who rejected a step, when, and why.
func rejectedText(step string, a *journal.Approval) string {
	in := ""
	if a.InAdvance {
		in = " in advance"
	}
	msg := fmt.Sprintf("step %s was rejected%s by %s", step, in, a.By)
	if a.At != nil {
		msg += " at " + a.At.UTC().Format(time.RFC3339)
	}
	if a.Reason != "" {
		msg += ": " + a.Reason
	}
	return msg
}

func (r *runner) condition(ctx context.Context, u unit) (bool, *stepResult) {
	v, err := u.If.Eval(ctx, r.vars(u))
	if err != nil {
		out := failed(CodeExpression, "step %s: if: %v", u.ID, err)
		return false, &out
	}
	b, ok := v.(bool)
	if !ok {
		out := failed(CodeExpression, "step %s: if yielded %s, not true or false", u.ID, workflow.Text(v))
		return false, &out
	}
	return b, nil
}

// skip journals a step whose condition was false.
func (r *runner) skip(u unit) (stepResult, error) {
	value := newValue(false, true)
	if _, done := r.prior[unitKey{u.ID, -1}]; done {
		return stepResult{value: value, status: journal.RunSucceeded}, nil
	}
	u.target = r.scrub(u.Target())
	inv := &journal.Invocation{RunID: r.run.ID, Step: u.ID, Item: -1, Server: u.Server, Tool: u.target, Method: u.Method()}
	if err := r.j.SkipLater(inv); err != nil {
		return stepResult{}, err
	}
	out := stepResult{value: value, status: journal.RunSucceeded, invocation: inv.ID, state: journal.StateSkipped}
	r.finished(u, out)
	return out, nil
}

// unit runs or resumes one invocation, and reports how it ended.
func (r *runner) unit(ctx context.Context, u unit) (stepResult, error) {
	var out stepResult
	var err error
	u.target = u.Target()
	if inv, ok := r.prior[unitKey{u.ID, u.item}]; ok {
		u.target = inv.Tool
		out, err = r.resumeUnit(ctx, u, inv)
	} else {
		out, err = r.begin(ctx, &u)
	}
	if err == nil {
		r.finished(u, out)
	}
	return out, err
}

// finished reports the end of a unit whose invocation is journaled: the one
// place a StepFinished event is built. A unit that ended before its intent
// was journaled (an expression, a server that did not start, invalid
// arguments) reports nothing here; the run's end says why.
func (r *runner) finished(u unit, out stepResult) {
	if out.invocation.IsZero() {
		return
	}
	r.emitDurable(Event{Kind: StepFinished, Run: r.run.ID, Step: u.ID, Item: u.item, Server: u.Server, Tool: u.target, Method: u.Method(),
		Invocation: out.invocation, State: out.state, Attempt: out.attempt, Elapsed: out.elapsed, Text: out.text, Err: out.err})
}

// fanOut runs one invocation per item with at most st.Concurrency in
// flight. After the first item that does not succeed no new item starts;
// items already in flight finish (cancelling them would leave their
// outcome unknown).
func (r *runner) fanOut(ctx context.Context, st *workflow.Step, items []any) (stepResult, error) {
	results := make([]stepResult, len(items))
	errs := make([]error, len(items))
	started := make([]bool, len(items))
	sem := make(chan struct{}, st.Concurrency)
	stopped := make(chan struct{})
	var stop sync.Once
	var wg sync.WaitGroup
launch:
	for i, item := range items {
		select {
		case sem <- struct{}{}:
		case <-stopped:
			break launch
		}
		select {
		case <-stopped:
			break launch
		default:
		}
		started[i] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, span := tracer().Start(ctx, "mcpflow.item")
			if span.IsRecording() {
				span.SetAttributes(attribute.String(AttrStep, st.ID), attribute.Int(AttrItem, i))
			}
			results[i], errs[i] = r.unit(ctx, unit{Step: st, item: i, itemValue: item})
			if span.IsRecording() && !results[i].invocation.IsZero() {
				span.SetAttributes(attribute.String(AttrInvocationID, results[i].invocation.String()), attribute.String(AttrState, results[i].state.String()))
			}
			span.End()
			if errs[i] == nil && st.Concurrency > 1 {
				// Other items may be in long calls: this outcome does not
				// wait for their next write (one at a time, the next
				// item's intent carries it).
				errs[i] = r.flush()
			}
			if errs[i] != nil || (results[i].status != journal.RunSucceeded && !st.ContinueOnError) {
				stop.Do(func() { close(stopped) })
			}
		}()
	}
	wg.Wait()
	values := make([]any, len(items))
	worst := stepResult{status: journal.RunSucceeded}
	for i := range items {
		if errs[i] != nil {
			return stepResult{}, errs[i]
		}
		res := results[i]
		switch {
		case !started[i]:
			values[i] = nil // never started
		case res.status == journal.RunSucceeded:
			values[i] = res.value
		default:
			values[i] = res.value
			if values[i] == nil {
				values[i] = failedValue(res.err)
			}
			if rank(res.status) > rank(worst.status) {
				worst = res
			}
		}
	}
	if worst.status == journal.RunSucceeded {
		return stepResult{value: map[string]any{"items": values, "isError": false}, status: journal.RunSucceeded}, nil
	}
	worst.value = map[string]any{"items": values, "isError": true}
	return worst, nil
}

// rank orders how a fan-out ends when its items end differently.
func rank(s journal.RunStatus) int {
	switch s {
	case journal.RunBlocked:
		return 4
	case journal.RunCancelled:
		return 3
	case journal.RunFailed:
		return 2
	case journal.RunSucceeded:
		return 1
	}
	return 0
}

func (r *runner) finish(status journal.RunStatus, runErr *journal.Error, cause error) (*journal.Run, error) {
	if status != journal.RunSucceeded {
		r.run.Outputs = nil
	}
	run, err := r.j.EndRun(r.run.ID, status, runErr, r.run.Outputs) // as committed: status, error (scrubbed), outputs, times
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	r.emit(r.runFinished(run))
	return run, cause
}

// runFinished is the event of run's end: its time, work and wall, when
// someone listens (it reads the run's invocations).
func (r *runner) runFinished(run *journal.Run) Event {
	ev := Event{Kind: RunFinished, Run: run.ID, Workflow: r.wf.Name, Status: run.Status, Err: run.Error, Elapsed: r.e.now().Sub(r.start)}
	if r.e.Events == nil {
		return ev
	}
	if invs, err := r.j.RunInvocations(run.ID); err == nil {
		t := api.TimingOf(run, invs, r.e.now())
		ev.Elapsed, ev.Work, ev.Waited = t.Wall, t.Work, t.Waited()
	}
	return ev
}

// stepResult is what one step produced: the value later expressions see as
// steps.ID, or the run status it ends the run with; and, for a unit whose
// invocation is journaled, how that invocation ended (the StepFinished
// event).
type stepResult struct {
	value  map[string]any
	status journal.RunStatus
	err    *journal.Error

	invocation journal.ID // zero: no invocation was journaled
	state      journal.State
	attempt    int
	elapsed    time.Duration // of the newest attempt sent
	text       string        // a completed call's text content, as it came
	// call is a completed call's result as it came, when it came now (not
	// from the journal): what a proxy passes back to its client.
	call *mcp.CallToolResult
	// sent is the error a failed send returned, as it came (a JSON-RPC
	// error of the server's): what a proxy passes back to its client.
	sent error
}

func failed(code, format string, args ...any) stepResult {
	return stepResult{status: journal.RunFailed, err: &journal.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// newValue is the shape of every steps.ID value expressions see.
func newValue(isError, skipped bool) map[string]any {
	return map[string]any{"isError": isError, "skipped": skipped, "text": "", "content": nil, "structuredContent": nil, "error": nil}
}

// resultJSON is the JSON of a result's content and of its
// structuredContent (nil when it has none, or it cannot be encoded).
func resultJSON(res *mcp.CallToolResult) (content, structured json.RawMessage) {
	content, err := json.Marshal(res.Content)
	if err != nil {
		content = nil
	}
	if res.StructuredContent != nil {
		if structured, err = json.Marshal(res.StructuredContent); err != nil {
			structured = nil
		}
	}
	return content, structured
}

// resultValue is what expressions see of a tool's result, live or
// journaled: content, its text parts joined, and structuredContent (see
// valueOf for every method).
func resultValue(content, structured json.RawMessage, isError bool) map[string]any {
	v := newValue(isError, false)
	// The content list and structuredContent are decoded only if an
	// expression reads them; the text, which every step's report shows,
	// at once.
	if json.Valid(content) {
		v["content"] = decodeLazily(content)
		v["text"] = api.ContentText(content)
	}
	if json.Valid(structured) {
		v["structuredContent"] = decodeLazily(structured)
	}
	return v
}

// decodeLazily is the value of doc (valid JSON), decoded when an
// expression first reads it.
func decodeLazily(doc json.RawMessage) *workflow.Lazy {
	return workflow.NewLazy(func() any {
		var v any
		json.Unmarshal(doc, &v)
		return v
	})
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
