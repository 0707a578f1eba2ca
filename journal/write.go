package journal

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
)

// Intent is the proof that an invocation's intent record is durable. Only
// the journal creates Intents, and only after the commit that wrote the
// intent was fsynced: whoever sends a tools/call needs one.
type Intent struct {
	ID             ID
	RunID          ID
	IdempotencyKey string
	Attempt        int
	// Kind says why the attempt was sent (Attempt.Kind).
	Kind AttemptKind
	// Continuation is set on a KindContinuation attempt: the answers and
	// the server's request state, as journaled, that the call carries.
	Continuation *Continuation
	durable      bool
}

// Continuation is what a continued call carries besides its arguments
// (MCP multi-round-trip requests): the inputResponses object and the
// requestState to echo.
type Continuation struct {
	Responses json.RawMessage
	State     string
}

// Valid reports whether the Intent came from the journal.
func (in Intent) Valid() bool { return in.durable }

// Relayed returns in as the journal issued it (Valid then reports true).
// It exists for the two ends of a journal that another process holds, and
// for nothing else: the journal's client (package client), on an Intent
// decoded from the answer of the process that holds the journal, which
// sends it only after its Begin or Again returned it, the intent record
// durable; and that process's HTTP API (package httpapi), on the Intent a
// client sends back with Finish, which the journal then checks against
// the invocation's open attempt as it checks any. Anyone else calling it
// forges the proof that a call's intent is durable, which is what
// engine.MCP asks for before it sends a tools/call; internal/deps checks
// that no other package calls it.
func Relayed(in Intent) Intent {
	in.durable = true
	return in
}

// CreateRun writes a new run in status running. It assigns r.ID when unset
// and sets the timestamps. Durable when it returns nil.
func (w *Writer) CreateRun(r *Run) error { return w.write(w.createRun(r)) }

// NewRunID makes the id of a run about to be created (CreateRun or
// CreateRunLater with it set), from the journal's clock: whoever starts
// the run knows its id before anything can read the run. The run's
// StartedAt comes from the clock a moment later.
func (w *Writer) NewRunID() ID { return w.ids.Next(w.now().UTC()) }

// CreateRunLater is CreateRun queued to ride with the next commit (see
// Pending): the run exists once the Pending is done without error.
func (w *Writer) CreateRunLater(r *Run) (*Pending, error) { return w.writeLater(w.createRun(r)) }

func (w *Writer) createRun(r *Run) func(Tx) error {
	now := w.now().UTC()
	if r.ID.IsZero() {
		r.ID = w.ids.Next(now)
	}
	r.Status, r.StartedAt, r.UpdatedAt, r.FinishedAt = RunRunning, now, now, nil
	if len(r.Definition) > 0 && r.Digest == "" {
		r.Digest = Digest(r.Definition)
	}
	rec := *r
	return func(s Tx) error {
		exists, err := s.HasRun(rec.ID)
		if err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("run %s: %w", rec.ID, ErrExists)
		}
		return s.PutRun(nil, &rec)
	}
}

// SetRunStatus moves a run to status with an optional error; finished
// statuses set FinishedAt. An illegal transition returns ErrTransition and
// writes nothing, and so does succeeded while an invocation of the run is
// unsettled (see [State.Unsettled]). Durable when it returns nil.
func (w *Writer) SetRunStatus(id ID, status RunStatus, runErr *Error) error {
	_, err := w.EndRun(id, status, runErr, nil)
	return err
}

// EndRun is SetRunStatus that also records the run's outputs (kept only
// with RunSucceeded), in the same commit. Durable when it returns; it
// returns the run as committed, as Run would read it back.
func (w *Writer) EndRun(id ID, status RunStatus, runErr *Error, outputs map[string]any) (*Run, error) {
	now := w.now().UTC()
	var put *Run // as the commit's last try of the write put it
	err := w.write(func(s Tx) error {
		old, err := s.Run(id)
		if err != nil {
			return err
		}
		if !CanTransitionRun(old.Status, status) {
			return fmt.Errorf("run %s: %s → %s: %w", id.Short(), old.Status, status, ErrTransition)
		}
		if status == RunSucceeded {
			if p := old.PendingApprovals(); len(p) > 0 {
				return fmt.Errorf("run %s: succeeded while step %s waits for approval: %w", id.Short(), p[0].Step, ErrTransition)
			}
			if inv, err := s.FirstWhere(id, State.Unsettled); err != nil || inv != nil {
				if err != nil {
					return err
				}
				return fmt.Errorf("run %s: succeeded while invocation %s is %s: %w", id.Short(), inv.ID.Short(), inv.State, ErrTransition)
			}
		}
		r := *cloneRun(old)
		r.Status, r.Error, r.UpdatedAt = status, runErr, now
		r.Outputs = nil
		if status == RunSucceeded {
			r.Outputs = outputs
		}
		r.FinishedAt = nil
		if status.Finished() {
			r.FinishedAt = &now
		}
		put = &r
		return s.PutRun(old, &r)
	})
	if err != nil {
		return nil, err
	}
	return asCommitted(put)
}

// asCommitted is r, put by a write, as a read of its record gives it:
// its error and outputs shaped as JSON decodes them (an empty map left
// out, a byte that is not UTF-8 made U+FFFD, numbers as float64), and
// nothing shared with the caller of the write. The rest of r is the
// record the write read (which store.run decoded for it) and the values
// it set.
func asCommitted(r *Run) (*Run, error) {
	type shaped struct {
		Error   *Error         `json:"error,omitempty"`
		Outputs map[string]any `json:"outputs,omitempty"`
	}
	b, err := json.Marshal(shaped{r.Error, r.Outputs}) // it was encoded when put: this cannot fail
	if err != nil {
		return nil, err
	}
	var s shaped
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	c := *r
	c.Error, c.Outputs = s.Error, s.Outputs
	return &c, nil
}

// RequestApproval records that run reached step, whose approve: asks for an
// operator's decision before anything of it is written, and returns the
// step's gate as committed: a new pending approval with message, for the
// approver; or the decision already recorded, which the caller follows. A
// gate decided in advance that the run reaches now is marked reached (its
// RequestedAt and message set, the decision kept); any other gate already
// recorded is left as it is. Reading the gate and recording the request
// are one transaction: a decision made in advance is never missed by a run
// that reaches its step at the same moment. The run must exist and not
// have succeeded. Durable when it returns nil.
func (w *Writer) RequestApproval(id ID, step, message string) (*Approval, error) {
	if strings.TrimSpace(step) == "" {
		return nil, fmt.Errorf("run %s: request approval: step is required", id.Short())
	}
	now := w.now().UTC()
	var out Approval
	err := w.write(func(s Tx) error {
		old, err := s.Run(id)
		if err != nil {
			return err
		}
		if a := old.Approval(step); a != nil && a.Reached() {
			out = *a
			return nil
		}
		if old.Status == RunSucceeded {
			return fmt.Errorf("run %s succeeded; step %s cannot wait for approval: %w", id.Short(), step, ErrTransition)
		}
		r := cloneRun(old)
		a := r.Approval(step)
		if a == nil {
			r.Approvals = append(r.Approvals, Approval{Step: step, State: ApprovalPending})
			a = &r.Approvals[len(r.Approvals)-1]
		}
		a.Message, a.RequestedAt = message, now
		r.UpdatedAt = now
		out = *a
		return s.PutRun(old, r)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DecideApproval records an operator's decision on a step of run that
// waits for approval: as ApprovalApproved or ApprovalRejected, with who (by,
// required) and why (reason, optional); the journal sets when. It returns
// the approval as committed. A step that does not wait for approval —
// never reached, without approve:, or decided already (the error says by
// whom and when) — returns ErrTransition and writes nothing. Durable when
// it returns nil.
func (w *Writer) DecideApproval(id ID, step string, as ApprovalState, by, reason string) (*Approval, error) {
	return w.decide(id, step, as, by, reason, false)
}

// DecideInAdvance records an operator's decision on the gate of a step
// that run has not reached yet, as DecideApproval records one on a step
// that waits: the gate is recorded decided and InAdvance, with who, when
// and why, and not reached (RequestedAt zero) until the run gets there
// (RequestApproval), which then goes on, or fails the step when it was
// rejected, without stopping. The journal does not know the run's steps:
// the caller checks that step has approve: and that the run has not passed
// it. A gate the run reached in the meantime is decided as DecideApproval
// decides it (not in advance); one decided already returns ErrTransition,
// and so does a run that succeeded. Durable when it returns nil.
func (w *Writer) DecideInAdvance(id ID, step string, as ApprovalState, by, reason string) (*Approval, error) {
	return w.decide(id, step, as, by, reason, true)
}

// decide is DecideApproval, and DecideInAdvance when advance is set.
func (w *Writer) decide(id ID, step string, as ApprovalState, by, reason string, advance bool) (*Approval, error) {
	if !as.Decided() {
		return nil, fmt.Errorf("run %s: decide approval of step %s as %s: want approved or rejected: %w", id.Short(), step, as, ErrTransition)
	}
	if strings.TrimSpace(by) == "" {
		return nil, fmt.Errorf("run %s: decide approval of step %s: who (by) is required", id.Short(), step)
	}
	if advance && strings.TrimSpace(step) == "" {
		return nil, fmt.Errorf("run %s: decide approval in advance: step is required", id.Short())
	}
	now := w.now().UTC()
	var out Approval
	err := w.write(func(s Tx) error {
		old, err := s.Run(id)
		if err != nil {
			return err
		}
		a := old.Approval(step)
		switch {
		case a == nil && !advance:
			return fmt.Errorf("run %s: step %s is not waiting for approval (%s): %w", id.Short(), step, waitingText(old), ErrTransition)
		case a == nil && old.Status == RunSucceeded:
			return fmt.Errorf("run %s succeeded; step %s cannot be decided in advance: %w", id.Short(), step, ErrTransition)
		case a != nil && a.State.Decided():
			in := ""
			if a.InAdvance {
				in = " in advance"
			}
			return fmt.Errorf("run %s: step %s was already %s%s by %s at %s: %w", id.Short(), step, a.State, in, a.By, a.At.Format(time.RFC3339), ErrTransition)
		}
		r := cloneRun(old)
		if a == nil {
			r.Approvals = append(r.Approvals, Approval{Step: step, InAdvance: true})
		}
		a = r.Approval(step)
		a.State, a.By, a.At, a.Reason = as, by, &now, reason
		r.UpdatedAt = now
		out = *a
		return s.PutRun(old, r)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// waitingText names the steps of r that wait for approval.
func waitingText(r *Run) string {
	p := r.PendingApprovals()
	if len(p) == 0 {
		return "no step of this run waits for approval"
	}
	names := make([]string, len(p))
	for i, a := range p {
		names[i] = a.Step
	}
	return "waiting: " + strings.Join(names, ", ")
}

func cloneRun(r *Run) *Run {
	c := *r
	c.Approvals = append([]Approval(nil), r.Approvals...)
	return &c
}

// Begin writes the intent of a new invocation (state intent, attempt 1) and
// returns its Intent once the record is committed and fsynced: the only way
// to get an Intent for a new call. It assigns inv.ID when unset; the
// idempotency key is the invocation id. Fields of inv that the journal owns
// (state, attempts, result, error, decisions, resolutions, timestamps) are
// overwritten. The run must exist.
func (w *Writer) Begin(inv *Invocation) (Intent, error) {
	now := w.now().UTC()
	w.newInv(inv, now, StateIntent)
	trust := inv.Trust
	inv.Attempts = []Attempt{{N: 1, SentAt: now, Kind: KindFirst, Trust: &trust, Annotations: inv.Annotations}}
	rec := *inv
	err := w.write(func(s Tx) error { return insertInv(s, &rec) })
	if err != nil {
		return Intent{}, err
	}
	return Intent{ID: rec.ID, RunID: rec.RunID, IdempotencyKey: rec.IdempotencyKey, Attempt: 1, Kind: KindFirst, durable: true}, nil
}

// Skip records a step whose condition was false: an invocation in state
// skipped that was never sent (no attempt). Like Begin it assigns inv.ID
// and overwrites the fields the journal owns. Durable when it returns nil.
func (w *Writer) Skip(inv *Invocation) error { return w.write(w.skip(inv)) }

// SkipLater is Skip queued to ride with the next commit (see Pending).
func (w *Writer) SkipLater(inv *Invocation) (*Pending, error) { return w.writeLater(w.skip(inv)) }

func (w *Writer) skip(inv *Invocation) func(Tx) error {
	now := w.now().UTC()
	w.newInv(inv, now, StateSkipped)
	rec := *inv
	return func(s Tx) error { return insertInv(s, &rec) }
}

func (w *Writer) newInv(inv *Invocation, now time.Time, s State) {
	if inv.ID.IsZero() {
		inv.ID = w.ids.Next(now)
	}
	inv.IdempotencyKey = inv.ID.String()
	inv.State = s
	inv.Attempts = nil
	inv.CreatedAt, inv.UpdatedAt = now, now
	inv.Result, inv.Error, inv.Decisions, inv.Resolutions = nil, nil, nil, nil
}

// insertInv writes a new invocation of an existing run.
func insertInv(s Tx, inv *Invocation) error {
	if strings.IndexByte(inv.Server, 0) >= 0 || strings.IndexByte(inv.Tool, 0) >= 0 {
		return fmt.Errorf("invocation %s: server or tool name contains a NUL byte", inv.ID.Short())
	}
	return s.PutInvocation(nil, inv)
}

// NextAttempt describes a new attempt of an existing invocation.
type NextAttempt struct {
	// Kind says why it is sent: KindRetry, KindReplay, KindFirstDelivery
	// or KindOperatorRetry (required; only Begin sends a KindFirst).
	Kind AttemptKind
	// Trust and Annotations as they are now, after rediscovery.
	Trust       Trust
	Annotations json.RawMessage
	// Decision, when set, is journaled in the same commit: the verdict that
	// allowed this attempt (e.g. a replay cleared after rediscovery).
	Decision *Decision
}

// Again writes a new attempt of an invocation, of kind next.Kind (a retry,
// a replay, a first delivery of a call that provably did not run, an
// operator's retry), and returns its Intent once the record is committed
// and fsynced. The invocation goes to (or stays in) state intent; the
// previous attempt must have ended. An illegal transition, or a kind that
// is not one of those four, returns ErrTransition and writes nothing.
func (w *Writer) Again(id ID, next NextAttempt) (Intent, error) {
	if !next.Kind.Known() || next.Kind == KindFirst {
		return Intent{}, fmt.Errorf("invocation %s: another attempt of kind %q: want retry, replay, first_delivery, operator_retry or continuation: %w", id.Short(), next.Kind, ErrTransition)
	}
	now := w.now().UTC()
	var out Intent
	err := w.write(func(s Tx) error {
		old, err := s.Invocation(id)
		if err != nil {
			return err
		}
		if err := checkTransition(id, old.State, StateIntent); err != nil {
			return err
		}
		if last := old.LastAttempt(); old.State == StateIntent && last != nil && last.EndedAt == nil {
			return fmt.Errorf("invocation %s: attempt %d has no outcome yet: %w", id.Short(), last.N, ErrTransition)
		}
		var cont *Continuation
		switch waiting := old.WaitingInput(); {
		case next.Kind == KindContinuation && waiting == nil:
			return fmt.Errorf("invocation %s: a continuation follows only a result that asked for input: %w", id.Short(), ErrTransition)
		case next.Kind == KindContinuation:
			if open, err := waiting.Unanswered(); err != nil || len(open) > 0 {
				return fmt.Errorf("invocation %s: input %s not answered yet (%v): %w", id.Short(), strings.Join(open, ", "), err, ErrTransition)
			}
			cont = &Continuation{Responses: waiting.Responses(), State: waiting.State}
		case waiting != nil:
			return fmt.Errorf("invocation %s waits for input: only a continuation follows: %w", id.Short(), ErrTransition)
		}
		inv := CloneInvocation(old)
		inv.State = StateIntent
		inv.Trust = next.Trust
		inv.Annotations = next.Annotations
		inv.Result, inv.Error = nil, nil
		inv.UpdatedAt = now
		if next.Decision != nil {
			d := *next.Decision
			d.Attempt, d.At = len(inv.Attempts), now
			inv.Decisions = append(inv.Decisions, d)
		}
		n := len(inv.Attempts) + 1
		inv.Attempts = append(inv.Attempts, Attempt{N: n, SentAt: now, Kind: next.Kind, Replay: next.Kind == KindReplay, Trust: &next.Trust, Annotations: next.Annotations})
		out = Intent{ID: inv.ID, RunID: inv.RunID, IdempotencyKey: inv.IdempotencyKey, Attempt: n, Kind: next.Kind, Continuation: cont, durable: true}
		return s.PutInvocation(old, inv)
	})
	if err != nil {
		return Intent{}, err
	}
	return out, nil
}

// Outcome is what became of an attempt.
type Outcome struct {
	// State is the invocation's new state. StateIntent means the attempt
	// failed but the invocation stays in flight (the replay policy decided to
	// replay; the next attempt follows with Again).
	State  State
	Result *Result
	Error  *Error
	// Failure and Detail are recorded on the attempt: what its outcome
	// proved (a tool error included), and the upstream error text.
	Failure failure.Class
	Detail  string
	// Decision, when set, is the replay policy's verdict on this failure,
	// journaled in the same commit.
	Decision *Decision
	// Input is what the attempt's result asked for (State StateIntent,
	// with a verdict.Continue Decision): its Attempt is set here, and the
	// times of the answers it brings (a step's elicit:).
	Input *Input
}

// Finish records the outcome of the attempt that in started. The attempt
// must be the invocation's newest and still open; an illegal transition
// returns ErrTransition and writes nothing. Durable when it returns nil.
func (w *Writer) Finish(in Intent, o Outcome) error {
	if !in.durable {
		return fmt.Errorf("finish: intent not issued by the journal: %w", ErrTransition)
	}
	return w.write(w.finish(in, o, false))
}

// FinishLater is Finish queued to ride with the next commit (see Pending):
// the outcome of one step and the intent of the next share a commit.
func (w *Writer) FinishLater(in Intent, o Outcome) (*Pending, error) {
	if !in.durable {
		return nil, fmt.Errorf("finish: intent not issued by the journal: %w", ErrTransition)
	}
	return w.writeLater(w.finish(in, o, false))
}

// finish writes o as the outcome of the attempt in started; interrupted
// marks it found open on resume (Attempt.Interrupted).
func (w *Writer) finish(in Intent, o Outcome, interrupted bool) func(Tx) error {
	now := w.now().UTC()
	return func(s Tx) error {
		old, err := s.Invocation(in.ID)
		if err != nil {
			return err
		}
		if old.State != StateIntent {
			return fmt.Errorf("invocation %s is %s, not in flight: %w", in.ID.Short(), old.State, ErrTransition)
		}
		if err := checkTransition(in.ID, old.State, o.State); err != nil {
			return err
		}
		last := old.LastAttempt()
		if last == nil || last.N != in.Attempt || last.EndedAt != nil {
			return fmt.Errorf("invocation %s: attempt %d is not the open attempt: %w", in.ID.Short(), in.Attempt, ErrTransition)
		}
		inv := CloneInvocation(old)
		a := &inv.Attempts[len(inv.Attempts)-1]
		a.EndedAt = &now
		a.Failure, a.Detail, a.Interrupted = o.Failure, o.Detail, interrupted
		inv.State, inv.Result, inv.Error, inv.UpdatedAt = o.State, o.Result, o.Error, now
		inv.ToolError = o.Result != nil && o.Result.IsError
		if o.Input != nil {
			if o.Decision == nil || o.Decision.Verdict != verdict.Continue || o.State != StateIntent {
				return fmt.Errorf("invocation %s: input asked for without a decision to continue: %w", in.ID.Short(), ErrTransition)
			}
			input := *o.Input
			input.Attempt = a.N
			input.Answers = slices.Clone(input.Answers)
			for i := range input.Answers {
				input.Answers[i].At = now
			}
			inv.Inputs = append(slices.Clone(inv.Inputs), input)
		}
		if o.Decision != nil {
			d := *o.Decision
			d.Attempt, d.At = a.N, now
			inv.Decisions = append(inv.Decisions, d)
		}
		return s.PutInvocation(old, inv)
	}
}

// Interrupted records the failure of an attempt whose outcome was never
// recorded because the process died while it was in flight (a crash is a
// lost connection). It is Finish for an attempt found open on resume, with
// the same checks, and marks the attempt Interrupted: its EndedAt is now,
// when it was found, not when it ended. Durable when it returns nil.
func (w *Writer) Interrupted(id ID, o Outcome) error {
	return w.write(func(s Tx) error {
		inv, err := s.Invocation(id)
		if err != nil {
			return err
		}
		last := inv.LastAttempt()
		if last == nil {
			return fmt.Errorf("invocation %s has no attempt: %w", id.Short(), ErrTransition)
		}
		return w.finish(Intent{ID: id, RunID: inv.RunID, IdempotencyKey: inv.IdempotencyKey, Attempt: last.N, Kind: last.Kind, durable: true}, o, true)(s)
	})
}

// Decide journals a replay decision on an invocation whose last attempt has
// ended — in flight (for example the re-check after rediscovery), or aborted
// or timed out (judged on resume, and then only to StateOutcomeUnknown, or
// for a read, which changes nothing, StateFailed) — and moves it to state
// (StateIntent keeps an in-flight one in flight).
// Durable when it returns nil.
func (w *Writer) Decide(id ID, d Decision, state State, e *Error) error {
	now := w.now().UTC()
	return w.write(func(s Tx) error {
		old, err := s.Invocation(id)
		if err != nil {
			return err
		}
		switch old.State {
		case StateIntent:
		case StateAborted, StateTimedOut:
			// Resume judging an interrupted call that may have run.
		default:
			return fmt.Errorf("invocation %s is %s, not in flight, aborted or timed out: %w", id.Short(), old.State, ErrTransition)
		}
		last := old.LastAttempt()
		if last == nil || last.EndedAt == nil {
			return fmt.Errorf("invocation %s: decide before the attempt has ended: %w", id.Short(), ErrTransition)
		}
		if old.State != StateIntent && state != StateOutcomeUnknown && (state != StateFailed || !old.Method.Reads()) {
			return fmt.Errorf("invocation %s is %s: a decision can only make its outcome unknown (or a read's failed), not %s: %w", id.Short(), old.State, state, ErrTransition)
		}
		if err := checkTransition(id, old.State, state); err != nil {
			return err
		}
		inv := CloneInvocation(old)
		d.Attempt, d.At = last.N, now
		inv.Decisions = append(inv.Decisions, d)
		inv.State, inv.UpdatedAt = state, now
		if e != nil {
			inv.Error = e
		}
		return s.PutInvocation(old, inv)
	})
}

// Resolve records an operator's resolution of an invocation that waits for
// one (outcome_unknown, aborted or timed_out): as completed, failed or
// retry_approved, with who (r.By) and why (r.Why); the journal sets when
// and from which state. A failed invocation, or one that completed with a
// tool error, may be approved for a retry (retry_approved). Anything else
// returns ErrTransition and writes nothing. Durable when it returns nil.
func (w *Writer) Resolve(id ID, r Resolution, result *Result) error {
	if strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Why) == "" {
		return fmt.Errorf("resolve invocation %s: who (By) and why (Why) are required", id.Short())
	}
	now := w.now().UTC()
	return w.write(func(s Tx) error {
		old, err := s.Invocation(id)
		if err != nil {
			return err
		}
		switch {
		case old.State == StateCompleted && r.As == StateRetryApproved && !old.ToolError:
			return fmt.Errorf("invocation %s completed without a tool error; there is nothing to retry: %w", id.Short(), ErrTransition)
		case !resolvable(old.State, r.As):
			return fmt.Errorf("invocation %s is %s; only outcome_unknown, aborted or timed_out invocations are resolved, and failed ones or tool errors approved for a retry: %w", id.Short(), old.State, ErrTransition)
		}
		if !r.As.isResolution() {
			return fmt.Errorf("resolve as %s: want completed, failed or retry_approved: %w", r.As, ErrTransition)
		}
		inv := CloneInvocation(old)
		r.At, r.From = now, old.State
		inv.Resolutions = append(inv.Resolutions, r)
		inv.State, inv.UpdatedAt = r.As, now
		if r.As != StateFailed {
			inv.Error = nil // the operator settled what the error was about
		}
		if result != nil {
			inv.Result, inv.ToolError = result, result.IsError
		}
		if r.As == StateFailed {
			inv.Error = &Error{Code: "MCPFLOW_RESOLVED_FAILED", Message: r.Why}
		}
		return s.PutInvocation(old, inv)
	})
}

// Answer journals answers to the input an invocation waits for
// (Invocation.WaitingInput), asked by attempt: who gave them (each
// answer's By) and when. An answer is final: a request answered already,
// one the input does not have, or an invocation that waits for no input
// (or for that of another attempt) returns ErrTransition and writes
// nothing. Durable when it returns nil; the calls of this process that
// wait for it are then told (AnswerGiven).
func (w *Writer) Answer(id ID, attempt int, answers []Answer) (*Input, error) {
	now := w.now().UTC()
	var out *Input
	err := w.write(func(s Tx) error {
		old, err := s.Invocation(id)
		if err != nil {
			return err
		}
		waiting := old.WaitingInput()
		if waiting == nil {
			waiting = old.AskedInCall()
		}
		if waiting == nil || waiting.Attempt != attempt {
			return fmt.Errorf("invocation %s waits for no input of attempt %d: %w", id.Short(), attempt, ErrTransition)
		}
		reqs, err := waiting.Parsed()
		if err != nil {
			return fmt.Errorf("invocation %s: %w: %v", id.Short(), ErrDamaged, err)
		}
		inv := CloneInvocation(old)
		in := &inv.Inputs[len(inv.Inputs)-1]
		in.Answers = slices.Clone(in.Answers)
		for _, a := range answers {
			if !slices.ContainsFunc(reqs, func(r InputRequest) bool { return r.Key == a.Key }) {
				return fmt.Errorf("invocation %s has no input request %q: %w", id.Short(), a.Key, ErrTransition)
			}
			if got := in.Answer(a.Key); got != nil {
				return fmt.Errorf("input request %q of invocation %s was answered by %s at %s; an answer is final: %w", a.Key, id.Short(), got.By, got.At.Format(time.RFC3339), ErrTransition)
			}
			if strings.TrimSpace(a.By) == "" || !json.Valid(a.Response) {
				return fmt.Errorf("answer to input request %q of invocation %s: who (By) and a JSON response are required: %w", a.Key, id.Short(), ErrTransition)
			}
			a.At = now
			in.Answers = append(in.Answers, a)
		}
		inv.UpdatedAt = now
		// The caller's copy: the record put may be what the next write
		// of the invocation reads (a Tx keeps it).
		c := *in
		c.Answers = slices.Clone(in.Answers)
		out = &c
		return s.PutInvocation(old, inv)
	})
	if err != nil {
		return nil, err
	}
	w.answers.answered(id)
	return out, nil
}

// Ask journals a request a server made during the open attempt of an
// invocation (an elicitation over a protocol without multi-round-trip
// requests: the call stays open while it waits), with the answers given
// at once (a step's elicit:). Durable when it returns nil.
func (w *Writer) Ask(id ID, attempt int, in Input) error {
	now := w.now().UTC()
	return w.write(func(s Tx) error {
		old, err := s.Invocation(id)
		if err != nil {
			return err
		}
		last := old.LastAttempt()
		if old.State != StateIntent || last == nil || last.N != attempt || last.EndedAt != nil {
			return fmt.Errorf("invocation %s: attempt %d is not in flight: %w", id.Short(), attempt, ErrTransition)
		}
		if _, err := in.Parsed(); err != nil {
			return fmt.Errorf("invocation %s: %w", id.Short(), err)
		}
		inv := CloneInvocation(old)
		in.Attempt = attempt
		in.Answers = slices.Clone(in.Answers)
		for i := range in.Answers {
			in.Answers[i].At = now
		}
		inv.Inputs = append(inv.Inputs, in)
		inv.UpdatedAt = now
		return s.PutInvocation(old, inv)
	})
}

func CloneInvocation(inv *Invocation) *Invocation {
	c := *inv
	c.Attempts = append([]Attempt(nil), inv.Attempts...)
	c.Resolutions = append([]Resolution(nil), inv.Resolutions...)
	c.Decisions = append([]Decision(nil), inv.Decisions...)
	c.Inputs = append([]Input(nil), inv.Inputs...)
	return &c
}
