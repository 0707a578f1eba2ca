package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/workflow"
)

// Live is a run whose steps are not known in advance: a proxy session
// (mcpflow proxy), where each tools/call a client makes is one more step,
// journaled and sent by the same attempt loop, under the same replay rule
// and trust gates, as a workflow's. Calls may go concurrently. End ends
// the run.
type Live struct {
	r         *runner
	server    string
	span      trace.Span
	workspace string
	created   bool // the run is journaled (at the first call)

	mu       sync.Mutex
	calls    int
	unknown  int    // calls whose outcome is unknown
	mayHave  string // a call that ended aborted or timed out: it may have run
	ended    bool
	inFlight sync.WaitGroup
}

// Open prepares the run of a proxy session of wf (workflow.Proxy), with
// the client's name and version as its inputs. The run is journaled with
// the session's first call — a session that calls nothing leaves no run —
// before that call's intent.
func (e *Engine) Open(ctx context.Context, wf *workflow.Workflow, inputs map[string]any, workspace string) (*Live, error) {
	server, ok := workflow.ProxyServer(wf.Name, wf.Path)
	if !ok {
		return nil, fmt.Errorf("engine: workflow %q is not a proxy session's", wf.Name)
	}
	_, span := tracer().Start(ctx, "mcpflow.run", trace.WithAttributes(attribute.String(AttrWorkflow, wf.Name)))
	r := newRunner(e, wf, &journal.Run{Workflow: wf.Name}, inputs, nil)
	r.live, r.queued = true, map[journal.ID]*journal.Pending{}
	return &Live{r: r, server: server, span: span, workspace: workspace}, nil
}

// create journals the run, at the session's first call. l.mu is held.
func (l *Live) create() error {
	if l.created {
		return nil
	}
	e, r := l.r.e, l.r
	run := e.newRun(r.wf, r.inputs, l.workspace)
	run.TraceParent = traceParent(l.span)
	if err := e.Journal.CreateRun(run); err != nil {
		return err
	}
	r.run, r.start, l.created = run, e.now(), true
	e.emit(Event{Kind: RunStarted, Run: run.ID, Workflow: r.wf.Name})
	return nil
}

// Run is the session's run as journaled at its start; nil before its
// first call.
func (l *Live) Run() *journal.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.created {
		return nil
	}
	return l.r.run
}

// Answer is how one call through a Live run ended.
type Answer struct {
	// Result is the tool's result as it came (a tool error included); nil
	// when no result came.
	Result *mcp.CallToolResult
	// Err says why there is no result: the stable error of an outcome
	// unknown, a failure, or a call refused before anything was sent.
	Err *journal.Error
	// Failure is the error the server answered a failed call with, as it
	// came (a *jsonrpc.Error for a JSON-RPC error); nil otherwise. Never
	// set when the outcome is unknown.
	Failure error
	// Invocation is the journaled invocation; zero when the call was
	// refused before its intent was journaled (an unknown tool, invalid
	// arguments, a server that did not start): nothing was sent.
	Invocation journal.ID
	State      journal.State
	// Step is the call's step in the run: call-N.
	Step string
}

// Forward is what a client that mcpflow stands in for gives a call: its
// own _meta, sent with the idempotency key (which wins on a clash), and
// where the call's progress goes.
type Forward struct {
	Meta     map[string]any
	Progress func(progress, total float64, message string)

	sent       atomic.Bool
	invocation atomic.Pointer[journal.ID]
}

// Sent reports whether the call was put on the wire: a call that failed
// before (its intent not journaled, the journal unreachable) never ran.
func (f *Forward) Sent() bool { return f.sent.Load() }

// Invocation is the invocation of the call once sent: when Call failed on
// the journal after the send, the one whose outcome is unknown.
func (f *Forward) Invocation() journal.ID {
	if id := f.invocation.Load(); id != nil {
		return *id
	}
	return journal.ID{}
}

type forwardKey struct{}

func forwardOf(ctx context.Context) *Forward {
	f, _ := ctx.Value(forwardKey{}).(*Forward)
	return f
}

// Call sends one tools/call of tool with args, exactly as given, as the
// run's next step: intent journaled before the send, the outcome durable
// before Call returns, a lost connection judged by the replay rule (a safe
// call is sent again after reconnecting and rediscovering the tool; an
// unsafe one ends outcome unknown, for an operator to resolve). The error
// is the journal's: the call's own failures are in the Answer.
func (l *Live) Call(ctx context.Context, tool string, args json.RawMessage, fw *Forward) (Answer, error) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return Answer{}, fmt.Errorf("run %s has ended", l.r.run.ID.Short())
	}
	if err := l.create(); err != nil {
		l.mu.Unlock()
		return Answer{}, err
	}
	l.calls++
	l.inFlight.Add(1)
	defer l.inFlight.Done()
	// Sent as the journal keeps them (compact JSON, as encoding/json
	// writes it), so that a resume sends the same bytes: the same JSON as
	// the client's, numbers untouched.
	if canonical, err := json.Marshal(args); err == nil {
		args = canonical
	}
	st := workflow.ProxyStep(workflow.ProxyCall{Step: fmt.Sprintf("call-%d", l.calls), Tool: tool, Args: args}, l.server)
	l.mu.Unlock()
	ctx = trace.ContextWithSpan(ctx, l.span)
	if fw != nil {
		ctx = context.WithValue(ctx, forwardKey{}, fw)
	}
	out, err := l.r.runStep(ctx, st)
	if err == nil {
		err = l.r.flush()
	}
	if err == nil && !out.invocation.IsZero() {
		// The answer goes back once this call's outcome is durable, even
		// when another call's flush took it from the queue.
		err = l.r.outcomeDurable(out.invocation)
	}
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Result: out.call, Invocation: out.invocation, State: out.state, Failure: out.sent, Step: st.ID}
	if out.call == nil {
		a.Err = out.err
		if a.Err == nil {
			a.Err = &journal.Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("step %s: no result", st.ID)}
		}
	}
	l.mu.Lock()
	switch out.state {
	case journal.StateOutcomeUnknown:
		l.unknown++
	case journal.StateAborted, journal.StateTimedOut:
		if l.mayHave == "" {
			l.mayHave = fmt.Sprintf("step %s (%s) ended %s: it may have run", st.ID, tool, out.state)
		}
	}
	l.mu.Unlock()
	return a, nil
}

// End ends the run once its calls returned (it waits for those in
// flight): blocked when a call's outcome is unknown (an operator resolves
// it, as any other); cancelled when a call was aborted or timed out,
// which may have run — resume judges it by the replay rule; otherwise
// succeeded — a call that failed was answered to the client, and the
// session went on.
func (l *Live) End() (*journal.Run, error) {
	l.mu.Lock()
	l.ended = true
	created := l.created
	l.mu.Unlock()
	l.inFlight.Wait()
	if !created {
		// The session called nothing: no run was journaled.
		endRun(l.span, nil, nil)
		return nil, nil
	}
	l.mu.Lock()
	status, runErr := journal.RunSucceeded, (*journal.Error)(nil)
	switch {
	case l.unknown > 0:
		status, runErr = journal.RunBlocked, outcomeUnknown
	case l.mayHave != "":
		status, runErr = journal.RunCancelled, &journal.Error{Code: CodeAborted, Message: l.mayHave + "; mcpflow resume judges it by the replay rule"}
	}
	l.mu.Unlock()
	defer l.r.returnSecrets()
	if err := l.r.flush(); err != nil {
		endRun(l.span, nil, err)
		return nil, err
	}
	run, err := l.r.finish(status, runErr, nil)
	endRun(l.span, run, err)
	return run, err
}
