package service_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/service"
)

const gated = `name: gated
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: ship, server: demo, tool: ledger_append, approve: "Append to the ledger?", with: {entry: shipped}}
  - {id: later, server: demo, tool: greet, approve: true, with: {name: Bo}}
  - {id: never, server: demo, tool: greet, approve: true, if: "false"}
`

func TestDecideChecksTheStep(t *testing.T) {
	r := newRig(t)
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("gated.yaml", gated)})
	if err != nil {
		t.Fatal(err)
	}
	run, short := rep.Run.ID.String(), rep.Run.ID.Short()
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
		{"a typo", service.ApproveRequest{Run: run[:8], Step: "shipp"}, `run ` + short + ` has no step "shipp" (did you mean "ship"? steps with approve: ship, later, never)`},
		{"unknown step", service.ApproveRequest{Run: run[:8], Step: "deploy"}, `has no step "deploy" (its steps: greet, ship, later, never; steps with approve: ship, later, never)`},
		{"no approve:", service.ApproveRequest{Run: run, Step: "greet"}, "step greet of run " + short + " has no approve:, so it never waits for approval (steps with approve: ship, later, never)"},
	} {
		req := tc.req
		req.As, req.By = journal.ApprovalApproved, "op"
		_, err := r.svc.Decide(req)
		if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	got, err := r.svc.Decide(service.ApproveRequest{Run: run[:13], Step: "ship", As: journal.ApprovalApproved, By: "op", Reason: "ticket 7"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Approval.State != journal.ApprovalApproved || got.Approval.InAdvance || got.Approval.By != "op" || got.Approval.Reason != "ticket 7" ||
		got.Run.Approval("ship") == nil || !got.Continues || got.Continued != nil {
		t.Fatalf("decision %+v", got)
	}
	_, err = r.svc.Decide(service.ApproveRequest{Run: run, Step: "ship", As: journal.ApprovalRejected, By: "other"})
	if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "step ship of run "+short+" was already approved by op at ") {
		t.Errorf("second decision: %v", err)
	}

	// Decided records only: Resume runs the approved step and stops at
	// the next gate, which a rejection fails.
	rep, err = r.svc.Resume(t.Context(), service.ResumeRequest{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Status != journal.RunBlocked || rep.Run.Error.Message != "step later waits for approval" || len(r.ledger()) != 2 {
		t.Fatalf("after approval: %s %v, %d ledger rows", rep.Run.Status, rep.Run.Error, len(r.ledger()))
	}
	if _, err := r.svc.Decide(service.ApproveRequest{Run: run, Step: "later", As: journal.ApprovalRejected, By: "op"}); err != nil {
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

// Local.Approve continues the run a decision leaves nothing to wait for:
// two gates, two approvals, no resume; a gate further on approved in
// advance is passed without stopping; NoContinue only records.
func TestApproveContinuesTheRun(t *testing.T) {
	r := newRig(t)
	l := &service.Local{Service: r.svc}
	approve := func(run, step string, as journal.ApprovalState, noContinue bool) *service.ApproveReport {
		t.Helper()
		var decided, started atomic.Bool
		rep, err := l.Approve(t.Context(), service.ApproveRequest{Run: run, Step: step, As: as, By: "op", NoContinue: noContinue,
			Decided: func(*service.ApproveReport) { decided.Store(true) },
			Events: func(ev engine.Event) {
				if !decided.Load() {
					t.Errorf("event %v before the decision was handed over", ev.Kind)
				}
				if ev.Kind == engine.RunStarted {
					started.Store(true)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if (rep.Continued != nil) != started.Load() {
			t.Errorf("continued %v, but events say started %v", rep.Continued != nil, started.Load())
		}
		return rep
	}
	start := func() string {
		t.Helper()
		rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("gated.yaml", gated)})
		if err != nil || rep.Run.Status != journal.RunBlocked {
			t.Fatalf("run: %v %v", rep, err)
		}
		return rep.Run.ID.String()
	}

	// Two gates: each approval runs the run on to the next one, then to
	// its end.
	run := start()
	got := approve(run, "ship", journal.ApprovalApproved, false)
	if c := got.Continued; !got.Continues || c == nil || c.Run.Status != journal.RunBlocked || c.Run.Error.Message != "step later waits for approval" {
		t.Fatalf("first approval: %+v", got)
	}
	got = approve(run, "later", journal.ApprovalApproved, false)
	if c := got.Continued; c == nil || c.Run.Status != journal.RunSucceeded || len(c.Invocations) != 4 {
		t.Fatalf("second approval: %+v", got)
	}

	// In advance: the run still waits at ship, and goes through later
	// once ship is approved.
	run = start()
	got = approve(run, "later", journal.ApprovalApproved, false)
	if a := got.Approval; !a.InAdvance || a.Reached() || got.Continues || got.Continued != nil || got.Run.Status != journal.RunBlocked {
		t.Fatalf("approval in advance: %+v", got)
	}
	if p := got.Run.PendingApprovals(); len(p) != 1 || p[0].Step != "ship" {
		t.Fatalf("pending after the approval in advance: %+v", p)
	}
	got = approve(run, "ship", journal.ApprovalApproved, false)
	if c := got.Continued; c == nil || c.Run.Status != journal.RunSucceeded {
		t.Fatalf("after approving ship: %+v", got)
	}
	if a := got.Continued.Run.Approval("later"); a == nil || !a.InAdvance || !a.Reached() || a.State != journal.ApprovalApproved {
		t.Errorf("later's gate: %+v", a)
	}
	// A step the run skipped, or one of a run that succeeded, takes no
	// decision.
	if _, err := r.svc.Decide(service.ApproveRequest{Run: run, Step: "never", As: journal.ApprovalApproved, By: "op"}); !errors.Is(err, service.ErrInvalid) ||
		!strings.Contains(err.Error(), "skipped step never (its condition was false)") {
		t.Errorf("skipped step: %v", err)
	}

	// NoContinue records; a rejection continued fails the run.
	run = start()
	got = approve(run, "ship", journal.ApprovalRejected, true)
	if !got.Continues || got.Continued != nil || got.NotContinued != nil || got.Run.Status != journal.RunBlocked {
		t.Fatalf("no continue: %+v", got)
	}
	rep, err := l.Resume(t.Context(), service.ResumeRequest{Run: run})
	if err != nil || rep.Run.Status != journal.RunFailed || rep.Run.Error.Code != engine.CodeApprovalRejected {
		t.Fatalf("resume after a rejection: %v %v", rep, err)
	}
}

// A decision that comes after the run asked for it and before the run was
// let go is seen: the run goes on, once. The operator's resume waits for
// the run to be let go; then either it continues the run, or the run's own
// request does and the operator's finds the run going (ErrRunning).
func TestRunGoesOnWhenDecidedWhileItEnds(t *testing.T) {
	r := newRig(t)
	var once atomic.Bool
	operator := make(chan error, 1)
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("gated.yaml", gated), Events: func(ev engine.Event) {
		if ev.Kind == engine.RunFinished && ev.Status == journal.RunBlocked && once.CompareAndSwap(false, true) {
			// The run is journaled blocked, and still going here.
			if _, err := r.svc.Decide(service.ApproveRequest{Run: ev.Run.String(), Step: "ship", As: journal.ApprovalApproved, By: "op"}); err != nil {
				t.Error(err)
			}
			go func() {
				_, err := r.svc.Resume(t.Context(), service.ResumeRequest{Run: ev.Run.String()})
				operator <- err
			}()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-operator; err != nil && !errors.Is(err, service.ErrRunning) {
		t.Fatalf("the operator's resume: %v", err)
	}
	got, err := r.svc.RunDetail(rep.Run.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Run.Status != journal.RunBlocked || got.Run.Error.Message != "step later waits for approval" || len(r.ledger()) != 2 {
		t.Fatalf("run %s: %v; %d ledger rows", got.Run.Status, got.Run.Error, len(r.ledger()))
	}
}

// A resume that comes while a run's end is journaled but the run is still
// going here waits for the run to be let go (on PostgreSQL, its lease
// freed), then resumes it; one that comes while the run goes is refused at
// once.
func TestResumeWaitsForARunThatEnds(t *testing.T) {
	journaltest.EachLocation(t, func(t *testing.T, location string) {
		r := newRigOn(t, location, "")
		resumeWhileItEnds(t, r, r.svc)
	})
}

// The same from another worker on the journal: its resume waits for the
// lease of the run the first worker is letting go.
func TestResumeWaitsForAnotherWorkerToLetGo(t *testing.T) {
	location := journaltest.PostgresURL(t)
	resumeWhileItEnds(t, newRigOn(t, location, "a"), newRigOn(t, location, "b").svc)
}

// resumeWhileItEnds runs a workflow on r that ends blocked at a gate, and
// resumes it through other: while its first step goes (refused at once),
// and once its end is journaled, before r lets it go (that resume must
// wait, and succeed once the run is let go).
func resumeWhileItEnds(t *testing.T, r *rig, other *service.Service) {
	var going, ending atomic.Bool
	resumed := make(chan error, 1)
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("gated.yaml", gated), Events: func(ev engine.Event) {
		switch {
		case ev.Kind == engine.StepStarted && going.CompareAndSwap(false, true):
			start := time.Now()
			if _, err := other.Resume(t.Context(), service.ResumeRequest{Run: ev.Run.String()}); !errors.Is(err, service.ErrRunning) {
				t.Errorf("resume of a run going: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("resume of a run going refused after %v: it waited", d)
			}
		case ev.Kind == engine.RunFinished && ev.Status == journal.RunBlocked && ending.CompareAndSwap(false, true):
			go func() {
				_, err := other.Resume(t.Context(), service.ResumeRequest{Run: ev.Run.String()})
				resumed <- err
			}()
			select {
			case err := <-resumed:
				t.Errorf("the resume returned while the run was not let go yet: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
		}
	}})
	if err != nil || rep.Run.Status != journal.RunBlocked || !going.Load() || !ending.Load() {
		t.Fatalf("run: %v %v", rep, err)
	}
	select {
	case err := <-resumed:
		if err != nil {
			t.Fatalf("the resume once the run was let go: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the resume still waits after the run was let go")
	}
}

// A resume whose context ends while it waits for a run to be let go says
// so, as an interruption: it did not resume the run.
func TestResumeStoppedWhileItWaits(t *testing.T) {
	r := newRig(t)
	var once atomic.Bool
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("gated.yaml", gated), Events: func(ev engine.Event) {
		if ev.Kind != engine.RunFinished || ev.Status != journal.RunBlocked || !once.CompareAndSwap(false, true) {
			return
		}
		ctx, cancel := context.WithCancel(t.Context())
		resumed := make(chan error, 1)
		go func() {
			_, err := r.svc.Resume(ctx, service.ResumeRequest{Run: ev.Run.String()})
			resumed <- err
		}()
		time.Sleep(100 * time.Millisecond) // it waits: the run is let go only once this returns
		cancel()
		select {
		case err := <-resumed:
			if !errors.Is(err, context.Canceled) || service.CodeOf(err).Name != "interrupted" || !strings.Contains(err.Error(), "stopped while it waited") {
				t.Errorf("resume stopped while it waited: %v (%s)", err, service.CodeOf(err).Name)
			}
		case <-time.After(5 * time.Second):
			t.Error("the resume did not stop with its context")
		}
	}})
	if err != nil || rep.Run.Status != journal.RunBlocked || !once.Load() {
		t.Fatalf("run: %v %v", rep, err)
	}
}

// Release leaves a run going here: its lease stays this worker's, and
// another worker's resume is refused.
func TestReleaseLeavesARunGoingHere(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a, b := newRigOn(t, location, "a"), newRigOn(t, location, "b")
	var asked atomic.Bool
	rep, err := a.svc.Run(t.Context(), service.RunRequest{File: a.workflow("hello.yaml", hello), Events: func(ev engine.Event) {
		if ev.Kind == engine.StepStarted && asked.CompareAndSwap(false, true) {
			a.svc.Release(ev.Run)
			if _, err := b.svc.Resume(t.Context(), service.ResumeRequest{Run: ev.Run.String()}); !errors.Is(err, service.ErrRunning) {
				t.Errorf("another worker's resume of a run going here, after Release: %v", err)
			}
		}
	}})
	if err != nil || !asked.Load() || rep.Run.Status != journal.RunSucceeded {
		t.Fatalf("run: %v %v", rep, err)
	}
}
