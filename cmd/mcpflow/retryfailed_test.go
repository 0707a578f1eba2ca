package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestResumeRetryFailed: resume --retry-failed sends again the step that
// failed, journaled as the operator's approval, without running again the
// steps that completed.
func TestResumeRetryFailed(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("w.yaml", `name: w
servers: {demo: {builtin: demo, trust: true}}
steps:
  - {id: hi, server: demo, tool: greet, with: {name: a}}
  - {id: shout, server: demo, tool: upper, with: {text: b}}
`)
	c.env = []string{"MCPFLOW_DEMO_FAULT=rpc-error-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=upper"}
	r := c.run("run", wf, "--trust-workspace")
	if r.code != exitFailed {
		t.Fatalf("run: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.env = nil
	j := c.openJournal()
	run, _ := c.onlyRun(j)
	j.Close()
	if r := c.run("resume", run.ID.String(), "--trust-workspace"); r.code != exitFailed {
		t.Errorf("plain resume: exit %d, want the failure to stand\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("resume", run.ID.String(), "--retry-failed", "--trust-workspace"); r.code != 0 {
		t.Fatalf("resume --retry-failed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if g, u := c.ledgerCount("greet"), c.ledgerCount("upper"); g != 1 || u != 2 {
		t.Errorf("greet ran %d times (want 1), upper %d (want 2)", g, u)
	}
	j = c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if run.Status != journal.RunSucceeded {
		t.Errorf("run %s", run.Status)
	}
	approved := false
	for _, inv := range invs {
		for _, res := range inv.Resolutions {
			approved = approved || (inv.Step == "shout" && res.As == journal.StateRetryApproved && strings.Contains(res.Why, "retry-failed") && res.By != "")
		}
	}
	if !approved {
		t.Errorf("the approval is not journaled:%s", describe(invs))
	}
}

// TestDryRun: run --dry-run shows the arguments each call would send, with
// secrets redacted, and the replay verdict; steps that depend on earlier
// results say so; nothing is journaled and no tool is called; a call that
// could not be sent as it stands exits 2.
func TestDryRun(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("w.yaml", `name: w
inputs: {token: {type: string, secret: true}}
servers: {demo: {builtin: demo, trust: true}}
steps:
  - {id: hi, server: demo, tool: greet, with: {name: "${{ inputs.token }}"}}
  - {id: put, server: demo, tool: put_record, with: {key: k, value: "${{ steps.hi.text }}"}}
  - {id: skipped, server: demo, tool: greet, with: {name: x}, if: "false"}
`)
	r := c.run("run", wf, "--dry-run", "--input", "token=SECRET-DRY-1", "--trust-workspace")
	if r.code != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{`{"name":"[redacted]"}`, "yes: declared_read_only", "its arguments read steps.hi", "skipped: its condition is false", "nothing was journaled"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "SECRET-DRY-1") {
		t.Error("the secret was shown")
	}
	if _, err := os.Stat(c.journalPath()); err == nil {
		t.Error("a dry run created the journal")
	}
	if n := len(c.ledger()); n != 0 {
		t.Errorf("a dry run called %d tools", n)
	}
	bad := c.workflow("bad.yaml", "name: bad\nservers: {demo: {builtin: demo}}\nsteps:\n  - {id: a, server: demo, tool: greet, with: {nmae: x}}\n")
	if r := c.run("run", bad, "--dry-run"); r.code != exitUsage || !strings.Contains(r.stdout, "nmae") {
		t.Errorf("dry run of a call the schema refuses: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
