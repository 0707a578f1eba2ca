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

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/servers"
)

// MetaIdempotencyKey is the _meta key carrying the invocation id on every
// tools/call, unchanged across replays, so servers that de-duplicate can.
const MetaIdempotencyKey = "io.mcpflow/idempotency-key"

// reconnectTries bounds reconnecting after a lost connection.
const reconnectTries = 4

// outcomeUnknown is the stable error journaled for an unsafe lost call. It
// never carries arguments or upstream error text.
var outcomeUnknown = &journal.Error{Code: replay.Code, Message: replay.Message}

// step evaluates a step's arguments and runs its invocation. The returned
// error is a journal failure; everything else is in stepResult.
func (r *runner) step(ctx context.Context, st *Step) (stepResult, error) {
	argv, err := evalValue(st.With, r.scope)
	if err != nil {
		return failed(CodeExpression, "step %s (%s:%d:%d): %v", st.ID, r.wf.Path, st.pos.line, st.pos.col, err), nil
	}
	if argv == nil {
		argv = map[string]any{}
	}
	args, err := json.Marshal(argv)
	if err != nil {
		return failed(CodeExpression, "step %s: arguments are not JSON: %v", st.ID, err), nil
	}
	sess, err := r.e.Connect(ctx, st.Server)
	if err != nil {
		if ctx.Err() != nil {
			return stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: "interrupted while connecting to server " + st.Server}}, nil
		}
		return failed(CodeServerUnavailable, "step %s: server %q unavailable: %v", st.ID, st.Server, err), nil
	}
	tool, err := sess.Tool(ctx, st.Tool)
	if err != nil {
		return failed(CodeUnknownTool, "step %s: %v", st.ID, err), nil
	}
	inv := &journal.Invocation{
		RunID:           r.run.ID,
		Step:            st.ID,
		Item:            -1,
		Server:          st.Server,
		Tool:            st.Tool,
		Arguments:       journal.CapJSON(r.redact(args), r.e.limit()),
		ArgumentsDigest: journal.Digest(args),
		Annotations:     tool.Annotations,
		Trust:           r.e.Trust(st.Server),
	}
	intent, err := r.e.Journal.Begin(inv)
	if err != nil {
		return stepResult{}, err
	}
	return r.send(ctx, st, sess, intent, args, inv)
}

// send puts the intent's tools/call on the wire and journals what came of
// it, replaying only what the replay policy clears.
func (r *runner) send(ctx context.Context, st *Step, sess Session, intent journal.Intent, args json.RawMessage, inv *journal.Invocation) (stepResult, error) {
	replays := 0
	for {
		started := r.e.now()
		r.e.emit(Event{Kind: StepStarted, Run: r.run.ID, Step: st.ID, Server: st.Server, Tool: st.Tool, Invocation: intent.ID, State: journal.StateIntent, Attempt: intent.Attempt})
		progress := func(p, total float64, msg string) {
			r.e.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: st.ID, Invocation: intent.ID, Attempt: intent.Attempt, Progress: p, Total: total, Message: msg, Elapsed: r.e.now().Sub(started)})
		}
		meta := map[string]any{MetaIdempotencyKey: intent.IdempotencyKey}
		res, callErr := sess.Call(ctx, st.Tool, args, meta, progress)
		class := replay.Classify(callErr)
		if callErr == nil && res.IsError {
			class = replay.ClassToolError
		}
		finished := func(state journal.State, e *journal.Error) {
			ev := Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Server: st.Server, Tool: st.Tool, Invocation: intent.ID, State: state, Attempt: intent.Attempt, Elapsed: r.e.now().Sub(started), Err: e}
			if res != nil && e == nil {
				ev.Text = oneLine(resultText(res))
			}
			r.e.emit(ev)
		}
		fail := func(state journal.State, e *journal.Error) (journal.Outcome, error) {
			o := journal.Outcome{State: state, Error: e, Failure: class.String(), Detail: callErr.Error()}
			if err := r.e.Journal.Finish(intent, o); err != nil {
				return o, err
			}
			finished(state, e)
			return o, nil
		}
		switch class {
		case replay.ClassNone, replay.ClassToolError:
			result := r.result(res)
			if err := r.e.Journal.Finish(intent, journal.Outcome{State: journal.StateCompleted, Result: result}); err != nil {
				return stepResult{}, err
			}
			if res.IsError {
				e := &journal.Error{Code: CodeToolError, Message: fmt.Sprintf("step %s: tool %s returned an error: %s", st.ID, st.Tool, oneLine(resultText(res)))}
				finished(journal.StateCompleted, e)
				return stepResult{status: journal.RunFailed, err: e}, nil
			}
			finished(journal.StateCompleted, nil)
			return stepResult{value: stepValue(res), status: journal.RunSucceeded}, nil

		case replay.ClassAborted:
			e := &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted while the call was in flight; it may have run", st.ID)}
			_, err := fail(journal.StateAborted, e)
			return stepResult{status: journal.RunCancelled, err: e}, err

		case replay.ClassTimedOut:
			e := &journal.Error{Code: CodeTimedOut, Message: fmt.Sprintf("step %s: timed out while the call was in flight; it may have run", st.ID)}
			_, err := fail(journal.StateTimedOut, e)
			return stepResult{status: journal.RunFailed, err: e}, err

		case replay.ClassRejected:
			e := &journal.Error{Code: CodeRejected, Message: fmt.Sprintf("step %s: server rejected the call before running it: %v", st.ID, callErr)}
			_, err := fail(journal.StateFailed, e)
			return stepResult{status: journal.RunFailed, err: e}, err

		case replay.ClassServerError:
			e := &journal.Error{Code: CodeServerError, Message: fmt.Sprintf("step %s: server returned an error; the tool may have run: %v", st.ID, callErr)}
			_, err := fail(journal.StateFailed, e)
			return stepResult{status: journal.RunFailed, err: e}, err
		}

		// The connection failed: either provably before the request left this
		// process (a first delivery may follow) or after it may have arrived
		// (only the replay policy may clear a re-send).
		sendTime := replay.Decide(r.policyInput(class, inv.Trust, inv.Annotations, replays))
		verdict := sendTime.Verdict.String()
		if class == replay.ClassNotDelivered {
			verdict = "first_delivery"
		}
		o := journal.Outcome{
			State:    journal.StateIntent,
			Failure:  class.String(),
			Detail:   callErr.Error(),
			Decision: &journal.Decision{Verdict: verdict, Reason: string(sendTime.Reason), View: "send_time"},
		}
		if class == replay.ClassLost && sendTime.Verdict != replay.Replay {
			o.State, o.Error = journal.StateOutcomeUnknown, outcomeUnknown
			if err := r.e.Journal.Finish(intent, o); err != nil {
				return stepResult{}, err
			}
			finished(journal.StateOutcomeUnknown, outcomeUnknown)
			return stepResult{status: journal.RunBlocked, err: outcomeUnknown}, nil
		}
		if err := r.e.Journal.Finish(intent, o); err != nil {
			return stepResult{}, err
		}
		// Reconnect, rediscover, and judge the fresh view.
		fresh, err := r.reconnect(ctx, st.Server, sess)
		if err != nil {
			e := &journal.Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("step %s: server %q unavailable after the connection was lost; `mcpflow resume` will try again", st.ID, st.Server)}
			if ctx.Err() != nil {
				return stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: "interrupted while reconnecting"}}, nil
			}
			finished(journal.StateIntent, e)
			return stepResult{status: journal.RunFailed, err: e}, nil
		}
		sess = fresh
		next, blocked, err := r.recheck(ctx, st, sess, inv, class, sendTime, replays)
		if err != nil || blocked {
			if blocked {
				finished(journal.StateOutcomeUnknown, outcomeUnknown)
				return stepResult{status: journal.RunBlocked, err: outcomeUnknown}, err
			}
			return stepResult{}, err
		}
		if next.Replay {
			replays++
		}
		if intent, err = r.e.Journal.Again(intent.ID, next); err != nil {
			return stepResult{}, err
		}
		inv.Trust, inv.Annotations = next.Trust, next.Annotations
	}
}

// recheck rediscovers the tool on the new session and applies the policy to
// the fresh view. It returns the next attempt to journal, or blocked after
// journaling outcome_unknown.
func (r *runner) recheck(ctx context.Context, st *Step, sess Session, inv *journal.Invocation, class replay.Class, sendTime replay.Decision, replays int) (journal.NextAttempt, bool, error) {
	trust := r.e.Trust(st.Server)
	tool, err := sess.Tool(ctx, st.Tool)
	if class == replay.ClassNotDelivered {
		if err != nil {
			return journal.NextAttempt{}, false, err
		}
		return journal.NextAttempt{Trust: trust, Annotations: tool.Annotations}, false, nil
	}
	var freshView replay.Decision
	if errors.Is(err, servers.ErrUnknownTool) {
		freshView = replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonToolMissing}
	} else if err != nil {
		freshView = replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonToolMissing}
	} else {
		freshView = replay.Decide(r.policyInput(class, trust, tool.Annotations, replays))
	}
	both := replay.Both(sendTime, freshView)
	d := &journal.Decision{Verdict: both.Verdict.String(), Reason: string(both.Reason), View: "rediscovered"}
	if both.Verdict != replay.Replay {
		return journal.NextAttempt{}, true, r.e.Journal.Decide(inv.ID, *d, journal.StateOutcomeUnknown, outcomeUnknown)
	}
	return journal.NextAttempt{Replay: true, Trust: trust, Annotations: tool.Annotations, Decision: d}, false, nil
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
		s, err := r.e.Reconnect(ctx, server, old)
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
	var secrets []string
	for _, in := range r.wf.Inputs {
		if !in.Secret {
			continue
		}
		if v := text(r.scope["inputs"].(map[string]any)[in.Name]); v != "" {
			secrets = append(secrets, v)
		}
	}
	if len(secrets) == 0 {
		return b
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	out, _ := json.Marshal(redactValue(v, secrets))
	return out
}

func redactValue(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			x = strings.ReplaceAll(x, s, Redacted)
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
			if text(x) == s {
				return Redacted
			}
		}
	}
	return v
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
