package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/internal/meta"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// MetaIdempotencyKey is the _meta key carrying the invocation id on every
// tools/call, unchanged across replays, so servers that de-duplicate can.
const MetaIdempotencyKey = meta.IdempotencyKey

// maxFirstDeliveries bounds how often a call that provably never left this
// process is sent again after reconnecting.
const maxFirstDeliveries = 3

// maxBackoff caps the delay between retries.
const maxBackoff = 5 * time.Minute

// maxReconnectBackoff caps the delay between reconnect tries.
const maxReconnectBackoff = 2 * time.Second

// backoff is the delay before try n+1 of an exponential backoff (n from
// 0): base doubled n times, capped at most.
func backoff(base time.Duration, n int, most time.Duration) time.Duration {
	return min(base<<min(n, 20), most)
}

// jitter spreads d over [d/2, 3d/2), so that runs that lost one server
// together do not reconnect in step.
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d) }

// outcomeUnknown is the stable error journaled for an unsafe lost call. It
// never carries arguments or upstream error text.
var outcomeUnknown = &journal.Error{Code: replay.Code, Message: replay.Message}

// causeKind says why the attempt loop makes another attempt.
type causeKind uint8

const (
	// causeLost: the connection failed after the call may have reached the
	// server, and the send-time snapshot cleared a replay. Reconnect,
	// rediscover, and replay only if the fresh view is safe too.
	causeLost causeKind = iota + 1
	// causeNotDelivered: the call provably never left this process.
	// Reconnect, rediscover, and send it as a first delivery.
	causeNotDelivered
	// causeResend: the call provably did not run (or an operator approved
	// it): connect and send it again without the replay rule.
	causeResend
	// causeRetry: the step's retry asked for another attempt, the decision
	// is journaled and its backoff has passed: same session.
	causeRetry
	// causeContinue: the previous attempt's result asked for input and
	// every request is answered: send the call again with the answers (a
	// continuation; the tool has not run).
	causeContinue
)

// cause is why the loop makes another attempt, and what that attempt is
// journaled with.
type cause struct {
	kind causeKind
	// sent is the kind the next attempt is journaled with, when kind does
	// not say it: a causeLost that carries out a journaled retry on resume
	// (KindRetry, not a replay), a causeResend (a retry, a first delivery,
	// an operator's retry). Empty: the kind's own (causeLost a replay,
	// causeNotDelivered a first delivery, causeRetry a retry).
	sent journal.AttemptKind
	// decision is journaled with the next attempt (causeResend).
	decision *journal.Decision
	// trust and annotations are the view a causeRetry was judged on.
	trust       journal.Trust
	annotations json.RawMessage
}

// turn is how one turn of the attempt loop ends: with the cause of another
// attempt, or with the end of the step. Exactly one is set.
type turn struct {
	next *cause
	end  *stepResult
}

func another(c *cause) turn      { return turn{next: c} }
func ending(out stepResult) turn { return turn{end: &out} }

// ready is an attempt journaled and ready to send, or, when none could be
// (the server is unavailable, the fresh view is not safe, Ctrl-C), the end
// of the step.
type ready struct {
	sess   Session
	intent journal.Intent
	end    *stepResult
}

// view is one view of a tool for the replay rule; of a read, which needs
// none, when m reads.
func view(m journal.Method, t journal.Trust, annotations json.RawMessage, missing bool) replay.View {
	return replay.View{ServerTrusted: t.Server, WorkspaceTrusted: t.Workspace, Annotations: annotations, Missing: missing, Read: m.Reads()}
}

// sendTimeView is the snapshot an invocation's newest attempt was sent with.
func sendTimeView(inv *journal.Invocation) replay.View {
	return view(inv.Method, inv.Trust, inv.Annotations, false)
}

// begin evaluates a unit's arguments, connects, discovers the tool, checks
// the arguments against its schema, journals the intent and hands it to
// the attempt loop. Nothing is journaled or sent before the arguments are
// known to be valid. A read has no tool to discover (see reads.go); its
// target, the URI, is known once evaluated. The returned error is a
// journal failure; everything else is in stepResult.
func (r *runner) begin(ctx context.Context, u *unit) (stepResult, error) {
	args, out := r.evalArgs(ctx, *u)
	if out != nil {
		return *out, nil
	}
	m := u.Method()
	if m == journal.MethodRead {
		u.target = r.scrub(uriOf(args))
	}
	if err := r.beforeStarting(u.Server); err != nil {
		return stepResult{}, err
	}
	sess, out := r.connect(ctx, *u, nil, false, journal.ID{})
	if out != nil {
		return *out, nil
	}
	interrupted := stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted before the %s was sent", u.name(), sentNoun(m))}}
	var tool upstream.Tool
	if m.Reads() {
		if _, ok := sess.(Reader); !ok {
			return failed(CodeServerUnavailable, "step %s: the session of server %q cannot send a %s", u.name(), u.Server, m), nil
		}
	} else {
		var err error
		tool, err = sess.Tool(ctx, u.Tool)
		if err != nil && ctx.Err() != nil {
			return interrupted, nil
		}
		if le := loginRequired(err); le != nil {
			return r.loginBlocked(*u, le), nil
		}
		if err != nil {
			if !errors.Is(err, upstream.ErrUnknownTool) {
				return failed(CodeServerUnavailable, "step %s: listing the tools of server %q failed: %v", u.name(), u.Server, err), nil
			}
			return failed(CodeUnknownTool, "step %s: %v", u.name(), err), nil
		}
	}
	if ctx.Err() != nil {
		// Interrupted before anything was journaled or sent.
		return interrupted, nil
	}
	// A call whose arguments violate the tool's input schema is a
	// validation error: no intent is written, nothing is sent.
	if err := tool.Validate(args); err != nil {
		return failed(CodeInvalidArguments, "step %s: %v", u.name(), err), nil
	}
	redacted := r.redact(args)
	inv := &journal.Invocation{
		RunID:           r.run.ID,
		Step:            u.ID,
		Item:            u.item,
		Server:          u.Server,
		Tool:            u.target,
		Method:          m,
		Arguments:       journal.CapJSON(redacted, r.e.limit()),
		ArgumentsDigest: r.j.Digest(redacted), // keyed when sealed; of a redacted secret, not even a digest
		Annotations:     tool.Annotations,
		Trust:           r.e.Trust(u.Server),
	}
	intent, err := r.j.Begin(inv)
	if err != nil {
		return stepResult{}, err
	}
	return r.attempts(ctx, *u, args, intent.ID, sess, intent, nil)
}

// sentNoun is what people call a request of method m: "call", "read",
// "prompt request".
func sentNoun(m journal.Method) string {
	switch m {
	case journal.MethodRead:
		return "read"
	case journal.MethodPrompt:
		return "prompt request"
	}
	return "call"
}

// evalArgs evaluates a unit's arguments to JSON: a tool's arguments, or a
// read's (readArgs).
func (r *runner) evalArgs(ctx context.Context, u unit) (json.RawMessage, *stepResult) {
	if u.Method().Reads() {
		return r.readArgs(ctx, u)
	}
	if u.Args != nil {
		return u.Args, nil
	}
	var argv any = map[string]any{}
	if u.With != nil {
		v, err := u.With.Eval(ctx, r.vars(u))
		if err != nil {
			out := failed(CodeExpression, "step %s: %v", u.name(), err)
			return nil, &out
		}
		argv = v
	}
	args, err := json.Marshal(argv)
	if err != nil {
		out := failed(CodeExpression, "step %s: arguments are not JSON: %v", u.name(), err)
		return nil, &out
	}
	return args, nil
}

// attempts is the one attempt loop. Every attempt of every invocation goes
// through it: the first send, a retry, a replay after a lost connection, a
// first delivery, a re-send on resume. Each turn:
//
//  1. connect (one reconnect policy: r.connect), rediscover the tool;
//  2. judge the send-time snapshot and the view now with one function
//     (replay.JudgeBoth) when the call may have run;
//  3. journal the decision and the new attempt (durable before the send);
//  4. send the tools/call and classify what came back (upstream.Classify);
//  5. journal the outcome, with the decision on what happens next;
//
// then loop or end. Without a cause (next nil) the loop starts at 4 with
// the intent begin journaled; with one (resume) at 1, for invocation id.
func (r *runner) attempts(ctx context.Context, u unit, args json.RawMessage, id journal.ID, sess Session, intent journal.Intent, next *cause) (stepResult, error) {
	at := ready{sess: sess, intent: intent}
	for {
		if next != nil {
			var err error
			if at, err = r.again(ctx, u, at.sess, id, *next); err != nil {
				return stepResult{}, err
			}
			if at.end != nil {
				return *at.end, nil
			}
		}
		t, err := r.send(ctx, u, at.sess, at.intent, args)
		if err != nil {
			return stepResult{}, err
		}
		if t.end != nil {
			return *t.end, nil
		}
		next = t.next
	}
}

// again carries out a decision to send an invocation again: connect (or
// reconnect), rediscover the tool, judge the view now when the call may
// have run (both views must clear it), and journal the next attempt — or
// the outcome_unknown decision that stops it.
func (r *runner) again(ctx context.Context, u unit, sess Session, id journal.ID, c cause) (ready, error) {
	// stop ends the step without a new attempt; the invocation keeps the
	// state it is journaled in (intent with a decision to send again,
	// failed, aborted, timed_out or retry_approved on resume).
	stop := func(out stepResult, state journal.State) (ready, error) {
		out.invocation, out.state = id, state
		if inv, err := r.j.Invocation(id); err == nil {
			out.state = inv.State
		}
		return ready{end: &out}, nil
	}
	if c.kind == causeRetry {
		next := journal.NextAttempt{Kind: journal.KindRetry, Trust: c.trust, Annotations: c.annotations}
		intent, err := r.j.Again(id, next)
		return ready{sess: sess, intent: intent}, err
	}
	if c.kind == causeContinue {
		if sess == nil { // on resume
			if err := r.beforeStarting(u.Server); err != nil {
				return ready{}, err
			}
			var out *stepResult
			if sess, out = r.connect(ctx, u, nil, false, id); out != nil {
				return stop(*out, journal.StateIntent)
			}
		}
		inv, err := r.j.Invocation(id)
		if err != nil {
			return ready{}, err
		}
		if out, err := r.fulfil(ctx, u, inv); err != nil || out != nil {
			return ready{end: out}, err
		}
		intent, err := r.j.Again(id, journal.NextAttempt{Kind: journal.KindContinuation, Trust: r.e.Trust(u.Server), Annotations: inv.Annotations})
		return ready{sess: sess, intent: intent}, err
	}
	if err := r.beforeStarting(u.Server); err != nil {
		return ready{}, err
	}
	sess, out := r.connect(ctx, u, sess, c.kind != causeResend, id)
	if out != nil {
		return stop(*out, journal.StateIntent)
	}
	inv, err := r.j.Invocation(id)
	if err != nil {
		return ready{}, err
	}
	trust := r.e.Trust(u.Server)
	tool, toolErr := rediscover(ctx, u, sess)
	switch {
	case ctx.Err() != nil:
		// Interrupted while rediscovering: nothing is decided, the
		// journaled decision to send again stands for resume.
		return stop(stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted while rediscovering the tools of server %s", u.name(), u.Server)}}, journal.StateIntent)
	case loginRequired(toolErr) != nil:
		// Refused for want of a login: the journaled decision to send
		// again stands, for resume once someone logged in.
		return stop(r.loginBlocked(u, loginRequired(toolErr)), journal.StateIntent)
	case toolErr != nil && !errors.Is(toolErr, upstream.ErrUnknownTool):
		// The listing failed: the server is not there to judge, which is
		// not the tool being gone. Resume tries again.
		return stop(failed(CodeServerUnavailable, "step %s: listing the tools of server %q failed after reconnecting (%v); resuming the run tries again", u.name(), u.Server, toolErr), journal.StateIntent)
	}
	next := journal.NextAttempt{Kind: c.sent, Trust: trust, Annotations: inv.Annotations}
	if toolErr == nil {
		next.Annotations = tool.Annotations
	}
	switch c.kind {
	case causeNotDelivered:
		if toolErr != nil {
			return stop(failed(CodeUnknownTool, "step %s: %v", u.name(), toolErr), journal.StateIntent)
		}
		next.Kind = journal.KindFirstDelivery
	case causeLost:
		d := replay.JudgeBoth(sendTimeView(inv), view(inv.Method, trust, tool.Annotations, toolErr != nil), inv.Tally().AgainstBudget)
		jd := journal.Decision{Verdict: d.Verdict, Reason: string(d.Reason), View: verdict.Rediscovered}
		if d.Verdict != replay.Replay {
			state, e, end := notCleared(inv)
			if err := r.j.Decide(id, jd, state, e); err != nil {
				return ready{}, err
			}
			r.decided(ctx, &jd)
			return ready{end: end}, nil
		}
		if next.Kind == "" {
			next.Kind = journal.KindReplay
		}
		next.Decision = &jd
		r.decided(ctx, &jd)
	case causeResend:
		next.Decision = c.decision
	}
	intent, err := r.j.Again(id, next)
	if err != nil {
		return ready{}, err
	}
	return ready{sess: sess, intent: intent}, nil
}

// connect returns a session for the unit's server: old when it is still
// usable, else a new one (the one reconnect policy). A first connect tries
// once. After a lost connection (afterLoss) it keeps trying, with jittered
// exponential backoff, until the server's reconnect budget
// (Engine.ReconnectTimeout) is spent, reporting each try as progress of
// invocation id: a server that restarts after its side effect committed
// has that long to come back. Interrupted, it ends the step as cancelled,
// whatever it was doing. A server that wants a login (login.go) ends the
// step blocked at once: trying again would be refused again.
func (r *runner) connect(ctx context.Context, u unit, old Session, afterLoss bool, id journal.ID) (Session, *stepResult) {
	base := r.e.Backoff
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	start := r.e.now()
	budget := time.Duration(0)
	if afterLoss {
		budget = r.e.reconnectTimeout(u.Server)
	}
	var lastErr error
	for try := 0; ctx.Err() == nil; try++ {
		if try > 0 {
			elapsed := r.e.now().Sub(start)
			if elapsed >= budget {
				break
			}
			d := min(jitter(backoff(base, try-1, maxReconnectBackoff)), budget-elapsed)
			r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: u.ID, Item: u.item, Invocation: id,
				Message: fmt.Sprintf("reconnecting to %s (attempt %d, %.1fs)", u.Server, try+1, (elapsed + d).Seconds())})
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
		}
		var s Session
		var err error
		if old == nil {
			s, err = r.e.Connect(ctx, u.Server)
		} else {
			s, err = r.e.Reconnect(ctx, u.Server, old)
		}
		if err == nil {
			r.using(u.Server)
			r.lendSecrets(s)
			return s, nil
		}
		if le := loginRequired(err); le != nil {
			out := r.loginBlocked(u, le)
			return nil, &out
		}
		lastErr, old = err, nil
		if !afterLoss {
			break
		}
	}
	if ctx.Err() != nil {
		verb := "connecting"
		if afterLoss {
			verb = "reconnecting"
		}
		return nil, &stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("interrupted while %s to server %s", verb, u.Server)}}
	}
	if afterLoss {
		out := failed(CodeServerUnavailable, "step %s: server %q unavailable: it did not come back within %s after the connection was lost (%v); resuming the run tries again", u.name(), u.Server, r.e.reconnectTimeout(u.Server), lastErr)
		return nil, &out
	}
	out := failed(CodeServerUnavailable, "step %s: server %q unavailable: %v", u.name(), u.Server, lastErr)
	return nil, &out
}

// send puts one attempt's tools/call on the wire, classifies what came
// back, and journals the outcome together with the decision on what comes
// next: another attempt, or the end of the step.
//
// The attempt is one client span, "tools/call TOOL" (the OpenTelemetry MCP
// conventions), whose context the call carries in _meta.
func (r *runner) send(ctx context.Context, u unit, sess Session, intent journal.Intent, args json.RawMessage) (turn, error) {
	m := u.Method()
	ctx, span := tracer().Start(ctx, m.String()+" "+u.target, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		switch m {
		case journal.MethodRead:
			span.SetAttributes(attribute.String("mcp.resource.uri", u.target))
		case journal.MethodPrompt:
			span.SetAttributes(attribute.String("gen_ai.prompt.name", u.target))
		default:
			span.SetAttributes(attribute.String("gen_ai.tool.name", u.Tool), attribute.String("gen_ai.operation.name", "execute_tool"))
		}
		span.SetAttributes(
			attribute.String("mcp.method.name", m.String()),
			attribute.String(AttrServer, u.Server),
			attribute.String(AttrRunID, r.run.ID.String()),
			attribute.String(AttrStep, u.ID),
			attribute.String(AttrInvocationID, intent.ID.String()),
			attribute.String(AttrIdempotencyKey, intent.IdempotencyKey),
			attribute.Int(AttrAttempt, intent.Attempt),
			attribute.String(AttrAttemptKind, intent.Kind.String()),
			attribute.Bool(AttrReplay, intent.Kind == journal.KindReplay),
			attribute.Int(AttrArgsBytes, len(args)),
		)
		if u.item >= 0 {
			span.SetAttributes(attribute.Int(AttrItem, u.item))
		}
		if s := SessionOf(sess); s != nil {
			if id := s.ID(); id != "" {
				span.SetAttributes(attribute.String("mcp.session.id", id))
			}
			span.SetAttributes(attribute.String("network.transport", networkTransport(s.Transport())), attribute.String(AttrTransport, s.Transport()))
			if v := s.ProtocolVersion(); v != "" {
				span.SetAttributes(attribute.String("mcp.protocol.version", v))
			}
		}
	}
	t, err := r.call(ctx, u, sess, intent, args)
	if span.IsRecording() {
		if t.end != nil {
			span.SetAttributes(attribute.String(AttrState, t.end.state.String()))
			if t.end.status != journal.RunSucceeded {
				span.SetStatus(codes.Error, t.end.state.String())
			}
		} else {
			span.SetAttributes(attribute.String(AttrState, journal.StateIntent.String()))
		}
		if err != nil {
			span.SetStatus(codes.Error, "journal")
		}
	}
	span.End()
	return t, err
}

// call is send's work, inside the attempt's span.
func (r *runner) call(ctx context.Context, u unit, sess Session, intent journal.Intent, args json.RawMessage) (turn, error) {
	started := r.e.now()
	r.emit(Event{Kind: StepStarted, Run: r.run.ID, Step: u.ID, Item: u.item, Server: u.Server, Tool: u.target, Method: u.Method(), Invocation: intent.ID, State: journal.StateIntent, Attempt: intent.Attempt})
	fw := forwardOf(ctx)
	progress := func(p, total float64, msg string) {
		r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: u.ID, Item: u.item, Invocation: intent.ID, Attempt: intent.Attempt, Progress: p, Total: total, Message: msg, Elapsed: r.e.now().Sub(started)})
		if fw != nil && fw.Progress != nil {
			fw.Progress(p, total, msg)
		}
	}
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if u.Timeout > 0 {
		// On expiry go-sdk sends notifications/cancelled to the server.
		callCtx, cancel = context.WithTimeout(ctx, u.Timeout)
	}
	var res *answer
	var callErr error
	class := replay.ClassNotDelivered // interrupted before the call left
	if ctx.Err() == nil {
		sent := r.e.now()
		res, callErr = r.request(callCtx, u, sess, intent, args, progress)
		if u.Method() == journal.MethodCall {
			r.called(u.Server, u.Tool, r.e.now().Sub(sent))
		}
		class = upstream.Classify(callErr)
	} else {
		callErr = fmt.Errorf("not sent: %w", ctx.Err())
	}
	cancel()
	le := loginRequired(callErr)
	if le != nil {
		class = replay.ClassNotDelivered // refused before the server acted on it
	}
	if callErr == nil && res.call != nil && res.call.NeedsInput() {
		if len(res.call.InputRequests) > 0 {
			return r.inputRequired(ctx, u, sess, intent, res.call)
		}
		// input_required asking nothing: the server shed load before
		// running the tool.
		callErr, class = errors.New("the server shed load (input_required with no input requests): the tool did not run"), replay.ClassRejected
	}
	if callErr == nil && res.isError {
		class = replay.ClassToolError
	}
	// end is the step's end after this attempt, with the invocation's state.
	end := func(out stepResult, state journal.State) turn {
		out.invocation, out.state, out.attempt, out.elapsed = intent.ID, state, intent.Attempt, r.e.now().Sub(started)
		return ending(out)
	}
	detail := ""
	if callErr != nil {
		detail = callErr.Error()
		// error.type is the conventions' failure attribute: the class,
		// never the upstream text.
		trace.SpanFromContext(ctx).SetAttributes(attribute.String(AttrFailure, class.String()), attribute.String("error.type", class.String()))
	} else if res.isError {
		detail = api.OneLine(api.ContentText(res.content), 200)
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("error.type", class.String()))
	}

	if le != nil {
		// Not sent again until someone logged in (login.go).
		t, err := r.loginRefused(ctx, u, intent, le, detail)
		if err != nil {
			return t, err
		}
		return end(*t.end, t.end.state), nil
	}
	if class == replay.ClassLost || class == replay.ClassNotDelivered {
		t, err := r.lost(ctx, u, intent, class, detail)
		if err != nil || t.end == nil {
			return t, err
		}
		return end(*t.end, t.end.state), nil
	}

	// A result, or a failure that is not about the connection: the step's
	// retry may ask for another attempt.
	rv, err := r.retry(ctx, u, sess, intent, class, detail)
	switch {
	case err != nil:
		return turn{}, err
	case rv.next != nil:
		return rv.turn, nil
	case rv.end != nil:
		return end(*rv.end, journal.StateIntent), nil
	case rv.unknown != nil:
		// The call may have run and will not be sent again: its outcome is
		// unknown, now, not on some later resume (a read's fails).
		inv, err := r.j.Invocation(intent.ID)
		if err != nil {
			return turn{}, err
		}
		state, e, stop := notCleared(inv)
		o := journal.Outcome{State: state, Error: e, Failure: class, Detail: detail, Decision: rv.unknown}
		if err := r.j.Finish(intent, o); err != nil {
			return turn{}, err
		}
		r.decided(ctx, rv.unknown)
		return end(*stop, state), nil
	}
	if class.ResultArrived() {
		// The outcome rides with the run's next write (durable.go).
		result, value := r.result(u.Method(), res)
		// A tool error is the attempt's outcome too (failure tool_error).
		if err := r.j.FinishLater(intent, journal.Outcome{State: journal.StateCompleted, Result: result, Failure: class, Decision: rv.declined}); err != nil {
			return turn{}, err
		}
		r.decided(ctx, rv.declined)
		done := completed(u, value)
		if done.err == nil {
			done.text = workflow.Text(value["text"])
		}
		done.call = res.call
		return end(done, journal.StateCompleted), nil
	}
	state, failure := r.failure(u, class, callErr)
	o := journal.Outcome{State: state, Error: failure.err, Failure: class, Detail: detail, Decision: rv.declined}
	if err := r.j.Finish(intent, o); err != nil {
		return turn{}, err
	}
	r.decided(ctx, rv.declined)
	failure.sent = callErr
	return end(failure, state), nil
}

// lost journals the outcome of an attempt whose connection failed: either
// provably before the request left this process (a first delivery may
// follow) or after it may have arrived (only the replay rule, judged on the
// send-time snapshot, may clear a re-send). The decision is journaled with
// the outcome, before it is acted on.
func (r *runner) lost(ctx context.Context, u unit, intent journal.Intent, class replay.Class, detail string) (turn, error) {
	inv, err := r.j.Invocation(intent.ID)
	if err != nil {
		return turn{}, err
	}
	if class.NotDelivered() && inv.Tally().FirstDeliveries >= maxFirstDeliveries {
		// The session keeps breaking before the call leaves: the server
		// is unusable. The call never ran; resume may try again.
		o := journal.Outcome{State: journal.StateFailed, Failure: class, Detail: detail,
			Error: &journal.Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("step %s: server %q broke the session %d times before the call could be sent", u.name(), u.Server, maxFirstDeliveries+1)}}
		if err := r.j.Finish(intent, o); err != nil {
			return turn{}, err
		}
		return ending(stepResult{status: journal.RunFailed, err: o.Error, state: journal.StateFailed}), nil
	}
	o, next := lossOutcome(inv, class)
	o.Detail = detail
	if err := r.j.Finish(intent, o); err != nil {
		return turn{}, err
	}
	r.decided(ctx, o.Decision)
	if next == nil {
		_, _, end := notCleared(inv)
		return turn{end: end}, nil
	}
	return another(next), nil
}

// lossOutcome is the outcome to journal for an attempt whose connection
// failed, with the send-time decision, and the cause of the next attempt
// (nil: the outcome is unknown — or, for a read, failed: notCleared).
func lossOutcome(inv *journal.Invocation, class replay.Class) (journal.Outcome, *cause) {
	o := journal.Outcome{State: journal.StateIntent, Failure: class}
	if class.NotDelivered() {
		o.Decision = &journal.Decision{Verdict: verdict.FirstDelivery, Reason: string(replay.ReasonNotDelivered), View: verdict.SendTime}
		return o, &cause{kind: causeNotDelivered}
	}
	d := replay.Judge(sendTimeView(inv), inv.Tally().AgainstBudget)
	o.Decision = &journal.Decision{Verdict: d.Verdict, Reason: string(d.Reason), View: verdict.SendTime}
	if d.Verdict != replay.Replay {
		o.State, o.Error, _ = notCleared(inv)
		return o, nil
	}
	return o, &cause{kind: causeLost}
}

// earlierMayHaveRun reports whether an attempt before the newest may have
// run without its result arriving: then sending the call again is a
// replay, whatever the newest attempt proved. (A class this mcpflow does
// not know, a newer one's, may have run.)
func earlierMayHaveRun(inv *journal.Invocation) bool {
	for i := 0; i+1 < len(inv.Attempts); i++ {
		if inv.Attempts[i].Failure.MayHaveRun() {
			return true
		}
	}
	return false
}

// retryVerdict is retry's answer: another attempt (next), the end of the
// step when the run is interrupted during the backoff (end), or no retry —
// with the decision saying why when the step asked for one (declined),
// which the caller journals with the attempt's outcome. unknown is set when
// the call may have run and the replay rule does not clear sending it
// again: its outcome is unknown, whatever the step's retry says.
type retryVerdict struct {
	turn
	declined *journal.Decision
	unknown  *journal.Decision
}

// retry decides whether a failure the step's retry covers is retried: a
// tool error (the author's explicit choice), a rejection before execution,
// or — only when the replay rule clears both the send-time snapshot and the
// current view — a timeout or a server error, after which the call may have
// run. When it is, the decision is journaled with the attempt's outcome and
// the backoff is waited out. Interrupted during the backoff, the journaled
// decision to retry is carried out by resume.
//
// A timeout or a server error is judged by the replay rule whether or not
// the step asked for a retry: when the rule does not clear it, the verdict
// says its outcome is unknown.
func (r *runner) retry(ctx context.Context, u unit, sess Session, intent journal.Intent, class replay.Class, detail string) (retryVerdict, error) {
	// No failure, an abort (the user's), or a result too large for the
	// transport (it would be too large again): nothing to retry or judge.
	if class == replay.ClassNone || class == replay.ClassAborted || class == replay.ClassTooLarge {
		return retryVerdict{}, nil
	}
	// A lost connection is judged by lost, an abort returned above: what
	// may have run here timed out, or failed on the server.
	mayHaveRun := class.MayHaveRun()
	wantsRetry := u.Retry.Attempts > 1
	inv, err := r.j.Invocation(intent.ID)
	if err != nil {
		return retryVerdict{}, err
	}
	if class.NotRun() && earlierMayHaveRun(inv) {
		// This attempt did not run, but an earlier one may have: sending
		// again is a replay, and not sending leaves the outcome unknown.
		mayHaveRun = true
	}
	if !mayHaveRun && !wantsRetry {
		return retryVerdict{}, nil
	}
	if ctx.Err() != nil {
		// Interrupted: nothing to judge with; the failure is journaled as
		// it is, and resume judges it.
		return retryVerdict{}, nil
	}
	tally := inv.Tally()
	// Trust and annotations as they are now: the journal records what each
	// attempt was sent under, and a call that may have run is repeated only
	// if the send-time snapshot and the current view are both safe.
	trust := r.e.Trust(u.Server)
	tool, toolErr := rediscover(ctx, u, sess)
	next := &cause{kind: causeRetry, trust: trust, annotations: inv.Annotations}
	if toolErr == nil {
		next.annotations = tool.Annotations
	}
	var rv retryVerdict
	reason := "retry_requested"
	if mayHaveRun {
		d := replay.JudgeBoth(sendTimeView(inv), view(inv.Method, trust, tool.Annotations, toolErr != nil), tally.AgainstBudget)
		if d.Verdict != replay.Replay {
			// The call may have run and the tool is not safe to repeat.
			rv.unknown = &journal.Decision{Verdict: verdict.OutcomeUnknown, Reason: string(d.Reason), View: verdict.Current}
			if wantsRetry {
				rv.declined = &journal.Decision{Verdict: verdict.NotRetried, Reason: string(d.Reason), View: verdict.Current}
			}
			return rv, nil
		}
		// Cleared by the rule, the step's retry sends it again: a retry,
		// counted against the replay budget (Tally.AgainstBudget).
		reason = string(d.Reason)
	}
	if !wantsRetry {
		return rv, nil
	}
	retries := tally.Retries
	if retries >= u.Retry.Attempts-1 {
		rv.declined = &journal.Decision{Verdict: verdict.NotRetried, Reason: "retry_attempts_spent", View: verdict.Current}
		return rv, nil
	}
	o := journal.Outcome{State: journal.StateIntent, Failure: class, Detail: detail,
		Decision: &journal.Decision{Verdict: verdict.Retry, Reason: reason, View: verdict.Current}}
	if err := r.j.Finish(intent, o); err != nil {
		return retryVerdict{}, err
	}
	r.decided(ctx, o.Decision)
	delay := backoff(u.Retry.Backoff, retries, maxBackoff)
	r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: u.ID, Item: u.item, Invocation: intent.ID, Attempt: intent.Attempt,
		Message: fmt.Sprintf("attempt %d: %s; retrying in %s", intent.Attempt, strings.ReplaceAll(class.String(), "_", " "), delay)})
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		// The decision to retry is journaled; resume carries it out.
		return retryVerdict{turn: ending(stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted before retrying; resuming the run retries", u.name())}})}, nil
	}
	return retryVerdict{turn: another(next)}, nil
}

// completed is the step result of a call whose result arrived: a tool error
// (isError) fails the step; anything else feeds later steps.
func completed(u unit, value map[string]any) stepResult {
	if isErr, _ := value["isError"].(bool); isErr {
		// The tool's own error result stays visible to later steps (with
		// continue_on_error) as steps.ID.text, .structuredContent, …
		e := &journal.Error{Code: CodeToolError, Message: fmt.Sprintf("step %s: tool %s returned an error: %s", u.name(), u.Tool, api.OneLine(workflow.Text(value["text"]), 200))}
		value["error"] = map[string]any{"code": e.Code, "message": e.Message}
		return stepResult{value: value, status: journal.RunFailed, err: e}
	}
	return stepResult{value: value, status: journal.RunSucceeded}
}

// failure maps a failure that is not a connection loss to the invocation's
// state and the step's result.
func (r *runner) failure(u unit, class replay.Class, callErr error) (journal.State, stepResult) {
	if m := u.Method(); m.Reads() {
		// A read changes nothing: what matters is that it failed.
		what := requestText(m, u.target)
		switch class {
		case replay.ClassAborted:
			return journal.StateAborted, stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted while the %s of %s was in flight", u.name(), sentNoun(m), what)}}
		case replay.ClassTimedOut:
			return journal.StateTimedOut, failed(CodeTimedOut, "step %s: timed out while the %s of %s was in flight", u.name(), sentNoun(m), what)
		case replay.ClassRejected:
			return journal.StateFailed, failed(CodeRejected, "step %s: server refused the %s of %s: %v", u.name(), sentNoun(m), what, callErr)
		case replay.ClassTooLarge:
			return journal.StateFailed, failed(CodeResultTooLarge, "step %s: the answer to the %s of %s was lost: %v", u.name(), sentNoun(m), what, callErr)
		}
		return journal.StateFailed, failed(CodeServerError, "step %s: server returned an error for the %s of %s: %v", u.name(), sentNoun(m), what, callErr)
	}
	switch class {
	case replay.ClassAborted:
		return journal.StateAborted, stepResult{status: journal.RunCancelled, err: &journal.Error{Code: CodeAborted, Message: fmt.Sprintf("step %s: interrupted while the call was in flight; it may have run", u.name())}}
	case replay.ClassTimedOut:
		return journal.StateTimedOut, failed(CodeTimedOut, "step %s: timed out while the call was in flight; it may have run", u.name())
	case replay.ClassRejected:
		return journal.StateFailed, failed(CodeRejected, "step %s: server rejected the call before running it: %v", u.name(), callErr)
	case replay.ClassTooLarge:
		return journal.StateFailed, failed(CodeResultTooLarge, "step %s: the tool ran, but its result was lost: %v", u.name(), callErr)
	}
	return journal.StateFailed, failed(CodeServerError, "step %s: server returned an error; the tool may have run: %v", u.name(), callErr)
}

// blocked is the end of a step whose invocation's outcome is unknown.
func blocked(id journal.ID) *stepResult {
	return &stepResult{status: journal.RunBlocked, err: outcomeUnknown, invocation: id, state: journal.StateOutcomeUnknown}
}

// result is a request's result as the journal keeps it (secrets
// redacted, large values capped) and as expressions see it (valueOf): its
// JSON is encoded once for both.
func (r *runner) result(m journal.Method, res *answer) (*journal.Result, map[string]any) {
	value := valueOf(m, res.content, res.structured, res.isError)
	out := &journal.Result{IsError: res.isError}
	if res.content != nil {
		out.Content = journal.CapJSON(r.redact(res.content), r.e.limit())
	}
	if res.structured != nil {
		out.StructuredContent = journal.CapJSON(r.redact(res.structured), r.e.limit())
	}
	return out, value
}
