package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// npmServer returns node and the entry point of an MCP server pinned in
// examples/npm (installed there by `npm ci`), to start it over stdio
// without npx. Without node or the install the test is skipped locally and
// fails in CI, where .ci/run installs both.
func npmServer(t *testing.T, pkg, entry string) (node, script string) {
	t.Helper()
	script = abs(t, repoFile("examples", "npm", "node_modules", "@modelcontextprotocol", pkg, entry))
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and examples/npm/node_modules are needed (.ci/run installs them with npm ci): %v", err)
		}
		t.Skipf("needs node and `cd examples/npm && npm ci`: %v", err)
	}
	return node, script
}

// texts is the text of each content block of a journaled result.
func texts(t *testing.T, r *journal.Result) string {
	t.Helper()
	if r == nil {
		return ""
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(r.Content, &blocks); err != nil {
		t.Fatalf("content %s: %v", r.Content, err)
	}
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return strings.Join(out, "\n")
}

// runRootsWorkflow runs src in c's workspace and returns the journaled
// result of each step, by step id.
func runRootsWorkflow(t *testing.T, c *cli, src string) map[string]*journal.Result {
	t.Helper()
	r := c.run("run", c.workflow("roots.yaml", src))
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	j := c.openJournal()
	defer j.Close()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s", run.Status)
	}
	out := map[string]*journal.Result{}
	for _, inv := range invs {
		if inv.State != journal.StateCompleted {
			t.Fatalf("step %s: %s", inv.Step, inv.State)
		}
		out[inv.Step] = inv.Result
	}
	return out
}

// TestRootsConfineFilesystem: the reference filesystem server, started
// without directory arguments, is confined to the workspace — the root
// mcpflow declares by default: a file in the workspace reads, one in a
// directory beside it does not. With roots: [] it reads nothing.
func TestRootsConfineFilesystem(t *testing.T) {
	t.Parallel()
	node, script := npmServer(t, "server-filesystem", "dist/index.js")
	c := newCLI(t)
	outside := t.TempDir() // beside the workspace, under the same parent
	c.writeFile(filepath.Join(outside, "secret.txt"), "not for the server")
	c.writeFile(filepath.Join(c.workspace, "data", "note.txt"), "inside the workspace")
	workflow := func(roots string) string {
		return fmt.Sprintf(`name: roots
servers:
  files:
    command: %q
    args: [%q]
    env: {%s: %q}
%ssteps:
  - {id: allowed, server: files, tool: list_allowed_directories}
  - {id: inside, server: files, tool: read_text_file, with: {path: data/note.txt}, continue_on_error: true}
  - {id: inside_abs, server: files, tool: read_text_file, with: {path: %q}, continue_on_error: true}
  - {id: outside, server: files, tool: read_text_file, with: {path: %q}, continue_on_error: true}
`, node, script, tagEnv, c.tag, roots, filepath.Join(c.workspace, "data", "note.txt"), filepath.Join(outside, "secret.txt"))
	}

	res := runRootsWorkflow(t, c, workflow(""))
	if got := texts(t, res["allowed"]); !strings.Contains(got, c.workspace) || strings.Contains(got, outside) {
		t.Errorf("allowed directories: %q, want the workspace %s only", got, c.workspace)
	}
	for _, step := range []string{"inside", "inside_abs"} {
		if got := texts(t, res[step]); res[step].IsError || got != "inside the workspace" {
			t.Errorf("%s: isError %v, %q; want the note", step, res[step].IsError, got)
		}
	}
	if got := texts(t, res["outside"]); !res["outside"].IsError || !strings.Contains(got, "Access denied") || strings.Contains(got, "not for the server") {
		t.Errorf("outside: isError %v, %q; want access denied", res["outside"].IsError, got)
	}

	// roots: [] declares none: the server, which has no directory of its
	// own either, refuses every path.
	c = newCLI(t)
	c.writeFile(filepath.Join(c.workspace, "data", "note.txt"), "inside the workspace")
	res = runRootsWorkflow(t, c, workflow("roots: []\n"))
	for _, step := range []string{"inside", "inside_abs", "outside"} {
		if got := texts(t, res[step]); !res[step].IsError || !strings.Contains(got, "Access denied") {
			t.Errorf("roots: []: %s: isError %v, %q; want access denied", step, res[step].IsError, got)
		}
	}
}

// TestRootsEverything: server-everything's get-roots-list reports what
// the server was told: the workspace by default, the workflow's roots:
// when it has them, an entry's own over both.
func TestRootsEverything(t *testing.T) {
	t.Parallel()
	node, script := npmServer(t, "server-everything", "dist/index.js")
	c := newCLI(t)
	c.writeFile(filepath.Join(c.workspace, "reports", "r.txt"), "")
	c.writeFile(filepath.Join(c.workspace, "mine", "m.txt"), "")
	res := runRootsWorkflow(t, c, fmt.Sprintf(`name: roots
servers:
  everything:
    command: %[1]q
    args: [%[2]q, stdio]
    env: {%[3]s: %[4]q}
  narrowed:
    command: %[1]q
    args: [%[2]q, stdio]
    env: {%[3]s: %[4]q}
    roots: [mine]
steps:
  - {id: roots, server: everything, tool: get-roots-list}
`, node, script, tagEnv, c.tag))
	want := "1. workspace\n   URI: file://" + c.workspace + "\n"
	if got := texts(t, res["roots"]); !strings.Contains(got, "Current MCP Roots (1 total)") || !strings.Contains(got, want) {
		t.Errorf("get-roots-list: %q, want the workspace:\n%s", got, want)
	}

	c = newCLI(t)
	c.writeFile(filepath.Join(c.workspace, "reports", "r.txt"), "")
	c.writeFile(filepath.Join(c.workspace, "mine", "m.txt"), "")
	res = runRootsWorkflow(t, c, fmt.Sprintf(`name: roots
roots: [reports]
servers:
  everything:
    command: %[1]q
    args: [%[2]q, stdio]
    env: {%[3]s: %[4]q}
  narrowed:
    command: %[1]q
    args: [%[2]q, stdio]
    env: {%[3]s: %[4]q}
    roots: [mine]
steps:
  - {id: workflow, server: everything, tool: get-roots-list}
  - {id: entry, server: narrowed, tool: get-roots-list}
`, node, script, tagEnv, c.tag))
	for step, want := range map[string]string{
		"workflow": "1. reports\n   URI: file://" + filepath.Join(c.workspace, "reports") + "\n",
		"entry":    "1. mine\n   URI: file://" + filepath.Join(c.workspace, "mine") + "\n",
	} {
		if got := texts(t, res[step]); !strings.Contains(got, "(1 total)") || !strings.Contains(got, want) {
			t.Errorf("%s: get-roots-list: %q, want\n%s", step, got, want)
		}
	}
}

// TestRootsNotADirectory: a root that is not a directory is found by
// validate, and stops a run before the server starts, naming where the
// root is written.
func TestRootsNotADirectory(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writeFile(filepath.Join(c.workspace, "notes.txt"), "")
	wf := c.workflow("roots.yaml", `name: roots
roots: [notes.txt]
servers:
  demo: {builtin: demo}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: x}}
`)
	want := wf + `:2:9: server demo: roots[0]: ` + filepath.Join(c.workspace, "notes.txt") + " is not a directory (expected a directory, not a file)"
	r := c.run("validate", wf)
	if r.code != exitUsage || r.stderr != "mcpflow: "+want+"\n" {
		t.Errorf("validate: exit %d\nstdout:\n%s\nstderr:\n%s\nwant %q", r.code, r.stdout, r.stderr, want)
	}
	r = c.run("run", wf)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("run: exit %d\nstdout:\n%s\nstderr:\n%s\nwant %q", r.code, r.stdout, r.stderr, want)
	}
	if n := c.ledgerCount("greet"); n != 0 {
		t.Errorf("the demo server ran greet %d times", n)
	}
}
