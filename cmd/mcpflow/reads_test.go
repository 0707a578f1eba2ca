package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// TestReadAndAsk runs the resources-and-prompts example through the real
// CLI against the real demo-server subprocess: it reads two resources and
// a templated one, gets a prompt, and a tool step uses what they returned.
// Every view names each request for what it is.
func TestReadAndAsk(t *testing.T) {
	c := newCLI(t)
	r := c.run("run", abs(t, repoFile("examples", "workflows", "read-and-ask.yaml")), "--input", "name=Ada")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^run [0-9a-f-]{36} started: read-and-ask$`),
		regexp.MustCompile(`^step notes +completed +resource demo file:///demo/notes.txt +\S+ +→ note 1 …$`),
		regexp.MustCompile(`^step logo +completed +resource demo file:///demo/logo.bin +\S+$`),
		regexp.MustCompile(`^step hello +completed +resource demo demo://greeting/Ada +\S+ +→ Hello, Ada!$`),
		regexp.MustCompile(`^step ask +completed +prompt demo review +\S+ +→ Please review the following text, focusing on tone`),
		regexp.MustCompile(`^step record +completed +demo/ledger_append +\S+ +→ appended row 1$`),
		regexp.MustCompile(`^run [0-9a-f-]{36} succeeded in \S+$`),
	}
	got := lines(r.stdout)
	for i, re := range want {
		if i >= len(got) || !re.MatchString(got[i]) {
			t.Errorf("line %d = %q, want %s", i+1, strings.Join(got[i:min(i+1, len(got))], ""), re)
		}
	}
	if !strings.Contains(r.stdout, "  first_note: note 1\n") || !strings.Contains(r.stdout, "  greeting: Hello, Ada!\n") {
		t.Errorf("outputs:\n%s", r.stdout)
	}

	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if run.Status != journal.RunSucceeded || len(invs) != 5 {
		t.Fatalf("run %s, %d invocations", run.Status, len(invs))
	}
	for i, w := range []struct {
		method journal.Method
		tool   string
	}{
		{journal.MethodRead, "file:///demo/notes.txt"},
		{journal.MethodRead, "file:///demo/logo.bin"},
		{journal.MethodRead, "demo://greeting/Ada"},
		{journal.MethodPrompt, "review"},
		{journal.MethodCall, "ledger_append"},
	} {
		inv := invs[i]
		if inv.Method != w.method || inv.Tool != w.tool || inv.State != journal.StateCompleted || len(inv.Attempts) != 1 || inv.Attempts[0].EndedAt == nil {
			t.Errorf("invocation %d: %s %s %s, %d attempts", i, inv.Method, inv.Tool, inv.State, len(inv.Attempts))
		}
	}
	if got := string(invs[1].Result.StructuredContent); got != `{"contents":[{"uri":"file:///demo/logo.bin","mimeType":"application/octet-stream","blob":"AAECAwQFBgc="}]}` {
		t.Errorf("the blob's result %s", got)
	}
	if got := string(invs[3].Arguments); got != `{"focus":"tone (the notes are text/plain)","text":"Hello, Ada!"}` {
		t.Errorf("the prompt's arguments %s", got)
	}
	rows := c.ledger()
	if len(rows) != 1 {
		t.Fatalf("ledger %v: reads leave no row, the one call one", rows)
	}
	entry, _ := rows[0]["args"].(map[string]any)["entry"].(string)
	if entry != "A review of a text: Please review the following text, focusing on tone (the notes are text/plain):\n\nHello, Ada! (logo AAECAwQFBgc=)" {
		t.Errorf("the record step wrote %q", entry)
	}

	// runs show names each request; journal list -o json says its method.
	r = c.run("runs", "show", run.ID.Short())
	for _, s := range []string{"resource demo file:///demo/notes.txt", "resource demo demo://greeting/Ada", "prompt demo review", "demo/ledger_append"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("runs show lacks %q:\n%s", s, r.stdout)
		}
	}
	r = c.run("journal", "list", "-o", "json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 5 {
		t.Fatalf("journal list -o json: %v\n%s", err, r.stdout)
	}
	for i, m := range []any{nil, "prompts/get", "resources/read", "resources/read", "resources/read"} { // newest first
		if listed[i]["method"] != m {
			t.Errorf("listed[%d] method %v, want %v", i, listed[i]["method"], m)
		}
	}
	r = c.run("journal", "show", invs[0].ID.Short(), "--payload")
	for _, s := range []string{"Request:      resource demo file:///demo/notes.txt", "[resource file:///demo/notes.txt text/plain]", "    note 1"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("journal show lacks %q:\n%s", s, r.stdout)
		}
	}
}

// TestKilledReadIsSentAgain: the demo server dies while it answers a read
// (it exits before replying, once). The server is not trusted and the
// workspace is not either — a tools/call would now have an unknown outcome
// — but a read changes nothing: mcpflow reconnects, sends it again as a
// replay, and the run goes on with its result.
func TestKilledReadIsSentAgain(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=file:///demo/notes.txt"}
	wf := c.workflow("w.yaml", `name: killed-read
servers: {demo: {builtin: demo}}
steps:
  - {id: notes, server: demo, resource: "file:///demo/notes.txt"}
  - {id: shout, server: demo, tool: upper, with: {text: "${{ steps.notes.text }}"}}
`)
	r := c.run("run", wf)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^step notes +completed +resource demo file:///demo/notes.txt +\S+  attempt 2  → note 1 …$`).MatchString(r.stdout) {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(c.workspace, ".mcpflow", "demo", "ledger.jsonl.fault-fired")); err != nil {
		t.Errorf("the fault did not fire: %v", err)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if run.Status != journal.RunSucceeded || len(invs) != 2 {
		t.Fatalf("run %s, %d invocations", run.Status, len(invs))
	}
	inv := invs[0]
	if inv.Trust.Server || inv.Trust.Workspace {
		t.Errorf("trust %+v: the test means neither", inv.Trust)
	}
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[0].Failure != "connection_lost" || inv.Attempts[1].Kind != journal.KindReplay {
		t.Fatalf("read: %s, attempts %+v", inv.State, inv.Attempts)
	}
	if len(inv.Decisions) != 2 || inv.Decisions[0].Reason != string(replay.ReasonReadRequest) || inv.Decisions[1].Reason != string(replay.ReasonReadRequest) || inv.Decisions[1].View != "rediscovered" {
		t.Errorf("decisions %+v", inv.Decisions)
	}
	if got := string(invs[1].Arguments); !strings.HasPrefix(got, `{"text":"note 1\nnote 2`) {
		t.Errorf("the step after the read got %s", got)
	}
}

// TestDryRunChecksReads: run --dry-run names each read for what it is,
// with a read's verdict (always safe to repeat), and checks the resource
// and the prompt against the server without reading anything.
func TestDryRunChecksReads(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("bad.yaml", `name: bad
servers: {demo: {builtin: demo}}
steps:
  - {id: n, server: demo, resource: "file:///demo/nots.txt"}
  - {id: p, server: demo, prompt: review, with: {focus: x}}
`)
	r := c.run("run", wf, "--dry-run", "-o", "json")
	if r.code != exitUsage {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var planned []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &planned); err != nil || len(planned) != 2 {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	for i, w := range []struct{ method, tool, problem string }{
		{"resources/read", "file:///demo/nots.txt", `unknown resource "file:///demo/nots.txt" on server "demo" (did you mean "file:///demo/notes.txt"?`},
		{"prompts/get", "review", "prompt review: argument text: missing (required)"},
	} {
		p := planned[i]
		replay, _ := p["replay"].(map[string]any)
		if p["method"] != w.method || p["tool"] != w.tool || !strings.HasPrefix(p["problem"].(string), w.problem) || replay["safe"] != true || replay["reason"] != "read_request" {
			t.Errorf("planned[%d] = %v", i, p)
		}
	}
	if c.ledger() != nil {
		t.Errorf("a dry run wrote the ledger")
	}
}

// TestReadThatAlwaysKillsTheServerFails: a read that kills the server
// every time is sent 1 + 3 times and then fails — it never blocks the run,
// for it has no outcome to be unknown about — and resume --retry-failed
// sends it again once the server answers.
func TestReadThatAlwaysKillsTheServerFails(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=review"}
	wf := c.workflow("w.yaml", `name: always
servers: {demo: {builtin: demo, reconnect_timeout: 5s}}
steps:
  - {id: ask, server: demo, prompt: review, with: {text: hi}}
`)
	r := c.run("run", wf)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	inv := invs[0]
	if run.Status != journal.RunFailed || inv.State != journal.StateFailed || len(inv.Attempts) != 1+replay.MaxReplays {
		t.Fatalf("run %s, read %s with %d attempts", run.Status, inv.State, len(inv.Attempts))
	}
	if d := inv.LastDecision(); d == nil || d.Reason != string(replay.ReasonBudgetSpent) || inv.Error.Code != "MCPFLOW_SERVER_UNAVAILABLE" {
		t.Errorf("decision %+v, error %v", d, inv.Error)
	}
	if want := "continue it with: mcpflow resume " + run.ID.Short() + " --retry-failed"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	c.env = nil
	r = c.run("resume", run.ID.Short(), "--retry-failed")
	if r.code != 0 || !strings.Contains(r.stdout, "prompt demo review") {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
