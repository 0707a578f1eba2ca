package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkspaceHintForUnknownServer: a workflow run from another
// directory names a server its own directory's mcpflow.yaml defines; the
// error says where mcpflow looked and which --workspace would find it,
// and that --workspace does.
func TestWorkspaceHintForUnknownServer(t *testing.T) {
	c := newCLI(t)
	other := t.TempDir()
	c.writeFile(filepath.Join(other, "mcpflow.yaml"), "servers:\n  every: {builtin: demo}\n")
	wf := filepath.Join(other, "wf.yaml")
	c.writeFile(wf, "name: w\nsteps:\n  - {id: s, server: every, tool: greet, with: {name: Ada}}\n")
	for _, cmd := range [][]string{{"run", wf}, {"validate", wf}} {
		r := c.run(cmd...)
		for _, want := range []string{
			`unknown server "every"`,
			"servers were looked for in the workspace " + c.workspace + ", which has no mcpflow.yaml",
			"the workflow is in " + other + ", which has its own mcpflow.yaml: to use it, pass --workspace " + other,
		} {
			if r.code != exitUsage || !strings.Contains(r.stderr, want) {
				t.Errorf("%s: exit %d, want 2 saying %q\n%s", cmd[0], r.code, want, r.stderr)
			}
		}
	}
	if r := c.run("run", wf, "--workspace", other); r.code != 0 || !strings.Contains(r.stdout, "Hello, Ada!") {
		t.Errorf("run --workspace %s: exit %d\n%s%s", other, r.code, r.stdout, r.stderr)
	}
	// What was read is named when there was something to read.
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), "servers:\n  demo: {builtin: demo}\n")
	r := c.run("run", wf)
	if want := "servers were looked for in the workspace " + c.workspace + ", in: " + filepath.Join(c.workspace, "mcpflow.yaml"); !strings.Contains(r.stderr, want) {
		t.Errorf("run: want %q\n%s", want, r.stderr)
	}
}
