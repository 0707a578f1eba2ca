package service_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
)

// Runs of a server whose entry says sessions: share its session: the
// first run leaves it open for the next, and only Close stops it. An
// entry without it is stopped with its run.
func TestRunsShareSessions(t *testing.T) {
	r := newRig(t)
	base := upstream.ActiveSessions()
	shared := r.workflow("shared.yaml", `name: shared
servers:
  demo: {builtin: demo, sessions: 1}
steps:
  - id: greet
    server: demo
    tool: greet
    with: {name: Ada}
`)
	for i := range 2 {
		rep, err := r.svc.Run(t.Context(), service.RunRequest{File: shared})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Run.Status != journal.RunSucceeded {
			t.Fatalf("run %d: %s", i, rep.Run.Status)
		}
		if n := upstream.ActiveSessions() - base; n != 1 {
			t.Errorf("after run %d: %d sessions open, want the one shared", i, n)
		}
	}
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("hello.yaml", hello)})
	if err != nil || rep.Run.Status != journal.RunSucceeded {
		t.Fatalf("run of an entry without sessions: %v %v", rep, err)
	}
	if n := upstream.ActiveSessions() - base; n != 1 {
		t.Errorf("a run's own session outlived it: %d sessions open, want 1", n)
	}
	if err := r.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if n := upstream.ActiveSessions() - base; n != 0 {
		t.Errorf("after Close: %d sessions open", n)
	}
}

// TestSharedSessionsSurviveAnEdit: runs share a server's sessions by the
// entry, not by where it was read: a workflow edited between runs (a
// comment line moves the entry), or another workflow with the same entry,
// uses the sessions already open instead of leaving them idle until the
// service closes.
func TestSharedSessionsSurviveAnEdit(t *testing.T) {
	r := newRig(t)
	base := upstream.ActiveSessions()
	src := `name: shared
servers:
  demo: {builtin: demo, sessions: 1}
steps:
  - id: greet
    server: demo
    tool: greet
    with: {name: Ada}
`
	for i := range 4 {
		f := r.workflow("shared.yaml", src)
		rep, err := r.svc.Run(t.Context(), service.RunRequest{File: f})
		if err != nil || rep.Run.Status != journal.RunSucceeded {
			t.Fatalf("run %d: %v %v", i, rep, err)
		}
		src = "# edited\n" + src
	}
	if n := upstream.ActiveSessions() - base; n != 1 {
		t.Errorf("after 4 runs of one workflow edited between runs (sessions: 1): %d sessions open", n)
	}
	// The same entry, written in two workflow files.
	other := r.workflow("other.yaml", "name: other\nservers:\n  demo: {builtin: demo, sessions: 1}\nsteps:\n  - {id: greet, server: demo, tool: greet, with: {name: Ada}}\n")
	before := upstream.ActiveSessions()
	if rep, err := r.svc.Run(t.Context(), service.RunRequest{File: other}); err != nil || rep.Run.Status != journal.RunSucceeded {
		t.Fatal(err)
	}
	if n := upstream.ActiveSessions() - before; n != 0 {
		t.Errorf("another workflow with the same entry opened %d more sessions, want none", n)
	}
}
