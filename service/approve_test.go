package service_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

const gated = `name: gated
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: ship, server: demo, tool: ledger_append, approve: "Append to the ledger?", with: {entry: shipped}}
  - {id: later, server: demo, tool: greet, approve: true, with: {name: Bo}}
`

func TestApproveThenResume(t *testing.T) {
	r := newRig(t)
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("gated.yaml", gated)})
	if err != nil {
		t.Fatal(err)
	}
	run := rep.Run.ID.String()
	// Every execution is a ledger row: greet ran, ship did not.
	if rep.Run.Status != journal.RunBlocked || len(rep.Invocations) != 1 || len(r.ledger()) != 1 {
		t.Fatalf("run %s with %d invocations, %d ledger rows", rep.Run.Status, len(rep.Invocations), len(r.ledger()))
	}
	for _, tc := range []struct {
		name string
		req  service.ApproveRequest
		want string
	}{
		{"unknown run", service.ApproveRequest{Run: "ffff", Step: "ship"}, `run "ffff": not found`},
		{"unknown step", service.ApproveRequest{Run: run[:8], Step: "shipp"}, `has no step "shipp" (its steps: greet, ship, later; steps with approve: ship, later)`},
		{"no approve:", service.ApproveRequest{Run: run, Step: "greet"}, "step greet of run " + rep.Run.ID.Short() + " has no approve:, so it never waits for approval (steps with approve: ship, later)"},
		{"not reached", service.ApproveRequest{Run: run, Step: "later"}, "step later of run " + rep.Run.ID.Short() + " is not waiting for approval: the run is blocked and has not reached it (waiting: ship)"},
	} {
		req := tc.req
		req.As, req.By = journal.ApprovalApproved, "op"
		_, err := r.svc.Approve(req)
		if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	got, err := r.svc.Approve(service.ApproveRequest{Run: run[:13], Step: "ship", As: journal.ApprovalApproved, By: "op", Reason: "ticket 7"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Approval.State != journal.ApprovalApproved || got.Approval.By != "op" || got.Approval.Reason != "ticket 7" || got.Run.Approval("ship") == nil {
		t.Fatalf("approval %+v", got.Approval)
	}
	_, err = r.svc.Approve(service.ApproveRequest{Run: run, Step: "ship", As: journal.ApprovalRejected, By: "other"})
	if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "step ship of run "+rep.Run.ID.Short()+" was already approved by op at ") {
		t.Errorf("second decision: %v", err)
	}

	// Resume runs the approved step and stops at the next gate.
	rep, err = r.svc.Resume(t.Context(), service.ResumeRequest{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Status != journal.RunBlocked || rep.Run.Error.Message != "step later waits for approval" || len(r.ledger()) != 2 {
		t.Fatalf("after approval: %s %v, %d ledger rows", rep.Run.Status, rep.Run.Error, len(r.ledger()))
	}
	if _, err := r.svc.Approve(service.ApproveRequest{Run: run, Step: "later", As: journal.ApprovalRejected, By: "op"}); err != nil {
		t.Fatal(err)
	}
	rep, err = r.svc.Resume(t.Context(), service.ResumeRequest{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Status != journal.RunFailed || rep.Run.Error.Code != "MCPFLOW_APPROVAL_REJECTED" || len(rep.Invocations) != 2 || len(r.ledger()) != 2 {
		t.Fatalf("after rejection: %s %v, %d invocations, %d ledger rows", rep.Run.Status, rep.Run.Error, len(rep.Invocations), len(r.ledger()))
	}
}
