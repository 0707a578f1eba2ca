package service_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/service"
)

// TestResumeRunsARunBlockedForALogin: a run blocked because a server
// wanted a login is not waiting for an operator's decision: Resume runs it
// again — unlike a run waiting at an approval gate or for answers — and
// ends there, without going on in a loop. Blocked before its first call
// (nothing journaled) the step starts afresh; blocked at a call the server
// refused (as the engine journals it: not delivered, with the decision to
// send it again) the call is sent once more. The demo server stands for
// the server once logged in; its ledger counts what ran.
func TestResumeRunsARunBlockedForALogin(t *testing.T) {
	for _, refused := range []bool{false, true} {
		name := "at connect"
		if refused {
			name = "at the call"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			j, err := r.svc.Journal()
			if err != nil {
				t.Fatal(err)
			}
			run := &journal.Run{Workflow: "hello", Definition: []byte(hello), Source: r.workflow("hello.yaml", hello), Workspace: r.workspace}
			if err := j.CreateRun(run); err != nil {
				t.Fatal(err)
			}
			id := run.ID
			if refused {
				in, err := j.Begin(&journal.Invocation{RunID: id, Step: "greet", Item: -1, Server: "demo", Tool: "greet",
					Method: journal.MethodCall, Arguments: json.RawMessage(`{"name":"Ada"}`)})
				if err != nil {
					t.Fatal(err)
				}
				o := journal.Outcome{State: journal.StateIntent, Failure: replay.ClassNotDelivered, Detail: "rejected by transport: 401",
					Decision: &journal.Decision{Verdict: verdict.FirstDelivery, Reason: string(replay.ReasonNotDelivered), View: verdict.SendTime}}
				if err := j.Finish(in, o); err != nil {
					t.Fatal(err)
				}
			}
			login := &journal.Error{Code: engine.CodeLoginRequired, Message: `step greet: server "demo" needs a login (none is stored): run mcpflow servers login demo, then mcpflow resume`}
			if _, err := j.EndRun(id, journal.RunBlocked, login, nil); err != nil {
				t.Fatal(err)
			}
			ids, err := r.svc.Resumable()
			if err != nil || len(ids) != 1 || ids[0] != id {
				t.Fatalf("resumable %v, %v, want the blocked run", ids, err)
			}

			rep, err := r.svc.Resume(t.Context(), service.ResumeRequest{Run: id.Short()})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Acted || rep.Run.Status != journal.RunSucceeded {
				t.Fatalf("resume: acted %v, run %s %v, want it run to success", rep.Acted, rep.Run.Status, rep.Run.Error)
			}
			if n := len(r.ledger()); n != 2 {
				t.Errorf("%d executions, want 2: each step once", n)
			}
			greet := rep.Invocations[0]
			want := []journal.AttemptKind{journal.KindFirst}
			if refused {
				want = append(want, journal.KindFirstDelivery)
			}
			if greet.Step != "greet" || greet.State != journal.StateCompleted || len(greet.Attempts) != len(want) || greet.LastAttempt().Kind != want[len(want)-1] {
				t.Errorf("step greet: %s with attempts %+v, want completed, sent as %v", greet.State, greet.Attempts, want)
			}
		})
	}
}
