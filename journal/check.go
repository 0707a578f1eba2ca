package journal

import (
	"fmt"
)

// Problem is one finding of Check.
type Problem struct {
	Record  string
	Message string
}

func (p Problem) String() string { return p.Record + ": " + p.Message }

// The rules of the records themselves, which Check (on either backend)
// and Import apply: checkRun to a run record, checkInvocation to an
// invocation record, checkSucceeded to a run and its invocations.

// CheckRun adds the problems of a run record: a run is finished exactly
// when it has FinishedAt, its digest is its definition's, and its
// approvals are consistent (checkApprovals).
func CheckRun(r *Run, add func(string, string, ...any)) {
	name := "run " + r.ID.String()
	if r.Status.Finished() != (r.FinishedAt != nil) {
		add(name, "status %s but finished_at %v", r.Status, r.FinishedAt)
	}
	if len(r.Definition) > 0 && r.Digest != Digest(r.Definition) {
		add(name, "digest %s does not match the definition", r.Digest)
	}
	checkApprovals(r, name, add)
}

// CheckSucceeded adds the problem of a succeeded run with an unsettled
// invocation ([State.Unsettled]): unsettled is the first one found of the
// run's invocations, nil when there is none.
func CheckSucceeded(run ID, status RunStatus, unsettled *Invocation, add func(string, string, ...any)) {
	if status == RunSucceeded && unsettled != nil {
		add("run "+run.String(), "succeeded while invocation %s is %s", unsettled.ID, unsettled.State)
	}
}

// CheckInvocation adds the problems of an invocation record: its
// idempotency key is its id; it has an intent (attempt 1) unless skipped,
// its attempts are numbered 1..n, only the last may be open, and a settled
// state has no open attempt; resolutions go from a state that waits for
// one to completed, failed or retry_approved.
func CheckInvocation(inv *Invocation, name string, add func(string, string, ...any)) {
	if inv.IdempotencyKey != inv.ID.String() {
		add(name, "idempotency key %q is not the invocation id", inv.IdempotencyKey)
	}
	switch {
	case inv.State == StateSkipped && len(inv.Attempts) > 0:
		add(name, "skipped but has %d attempts", len(inv.Attempts))
	case inv.State != StateSkipped && len(inv.Attempts) == 0:
		add(name, "state %s without an intent (no attempts)", inv.State)
	}
	for i, a := range inv.Attempts {
		if a.N != i+1 {
			add(name, "attempt %d numbered %d", i+1, a.N)
		}
		if i < len(inv.Attempts)-1 && a.EndedAt == nil {
			add(name, "attempt %d has no outcome but a later attempt exists", a.N)
		}
		if a.Interrupted && a.EndedAt == nil {
			add(name, "attempt %d is marked interrupted but has no end", a.N)
		}
	}
	if last := inv.LastAttempt(); inv.State != StateIntent && last != nil && last.EndedAt == nil {
		add(name, "state %s but the last attempt has no outcome", inv.State)
	}
	for i, r := range inv.Resolutions {
		if !resolvable(r.From, r.As) || !r.As.isResolution() {
			add(name, "resolution %d from %s as %s", i+1, r.From, r.As)
		}
	}
	if inv.State == StateRetryApproved && len(inv.Resolutions) == 0 {
		add(name, "retry_approved without a resolution")
	}
	for _, in := range inv.Inputs {
		if in.Attempt < 1 || in.Attempt > len(inv.Attempts) || inv.Attempts[in.Attempt-1].EndedAt == nil {
			add(name, "input asked by attempt %d, which has no outcome", in.Attempt)
		}
		seen := map[string]bool{}
		for _, a := range in.Answers {
			if seen[a.Key] {
				add(name, "input request %q of attempt %d answered twice", a.Key, in.Attempt)
			}
			seen[a.Key] = true
		}
	}
}

func checkApprovals(r *Run, name string, add func(string, string, ...any)) {
	seen := map[string]bool{}
	for i, a := range r.Approvals {
		what := fmt.Sprintf("approval %d (step %q)", i+1, a.Step)
		switch {
		case a.Step == "":
			add(name, "approval %d has no step", i+1)
		case seen[a.Step]:
			add(name, "%s: a second approval of the same step", what)
		}
		seen[a.Step] = true
		switch {
		case a.State == ApprovalPending:
			if a.By != "" || a.At != nil || a.InAdvance {
				add(name, "%s: pending but decided by %q", what, a.By)
			}
			if !a.Reached() {
				add(name, "%s: pending but never requested", what)
			}
			if r.Status == RunSucceeded {
				add(name, "%s: succeeded while the step waits for approval", what)
			}
		case a.State.Decided() && a.InAdvance:
			// Decided first; reached (requested) then, or not yet.
			if a.By == "" || a.At == nil || (a.Reached() && a.RequestedAt.Before(*a.At)) {
				add(name, "%s: %s in advance without who, or reached before it was decided", what, a.State)
			}
		case a.State.Decided():
			if a.By == "" || a.At == nil || !a.Reached() || a.At.Before(a.RequestedAt) {
				add(name, "%s: %s without who, or when not after it was requested", what, a.State)
			}
		default:
			add(name, "%s: state %s", what, a.State)
		}
	}
}
