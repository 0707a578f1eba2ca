package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
)

const twoGates = `name: gates
servers:
  demo: {builtin: demo}
steps:
  - {id: build, server: demo, tool: greet, with: {name: build}}
  - {id: deploy, server: demo, tool: greet, approve: "Roll out?", with: {name: deploy}}
  - {id: announce, server: demo, tool: greet, approve: true, with: {name: announce}}
`

// POST /api/runs/{id}/approve continues the run in the server: two gates,
// two approvals, no resume; a gate further on approved in advance; the
// decision on the event stream; no_continue only records.
func TestAPIApproveContinuesTheRun(t *testing.T) {
	r := newRig(t, &httpapi.Options{By: "alice"})
	r.workflow("gates.yaml", twoGates)
	submit := func() string {
		t.Helper()
		var started api.Started
		if code := r.do("POST", "/api/runs", map[string]any{"file": "gates.yaml"}, &started); code != http.StatusAccepted {
			t.Fatalf("submit: %d", code)
		}
		r.waitStatus(started.Run, journal.RunBlocked)
		return started.Run
	}
	decide := func(run string, body api.DecisionRequest) api.Decided {
		t.Helper()
		var d api.Decided
		if code := r.do("POST", "/api/runs/"+run+"/approve", body, &d); code != http.StatusOK {
			t.Fatalf("approve %s: %d", body.Step, code)
		}
		return d
	}

	run := submit()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	decisions := make(chan api.Event, 4)
	subscribed := make(chan struct{})
	go r.sse(ctx, "/api/runs/"+run+"/events", subscribed, func(e api.Event) bool {
		if e.Kind == api.EventApproval {
			decisions <- e
		}
		return true
	})
	<-subscribed

	if d := decide(run, api.DecisionRequest{Step: "deploy", Reason: "ticket 7"}); !d.Continued || d.NotContinued != nil || d.State != "approved" || d.By != "alice" || d.InAdvance {
		t.Fatalf("first approval: %+v", d)
	}
	select {
	case e := <-decisions:
		if e.Run != run || e.Step != "deploy" || e.State != "approved" || e.Text != "ticket 7" {
			t.Errorf("decision event %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("no decision on the event stream")
	}
	if rep := r.waitStatus(run, journal.RunBlocked); rep.Run.Error.Message != "step announce waits for approval" {
		t.Fatalf("after the first approval: %v", rep.Run.Error)
	}
	decide(run, api.DecisionRequest{Step: "announce"})
	if rep := r.waitStatus(run, journal.RunSucceeded); len(rep.Invocations) != 3 {
		t.Fatalf("after the second approval: %d invocations", len(rep.Invocations))
	}

	// In advance: recorded, the run still waits at deploy; approving
	// deploy takes it through announce to its end.
	run = submit()
	d := decide(run, api.DecisionRequest{Step: "announce"})
	if d.Continued || !d.InAdvance || d.RequestedAt != nil || d.At == nil {
		t.Fatalf("approval in advance: %+v", d)
	}
	if rep := r.waitStatus(run, journal.RunBlocked); len(rep.Run.PendingApprovals()) != 1 {
		t.Fatalf("after the approval in advance: %+v", rep.Run.Approvals)
	}
	decide(run, api.DecisionRequest{Step: "deploy"})
	rep := r.waitStatus(run, journal.RunSucceeded)
	if a := rep.Run.Approval("announce"); a == nil || !a.InAdvance || !a.Reached() {
		t.Errorf("announce's gate: %+v", a)
	}

	// no_continue records only; a typo is refused with the closest step.
	run = submit()
	if d := decide(run, api.DecisionRequest{Step: "deploy", NoContinue: true}); d.Continued {
		t.Fatalf("no_continue: %+v", d)
	}
	if rep := r.waitStatus(run, journal.RunBlocked); len(rep.Invocations) != 1 {
		t.Fatalf("after no_continue: %d invocations", len(rep.Invocations))
	}
	var e api.Error
	if code := r.do("POST", "/api/runs/"+run+"/approve", api.DecisionRequest{Step: "anounce"}, &e); code != http.StatusBadRequest ||
		e.Error.Code != "invalid" || !strings.Contains(e.Error.Message, `has no step "anounce" (did you mean "announce"?`) {
		t.Errorf("a typo: %d %+v", code, e)
	}
}
