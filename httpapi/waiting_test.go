package httpapi_test

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

// A run that waits for a person with its call ended — at an approval
// gate, or on a question its server asked by ending the call
// (input_required) — is only its journal's records: once it is blocked,
// the server holds no goroutine for it (issue 36, runs that wait cost
// little). The runs page then lists them, counted.
func TestBlockedRunsHoldNoGoroutine(t *testing.T) {
	r := newRig(t, nil)
	r.workflow("gate.yaml", `name: gate
servers:
  demo: {builtin: demo}
steps:
  - {id: deploy, approve: "Deploy?", server: demo, tool: greet, with: {name: x}}
`)
	r.workflow("question.yaml", `name: question
servers:
  demo: {builtin: demo}
steps:
  - {id: pay, server: demo, tool: transfer, with: {amount: 25, to: acme}}
`)
	submit := func(file string) string {
		t.Helper()
		var started api.Started
		if code := r.do("POST", "/api/runs", map[string]any{"file": file}, &started); code != http.StatusAccepted {
			t.Fatalf("submit %s: %d", file, code)
		}
		return started.Run
	}
	// One of each first: the connections and the server's own goroutines
	// are there before the count.
	for _, f := range []string{"gate.yaml", "question.yaml"} {
		r.waitStatus(submit(f), journal.RunBlocked)
	}
	before := settledGoroutines(0)

	var runs []string
	for i := range 24 {
		runs = append(runs, submit(map[bool]string{true: "question.yaml", false: "gate.yaml"}[i%4 == 3]))
	}
	for _, run := range runs {
		rep := r.waitStatus(run, journal.RunBlocked)
		want := map[string]string{"gate": "MCPFLOW_APPROVAL_REQUIRED", "question": "MCPFLOW_INPUT_REQUIRED"}[rep.Run.Workflow]
		if rep.Run.Error == nil || rep.Run.Error.Code != want {
			t.Fatalf("run %s of %s: error %+v, want %s", run, rep.Run.Workflow, rep.Run.Error, want)
		}
	}
	if after := settledGoroutines(before); after > before+2 {
		t.Errorf("%d goroutines with 26 runs waiting, %d with 2: a blocked run holds goroutines", after, before)
	}

	var list api.RunList
	if code := r.do("GET", "/api/runs?status=blocked&limit=10&count=1", nil, &list); code != http.StatusOK {
		t.Fatalf("runs page: %d", code)
	}
	if len(list.Runs) != 10 || list.Total == nil || list.Total.N != 26 || list.NextCursor == nil {
		t.Errorf("runs page: %d runs, total %s, next %v; want 10 of 26 and a cursor", len(list.Runs), countOf(list.Total), list.NextCursor)
	}
}

// settledGoroutines is how many goroutines there are once what ended is
// gone: it waits, up to a few seconds, for the count to come down to want
// (0: for it to stay the same for a moment).
func settledGoroutines(want int) int {
	n, deadline := runtime.NumGoroutine(), time.Now().Add(5*time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if (want > 0 && m <= want) || (want == 0 && m == n) {
			return m
		}
		n = m
	}
	return n
}

func countOf(c *api.Count) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%d (more: %v)", c.N, c.More)
}
