package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// TestHello runs the README's first command through the real CLI against
// the real demo-server subprocess.
func TestHello(t *testing.T) {
	c := newCLI(t)
	r := c.run("run", abs(t, repoFile("examples", "workflows", "hello.yaml")), "--input", "name=Ada")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^run [0-9a-f-]{36} started: hello$`),
		regexp.MustCompile(`^step greet +completed +demo/greet +\S+ +→ Hello, Ada!$`),
		regexp.MustCompile(`^step shout +completed +demo/upper +\S+ +→ HELLO, ADA!$`),
		regexp.MustCompile(`^step record +completed +demo/ledger_append +\S+ +→ appended row 3$`),
		regexp.MustCompile(`^run [0-9a-f-]{36} succeeded in \S+$`),
	}
	got := lines(r.stdout)
	if len(got) != len(want) {
		t.Fatalf("stdout has %d lines, want %d:\n%s", len(got), len(want), r.stdout)
	}
	for i, re := range want {
		if !re.MatchString(got[i]) {
			t.Errorf("line %d = %q, want %s", i+1, got[i], re)
		}
	}

	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunSucceeded || run.Workflow != "hello" || run.Inputs["name"] != "Ada" || run.FinishedAt == nil {
		t.Errorf("run record %+v", run)
	}
	// In order: one intent and one outcome per step, each outcome before the
	// next intent.
	steps := []string{"greet", "shout", "record"}
	if len(invs) != len(steps) {
		t.Fatalf("%d invocations, want %d", len(invs), len(steps))
	}
	var prev time.Time
	for i, inv := range invs {
		if inv.Step != steps[i] || inv.State != journal.StateCompleted || len(inv.Attempts) != 1 {
			t.Fatalf("invocation %d: step %s state %s attempts %d", i, inv.Step, inv.State, len(inv.Attempts))
		}
		a := inv.Attempts[0]
		if a.EndedAt == nil || a.SentAt.Before(prev) || a.EndedAt.Before(a.SentAt) {
			t.Errorf("step %s: intent %v, outcome %v, previous outcome %v: out of order", inv.Step, a.SentAt, a.EndedAt, prev)
		}
		prev = *a.EndedAt
	}
	if got := string(invs[0].Result.StructuredContent); got != `{"greeting":"Hello, Ada!"}` {
		t.Errorf("greet result %s", got)
	}
	if got := string(invs[1].Arguments); got != `{"text":"Hello, Ada!"}` {
		t.Errorf("shout arguments %s", got)
	}
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Errorf("ledger has %d ledger_append rows, want 1", n)
	}
	// The ledger's idempotency keys are the journal's invocation ids.
	for i, row := range c.ledger() {
		if row["idempotency_key"] != invs[i].ID.String() {
			t.Errorf("ledger row %d key %v, want %s", i, row["idempotency_key"], invs[i].ID)
		}
	}
	j.Close()

	// journal list -o json: the invocations, newest first.
	r = c.run("journal", "list", "-o", "json")
	if r.code != 0 {
		t.Fatalf("journal list: exit %d: %s", r.code, r.stderr)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil {
		t.Fatalf("journal list -o json: %v\n%s", err, r.stdout)
	}
	if len(listed) != 3 {
		t.Fatalf("listed %d invocations", len(listed))
	}
	for i, step := range []string{"record", "shout", "greet"} {
		o := listed[i]
		if o["step"] != step || o["state"] != "completed" || len(o["attempts"].([]any)) != 1 || o["error"] != nil || o["run_id"] != run.ID.String() {
			t.Errorf("listed[%d] = %v", i, o)
		}
		for _, k := range []string{"id", "run_id", "step", "server", "tool", "state", "attempts", "error"} {
			if _, ok := o[k]; !ok {
				t.Errorf("listed[%d] lacks %q", i, k)
			}
		}
	}
	r = c.run("journal", "list")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ID ") || len(lines(r.stdout)) != 4 {
		t.Errorf("journal list table:\n%s", r.stdout)
	}
}

func TestNoOrphansAfterError(t *testing.T) {
	c := newCLI(t)
	r := c.run("run", abs(t, "testdata/unknown-tool.yaml"))
	if r.code != 1 || !strings.Contains(r.stdout, `unknown tool "no_such_tool" on server "demo" (it has: `) {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// newCLI's cleanup asserts that no server process is left.
}

// startSlow starts the slow workflow and waits until its call reached the
// demo server (the ledger row is written before the tool runs).
func startSlow(t *testing.T, c *cli) (*exec.Cmd, func() result) {
	t.Helper()
	cmd, wait := c.background("run", abs(t, "testdata/slow.yaml"))
	c.waitLedger("count_slowly", 1)
	return cmd, wait
}

func TestInterruptCancelsRunAndStopsServers(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCLI(t)
			cmd, wait := startSlow(t, c)
			cmd.Process.Signal(sig)
			r := wait()
			if r.code != exitInterrupted {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitInterrupted, r.stdout, r.stderr)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunCancelled || len(invs) != 1 || invs[0].State != journal.StateAborted {
				t.Fatalf("run %s, invocations %+v: want cancelled with one aborted", run.Status, invs)
			}
		})
	}
}

func TestKillLeavesNoServer(t *testing.T) {
	c := newCLI(t)
	cmd, wait := startSlow(t, c)
	cmd.Process.Kill()
	wait()
	// The demo server notices its stdin closed (and the kernel's parent-death
	// signal): cleanup asserts it is gone.
	j := c.openJournal()
	_, invs := c.onlyRun(j)
	if len(invs) != 1 || invs[0].State != journal.StateIntent {
		t.Fatalf("after kill -9 the invocation is %+v, want an open intent", invs)
	}
}

// replayWorkflow is one call of tool on a trusted or untrusted demo server.
func replayWorkflow(server, tool string) string {
	return fmt.Sprintf(`name: replay
servers:
  trusted: {builtin: demo, trust: true}
  untrusted: {builtin: demo}
steps:
  - id: call
    server: %s
    tool: %s
    with: {entry: ARG-MARKER-7f3a}
`, server, tool)
}

// TestUnsafeLostCallIsOutcomeUnknown is the brief's end-to-end record over
// stdio: the server appends its ledger row, fsyncs, then dies before
// answering. Unless every gate passes, the call is never sent again.
func TestUnsafeLostCallIsOutcomeUnknown(t *testing.T) {
	cases := []struct {
		name, server, tool string
		trustWorkspace     bool
	}{
		{"no annotations", "trusted", "ledger_append", true},
		{"idempotentHint false", "trusted", "not_idempotent", true},
		{"contradictory read-only", "trusted", "contradictory_read", true},
		{"untrusted server", "untrusted", "ledger_append", true},
		{"untrusted workspace", "trusted", "not_idempotent", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=" + tc.tool}
			args := []string{"run", c.workflow("w.yaml", replayWorkflow(tc.server, tc.tool))}
			if tc.trustWorkspace {
				args = append(args, "--trust-workspace")
			}
			r := c.run(args...)
			if r.code != exitBlocked {
				t.Fatalf("exit %d, want 3\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, replay.ErrOutcomeUnknown.Error()) {
				t.Errorf("stderr lacks the stable error:\n%s", r.stderr)
			}
			for _, leak := range []string{"ARG-MARKER-7f3a", "EOF"} {
				if strings.Contains(r.stdout+r.stderr, leak) {
					t.Errorf("output leaks %q:\n%s\n%s", leak, r.stdout, r.stderr)
				}
			}
			if n := c.ledgerCount(tc.tool); n != 1 {
				t.Errorf("ledger has %d rows for %s, want exactly 1", n, tc.tool)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunBlocked || len(invs) != 1 || invs[0].State != journal.StateOutcomeUnknown || len(invs[0].Attempts) != 1 {
				t.Fatalf("run %s, invocations %+v", run.Status, invs)
			}
		})
	}
}

func TestSafeLostCallIsReplayed(t *testing.T) {
	for _, tool := range []string{"upper", "greet"} { // idempotentHint: true; readOnlyHint: true alone
		t.Run(tool, func(t *testing.T) {
			c := newCLI(t)
			c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=" + tool}
			wf := strings.Replace(replayWorkflow("trusted", tool), "{entry: ARG-MARKER-7f3a}", "{text: x, name: x}", 1)
			wf = strings.Replace(wf, "{text: x, name: x}", map[string]string{"upper": "{text: x}", "greet": "{name: x}"}[tool], 1)
			r := c.run("run", c.workflow("w.yaml", wf), "--trust-workspace")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if n := c.ledgerCount(tool); n != 2 {
				t.Errorf("ledger has %d executions of %s, want 2 (the lost one and the replay)", n, tool)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunSucceeded || len(invs) != 1 {
				t.Fatalf("run %s, %d invocations", run.Status, len(invs))
			}
			inv := invs[0]
			if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[1].Kind != journal.KindReplay || inv.Attempts[0].Failure != "connection_lost" {
				t.Errorf("invocation %+v", inv)
			}
			if len(inv.Decisions) != 2 || inv.Decisions[0].View != "send_time" || inv.Decisions[1].View != "rediscovered" || inv.Decisions[1].Verdict != "replay" {
				t.Errorf("decisions %+v", inv.Decisions)
			}
			keys := map[any]bool{}
			for _, row := range c.ledger() {
				keys[row["idempotency_key"]] = true
			}
			if len(keys) != 1 || !keys[inv.ID.String()] {
				t.Errorf("idempotency keys in the ledger %v, want only %s", keys, inv.ID)
			}
		})
	}
}
