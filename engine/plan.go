package engine

import (
	"fmt"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// PlanKind says how resume continues an invocation it finds in the journal.
type PlanKind uint8

const (
	// PlanCompleted: a result is journaled (or an operator resolved the
	// invocation as completed); it stands and feeds later steps.
	PlanCompleted PlanKind = iota + 1
	// PlanBlocked: the outcome is unknown; only an operator moves it on.
	PlanBlocked
	// PlanFailed: the journaled failure stands.
	PlanFailed
	// PlanResend: send a new attempt without the replay rule: the call
	// provably did not run (rejected before running, never delivered, or a
	// journaled retry of such a failure), or an operator approved it.
	PlanResend
	// PlanJudge: the call may have run and no decision on that is
	// journaled: mcpflow stopped while it was in flight (Interrupted), or it
	// was aborted or timed out. Judge the send-time snapshot and journal the
	// decision; if it clears a replay, reconnect, rediscover and judge the
	// fresh view too.
	PlanJudge
	// PlanFollow: a decision to send again is journaled and was not carried
	// out: reconnect, rediscover, judge the fresh view when the call may
	// have run (Class ClassLost), and send.
	PlanFollow
	// PlanAwaitInput: the call's result asked for input not all answered
	// yet; the run waits for an operator's answers.
	PlanAwaitInput
	// PlanContinue: the call's result asked for input, and every request
	// is answered: send the call again with the answers (a continuation).
	PlanContinue
)

var planNames = [...]string{
	PlanCompleted: "completed", PlanBlocked: "blocked", PlanFailed: "failed",
	PlanResend: "resend", PlanJudge: "judge", PlanFollow: "follow",
	PlanAwaitInput: "await_input", PlanContinue: "continue",
}

func (k PlanKind) String() string {
	if int(k) < len(planNames) && planNames[k] != "" {
		return planNames[k]
	}
	return fmt.Sprintf("PlanKind(%d)", uint8(k))
}

// Plan is how resume continues one journaled invocation. It is data: the
// attempt loop carries it out.
type Plan struct {
	Kind PlanKind
	// Class is what the failure being recovered from proved (PlanFollow):
	// ClassLost — the call may have run, so the fresh view must clear it —
	// or ClassNotDelivered — a first delivery.
	Class replay.Class
	// Interrupted (PlanJudge): the newest attempt never ended, because
	// mcpflow stopped while the call was in flight; its end is journaled
	// with the decision, as a lost connection.
	Interrupted bool
	// Sent (PlanResend, PlanFollow) is why the new attempt is sent, as it
	// is journaled: the step's retry (a journaled retry carried out), a
	// first delivery, an operator's retry. Empty for a PlanFollow of a
	// replay or a first delivery, which Class says.
	Sent journal.AttemptKind
	// Decision (PlanResend) is journaled with the new attempt: an
	// operator's approval.
	Decision *journal.Decision
}

// PlanResume decides, from the journal alone, how to continue an invocation
// after a crash, a failure or an operator's resolution. It does no I/O and
// decides nothing the journal has decided already: a journaled decision is
// followed, never re-decided.
func PlanResume(inv *journal.Invocation) (Plan, error) {
	last := inv.LastAttempt()
	switch inv.State {
	case journal.StateCompleted:
		return Plan{Kind: PlanCompleted}, nil
	case journal.StateOutcomeUnknown:
		return Plan{Kind: PlanBlocked}, nil
	case journal.StateFailed:
		if len(inv.Resolutions) == 0 && last != nil && !earlierMayHaveRun(inv) && last.Failure.NotRun() {
			// The call provably did not run (rejected before running, or
			// never sent): send it again, a first delivery.
			return Plan{Kind: PlanResend, Sent: journal.KindFirstDelivery}, nil
		}
		return Plan{Kind: PlanFailed}, nil
	case journal.StateRetryApproved:
		return Plan{Kind: PlanResend, Sent: journal.KindOperatorRetry,
			Decision: &journal.Decision{Verdict: verdict.OperatorRetry, Reason: "operator_approved", View: verdict.Operator}}, nil
	case journal.StateAborted, journal.StateTimedOut:
		return Plan{Kind: PlanJudge}, nil
	case journal.StateIntent:
		if last == nil {
			return Plan{}, fmt.Errorf("invocation %s is in state intent with no attempt", inv.ID.Short())
		}
		if last.EndedAt == nil {
			// A crash while the call was in flight is a lost connection.
			return Plan{Kind: PlanJudge, Interrupted: true}, nil
		}
		d := inv.LastDecision()
		switch {
		case d == nil:
			return Plan{}, fmt.Errorf("invocation %s: attempt %d ended in state intent with no decision", inv.ID.Short(), last.N)
		case d.Verdict == verdict.FirstDelivery:
			return Plan{Kind: PlanFollow, Class: replay.ClassNotDelivered}, nil
		case d.Verdict == verdict.Retry && !last.Failure.MayHaveRun() && !earlierMayHaveRun(inv):
			// A journaled retry of a failure after which the call did not
			// run, or ran and said so (a tool error).
			return Plan{Kind: PlanResend, Sent: journal.KindRetry}, nil
		case d.Verdict == verdict.Retry:
			// A retry of a call that may have run (timed out, server
			// error): the fresh view must clear it; it stays a retry.
			return Plan{Kind: PlanFollow, Class: replay.ClassLost, Sent: journal.KindRetry}, nil
		case d.Verdict == verdict.Replay:
			// A journaled replay: the fresh view must clear it.
			return Plan{Kind: PlanFollow, Class: replay.ClassLost}, nil
		case d.Verdict == verdict.Continue && inv.WaitingInput() != nil:
			if inputWaits(inv) {
				return Plan{Kind: PlanAwaitInput}, nil
			}
			return Plan{Kind: PlanContinue}, nil
		}
		return Plan{}, fmt.Errorf("invocation %s: attempt %d ended in state intent after a %s decision", inv.ID.Short(), last.N, d.Verdict)
	}
	return Plan{}, fmt.Errorf("invocation %s in state %s cannot be resumed", inv.ID.Short(), inv.State)
}
