package service

import (
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
)

// A workflow loaded from the same text against the same servers is the
// one loaded before; another text, or other servers, loads afresh.
func TestLoadedWorkflowsAreShared(t *testing.T) {
	var l loaded
	src := []byte("name: wf\nsteps:\n  - {id: a, server: demo, tool: greet, with: {name: Ada}}\n")
	set := func(trust bool) upstream.Set {
		return upstream.Set{"demo": {Name: "demo", Builtin: "demo", Trust: trust}}
	}
	first, err := l.load("wf.yaml", src, set(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		file   string
		src    []byte
		set    upstream.Set
		shared bool
	}{
		{"the same text and servers", "wf.yaml", src, set(true), true},
		{"another file", "other.yaml", src, set(true), false},
		{"another text", "wf.yaml", append([]byte("# edited\n"), src...), set(true), false},
		{"other servers", "wf.yaml", src, set(false), false},
	} {
		wf, err := l.load(c.file, c.src, c.set)
		if err != nil {
			t.Fatal(err)
		}
		if (wf == first) != c.shared {
			t.Errorf("%s: shared %v, want %v", c.name, wf == first, c.shared)
		}
	}
	if _, err := l.load("bad.yaml", []byte("name: [\n"), set(true)); err == nil {
		t.Fatal("a workflow that does not parse loaded")
	}
	if len(l.m) != 3 { // the load against other servers took the first's place
		t.Errorf("%d workflows kept, want 3", len(l.m))
	}
}
