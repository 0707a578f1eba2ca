package workflow_test

import (
	"slices"
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// TestWorkflowRoots: a workflow's roots: go to every server it can use
// whose entry has none, the workspace's servers included; an entry's own
// roots (even none) win; without roots: the entries are left as they are.
func TestWorkflowRoots(t *testing.T) {
	external := upstream.Set{
		"shared": {Name: "shared", Builtin: "demo"},
		"pinned": {Name: "pinned", Builtin: "demo", Roots: []string{"/srv"}},
	}
	src := []byte(`name: w
servers:
  own: {builtin: demo}
  closed: {builtin: demo, roots: []}
roots: [data, reports]
steps:
  - {id: a, server: own, tool: t}
`)
	wf, err := workflow.Load("wf.yaml", src, external)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wf.Roots, []string{"data", "reports"}) {
		t.Errorf("wf.Roots = %q", wf.Roots)
	}
	for name, want := range map[string][]string{
		"shared": {"data", "reports"},
		"own":    {"data", "reports"},
		"pinned": {"/srv"},
		"closed": {},
	} {
		if got := wf.Servers[name].Roots; got == nil || !slices.Equal(got, want) {
			t.Errorf("server %s: roots %#v, want %#v", name, got, want)
		}
	}
	if wf.Own["own"] != wf.Servers["own"] {
		t.Error("the workflow's own entry and the one steps use differ")
	}
	if external["shared"].Roots != nil {
		t.Errorf("the external entry changed: %q", external["shared"].Roots)
	}

	wf, err = workflow.Load("wf.yaml", []byte("name: w\nroots: []\nservers: {own: {builtin: demo}}\nsteps: [{id: a, server: own, tool: t}]\n"), external)
	if err != nil {
		t.Fatal(err)
	}
	if r := wf.Servers["own"].Roots; r == nil || len(r) != 0 || wf.Servers["shared"].Roots == nil {
		t.Errorf("roots: [] gave own %#v, shared %#v; want none declared for both", r, wf.Servers["shared"].Roots)
	}

	wf, err = workflow.Load("wf.yaml", []byte("name: w\nsteps: [{id: a, server: shared, tool: t}]\n"), external)
	if err != nil {
		t.Fatal(err)
	}
	if wf.Roots != nil || wf.Servers["shared"] != external["shared"] {
		t.Errorf("no roots: changed the servers (%q)", wf.Roots)
	}
}
