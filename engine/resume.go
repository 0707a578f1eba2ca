package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/workflow"
)

// Resume continues a run from the journal. The definition and inputs come
// from the journal, not from the file on disk. Completed steps are never
// called again (their journaled results feed later expressions); an
// invocation interrupted by a crash is treated exactly like a lost
// connection; a decision already journaled is followed, never re-decided;
// an outcome_unknown invocation keeps the run blocked until an operator
// resolves it. Resuming a run that succeeded changes nothing.
//
// secrets supplies the values of secret inputs, which the journal never
// holds; a run that used one cannot be resumed without it. external is the
// servers configured outside the workflow, read afresh.
func (e *Engine) Resume(ctx context.Context, id journal.ID, secrets map[string]any, external servers.Set) (*journal.Run, error) {
	run, err := e.Journal.Run(id)
	if err != nil {
		return nil, err
	}
	if run.Status == journal.RunSucceeded {
		return run, nil
	}
	wf, err := workflow.Load(run.Source, run.Definition, external)
	if err != nil {
		return nil, fmt.Errorf("run %s: journaled definition: %w", id.Short(), err)
	}
	inputs := map[string]any{}
	for k, v := range run.Inputs {
		inputs[k] = v
	}
	for _, in := range wf.Inputs {
		if !in.Secret {
			continue
		}
		v, ok := secrets[in.Name]
		if !ok {
			if _, used := run.Inputs[in.Name]; used {
				return nil, fmt.Errorf("%w: run %s used secret input %q, which the journal does not keep: pass --input %s=VALUE", workflow.ErrInput, id.Short(), in.Name, in.Name)
			}
			continue
		}
		inputs[in.Name] = v
	}
	invs, err := e.Journal.RunInvocations(id)
	if err != nil {
		return nil, err
	}
	prior := map[unitKey]*journal.Invocation{}
	for i := range invs {
		prior[unitKey{invs[i].Step, invs[i].Item}] = &invs[i] // newest wins: ids are time-ordered
		if invs[i].State == journal.StateOutcomeUnknown && run.Status == journal.RunBlocked {
			// Blocked until an operator resolves it: nothing to do, nothing
			// written. (A run that crashed is still "running": resume goes on
			// to journal a decision for its other in-flight calls and blocks.)
			return run, nil
		}
	}
	if err := e.Journal.SetRunStatus(id, journal.RunRunning, nil); err != nil {
		return nil, err
	}
	run.Status = journal.RunRunning
	e.emit(Event{Kind: RunStarted, Run: run.ID, Workflow: wf.Name})
	return newRunner(e, wf, run, inputs, prior).execute(ctx)
}

// resumeStep continues a step that has a journaled invocation.
func (r *runner) resumeStep(ctx context.Context, st unit, inv *journal.Invocation) (stepResult, error) {
	ev := Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: inv.ID, State: inv.State, Attempt: len(inv.Attempts)}
	switch inv.State {
	case journal.StateCompleted:
		out := completed(st, journaledValue(inv.Result))
		ev.Err, ev.Text = out.err, "(journaled result)"
		r.emit(ev)
		return out, nil
	case journal.StateOutcomeUnknown:
		ev.Err = outcomeUnknown
		r.emit(ev)
		return stepResult{status: journal.RunBlocked, err: outcomeUnknown}, nil
	case journal.StateFailed:
		if last := inv.LastAttempt(); len(inv.Resolutions) == 0 && last != nil &&
			(last.Failure == replay.ClassRejected.String() || last.Failure == replay.ClassNotDelivered.String()) {
			// The call provably did not run (rejected before execution, or
			// never sent): send it again.
			return r.resend(ctx, st, inv, journal.NextAttempt{Trust: inv.Trust, Annotations: inv.Annotations})
		}
		r.emit(ev)
		return stepResult{status: journal.RunFailed, err: inv.Error}, nil
	case journal.StateRetryApproved:
		// An operator approved sending the call again.
		return r.resend(ctx, st, inv, journal.NextAttempt{Replay: true, Trust: r.e.Trust(st.Server), Annotations: inv.Annotations,
			Decision: &journal.Decision{Verdict: verdict.Replay, Reason: "operator_approved", View: verdict.Operator}})
	case journal.StateAborted, journal.StateTimedOut:
		// The call may have run. Only the replay policy may clear a re-send.
		return r.continueLoss(ctx, st, inv, replay.ClassLost, true)
	case journal.StateIntent:
		last := inv.LastAttempt()
		if last != nil && last.EndedAt == nil {
			// A crash while the call was in flight is a lost connection.
			return r.continueLoss(ctx, st, inv, replay.ClassLost, false)
		}
		d := inv.LastDecision()
		class := replay.ClassLost
		if d != nil && d.Verdict == verdict.FirstDelivery {
			class = replay.ClassNotDelivered
		}
		if d != nil && d.Verdict == verdict.Retry {
			// A journaled decision to retry after a failure.
			if failure, err := replay.ParseClass(last.Failure); err == nil && !failure.MayHaveExecuted() {
				return r.resend(ctx, st, inv, journal.NextAttempt{Trust: r.e.Trust(st.Server), Annotations: inv.Annotations})
			}
		}
		return r.follow(ctx, st, inv, class)
	}
	return stepResult{}, fmt.Errorf("step %s: invocation %s in state %s cannot be resumed", st.name(), inv.ID.Short(), inv.State)
}

// continueLoss decides on an invocation whose call may have run and whose
// outcome was never recorded: journal the decision, then act on it.
func (r *runner) continueLoss(ctx context.Context, st unit, inv *journal.Invocation, class replay.Class, settled bool) (stepResult, error) {
	o, blocked := r.decideLoss(inv, class)
	if settled {
		// An aborted or timed-out call may have run: it is sent again only
		// when the policy clears it; otherwise its outcome is unknown, and
		// that decision is journaled, never to be re-decided.
		if blocked {
			return r.unknown(st, inv, *o.Decision)
		}
		return r.resendAfterCheck(ctx, st, inv, class)
	}
	o.Detail = "mcpflow stopped while the call was in flight"
	if err := r.j.Interrupted(inv.ID, o); err != nil {
		return stepResult{}, err
	}
	if blocked {
		r.emit(Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: inv.ID, State: journal.StateOutcomeUnknown, Err: outcomeUnknown})
		return stepResult{status: journal.RunBlocked, err: outcomeUnknown}, nil
	}
	return r.follow(ctx, st, inv, class)
}

// follow carries out a journaled decision to send again.
func (r *runner) follow(ctx context.Context, st unit, inv *journal.Invocation, class replay.Class) (stepResult, error) {
	args, out := r.arguments(st, inv)
	if out != nil {
		return *out, nil
	}
	sess, intent, res, err := r.again(ctx, st, nil, inv.ID, class)
	if err != nil || res != nil {
		if res == nil {
			return stepResult{}, err
		}
		r.emit(Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: inv.ID, State: res.state, Err: res.err})
		return *res, err
	}
	return r.send(ctx, st, sess, intent, args)
}

// resendAfterCheck re-sends an aborted or timed-out call the policy cleared,
// after rediscovery confirms the fresh view is safe too.
func (r *runner) resendAfterCheck(ctx context.Context, st unit, inv *journal.Invocation, class replay.Class) (stepResult, error) {
	args, out := r.arguments(st, inv)
	if out != nil {
		return *out, nil
	}
	sess, err := r.reconnect(ctx, st.Server, nil)
	if err != nil {
		return failed(CodeServerUnavailable, "step %s: server %q unavailable: %v", st.name(), st.Server, err), nil
	}
	trust := r.e.Trust(st.Server)
	tool, toolErr := sess.Tool(ctx, st.Tool)
	freshView := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonToolMissing}
	if toolErr == nil {
		freshView = replay.Decide(r.policyInput(class, trust, tool.Annotations, inv.Replays()))
	}
	if freshView.Verdict != replay.Replay {
		return r.unknown(st, inv, journal.Decision{Verdict: replay.OutcomeUnknown, Reason: string(freshView.Reason), View: verdict.Rediscovered})
	}
	d := journal.Decision{Verdict: verdict.Replay, Reason: string(freshView.Reason), View: verdict.Rediscovered}
	intent, err := r.j.Again(inv.ID, journal.NextAttempt{Replay: true, Trust: trust, Annotations: tool.Annotations, Decision: &d})
	if err != nil {
		return stepResult{}, err
	}
	return r.send(ctx, st, sess, intent, args)
}

// resend starts a new attempt without consulting the replay policy: the
// call provably did not run, or an operator approved it.
func (r *runner) resend(ctx context.Context, st unit, inv *journal.Invocation, next journal.NextAttempt) (stepResult, error) {
	args, out := r.arguments(st, inv)
	if out != nil {
		return *out, nil
	}
	sess, err := r.e.Connect(ctx, st.Server)
	if err != nil {
		return failed(CodeServerUnavailable, "step %s: server %q unavailable: %v", st.name(), st.Server, err), nil
	}
	if tool, err := sess.Tool(ctx, st.Tool); err == nil {
		next.Annotations = tool.Annotations
	}
	intent, err := r.j.Again(inv.ID, next)
	if err != nil {
		return stepResult{}, err
	}
	return r.send(ctx, st, sess, intent, args)
}

// arguments re-evaluates a step's arguments for another attempt and checks
// that they are exactly what the first attempt sent (their digest is
// journaled): another attempt never sends different arguments.
func (r *runner) arguments(st unit, inv *journal.Invocation) (json.RawMessage, *stepResult) {
	args, out := r.evalArgs(context.Background(), st)
	if out != nil {
		return nil, out
	}
	if got := journal.Digest(r.redact(args)); inv.ArgumentsDigest != "" && got != inv.ArgumentsDigest {
		res := failed(CodeExpression, "step %s: its arguments evaluate differently than when invocation %s was first sent (the results they depend on were capped); resolve the invocation instead", st.name(), inv.ID.Short())
		return nil, &res
	}
	return args, nil
}

// journaledValue rebuilds what expressions see of a journaled result.
func journaledValue(res *journal.Result) map[string]any {
	if res == nil {
		return newValue(false, false)
	}
	return resultValue(res.Content, res.StructuredContent, res.IsError)
}

// unknown journals that an aborted or timed-out invocation's outcome is
// unknown, with the decision that says why, and blocks the run.
func (r *runner) unknown(st unit, inv *journal.Invocation, d journal.Decision) (stepResult, error) {
	if err := r.j.Decide(inv.ID, d, journal.StateOutcomeUnknown, outcomeUnknown); err != nil {
		return stepResult{}, err
	}
	r.emit(Event{Kind: StepFinished, Run: r.run.ID, Step: st.ID, Item: st.item, Server: st.Server, Tool: st.Tool, Invocation: inv.ID, State: journal.StateOutcomeUnknown, Err: outcomeUnknown})
	return stepResult{status: journal.RunBlocked, err: outcomeUnknown}, nil
}
