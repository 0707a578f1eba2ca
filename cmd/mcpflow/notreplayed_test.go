package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestBlockedRunSaysWhyNotReplayed: a blocked run's output names the
// reason each waiting call was not replayed, and the fix, not only the
// journal.
func TestBlockedRunSaysWhyNotReplayed(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	r := c.run("run", repoFile("examples", "workflows", "outcome-unknown.yaml"))
	const want = `not replayed: server "demo" is not trusted — set trust: true`
	if r.code != exitBlocked || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, want 3 and %q\n%s", r.code, want, r.stderr)
	}
}

// TestShownResultResolvesAsIs: a result as `journal show -o json --payload`
// prints it can be passed back to `journal resolve --result` unchanged; and
// --since takes days.
func TestShownResultResolvesAsIs(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	if r := c.run("run", repoFile("examples", "workflows", "outcome-unknown.yaml")); r.code != exitBlocked {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	c.env = nil
	if r := c.run("run", repoFile("examples", "workflows", "hello.yaml")); r.code != 0 {
		t.Fatalf("hello: exit %d\n%s", r.code, r.stderr)
	}
	j := c.openJournal()
	invs, _ := j.Invocations(journal.Filter{})
	j.Close()
	var done, unknown string
	for _, inv := range invs {
		switch inv.State {
		case journal.StateCompleted:
			done = inv.ID.String()
		case journal.StateOutcomeUnknown:
			unknown = inv.ID.String()
		}
	}
	r := c.run("journal", "show", done, "--payload", "-o", "json")
	var shown struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || len(shown.Result) == 0 {
		t.Fatalf("journal show: %v\n%s", err, r.stdout)
	}
	file := c.workflow("result.json", string(shown.Result))
	if r := c.run("journal", "resolve", unknown, "--as", "completed", "--result", file); r.code != 0 {
		t.Errorf("resolve with a shown result: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("journal", "list", "--since", "7d"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Errorf("--since 7d: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestInputsFromAFile: --input-file reads typed inputs; --input wins.
func TestInputsFromAFile(t *testing.T) {
	c := newCLI(t)
	file := c.workflow("inputs.yaml", "# inputs for hello\nname: Grace\n")
	r := c.run("run", repoFile("examples", "workflows", "hello.yaml"), "--input-file", file)
	if r.code != 0 || !strings.Contains(r.stdout, "Hello, Grace!") {
		t.Errorf("--input-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("run", repoFile("examples", "workflows", "hello.yaml"), "--input-file", file, "--input", "name=Ada")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello, Ada!") {
		t.Errorf("--input over --input-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := c.workflow("bad-inputs.yaml", "nmae: Grace\n")
	if r := c.run("run", repoFile("examples", "workflows", "hello.yaml"), "--input-file", bad); r.code != exitUsage || !strings.Contains(r.stderr, `unknown input "nmae"`) {
		t.Errorf("unknown input in the file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestToolErrorsAreVisible: a call whose result is a tool error is listed
// as tool_error with the first line of the tool's text, and found by
// --state tool_error; JSON keeps state completed and says tool_error.
func TestToolErrorsAreVisible(t *testing.T) {
	c := newCLI(t)
	if r := c.run("call", "demo", "fail", "--arg", "message=disk full\nsecond line", "--workflow", repoFile("examples", "workflows", "hello.yaml")); r.code != exitFailed {
		t.Fatalf("call: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("call", "demo", "greet", "--arg", "name=x", "--workflow", repoFile("examples", "workflows", "hello.yaml")); r.code != 0 {
		t.Fatalf("call: exit %d\n%s", r.code, r.stderr)
	}
	r := c.run("journal", "list", "--state", "tool_error")
	if r.code != 0 || !strings.Contains(r.stdout, "tool_error") || !strings.Contains(r.stdout, "disk full") || strings.Contains(r.stdout, "second line") || strings.Contains(r.stdout, "greet") {
		t.Errorf("journal list --state tool_error: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("journal", "list", "-o", "json")
	if !strings.Contains(r.stdout, `"tool_error": true`) || !strings.Contains(r.stdout, `"tool_error": false`) {
		t.Errorf("JSON: %s", r.stdout)
	}
}
