package service

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// ApproveRequest records an operator's decision on a step of a run that
// waits for approval (the step's approve:).
type ApproveRequest struct {
	// Run is a run id or a unique prefix of one; Step is the step's id.
	Run, Step string
	// As is journal.ApprovalApproved or journal.ApprovalRejected.
	As journal.ApprovalState
	// Reason says why, for the audit trail (optional); By is who decided.
	Reason, By string
}

// ApproveReport is a decision as committed, and its run.
type ApproveReport struct {
	Run      *journal.Run
	Approval journal.Approval
}

// Approve journals an operator's decision on a step that waits for
// approval: who, when and why. The run then continues with Resume: an
// approved step runs, a rejected one fails without sending anything. A
// step that does not wait for approval — unknown, without approve:, not
// reached yet, or decided already (the error says by whom and when) — is
// an invalid request and writes nothing.
func (s *Service) Approve(req ApproveRequest) (*ApproveReport, error) {
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
	switch a := run.Approval(req.Step); {
	case a == nil:
		if err := s.notWaiting(run, req.Step); err != nil {
			return nil, err
		}
	case a.State.Decided():
		// The journal refuses it too; this says it for people.
		why := ""
		if a.Reason != "" {
			why = fmt.Sprintf(" (%q)", a.Reason)
		}
		return nil, invalid("step %s of run %s was already %s by %s at %s%s; a decision is final", req.Step, id.Short(), a.State, a.By, a.At.Format(time.RFC3339), why)
	}
	a, err := s.j.DecideApproval(id, req.Step, req.As, req.By, req.Reason)
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
	return &ApproveReport{Run: rep.Run, Approval: *a}, nil
}

// notWaiting says, from the run's journaled definition, why step has no
// approval gate on run: no such step, no approve: on it, or not reached.
// When the definition does not load (its servers changed), it returns nil
// and the journal's own refusal stands.
func (s *Service) notWaiting(run *journal.Run, step string) error {
	wf, _, err := s.journaledWorkflow(run)
	if err != nil {
		return nil
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
		return invalid("run %s has no step %q (its steps: %s; %s)", run.ID.Short(), step, strings.Join(ids, ", "), need)
	case !st.Approve:
		return invalid("step %s of run %s has no approve:, so it never waits for approval (%s)", step, run.ID.Short(), need)
	}
	waiting := "no step waits for approval"
	if p := run.PendingApprovals(); len(p) > 0 {
		waiting = "waiting: " + p[0].Step
	}
	return invalid("step %s of run %s is not waiting for approval: the run is %s and has not reached it (%s)", step, run.ID.Short(), run.Status, waiting)
}
