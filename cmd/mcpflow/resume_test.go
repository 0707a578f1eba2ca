package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// crashDuringCall runs a one-step workflow whose call commits its side
// effect and then hangs, and kill -9s mcpflow while the call is in flight.
func crashDuringCall(t *testing.T, c *cli, server, tool string, trust bool) journal.ID {
	t.Helper()
	args := []string{"run", c.workflow("w.yaml", oneCall(server, tool))}
	if trust {
		args = append(args, "--trust-workspace")
	}
	env := c.env
	c.env = append(env, "MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL="+tool)
	cmd, wait := c.background(args...)
	c.env = env
	c.waitLedger(tool, 1)
	cmd.Process.Kill()
	wait()
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunRunning || len(invs) != 1 || invs[0].State != journal.StateIntent {
		t.Fatalf("after the crash: run %s, invocations %+v", run.Status, invs)
	}
	j.Close()
	return run.ID
}

func oneCall(server, tool string) string {
	args := map[string]string{"greet": "{name: x}", "upper": "{text: x}"}[tool]
	if args == "" {
		args = "{entry: ARG-MARKER-7f3a}"
	}
	return "name: one-call\nservers:\n  trusted: {builtin: demo, trust: true, reconnect_timeout: 1s}\n  untrusted: {builtin: demo, reconnect_timeout: 1s}\nsteps:\n  - {id: call, server: " + server + ", tool: " + tool + ", with: " + args + "}\n  - {id: after, server: " + server + ", tool: greet, with: {name: after}}\n"
}

func TestResumeAfterCrashDuringUnsafeCall(t *testing.T) {
	c := newCLI(t)
	id := crashDuringCall(t, c, "trusted", "ledger_append", true)
	r := c.run("resume", id.String()[:13], "--trust-workspace")
	if r.code != exitBlocked || !strings.Contains(r.stderr, replay.ErrOutcomeUnknown.Error()) {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Fatalf("ledger has %d rows, want 1: the unsafe call ran again", n)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunBlocked || len(invs) != 1 || invs[0].State != journal.StateOutcomeUnknown {
		t.Fatalf("run %s, invocations %+v", run.Status, invs)
	}
	d := invs[0].LastDecision()
	if d == nil || d.Verdict != "outcome_unknown" || d.Reason != string(replay.ReasonNoAnnotations) {
		t.Errorf("decision %+v", d)
	}
	var before strings.Builder
	j.Export(&before, time.Time{}, false)
	runBefore, _ := json.Marshal(run)
	j.Close()

	// A second resume changes nothing, with or without workspace trust.
	r = c.run("resume", id.String(), "--untrusted")
	if r.code != exitBlocked {
		t.Fatalf("second resume: exit %d\n%s", r.code, r.stderr)
	}
	j = c.openJournal()
	var after strings.Builder
	j.Export(&after, time.Time{}, false)
	runAfter, _ := j.Run(id)
	ra, _ := json.Marshal(runAfter)
	if before.String() != after.String() || string(runBefore) != string(ra) {
		t.Errorf("the second resume changed the journal:\n%s\n%s\n%s\n%s", before.String(), after.String(), runBefore, ra)
	}
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Errorf("ledger has %d rows after the second resume", n)
	}
}

func TestResumeAfterCrashDuringSafeCallReplays(t *testing.T) {
	c := newCLI(t)
	id := crashDuringCall(t, c, "trusted", "upper", true)
	r := c.run("resume", id.String(), "--trust-workspace")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("upper"); n != 2 {
		t.Errorf("upper ran %d times, want 2 (the crashed call and its replay)", n)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunSucceeded || len(invs) != 2 {
		t.Fatalf("run %s with %d invocations", run.Status, len(invs))
	}
	inv := invs[0]
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[1].Kind != journal.KindReplay || inv.Attempts[0].Failure != "connection_lost" {
		t.Errorf("replayed invocation %+v", inv)
	}
	j.Close()
	// Resuming a run that succeeded changes nothing.
	r = c.run("resume", id.String())
	if r.code != 0 || !strings.Contains(r.stdout, "nothing to resume") || c.ledgerCount("upper") != 2 || c.ledgerCount("greet") != 1 {
		t.Errorf("resume of a succeeded run: exit %d\n%s", r.code, r.stdout)
	}
}

func TestResumeWithoutWorkspaceTrustDoesNotReplay(t *testing.T) {
	c := newCLI(t)
	id := crashDuringCall(t, c, "trusted", "upper", true)
	r := c.run("resume", id.String(), "--untrusted") // no --trust-workspace this time, and the user confirmed
	if r.code != exitBlocked || c.ledgerCount("upper") != 1 {
		t.Fatalf("exit %d, %d executions\n%s", r.code, c.ledgerCount("upper"), r.stderr)
	}
	j := c.openJournal()
	_, invs := c.onlyRun(j)
	if d := invs[0].LastDecision(); d == nil || d.Reason != string(replay.ReasonWorkspaceNotTrusted) {
		t.Errorf("decision %+v, want workspace_not_trusted", d)
	}
}
