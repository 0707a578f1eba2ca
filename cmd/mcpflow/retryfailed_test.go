package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
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

// TestResumeRetryFailedAuditTrail is issue 33's scenario: a step whose
// tool returns an error twice (its retry: sends it once more), then an
// operator's resume --retry-failed sends it a third time. Every attempt
// carries its outcome (tool_error) and why it was sent — the first send,
// the step's retry, the operator's retry; none is a replay — and every
// view says the same: journal show (-o json and for people), runs show,
// and run -o json, whose step shows the tool error.
func TestResumeRetryFailedAuditTrail(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("w.yaml", `name: w
servers: {demo: {builtin: demo, trust: true}}
steps:
  - {id: hi, server: demo, tool: greet, with: {name: a}}
  - {id: boom, server: demo, tool: fail, with: {message: quota exceeded}, retry: {attempts: 2, backoff: 10ms}}
`)
	r := c.run("run", wf, "--trust-workspace", "-o", "json")
	if r.code != exitFailed {
		t.Fatalf("run: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	var ran api.Run
	if err := json.Unmarshal([]byte(r.stdout), &ran); err != nil || len(ran.Steps) != 2 {
		t.Fatalf("run -o json: %v\n%s", err, r.stdout)
	}
	if st := ran.Steps[1]; st.Step != "boom" || st.State != "completed" || !st.ToolError || len(st.Attempts) != 2 ||
		st.Attempts[0].Failure != failure.ToolError || st.Attempts[1].Failure != failure.ToolError {
		t.Errorf("run -o json lists the step whose tool returned an error as %+v", st)
	}
	if st := ran.Steps[0]; st.ToolError || st.Attempts[0].Failure != failure.None || st.Attempts[0].Kind != journal.KindFirst {
		t.Errorf("run -o json, the step that succeeded: %+v", st)
	}

	if r := c.run("resume", ran.ID, "--retry-failed", "--trust-workspace"); r.code != exitFailed {
		t.Fatalf("resume --retry-failed: exit %d, want 1 (the tool fails again)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("fail"); n != 3 {
		t.Errorf("fail executed %d times, want 3", n)
	}
	boom := ran.Steps[1].Invocation

	r = c.run("journal", "show", boom, "-o", "json")
	if r.code != 0 {
		t.Fatalf("journal show -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var inv api.InvocationDetail
	if err := json.Unmarshal([]byte(r.stdout), &inv); err != nil {
		t.Fatalf("journal show -o json: %v\n%s", err, r.stdout)
	}
	want := []journal.AttemptKind{journal.KindFirst, journal.KindRetry, journal.KindOperatorRetry}
	if len(inv.Attempts) != len(want) {
		t.Fatalf("%d attempts, want %d:\n%s", len(inv.Attempts), len(want), r.stdout)
	}
	for i, a := range inv.Attempts {
		if a.Kind != want[i] || a.Failure != failure.ToolError || a.Replay || a.EndedAt == nil {
			t.Errorf("attempt %d: kind %q, failure %q, replay %v; want %s, tool_error, not a replay", a.N, a.Kind, a.Failure, a.Replay, want[i])
		}
	}
	if inv.State != "completed" || !inv.ToolError || inv.Replays != 0 || inv.Retries != 1 || inv.OperatorRetries != 1 || inv.FirstDeliveries != 0 {
		t.Errorf("invocation: state %s, tool_error %v, replays %d, retries %d, operator retries %d, first deliveries %d",
			inv.State, inv.ToolError, inv.Replays, inv.Retries, inv.OperatorRetries, inv.FirstDeliveries)
	}
	var decisions []string
	for _, d := range inv.Decisions {
		decisions = append(decisions, fmt.Sprintf("%d %s/%s@%s", d.Attempt, d.Verdict, d.Reason, d.View))
	}
	if got, want := strings.Join(decisions, ", "), fmt.Sprintf("1 %s/retry_requested@current, 2 %s/retry_attempts_spent@current, 2 %s/operator_approved@operator, 3 %s/retry_attempts_spent@current",
		verdict.Retry, verdict.NotRetried, verdict.OperatorRetry, verdict.NotRetried); got != want {
		t.Errorf("decisions\n%s\nwant\n%s", got, want)
	}

	// The views for people, word for word.
	for _, v := range []struct {
		golden string
		args   []string
	}{
		{"retry-failed-journal-show", []string{"journal", "show", boom}},
		{"retry-failed-runs-show", []string{"runs", "show", ran.ID}},
	} {
		r := c.run(v.args...)
		got := fmt.Sprintf("$ mcpflow %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(v.args, " "), r.code, r.stdout, r.stderr)
		// The operator is whoever runs the test.
		got = strings.NewReplacer(" "+osUser()+": ", " <USER>: ", " "+osUser()+" resolved ", " <USER> resolved ").Replace(got)
		checkGolden(t, v.golden, normalize(got, c.workspace, c.config))
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
