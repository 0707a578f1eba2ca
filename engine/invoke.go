package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/workflow"
)

// MetaIdempotencyKey is the _meta key carrying the invocation id on every
// tools/call, unchanged across replays, so servers that de-duplicate can.
const MetaIdempotencyKey = "io.mcpflow/idempotency-key"

// maxFirstDeliveries bounds how often a call that provably never left this
// process is sent again after reconnecting.
const maxFirstDeliveries = 3

func firstDeliveries(inv *journal.Invocation) int {
	n := 0
	for _, d := range inv.Decisions {
		if d.Verdict == verdict.FirstDelivery {
			n++
		}
	}
	return n
}

// maxBackoff caps the delay between retries.
const maxBackoff = 5 * time.Minute

// reconnectTries bounds reconnecting after a lost connection.
const reconnectTries = 4

// outcomeUnknown is the stable error journaled for an unsafe lost call. It
// never carries arguments or upstream error text.
var outcomeUnknown = &journal.Error{Code: replay.Code, Message: replay.Message}

// step evaluates a unit's arguments and runs its invocation. The returned
// error is a journal failure; everything else is in stepResult.
func (r *runner) step(ctx context.Context, st unit) (stepResult, error) {
	args, out := r.evalArgs(ctx, st)
	if out != nil {
		return *out, nil
	}
	sess, err := r.e.Connect(ctx, st.Server)
	if err != nil {
		if ctx.Err() != nil {
			return stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: "interrupted while connecting to server " + st.Server}}, nil
		}
		return failed(CodeServerUnavailable, "step %s: server %q unavailable: %v", st.name(), st.Server, err), nil
	}
	tool, err := sess.Tool(ctx, st.Tool)
	if err != nil {
		if !errors.Is(err, servers.ErrUnknownTool) {
			return failed(CodeServerUnavailable, "step %s: listing the tools of server %q failed: %v", st.name(), st.Server, err), nil
		}
		return failed(CodeUnknownTool, "step %s: %v", st.name(), err), nil
	}
	if ctx.Err() != nil {
		// Interrupted before anything was journaled or sent.
		return stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted before the call was sent", st.name())}}, nil
	}
	// A call whose arguments violate the tool's input schema is a
	// validation error: no intent is written, nothing is sent.
	if err := tool.Validate(args); err != nil {
		return failed(CodeInvalidArguments, "step %s: %v", st.name(), err), nil
	}
	inv := &journal.Invocation{
		RunID:           r.run.ID,
		Step:            st.ID,
		Item:            st.item,
		Server:          st.Server,
		Tool:            st.Tool,
		Arguments:       journal.CapJSON(r.redact(args), r.e.limit()),
		ArgumentsDigest: journal.Digest(r.redact(args)), // of a secret, not even a digest
		Annotations:     tool.Annotations,
		Trust:           r.e.Trust(st.Server),
	}
	intent, err := r.j.Begin(inv)
	if err != nil {
		return stepResult{}, err
	}
	return r.send(ctx, st, sess, intent, args)
}

// evalArgs evaluates a unit's arguments to JSON.
func (r *runner) evalArgs(ctx context.Context, st unit) (json.RawMessage, *stepResult) {
	var argv any = map[string]any{}
	if st.With != nil {
		v, err := st.With.Eval(ctx, r.vars(st))
		if err != nil {
			out := failed(CodeExpression, "step %s: %v", st.name(), err)
			return nil, &out
		}
		argv = v
	}
	args, err := json.Marshal(argv)
	if err != nil {
		out := failed(CodeExpression, "step %s: arguments are not JSON: %v", st.name(), err)
		return nil, &out
	}
	return args, nil
}

// send puts the intent's tools/call on the wire and journals what came of
// it, replaying only what the replay policy clears.
func (r *runner) send(ctx context.Context, st unit, sess Session, intent journal.Intent, args json.RawMessage) (stepResult, error) {
	for {
		started := r.e.now()
		r.emit(Event{Kind: StepStarted, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: intent.ID, State: journal.StateIntent, Attempt: intent.Attempt})
		progress := func(p, total float64, msg string) {
			r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: st.ID, Item: st.item, Invocation: intent.ID, Attempt: intent.Attempt, Progress: p, Total: total, Message: msg, Elapsed: r.e.now().Sub(started)})
		}
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if st.Timeout > 0 {
			// On expiry go-sdk sends notifications/cancelled to the server.
			callCtx, cancel = context.WithTimeout(ctx, st.Timeout)
		}
		res, callErr := sess.Call(callCtx, intent, st.Tool, args, progress)
		cancel()
		class := servers.Classify(callErr)
		if callErr == nil && res.IsError {
			class = replay.ClassToolError
		}
		var declined *journal.Decision // why a failure the step asked to retry was not
		if class == replay.ClassToolError || (class != replay.ClassNone && class != replay.ClassLost && class != replay.ClassNotDelivered) {
			next, d, stop, err := r.retry(ctx, st, sess, intent, class, res, callErr)
			if err != nil {
				return stepResult{}, err
			}
			declined = d
			if stop != nil {
				r.emit(Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: intent.ID, State: journal.StateIntent, Attempt: intent.Attempt, Err: stop.err})
				return *stop, nil
			}
			if next.Valid() {
				intent = next
				continue
			}
		}
		finished := func(state journal.State, e *journal.Error) {
			ev := Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: intent.ID, State: state, Attempt: intent.Attempt, Elapsed: r.e.now().Sub(started), Err: e}
			if res != nil && e == nil {
				ev.Text = oneLine(resultText(res))
			}
			r.emit(ev)
		}
		if class.Executed() {
			if err := r.j.Finish(intent, journal.Outcome{State: journal.StateCompleted, Result: r.result(res), Decision: declined}); err != nil {
				return stepResult{}, err
			}
			out := completed(st, stepValue(res))
			finished(journal.StateCompleted, out.err)
			return out, nil
		}
		if class != replay.ClassLost && class != replay.ClassNotDelivered {
			state, out := r.failure(st, class, callErr)
			o := journal.Outcome{State: state, Error: out.err, Failure: class.String(), Detail: callErr.Error(), Decision: declined}
			if err := r.j.Finish(intent, o); err != nil {
				return stepResult{}, err
			}
			finished(state, out.err)
			return out, nil
		}
		// The connection failed: either provably before the request left this
		// process (a first delivery may follow) or after it may have arrived
		// (only the replay policy may clear a re-send). The decision is
		// journaled with the attempt's outcome, before it is acted on.
		fresh, err := r.j.Invocation(intent.ID)
		if err != nil {
			return stepResult{}, err
		}
		if class == replay.ClassNotDelivered && firstDeliveries(fresh) >= maxFirstDeliveries {
			// The session keeps breaking before the call leaves: the server
			// is unusable. The call never ran; resume may try again.
			o := journal.Outcome{State: journal.StateFailed, Failure: replay.ClassNotDelivered.String(), Detail: callErr.Error(),
				Error: &journal.Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("step %s: server %q broke the session %d times before the call could be sent", st.name(), st.Server, maxFirstDeliveries+1)}}
			if err := r.j.Finish(intent, o); err != nil {
				return stepResult{}, err
			}
			finished(journal.StateFailed, o.Error)
			return stepResult{status: journal.RunFailed, err: o.Error}, nil
		}
		o, blocked := r.decideLoss(fresh, class)
		o.Detail = callErr.Error()
		if err := r.j.Finish(intent, o); err != nil {
			return stepResult{}, err
		}
		if blocked {
			finished(journal.StateOutcomeUnknown, outcomeUnknown)
			return stepResult{status: journal.RunBlocked, err: outcomeUnknown}, nil
		}
		var out *stepResult
		sess, intent, out, err = r.again(ctx, st, sess, intent.ID, class)
		if err != nil || out != nil {
			if out == nil {
				return stepResult{}, err
			}
			if out.err != nil {
				r.emit(Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: intent.ID, State: out.state, Err: out.err})
			}
			return *out, err
		}
	}
}

// retry journals and starts another attempt after a failure the step's
// retry asks to retry: a tool error (the author's explicit choice), a
// rejection before execution, or — only when the replay policy says the tool
// is safe — a timeout or a server error, after which the call may have run.
//
// It returns the next attempt's intent (invalid when there is no retry), or
// a result that ends the step when the run is interrupted during the
// backoff (the journaled decision to retry is then carried out by resume).
func (r *runner) retry(ctx context.Context, st unit, sess Session, intent journal.Intent, class replay.Class, res *mcp.CallToolResult, callErr error) (journal.Intent, *journal.Decision, *stepResult, error) {
	if st.Retry.Attempts <= 1 || class == replay.ClassAborted {
		return journal.Intent{}, nil, nil, nil
	}
	inv, err := r.j.Invocation(intent.ID)
	if err != nil {
		return journal.Intent{}, nil, nil, err
	}
	retries := 0
	for _, d := range inv.Decisions {
		if d.Verdict == verdict.Retry {
			retries++
		}
	}
	if retries >= st.Retry.Attempts-1 {
		return journal.Intent{}, &journal.Decision{Verdict: verdict.NotRetried, Reason: "retry_attempts_spent", View: verdict.Current}, nil, nil
	}
	// Trust and annotations as they are now: the journal records what each
	// attempt was sent under, and a call that may have run is repeated only
	// if the send-time snapshot and the current view are both safe.
	trust := r.e.Trust(st.Server)
	tool, toolErr := sess.Tool(ctx, st.Tool)
	reason, replayed := "retry_requested", false
	if class.MayHaveExecuted() {
		sendTime := replay.Decide(r.policyInput(replay.ClassLost, inv.Trust, inv.Annotations, inv.Replays()))
		now := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonToolMissing}
		if toolErr == nil {
			now = replay.Decide(r.policyInput(replay.ClassLost, trust, tool.Annotations, inv.Replays()))
		}
		both := replay.Both(sendTime, now)
		if both.Verdict != replay.Replay {
			// The call may have run and the tool is not safe to repeat.
			return journal.Intent{}, &journal.Decision{Verdict: verdict.NotRetried, Reason: string(both.Reason), View: verdict.Current}, nil, nil
		}
		reason, replayed = string(both.Reason), true
	}
	o := journal.Outcome{State: journal.StateIntent, Failure: class.String(),
		Decision: &journal.Decision{Verdict: verdict.Retry, Reason: reason, View: verdict.Current}}
	if callErr != nil {
		o.Detail = callErr.Error()
	} else if res != nil {
		o.Detail = oneLine(resultText(res))
	}
	if err := r.j.Finish(intent, o); err != nil {
		return journal.Intent{}, nil, nil, err
	}
	delay := min(st.Retry.Backoff<<min(retries, 20), maxBackoff)
	r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: st.ID, Item: st.item, Invocation: intent.ID, Attempt: intent.Attempt,
		Message: fmt.Sprintf("attempt %d: %s; retrying in %s", intent.Attempt, strings.ReplaceAll(class.String(), "_", " "), delay)})
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		// The decision to retry is journaled; resume carries it out.
		return journal.Intent{}, nil, &stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted before retrying; `mcpflow resume` will retry", st.name())}}, nil
	}
	next := journal.NextAttempt{Replay: replayed, Trust: trust, Annotations: inv.Annotations}
	if toolErr == nil {
		next.Annotations = tool.Annotations
	}
	intent, err = r.j.Again(intent.ID, next)
	return intent, nil, nil, err
}

// completed is the step result of a call whose result arrived: a tool error
// (isError) fails the step; anything else feeds later steps.
func completed(st unit, value map[string]any) stepResult {
	if isErr, _ := value["isError"].(bool); isErr {
		// The tool's own error result stays visible to later steps (with
		// continue_on_error) as steps.ID.text, .structuredContent, …
		e := &journal.Error{Code: CodeToolError, Message: fmt.Sprintf("step %s: tool %s returned an error: %s", st.name(), st.Tool, oneLine(workflow.Text(value["text"])))}
		value["error"] = map[string]any{"code": e.Code, "message": e.Message}
		return stepResult{value: value, status: journal.RunFailed, err: e}
	}
	return stepResult{value: value, status: journal.RunSucceeded}
}

// failure maps a failure that is not a connection loss to the invocation's
// state and the step's result.
func (r *runner) failure(st unit, class replay.Class, callErr error) (journal.State, stepResult) {
	switch class {
	case replay.ClassAborted:
		return journal.StateAborted, stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted while the call was in flight; it may have run", st.name())}}
	case replay.ClassTimedOut:
		return journal.StateTimedOut, failed(CodeTimedOut, "step %s: timed out while the call was in flight; it may have run", st.name())
	case replay.ClassRejected:
		return journal.StateFailed, failed(CodeRejected, "step %s: server rejected the call before running it: %v", st.name(), callErr)
	}
	return journal.StateFailed, failed(CodeServerError, "step %s: server returned an error; the tool may have run: %v", st.name(), callErr)
}

// decideLoss applies the replay policy to the send-time snapshot of an
// invocation whose connection failed, with the replays counted from the
// journal. It returns the outcome to journal and whether the run is blocked.
func (r *runner) decideLoss(inv *journal.Invocation, class replay.Class) (journal.Outcome, bool) {
	d := replay.Decide(r.policyInput(class, inv.Trust, inv.Annotations, inv.Replays()))
	v := d.Verdict
	if class == replay.ClassNotDelivered {
		v = verdict.FirstDelivery
	}
	o := journal.Outcome{
		State:    journal.StateIntent,
		Failure:  class.String(),
		Decision: &journal.Decision{Verdict: v, Reason: string(d.Reason), View: verdict.SendTime},
	}
	if class == replay.ClassLost && d.Verdict != replay.Replay {
		o.State, o.Error = journal.StateOutcomeUnknown, outcomeUnknown
		return o, true
	}
	return o, false
}

// again follows a journaled decision to send an invocation again (a replay
// or a first delivery): reconnect, rediscover, judge the fresh view, and
// journal the next attempt. A non-nil stepResult ends the step.
func (r *runner) again(ctx context.Context, st unit, old Session, id journal.ID, class replay.Class) (Session, journal.Intent, *stepResult, error) {
	sess, err := r.reconnect(ctx, st.Server, old)
	if err != nil {
		if ctx.Err() != nil {
			return nil, journal.Intent{}, &stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: "interrupted while reconnecting to server " + st.Server}}, nil
		}
		out := failed(CodeServerUnavailable, "step %s: server %q unavailable after the connection was lost; the decision to send again is journaled and `mcpflow resume` will try again", st.name(), st.Server)
		out.state = journal.StateIntent
		return nil, journal.Intent{}, &out, nil
	}
	inv, err := r.j.Invocation(id)
	if err != nil {
		return nil, journal.Intent{}, nil, err
	}
	trust := r.e.Trust(st.Server)
	tool, toolErr := sess.Tool(ctx, st.Tool)
	next := journal.NextAttempt{Trust: trust, Annotations: tool.Annotations}
	if class == replay.ClassNotDelivered {
		if toolErr != nil {
			out := failed(CodeUnknownTool, "step %s: %v", st.name(), toolErr)
			out.state = journal.StateIntent
			return nil, journal.Intent{}, &out, nil
		}
	} else {
		sendTime := replay.Decide(r.policyInput(class, inv.Trust, inv.Annotations, inv.Replays()))
		freshView := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonToolMissing}
		if toolErr == nil {
			freshView = replay.Decide(r.policyInput(class, trust, tool.Annotations, inv.Replays()))
		}
		both := replay.Both(sendTime, freshView)
		d := journal.Decision{Verdict: both.Verdict, Reason: string(both.Reason), View: verdict.Rediscovered}
		if both.Verdict != replay.Replay {
			if err := r.j.Decide(id, d, journal.StateOutcomeUnknown, outcomeUnknown); err != nil {
				return nil, journal.Intent{}, nil, err
			}
			return nil, journal.Intent{}, &stepResult{status: journal.RunBlocked, err: outcomeUnknown, state: journal.StateOutcomeUnknown}, nil
		}
		next.Replay, next.Decision = true, &d
	}
	intent, err := r.j.Again(id, next)
	if err != nil {
		return nil, journal.Intent{}, nil, err
	}
	return sess, intent, nil, nil
}

func (r *runner) policyInput(class replay.Class, trust journal.Trust, annotations json.RawMessage, replays int) replay.Input {
	ann, err := replay.ParseAnnotations(annotations)
	if err != nil {
		ann = nil // malformed annotations declare nothing
	}
	return replay.Input{Class: class, ServerTrusted: trust.Server, WorkspaceTrusted: trust.Workspace, Annotations: ann, Replays: replays}
}

// reconnect connects afresh with jittered exponential backoff.
func (r *runner) reconnect(ctx context.Context, server string, old Session) (Session, error) {
	base := r.e.Backoff
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	var lastErr error
	for try := 0; try < reconnectTries; try++ {
		if try > 0 {
			d := base << (try - 1)
			d = d/2 + rand.N(d)
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var s Session
		var err error
		if old == nil {
			s, err = r.e.Connect(ctx, server)
		} else {
			s, err = r.e.Reconnect(ctx, server, old)
		}
		if err == nil {
			return s, nil
		}
		lastErr, old = err, nil
	}
	return nil, lastErr
}

func (r *runner) result(res *mcp.CallToolResult) *journal.Result {
	out := &journal.Result{IsError: res.IsError}
	if b, err := json.Marshal(res.Content); err == nil {
		out.Content = journal.CapJSON(r.redact(b), r.e.limit())
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.StructuredContent = journal.CapJSON(r.redact(b), r.e.limit())
		}
	}
	return out
}

// redact removes the values of secret inputs from JSON bound for the journal.
func (r *runner) redact(b json.RawMessage) json.RawMessage {
	if len(r.secrets) == 0 {
		return b
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return json.RawMessage(`"` + workflow.Redacted + `"`)
	}
	out, _ := json.Marshal(redactValue(v, r.secrets))
	return out
}

// scrub removes the values of secret inputs from text bound for the
// journal or for output (tool error text, upstream errors, results).
func (r *runner) scrub(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, workflow.Redacted)
	}
	return s
}

func (r *runner) scrubError(e *journal.Error) *journal.Error {
	if e == nil || len(r.secrets) == 0 {
		return e
	}
	return &journal.Error{Code: e.Code, Message: r.scrub(e.Message)}
}

// emit reports an event with secrets scrubbed from its text.
func (r *runner) emit(ev Event) {
	if len(r.secrets) > 0 {
		ev.Text, ev.Message, ev.Err = r.scrub(ev.Text), r.scrub(ev.Message), r.scrubError(ev.Err)
	}
	r.e.emit(ev)
}

// scrubbing is the journal as a run writes it: every error text and failure
// detail goes through scrub first, so no secret reaches the file.
type scrubbing struct {
	Journal
	r *runner
}

func (s scrubbing) Finish(in journal.Intent, o journal.Outcome) error {
	o.Error, o.Detail = s.r.scrubError(o.Error), s.r.scrub(o.Detail)
	return s.Journal.Finish(in, o)
}

func (s scrubbing) Interrupted(id journal.ID, o journal.Outcome) error {
	o.Error, o.Detail = s.r.scrubError(o.Error), s.r.scrub(o.Detail)
	return s.Journal.Interrupted(id, o)
}

func (s scrubbing) Decide(id journal.ID, d journal.Decision, st journal.State, e *journal.Error) error {
	return s.Journal.Decide(id, d, st, s.r.scrubError(e))
}

func (s scrubbing) EndRun(id journal.ID, st journal.RunStatus, e *journal.Error, outputs map[string]any) error {
	return s.Journal.EndRun(id, st, s.r.scrubError(e), outputs)
}

func redactValue(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			x = strings.ReplaceAll(x, s, workflow.Redacted)
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = redactValue(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = redactValue(e, secrets)
		}
	default:
		for _, s := range secrets {
			if workflow.Text(x) == s {
				return workflow.Redacted
			}
		}
	}
	return v
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
