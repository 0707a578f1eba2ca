package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// approvalRun runs src on a scripted server whose tool t echoes its
// arguments, and returns a function that resumes the run.
func approvalRun(t *testing.T, src string) (*scripted, *bolt.Store, *journal.Run, func() (*journal.Run, bool)) {
	t.Helper()
	s := newScripted()
	s.tool("t", nil, func(_ context.Context, _ int, args map[string]any) (*mcp.CallToolResult, error) {
		return ok(args)
	})
	j := journaltest.Open(t, nil)
	wf := load(t, src)
	eng := newEngine(j, connectMem(t, s.srv))
	run, err := eng.Run(context.Background(), wf, map[string]any{}, "")
	if err != nil {
		t.Fatal(err)
	}
	resume := func() (*journal.Run, bool) {
		t.Helper()
		cur, err := j.Run(run.ID)
		if err != nil {
			t.Fatal(err)
		}
		out, acted, err := eng.Resume(context.Background(), cur, wf, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		return out, acted
	}
	return s, j, run, resume
}

func steps(t *testing.T, j *bolt.Store, run journal.ID) string {
	t.Helper()
	invs, err := j.RunInvocations(run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, inv := range invs {
		name := inv.Step
		if inv.Item >= 0 {
			name += fmt.Sprintf("[%d]", inv.Item)
		}
		out = append(out, name+"="+inv.State.String())
	}
	return strings.Join(out, " ")
}

const approveWorkflow = `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t, with: {n: 1}}
  - {id: b, server: s, tool: t, approve: "Ship it?", with: {n: 2}}
  - {id: c, server: s, tool: t, with: {n: 3}}
`

func TestApprovalBlocksBeforeTheIntentThenRuns(t *testing.T) {
	s, j, run, resume := approvalRun(t, approveWorkflow)
	if run.Status != journal.RunBlocked || run.Error == nil || run.Error.Code != engine.CodeApprovalRequired ||
		run.Error.Message != "step b waits for approval: Ship it?" {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	if got := steps(t, j, run.ID); got != "a=completed" {
		t.Errorf("journaled %q: nothing of step b may be written before approval", got)
	}
	if s.count("t") != 1 {
		t.Errorf("%d calls, want 1", s.count("t"))
	}
	if p := run.PendingApprovals(); len(p) != 1 || p[0].Step != "b" || p[0].Message != "Ship it?" {
		t.Errorf("pending approvals %+v", run.Approvals)
	}

	// Resuming before a decision does nothing and writes nothing.
	before, _ := j.Run(run.ID)
	out, acted := resume()
	after, _ := j.Run(run.ID)
	if acted || out.Status != journal.RunBlocked || !after.UpdatedAt.Equal(before.UpdatedAt) || s.count("t") != 1 {
		t.Fatalf("resume while waiting: acted %v, status %s, calls %d", acted, out.Status, s.count("t"))
	}

	if _, err := j.DecideApproval(run.ID, "b", journal.ApprovalApproved, "op", "looks good"); err != nil {
		t.Fatal(err)
	}
	out, acted = resume()
	if !acted || out.Status != journal.RunSucceeded {
		t.Fatalf("after approval: acted %v, %s: %v", acted, out.Status, out.Error)
	}
	if got := steps(t, j, run.ID); got != "a=completed b=completed c=completed" {
		t.Errorf("journaled %q", got)
	}
	if s.count("t") != 3 {
		t.Errorf("%d calls, want 3 (a once, then b and c)", s.count("t"))
	}
	if a := out.Approval("b"); a == nil || a.State != journal.ApprovalApproved || a.By != "op" || a.Reason != "looks good" {
		t.Errorf("approval %+v", a)
	}
}

func TestRejectedStepFailsWithoutSending(t *testing.T) {
	s, j, run, resume := approvalRun(t, approveWorkflow)
	if _, err := j.DecideApproval(run.ID, "b", journal.ApprovalRejected, "op", "not during the freeze"); err != nil {
		t.Fatal(err)
	}
	out, acted := resume()
	if !acted || out.Status != journal.RunFailed || out.Error == nil || out.Error.Code != engine.CodeApprovalRejected ||
		!strings.HasPrefix(out.Error.Message, "step b was rejected by op at ") || !strings.HasSuffix(out.Error.Message, ": not during the freeze") {
		t.Fatalf("after rejection: acted %v, %s: %v", acted, out.Status, out.Error)
	}
	if got := steps(t, j, run.ID); got != "a=completed" {
		t.Errorf("journaled %q: a rejected step writes no intent", got)
	}
	if s.count("t") != 1 {
		t.Errorf("%d calls, want 1", s.count("t"))
	}
	// A rejection is final: resuming again fails the same way, sending nothing.
	out, _ = resume()
	if out.Status != journal.RunFailed || out.Error.Code != engine.CodeApprovalRejected || s.count("t") != 1 {
		t.Errorf("second resume: %s %v, %d calls", out.Status, out.Error, s.count("t"))
	}
}

func TestRejectedStepWithContinueOnError(t *testing.T) {
	s, j, run, resume := approvalRun(t, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: b, server: s, tool: t, approve: true, continue_on_error: true, with: {n: 2}}
  - id: c
    server: s
    tool: t
    if: steps.b.isError
    with: {why: "${{ steps.b.error.code }}"}
`)
	if run.Status != journal.RunBlocked || run.Error.Message != "step b waits for approval" {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	if _, err := j.DecideApproval(run.ID, "b", journal.ApprovalRejected, "op", ""); err != nil {
		t.Fatal(err)
	}
	out, _ := resume()
	if out.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", out.Status, out.Error)
	}
	if got := steps(t, j, run.ID); got != "c=completed" {
		t.Errorf("journaled %q", got)
	}
	invs, _ := j.RunInvocations(run.ID)
	if s.count("t") != 1 || !strings.Contains(string(invs[0].Arguments), engine.CodeApprovalRejected) {
		t.Errorf("%d calls; c sent %s, want the rejection's code", s.count("t"), invs[0].Arguments)
	}
}

func TestOneApprovalCoversEveryItem(t *testing.T) {
	s, j, run, resume := approvalRun(t, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: each, server: s, tool: t, for_each: [1, 2, 3], concurrency: 2, approve: "All three?", with: {n: "${{ item }}"}}
`)
	if run.Status != journal.RunBlocked || steps(t, j, run.ID) != "" || s.count("t") != 0 {
		t.Fatalf("run %s, journaled %q, %d calls", run.Status, steps(t, j, run.ID), s.count("t"))
	}
	if _, err := j.DecideApproval(run.ID, "each", journal.ApprovalApproved, "op", ""); err != nil {
		t.Fatal(err)
	}
	out, _ := resume()
	if out.Status != journal.RunSucceeded || s.count("t") != 3 || len(out.Approvals) != 1 {
		t.Fatalf("run %s: %v; %d calls, approvals %+v", out.Status, out.Error, s.count("t"), out.Approvals)
	}
}

func TestSkippedStepNeedsNoApproval(t *testing.T) {
	s, j, run, _ := approvalRun(t, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: b, server: s, tool: t, approve: true, if: "false"}
  - {id: c, server: s, tool: t}
`)
	if run.Status != journal.RunSucceeded || len(run.Approvals) != 0 || s.count("t") != 1 || steps(t, j, run.ID) != "b=skipped c=completed" {
		t.Fatalf("run %s: %v; approvals %+v, %d calls", run.Status, run.Error, run.Approvals, s.count("t"))
	}
}

// A gate decided in advance, while the run is going: the run passes it
// without stopping when it gets there, and the journal says the decision
// was made in advance and when the run reached the step.
func TestApprovedInAdvancePassesWithoutStopping(t *testing.T) {
	s := newScripted()
	j := journaltest.Open(t, nil)
	var decided *journal.Approval
	s.tool("t", nil, func(_ context.Context, n int, args map[string]any) (*mcp.CallToolResult, error) {
		if n == 1 {
			// Step a is in flight: the operator approves b ahead.
			runs, err := j.Runs(journal.RunFilter{})
			if err != nil || len(runs) != 1 {
				return nil, fmt.Errorf("runs %v: %v", runs, err)
			}
			if decided, err = j.DecideInAdvance(runs[0].ID, "b", journal.ApprovalApproved, "op", "ahead"); err != nil {
				return nil, err
			}
		}
		return ok(args)
	})
	eng := newEngine(j, connectMem(t, s.srv))
	run, err := eng.Run(context.Background(), load(t, approveWorkflow), map[string]any{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded || s.count("t") != 3 || steps(t, j, run.ID) != "a=completed b=completed c=completed" {
		t.Fatalf("run %s: %v; %d calls, journaled %q", run.Status, run.Error, s.count("t"), steps(t, j, run.ID))
	}
	a := run.Approval("b")
	if a == nil || a.State != journal.ApprovalApproved || !a.InAdvance || a.By != "op" || a.Reason != "ahead" ||
		a.Message != "Ship it?" || !a.Reached() || a.RequestedAt.Before(*decided.At) {
		t.Errorf("approval %+v", a)
	}
}

func TestRejectedInAdvanceFailsWhenReached(t *testing.T) {
	s, j, run, resume := approvalRun(t, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t, approve: true}
  - {id: b, server: s, tool: t, approve: true}
`)
	if _, err := j.DecideInAdvance(run.ID, "b", journal.ApprovalRejected, "op", "not b"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.DecideApproval(run.ID, "a", journal.ApprovalApproved, "op", ""); err != nil {
		t.Fatal(err)
	}
	out, _ := resume()
	if out.Status != journal.RunFailed || out.Error.Code != engine.CodeApprovalRejected ||
		!strings.HasPrefix(out.Error.Message, "step b was rejected in advance by op at ") || s.count("t") != 1 {
		t.Fatalf("run %s: %v; %d calls", out.Status, out.Error, s.count("t"))
	}
}
