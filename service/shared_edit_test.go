package service_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
)

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
