package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/didyoumean"
	"github.com/mcpflow/mcpflow/journal"
)

// ApproveRequest records an operator's decision on the approval gate of a
// step of a run (the step's approve:): one the run waits at, or one further
// on, decided in advance.
type ApproveRequest struct {
	// Run is a run id or a unique prefix of one; Step is the step's id.
	Run, Step string
	// As is journal.ApprovalApproved or journal.ApprovalRejected.
	As journal.ApprovalState
	// Reason says why, for the audit trail (optional); By is who decided.
	Reason, By string
	// NoContinue only records the decision. Otherwise a decision that
	// leaves the run nothing to wait for (ApproveReport.Continues)
	// continues it where the journal is held: in this process ([Local]),
	// or in the server that serves the journal.
	NoContinue bool
	// Decided, when set, is handed the decision once it is journaled,
	// before the run continues: a front end shows it first.
	Decided func(*ApproveReport)
	// Events receives the progress of the run the decision continues.
	Events func(engine.Event)
}

// ApproveReport is a decision as committed, its run, and what became of
// the run.
type ApproveReport struct {
	// Run is the run as committed once the decision was (through a
	// server, as the server reads it then).
	Run      *journal.Run
	Approval journal.Approval
	// Continues: the decision leaves the run nothing to wait for (see
	// Continues), and a resume takes it on from here.
	Continues bool
	// Continued is the run as its continuation left it: run here, or
	// followed in the server to its end. Nil when it was not continued.
	Continued *Report
	// NotContinued says why a run that Continues was not continued (a
	// resume refused it as things are: trust, a secret input, the
	// journal held by a command running another run). Nil when it
	// continued, and when it goes on already where it is going.
	NotContinued error
}

// Continues reports whether run, as committed after a decision, has
// nothing left to wait for: it is blocked at an approval gate
// (engine.CodeApprovalRequired) and no gate of it waits any more. A resume
// takes such a run on: the approved step runs, a rejected one fails. The
// one rule every door applies after a decision (Local.Approve, the
// server's approve), and after a run ends blocked (a decision came while
// it ended: see Service.Resume).
func Continues(run *journal.Run) bool {
	return run.Status == journal.RunBlocked && run.Error != nil && run.Error.Code == engine.CodeApprovalRequired &&
		len(run.PendingApprovals()) == 0
}

// Decide journals an operator's decision on a step's approval gate, who,
// when and why, and says whether the run can go on (ApproveReport.Continues);
// it continues nothing (see Local.Approve). A step the run waits at is
// decided; a step with approve: that the run has not reached is decided in
// advance (journal DecideInAdvance), and the run passes it without
// stopping when it gets there. A step the run's definition does not have
// (the error suggests the closest), one without approve:, one the run
// passed, a run that succeeded, or a gate decided already (the error says
// by whom and when) is an invalid request and writes nothing.
func (s *Service) Decide(req ApproveRequest) (*ApproveReport, error) {
	if req.As != journal.ApprovalApproved && req.As != journal.ApprovalRejected {
		return nil, invalid("approve: want approved or rejected, not %s", req.As)
	}
	id, err := s.findRun(req.Run)
	if err != nil {
		return nil, err
	}
	run, err := s.j.Run(id)
	if err != nil {
		return nil, err
	}
	var a *journal.Approval
	switch got := run.Approval(req.Step); {
	case got != nil && got.State.Decided():
		// The journal refuses it too; this says it for people.
		why, in := "", ""
		if got.Reason != "" {
			why = fmt.Sprintf(" (%q)", got.Reason)
		}
		if got.InAdvance {
			in = " in advance"
		}
		return nil, invalid("step %s of run %s was already %s%s by %s at %s%s; a decision is final", req.Step, id.Short(), got.State, in, got.By, got.At.Format(time.RFC3339), why)
	case got != nil:
		a, err = s.j.DecideApproval(id, req.Step, req.As, req.By, req.Reason)
	default:
		if err := s.gateAhead(run, req.Step); err != nil {
			return nil, err
		}
		a, err = s.j.DecideInAdvance(id, req.Step, req.As, req.By, req.Reason)
	}
	if errors.Is(err, journal.ErrTransition) {
		return nil, invalid("%v", err)
	}
	if err != nil {
		return nil, err
	}
	rep, err := s.report(id, false)
	if err != nil {
		return nil, err
	}
	return &ApproveReport{Run: rep.Run, Approval: *a, Continues: Continues(rep.Run)}, nil
}

// Continue continues the run of a decision that Continues, unless
// NoContinue, with resume, and records in rep what became of it. resume
// returns the run as it left it (nil when it goes on in the background)
// and whether it started the run: a refusal before the start is the
// report's NotContinued, one of a run going already (ErrRunning: it sees
// the decision, see Service.Resume) nothing; an error once the run went
// is the caller's.
func (rep *ApproveReport) Continue(req ApproveRequest, resume func() (*Report, bool, error)) error {
	if req.NoContinue || !rep.Continues {
		return nil
	}
	got, started, err := resume()
	switch {
	case err == nil:
		rep.Continued = got
	case errors.Is(err, ErrRunning):
	case !started:
		rep.NotContinued = err
	default:
		return err
	}
	return nil
}

// Approve journals a decision (Service.Decide), then continues the run
// here when the decision leaves it nothing to wait for, unless
// req.NoContinue: as Resume does, with the request's Events, until the run
// ends or waits again.
func (l *Local) Approve(ctx context.Context, req ApproveRequest) (*ApproveReport, error) {
	rep, err := l.Decide(req)
	if err != nil {
		return nil, err
	}
	if req.Decided != nil {
		req.Decided(rep)
	}
	err = rep.Continue(req, func() (*Report, bool, error) {
		var started atomic.Bool
		got, err := l.Resume(ctx, ResumeRequest{Run: rep.Run.ID.String(), By: req.By, Events: func(ev engine.Event) {
			if ev.Kind == engine.RunStarted {
				started.Store(true)
			}
			if req.Events != nil {
				req.Events(ev)
			}
		}})
		return got, started.Load(), err
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// gateAhead checks, from the run's journaled definition, that the run may
// have step's gate decided in advance: step exists (else the closest step
// is suggested), has approve:, and the run neither passed it nor
// succeeded.
func (s *Service) gateAhead(run *journal.Run, step string) error {
	wf, _, err := s.journaledWorkflow(run)
	if err != nil {
		return invalid("step %s of run %s cannot be checked against the run's definition, so it is not decided in advance: %v", step, run.ID.Short(), err)
	}
	var ids, gated []string
	for _, st := range wf.Steps {
		ids = append(ids, st.ID)
		if st.Approve {
			gated = append(gated, st.ID)
		}
	}
	need := "no step of it has approve:"
	if len(gated) > 0 {
		need = "steps with approve: " + strings.Join(gated, ", ")
	}
	st := wf.Step(step)
	switch {
	case st == nil:
		guess := didyoumean.Closest(step, gated)
		if guess == "" {
			guess = didyoumean.Closest(step, ids)
		}
		if guess != "" {
			return invalid("run %s has no step %q (did you mean %q? %s)", run.ID.Short(), step, guess, need)
		}
		return invalid("run %s has no step %q (its steps: %s; %s)", run.ID.Short(), step, strings.Join(ids, ", "), need)
	case !st.Approve:
		return invalid("step %s of run %s has no approve:, so it never waits for approval (%s)", step, run.ID.Short(), need)
	}
	invs, err := s.j.RunInvocations(run.ID)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(invs, func(inv journal.Invocation) bool { return inv.Step == step }); i >= 0 {
		if invs[i].State == journal.StateSkipped {
			return invalid("run %s skipped step %s (its condition was false): nothing to decide", run.ID.Short(), step)
		}
		return invalid("run %s passed step %s already: nothing to decide", run.ID.Short(), step)
	}
	if run.Status == journal.RunSucceeded {
		return invalid("run %s succeeded without reaching step %s: nothing to decide", run.ID.Short(), step)
	}
	return nil
}
