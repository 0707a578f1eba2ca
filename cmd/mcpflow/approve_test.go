package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// TestApprovalCommandsFillTheirOptions: the cobra glue of approve and
// reject only fills the options; the decision is the one thing between
// them that differs.
func TestApprovalCommandsFillTheirOptions(t *testing.T) {
	for _, tc := range []struct {
		verb string
		want journal.ApprovalState
	}{
		{"approve", journal.ApprovalApproved},
		{"reject", journal.ApprovalRejected},
	} {
		var got *approvalOptions
		runF := func(_ context.Context, o *approvalOptions) error { got = o; return nil }
		cmd := newApproveCommand(&globals{}, runF)
		if tc.verb == "reject" {
			cmd = newRejectCommand(&globals{}, runF)
		}
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"01a2375e", "deploy", "--reason", "ticket 7"})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%s: %v", tc.verb, err)
		}
		if got == nil || got.as != tc.want || got.run != "01a2375e" || got.step != "deploy" || got.reason != "ticket 7" || got.Out != &out {
			t.Errorf("%s: options %+v", tc.verb, got)
		}

		got = nil
		cmd.SetArgs([]string{"01a2375e"})
		err := cmd.Execute()
		if codeFor(err) != exitUsage || err.Error() != "give RUN_ID and STEP, as the blocked run's message names them (blocked runs: mcpflow runs list --status blocked)" || got != nil {
			t.Errorf("%s with one argument: exit %d, %v", tc.verb, codeFor(err), err)
		}
	}
}

const gatesWorkflow = `name: gates
servers:
  demo: {builtin: demo}
steps:
  - {id: build, server: demo, tool: greet, with: {name: build}}
  - {id: deploy, server: demo, tool: ledger_append, approve: "Append the release?", with: {entry: "release 1.0"}}
  - {id: announce, server: demo, tool: greet, approve: true, with: {name: "row ${{ steps.deploy.structuredContent.row }}"}}
`

// TestApproveThroughServerProcess: with `mcpflow server` running, an
// approval through its API continues the run there (no resume), and so
// does `mcpflow approve`, a client of it; a gate further on approved in
// advance through the API is passed without stopping.
func TestApproveThroughServerProcess(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.workflow("gates.yaml", gatesWorkflow)
	base := startServer(t, c)
	post := func(path, body string, out any) int {
		t.Helper()
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("POST %s: %d, %v", path, res.StatusCode, err)
		}
		return res.StatusCode
	}
	submitGates := func() string {
		t.Helper()
		var started struct{ Run string }
		if code := post("/api/runs", `{"file": "gates.yaml"}`, &started); code != http.StatusAccepted {
			t.Fatalf("submit: %d", code)
		}
		waitBlocked(t, base, started.Run)
		return started.Run
	}
	type decided struct {
		State     string `json:"state"`
		InAdvance bool   `json:"in_advance"`
		Continued bool   `json:"continued"`
	}
	// waitSteps waits until run has n steps journaled and is status.
	waitSteps := func(run, status string, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, steps := apiRun(t, base, run)
			if got == status && len(steps) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s: %s with %d steps, want %s with %d", run, got, len(steps), status, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Through the API: the first gate approved, the run goes on in the
	// server to the second; `mcpflow approve` approves that one and
	// follows the run to its end.
	run := submitGates()
	var d decided
	if code := post("/api/runs/"+run+"/approve", `{"step": "deploy", "reason": "change 4711"}`, &d); code != http.StatusOK || !d.Continued || d.State != "approved" {
		t.Fatalf("approve deploy: %d %+v", code, d)
	}
	waitSteps(run, "blocked", 2)
	r := c.run("approve", run, "announce")
	if r.code != 0 || !strings.Contains(r.stdout, "step announce of run "+run[:18]+" approved by ") ||
		!regexp.MustCompile(`(?m)^step announce +completed +demo/greet .*Hello, row 2!`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "run "+run+" succeeded") {
		t.Fatalf("mcpflow approve through the server: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitSteps(run, "succeeded", 3)

	// In advance: the later gate, then the first; the run goes through
	// both, the ledger written once.
	run = submitGates()
	if code := post("/api/runs/"+run+"/approve", `{"step": "announce"}`, &d); code != http.StatusOK || d.Continued || !d.InAdvance {
		t.Fatalf("approve announce in advance: %d %+v", code, d)
	}
	waitSteps(run, "blocked", 1)
	if code := post("/api/runs/"+run+"/approve", `{"step": "deploy"}`, &d); code != http.StatusOK || !d.Continued || d.InAdvance {
		t.Fatalf("approve deploy: %d %+v", code, d)
	}
	waitSteps(run, "succeeded", 3)
	if n := c.ledgerCount("ledger_append"); n != 2 {
		t.Errorf("%d ledger_append rows, want 2: one a run", n)
	}
}
