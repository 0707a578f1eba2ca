package postgres_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// Shorthands for the states, as the tests write them.
const (
	intent   = journal.StateIntent
	done     = journal.StateCompleted
	failed   = journal.StateFailed
	unknown  = journal.StateOutcomeUnknown
	aborted  = journal.StateAborted
	timedOut = journal.StateTimedOut
	skipped  = journal.StateSkipped
	retry    = journal.StateRetryApproved
)

func newRun(t testing.TB, j journal.Store) journal.ID {
	t.Helper()
	r := &journal.Run{Workflow: "wf", Definition: []byte("name: wf\n"), Inputs: map[string]any{"n": 1.0}, Workspace: "/ws"}
	if err := j.CreateRun(r); err != nil {
		t.Fatalf("create run: %v", err)
	}
	return r.ID
}

func begin(t testing.TB, j journal.Store, run journal.ID, server, tool string) journal.Intent {
	t.Helper()
	in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: server, Tool: tool,
		Arguments: json.RawMessage(`{"a":1}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`),
		Trust: journal.Trust{Server: true}})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return in
}

func finish(t testing.TB, j journal.Store, in journal.Intent, s journal.State) {
	t.Helper()
	o := journal.Outcome{State: s}
	if s == journal.StateCompleted {
		o.Result = &journal.Result{Content: json.RawMessage(`[]`)}
	} else {
		o.Failure, o.Error = "connection_lost", &journal.Error{Code: "X", Message: "lost"}
	}
	if err := j.Finish(in, o); err != nil {
		t.Fatalf("finish %s: %v", s, err)
	}
}

func state(t testing.TB, j journal.Store, id journal.ID) journal.State {
	t.Helper()
	inv, err := j.Invocation(id)
	if err != nil {
		t.Fatalf("invocation %s: %v", id, err)
	}
	return inv.State
}

// raw is a record as the journal returns it (get is j.Run or
// j.Invocation), as JSON: what a refused write must leave unchanged, on
// every backend.
func raw[T any](t testing.TB, get func(journal.ID) (T, error), id journal.ID) []byte {
	t.Helper()
	rec, err := get(id)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	b, _ := json.Marshal(rec)
	return b
}
