package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/workflow"
)

// Resume continues run from the journal. wf is the run's journaled
// definition (run.Definition), loaded by the caller against the servers
// configured now; inputs are the run's inputs, the journaled ones with the
// secret ones supplied again (ResumeInputs).
//
// Completed steps are never called again (their journaled results feed
// later expressions). Each journaled invocation is continued as
// PlanResume says: an invocation interrupted by a crash is treated exactly
// like a lost connection; a decision already journaled is followed, never
// re-decided; an outcome_unknown invocation keeps the run blocked until an
// operator resolves it. A step with approve: runs once an operator
// approved it, and fails without sending anything once one rejected it. A
// run blocked for a server's login (CodeLoginRequired) runs again: the
// step starts afresh, or its refused call is sent as journaled.
//
// It returns the run as committed, and whether anything was done: resuming
// a run that succeeded, or one still blocked on an unresolved outcome or on
// a step waiting for approval, writes nothing.
//
// An error means the journal could not be read or written.
func (e *Engine) Resume(ctx context.Context, run *journal.Run, wf *workflow.Workflow, inputs map[string]any) (*journal.Run, bool, error) {
	if run.Status == journal.RunSucceeded {
		return run, false, nil
	}
	if run.Status == journal.RunBlocked && len(run.PendingApprovals()) > 0 {
		// Blocked until an operator approves or rejects the step: nothing
		// to do, nothing written.
		return run, false, nil
	}
	invs, err := e.Journal.RunInvocations(run.ID)
	if err != nil {
		return nil, false, err
	}
	prior := map[unitKey]*journal.Invocation{}
	for i := range invs {
		prior[unitKey{invs[i].Step, invs[i].Item}] = &invs[i] // newest wins: ids are time-ordered
		if run.Status == journal.RunBlocked && run.Error != nil && run.Error.Code == CodeInputRequired && inputWaits(&invs[i]) {
			// Waits for an operator's answers: nothing to do, nothing
			// written.
			return run, false, nil
		}
		if invs[i].State == journal.StateOutcomeUnknown && run.Status == journal.RunBlocked {
			// Blocked until an operator resolves it: nothing to do, nothing
			// written. (A run that crashed is still "running": resume goes on
			// to journal a decision for its other in-flight calls and blocks.)
			return run, false, nil
		}
	}
	if err := e.Journal.SetRunStatus(run.ID, journal.RunRunning, nil); err != nil {
		return nil, false, err
	}
	run.Status = journal.RunRunning
	e.emit(Event{Kind: RunStarted, Run: run.ID, Workflow: wf.Name})
	// The resumed run continues the trace its first run started.
	ctx, span := tracer().Start(withTraceParent(ctx, run.TraceParent), "mcpflow.run",
		trace.WithAttributes(attribute.String(AttrWorkflow, wf.Name), attribute.String(AttrRunID, run.ID.String()), attribute.Bool(AttrResumed, true)))
	out, err := newRunner(e, wf, run, inputs, prior).execute(ctx)
	endRun(span, out, err)
	return out, true, err
}

// resumeUnit continues a unit that has a journaled invocation, as
// PlanResume says, handing any further attempt to the attempt loop.
func (r *runner) resumeUnit(ctx context.Context, u unit, inv *journal.Invocation) (stepResult, error) {
	p, err := PlanResume(inv)
	if err != nil {
		return stepResult{}, fmt.Errorf("step %s: %w", u.name(), err)
	}
	stands := func(out stepResult) (stepResult, error) {
		out.invocation, out.state, out.attempt = inv.ID, inv.State, len(inv.Attempts)
		return out, nil
	}
	var next *cause
	switch p.Kind {
	case PlanCompleted:
		out := completed(u, journaledValue(inv.Method, inv.Result))
		out.text = "(journaled result)"
		return stands(out)
	case PlanBlocked:
		return stands(stepResult{status: journal.RunBlocked, err: outcomeUnknown})
	case PlanFailed:
		return stands(stepResult{status: journal.RunFailed, err: inv.Error})
	case PlanAwaitInput:
		return stands(*waitsForInput(u, inv.ID, ""))
	case PlanContinue:
		next = &cause{kind: causeContinue}
	case PlanResend:
		next = &cause{kind: causeResend, sent: p.Sent, decision: p.Decision}
	case PlanFollow:
		next = &cause{kind: causeLost, sent: p.Sent}
		if p.Class.NotDelivered() {
			next.kind = causeNotDelivered
		}
	case PlanJudge:
		// The call may have run: judge the send-time snapshot and journal
		// the decision before acting on it.
		o, c := lossOutcome(inv, replay.ClassLost)
		switch {
		case p.Interrupted:
			o.Detail = "mcpflow stopped while the call was in flight"
			if err := r.j.Interrupted(inv.ID, o); err != nil {
				return stepResult{}, err
			}
		case c == nil:
			// Aborted or timed out, and not safe to send again: its
			// outcome is unknown (a read's fails), journaled, never to be
			// re-decided.
			if err := r.j.Decide(inv.ID, *o.Decision, o.State, o.Error); err != nil {
				return stepResult{}, err
			}
		}
		if c == nil {
			_, _, end := notCleared(inv)
			return *end, nil
		}
		next = c
	}
	args, out := r.arguments(u, inv)
	if out != nil && u.Args != nil {
		// A proxied call whose arguments the journal does not hold whole:
		// no one can send them again, and it may have run.
		return r.argumentsLost(u, inv)
	}
	if out != nil {
		return *out, nil
	}
	return r.attempts(ctx, u, args, inv.ID, nil, journal.Intent{}, next)
}

// arguments re-evaluates a step's arguments for another attempt and checks
// that they are exactly what the first attempt sent (their digest is
// journaled): another attempt never sends different arguments.
func (r *runner) arguments(u unit, inv *journal.Invocation) (json.RawMessage, *stepResult) {
	args, out := r.evalArgs(context.Background(), u)
	if out != nil {
		return nil, out
	}
	got := r.j.Digest(r.redact(args))
	if !strings.HasPrefix(inv.ArgumentsDigest, "hmac-") {
		got = journal.Digest(r.redactAlways(args)) // journaled before payloads were sealed
	}
	if inv.ArgumentsDigest != "" && got != inv.ArgumentsDigest {
		res := failed(CodeExpression, "step %s: its arguments evaluate differently than when invocation %s was first sent (the results they depend on were capped); resolve the invocation instead", u.name(), inv.ID.Short())
		return nil, &res
	}
	return args, nil
}

// journaledValue rebuilds what expressions see of a journaled result of a
// request of method m.
func journaledValue(m journal.Method, res *journal.Result) map[string]any {
	if res == nil {
		return valueOf(m, nil, nil, false)
	}
	return valueOf(m, res.Content, res.StructuredContent, res.IsError)
}

// ResumeInputs are a run's inputs for Resume: the journaled ones, with the
// secret ones, which the journal never holds, supplied again. A run that
// used a secret input cannot be resumed without it.
func ResumeInputs(run *journal.Run, wf *workflow.Workflow, secrets map[string]any) (map[string]any, error) {
	inputs := map[string]any{}
	for k, v := range run.Inputs {
		inputs[k] = v
	}
	for _, in := range wf.Inputs {
		if !in.Secret {
			continue
		}
		v, ok := secrets[in.Name]
		kept, used := run.Inputs[in.Name]
		kept = keptSecret(kept)
		switch {
		case ok && kept != nil && workflow.Text(v) != workflow.Text(kept):
			// Other arguments under the same idempotency keys.
			return nil, fmt.Errorf("%w: secret input %q differs from the value run %s started with; a resume sends exactly what the run sent (leave it out: the journal keeps it, encrypted)", workflow.ErrInput, in.Name, run.ID.Short())
		case ok:
			inputs[in.Name] = v
		case kept != nil:
			inputs[in.Name] = kept
		case used:
			return nil, fmt.Errorf("%w: run %s used secret input %q, which the journal does not keep: pass --input %s=VALUE", workflow.ErrInput, run.ID.Short(), in.Name, in.Name)
		}
	}
	return inputs, nil
}

// keptSecret is a journaled secret input's value, or nil when the journal
// kept only its redaction (payloads not sealed) or nothing.
func keptSecret(v any) any {
	if v == nil || v == workflow.Redacted {
		return nil
	}
	return v
}

// argumentsLost ends a proxied call that resume cannot send again, its
// arguments not journaled whole (capped): its outcome is unknown, for an
// operator, and the decision is journaled.
func (r *runner) argumentsLost(u unit, inv *journal.Invocation) (stepResult, error) {
	d := journal.Decision{Verdict: replay.OutcomeUnknown, Reason: string(replay.ReasonArgumentsNotJournaled), View: verdict.SendTime}
	if err := r.j.Decide(inv.ID, d, journal.StateOutcomeUnknown, outcomeUnknown); err != nil {
		return stepResult{}, err
	}
	r.decided(context.Background(), &d)
	out := *blocked(inv.ID)
	out.attempt = len(inv.Attempts)
	return out, nil
}
