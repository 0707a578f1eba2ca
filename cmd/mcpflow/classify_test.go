package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// These tests take each failure class of docs/replay.md's failure table through
// a real transport (the CLI as a subprocess, the demo server as its stdio
// child or as a streamable HTTP server) and check how it is journaled, what
// the run and exit code say, whether retry and resume send it again, and —
// in the demo server's ledger — how many times the tool actually ran.

// quickExit returns env plus a GORACE setting that stops race-enabled
// mcpflow and demo-server processes (this test binary) from sleeping a
// second at exit: every CLI run starts two of them. Any GORACE options
// already set are kept.
func quickExit(env ...string) []string {
	opts := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append([]string{"GORACE=" + opts}, env...)
}

// classifyWorkflow is one step "call" on server "s" (its configuration entry
// given), with the step's extra keys (", timeout: 300ms", …) appended.
func classifyWorkflow(serverEntry, tool, with, extra string) string {
	return fmt.Sprintf("name: classify\nservers:\n  s: %s\nsteps:\n  - {id: call, server: s, tool: %s, with: %s%s}\n",
		serverEntry, tool, with, extra)
}

// classifyArgs is a tool's arguments in the classify workflows.
func classifyArgs(tool string) string {
	switch tool {
	case "upper":
		return "{text: x}"
	case "fail":
		return "{message: boom}"
	}
	return "{entry: x}"
}

// classifyOnly returns the run and its one invocation, failing unless there
// is exactly one of each.
func classifyOnly(t *testing.T, c *cli) (*journal.Run, journal.Invocation) {
	t.Helper()
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if len(invs) != 1 {
		t.Fatalf("run %s, invocations:%s\nwant exactly one", run.Status, describe(invs))
	}
	return run, invs[0]
}

// kindOf is the kind of attempt i (from 0) of an invocation whose every
// send after the first is of kind later.
func kindOf(i int, later journal.AttemptKind) journal.AttemptKind {
	if i == 0 {
		return journal.KindFirst
	}
	return later
}

// retryDecisions counts the journaled decisions to retry.
func retryDecisions(inv journal.Invocation) int {
	n := 0
	for _, d := range inv.Decisions {
		if d.Verdict == "retry" {
			n++
		}
	}
	return n
}

// TestClassifyTimedOut: a step timeout expires while the call hangs after
// its side effect committed. The call may have run: retry sends it again
// only when the replay policy says the tool is safe. Not sent again, an
// unsafe tool's call has an unknown outcome at once (blocked, exit 3); a
// safe tool's is timed_out (run failed, exit 1), which resume may replay.
func TestClassifyTimedOut(t *testing.T) {
	cases := []struct {
		name, tool, extra string
		attempts          int // attempts journaled = executions in the ledger
		unknown           bool
	}{
		{"unsafe", "ledger_append", "", 1, true},
		{"unsafe with retry", "ledger_append", ", retry: {attempts: 3, backoff: 10ms}", 1, true},
		{"safe with retry", "upper", ", retry: {attempts: 3, backoff: 10ms}", 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.env = quickExit("MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL="+tc.tool)
			// A trusted server in a trusted workspace: only the tool's
			// annotations decide whether a retry is safe.
			wf := classifyWorkflow("{builtin: demo, trust: true}", tc.tool, classifyArgs(tc.tool), ", timeout: 300ms"+tc.extra)
			r := c.run("run", c.workflow("w.yaml", wf), "--trust-workspace")
			code, status, state, errCode := exitFailed, journal.RunFailed, journal.StateTimedOut, engine.CodeTimedOut
			if tc.unknown {
				code, status, state, errCode = exitBlocked, journal.RunBlocked, journal.StateOutcomeUnknown, replay.Code
			}
			if r.code != code {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, code, r.stdout, r.stderr)
			}
			if n := c.ledgerCount(tc.tool); n != tc.attempts {
				t.Errorf("%s executed %d times, want %d", tc.tool, n, tc.attempts)
			}
			run, inv := classifyOnly(t, c)
			if run.Status != status || run.Error == nil || run.Error.Code != errCode {
				t.Errorf("run %s error %+v, want %s with %s", run.Status, run.Error, status, errCode)
			}
			if inv.State != state || len(inv.Attempts) != tc.attempts || inv.Error == nil || inv.Error.Code != errCode {
				t.Fatalf("invocation:%s\nerror %+v\nwant %s after %d attempts", describe([]journal.Invocation{inv}), inv.Error, state, tc.attempts)
			}
			for i, a := range inv.Attempts {
				if a.Failure != replay.ClassTimedOut || a.EndedAt == nil || a.Kind != kindOf(i, journal.KindRetry) || a.Replay {
					t.Errorf("attempt %d: %+v", i+1, a)
				}
			}
			if n := inv.Tally().AgainstBudget; n != tc.attempts-1 {
				t.Errorf("%d sends against the replay budget, want %d: each retry sends a call that may have run", n, tc.attempts-1)
			}
			if n := retryDecisions(inv); n != tc.attempts-1 {
				t.Errorf("%d retry decisions, want %d:%s", n, tc.attempts-1, describe([]journal.Invocation{inv}))
			}
			for _, k := range c.ledgerKeys(tc.tool) {
				if k != inv.ID.String() {
					t.Errorf("ledger idempotency key %v, want %s on every attempt", k, inv.ID)
				}
			}
		})
	}
}

// TestClassifyServerError: the server commits the side effect, then answers
// with JSON-RPC error -32603. The call may have run: neither retry nor
// resume sends an unsafe tool's call again, and its outcome is unknown at
// once (blocked, exit 3). A safe tool's call is retried when retry asks, and
// fails (server_error, exit 1) when the retries are spent.
func TestClassifyServerError(t *testing.T) {
	cases := []struct {
		name, transport, tool, extra string
		attempts                     int
		unknown                      bool
	}{
		{"stdio", "stdio", "ledger_append", "", 1, true},
		{"stdio unsafe with retry", "stdio", "ledger_append", ", retry: {attempts: 3, backoff: 10ms}", 1, true},
		{"stdio safe with retry", "stdio", "upper", ", retry: {attempts: 3, backoff: 10ms}", 3, false},
		{"http", "http", "ledger_append", "", 1, true},
		{"http unsafe with retry", "http", "ledger_append", ", retry: {attempts: 3, backoff: 10ms}", 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.env = quickExit()
			fault := []string{"MCPFLOW_DEMO_FAULT=rpc-error-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=" + tc.tool}
			server := "{builtin: demo, trust: true}"
			if tc.transport == "http" {
				d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", fault...)
				server = fmt.Sprintf("{url: %q, trust: true}", d.url)
			} else {
				c.env = quickExit(fault...)
			}
			wf := classifyWorkflow(server, tc.tool, classifyArgs(tc.tool), tc.extra)
			r := c.run("run", c.workflow("w.yaml", wf), "--trust-workspace")
			code, status, state, errCode := exitFailed, journal.RunFailed, journal.StateFailed, engine.CodeServerError
			if tc.unknown {
				code, status, state, errCode = exitBlocked, journal.RunBlocked, journal.StateOutcomeUnknown, replay.Code
			}
			if r.code != code {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, code, r.stdout, r.stderr)
			}
			if n := c.ledgerCount(tc.tool); n != tc.attempts {
				t.Errorf("%s executed %d times, want %d", tc.tool, n, tc.attempts)
			}
			run, inv := classifyOnly(t, c)
			if run.Status != status || run.Error == nil || run.Error.Code != errCode {
				t.Errorf("run %s error %+v, want %s with %s", run.Status, run.Error, status, errCode)
			}
			if inv.State != state || len(inv.Attempts) != tc.attempts || inv.Error == nil || inv.Error.Code != errCode {
				t.Fatalf("invocation:%s\nerror %+v", describe([]journal.Invocation{inv}), inv.Error)
			}
			for i, a := range inv.Attempts {
				if a.Failure != replay.ClassServerError || a.EndedAt == nil || a.Kind != kindOf(i, journal.KindRetry) || a.Replay {
					t.Errorf("attempt %d: %+v", i+1, a)
				}
			}
			if !strings.Contains(inv.Attempts[0].Detail, "internal error") {
				t.Errorf("attempt detail %q lacks the server's error", inv.Attempts[0].Detail)
			}
			if n := inv.Tally().AgainstBudget; n != tc.attempts-1 {
				t.Errorf("%d sends against the replay budget, want %d: each retry sends a call that may have run", n, tc.attempts-1)
			}
			if n := retryDecisions(inv); n != tc.attempts-1 {
				t.Errorf("%d retry decisions, want %d", n, tc.attempts-1)
			}
			if tc.attempts > 1 {
				return
			}

			// resume never sends a call that may have run again: the run
			// stays blocked. The fault is still armed: a re-send would add a
			// ledger row.
			r = c.run("resume", run.ID.String(), "--trust-workspace")
			if r.code != exitBlocked {
				t.Fatalf("resume: exit %d, want %d\n%s\n%s", r.code, exitBlocked, r.stdout, r.stderr)
			}
			if n := c.ledgerCount(tc.tool); n != 1 {
				t.Errorf("after resume %s executed %d times, want 1", tc.tool, n)
			}
			run, inv = classifyOnly(t, c)
			if run.Status != journal.RunBlocked || inv.State != journal.StateOutcomeUnknown || len(inv.Attempts) != 1 {
				t.Errorf("after resume: run %s, invocation:%s", run.Status, describe([]journal.Invocation{inv}))
			}
		})
	}
}

// TestClassifyRejected: the server answers -32602 invalid params without
// running the tool. It provably did not run: failed with failure rejected,
// nothing in the ledger; resume sends it again as a new attempt — a first
// delivery, not a replay, so even an untrusted server in an untrusted
// workspace gets it — and with the fault gone it succeeds.
func TestClassifyRejected(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		attempts    int
	}{
		{"once", "", 1},
		{"with retry", ", retry: {attempts: 3, backoff: 10ms}", 3}, // retry may send a rejected call again
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.env = quickExit("MCPFLOW_DEMO_FAULT=reject-before-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append")
			wf := classifyWorkflow("{builtin: demo}", "ledger_append", "{entry: x}", tc.extra)
			r := c.run("run", c.workflow("w.yaml", wf))
			if r.code != exitFailed {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitFailed, r.stdout, r.stderr)
			}
			if n := c.ledgerCount("ledger_append"); n != 0 {
				t.Fatalf("ledger_append executed %d times, want 0", n)
			}
			run, inv := classifyOnly(t, c)
			if run.Status != journal.RunFailed || run.Error == nil || run.Error.Code != engine.CodeRejected {
				t.Errorf("run %s error %+v, want failed with %s", run.Status, run.Error, engine.CodeRejected)
			}
			if inv.State != journal.StateFailed || len(inv.Attempts) != tc.attempts || inv.Error == nil || inv.Error.Code != engine.CodeRejected {
				t.Fatalf("invocation:%s\nerror %+v", describe([]journal.Invocation{inv}), inv.Error)
			}
			for i, a := range inv.Attempts {
				if a.Failure != replay.ClassRejected || a.EndedAt == nil || a.Kind != kindOf(i, journal.KindRetry) || a.Replay {
					t.Errorf("attempt %d: %+v", i+1, a)
				}
			}

			c.env = quickExit() // the server accepts the call now
			r = c.run("resume", run.ID.String())
			if r.code != 0 {
				t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if n := c.ledgerCount("ledger_append"); n != 1 {
				t.Errorf("after resume ledger_append executed %d times, want 1", n)
			}
			run, inv = classifyOnly(t, c)
			if run.Status != journal.RunSucceeded || inv.State != journal.StateCompleted || len(inv.Attempts) != tc.attempts+1 || inv.Tally().AgainstBudget != 0 {
				t.Fatalf("after resume: run %s, invocation:%s", run.Status, describe([]journal.Invocation{inv}))
			}
			if last := inv.LastAttempt(); last.Failure != "" || last.Kind != journal.KindFirstDelivery || last.Replay || last.Trust == nil || last.Trust.Server || last.Trust.Workspace {
				t.Errorf("the re-sent attempt %+v (trust %+v), want a first delivery to the untrusted server", last, last.Trust)
			}
			if keys := c.ledgerKeys("ledger_append"); len(keys) != 1 || keys[0] != inv.ID.String() {
				t.Errorf("ledger keys %v, want [%s]", keys, inv.ID)
			}
		})
	}
}

// TestClassifyAbortedThenResume: Ctrl-C while the call hangs after its side
// effect committed leaves it aborted and the run cancelled. resume re-sends
// it only when the replay rule clears it: an unsafe tool's call is not sent
// again (blocked, exit 3), a safe trusted tool's is (exit 0).
func TestClassifyAbortedThenResume(t *testing.T) {
	for _, tc := range []struct {
		tool       string
		code, runs int
	}{
		{"ledger_append", exitBlocked, 1},
		{"upper", 0, 2},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c := newCLI(t)
			c.env = quickExit("MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL="+tc.tool)
			cmd, wait := c.background("run", c.workflow("w.yaml", oneCall("trusted", tc.tool)), "--trust-workspace")
			c.waitLedger(tc.tool, 1)
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			r := wait()
			if r.code != exitInterrupted {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitInterrupted, r.stdout, r.stderr)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			j.Close()
			if run.Status != journal.RunCancelled || len(invs) != 1 || invs[0].State != journal.StateAborted ||
				len(invs[0].Attempts) != 1 || invs[0].Attempts[0].Failure != replay.ClassAborted {
				t.Fatalf("run %s, invocations:%s\nwant cancelled with one aborted", run.Status, describe(invs))
			}

			c.env = quickExit() // no fault: a re-sent call would complete
			r = c.run("resume", run.ID.String(), "--trust-workspace")
			if r.code != tc.code {
				t.Fatalf("resume: exit %d, want %d\n%s\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if n := c.ledgerCount(tc.tool); n != tc.runs {
				t.Errorf("%s executed %d times, want %d", tc.tool, n, tc.runs)
			}
			j = c.openJournal()
			run, invs = c.onlyRun(j)
			j.Close()
			if tc.code == exitBlocked {
				// Resume judged the aborted call: its outcome is unknown, a
				// journaled decision that a later resume will not re-decide.
				if run.Status != journal.RunBlocked || len(invs) != 1 || invs[0].State != journal.StateOutcomeUnknown || len(invs[0].Attempts) != 1 {
					t.Errorf("after resume: run %s, invocations:%s", run.Status, describe(invs))
				}
				if d := invs[0].LastDecision(); d == nil || d.Verdict != "outcome_unknown" || d.Reason != "no_annotations" {
					t.Errorf("decision %+v", d)
				}
				if invs[0].Error == nil || invs[0].Error.Error() != replay.ErrOutcomeUnknown.Error() {
					t.Errorf("error %v, want the stable error", invs[0].Error)
				}
				if c.ledgerCount("greet") != 0 {
					t.Errorf("the step after the blocked one ran")
				}
				// The blocked message names the invocation waiting for an
				// operator, with its state, and how to resolve it.
				if !strings.Contains(r.stderr, "waiting for you: invocation "+invs[0].ID.Short()) || !strings.Contains(r.stderr, "(outcome_unknown)") ||
					!strings.Contains(r.stderr, "mcpflow journal resolve "+invs[0].ID.Short()+" --as") {
					t.Errorf("stderr does not say what waits and how to resolve it:\n%s", r.stderr)
				}
				return
			}
			if run.Status != journal.RunSucceeded || len(invs) != 2 {
				t.Fatalf("after resume: run %s, invocations:%s", run.Status, describe(invs))
			}
			inv := invs[0]
			if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[1].Kind != journal.KindReplay || !inv.Attempts[1].Replay || inv.Attempts[1].Failure != "" {
				t.Errorf("after resume:%s", describe(invs))
			}
			if keys := c.ledgerKeys(tc.tool); len(keys) != 2 || keys[0] != inv.ID.String() || keys[1] != inv.ID.String() {
				t.Errorf("ledger keys %v, want twice %s", keys, inv.ID)
			}
			if c.ledgerCount("greet") != 1 {
				t.Errorf("greet executed %d times, want 1", c.ledgerCount("greet"))
			}
		})
	}
}

// TestClassifyToolError: a result with isError: true proves the tool ran.
// The invocation is completed with the error result, the run fails (exit
// 1), and resume never sends the call again.
func TestClassifyToolError(t *testing.T) {
	c := newCLI(t)
	c.env = quickExit()
	wf := classifyWorkflow("{builtin: demo, trust: true}", "fail", "{message: boom}", "")
	r := c.run("run", c.workflow("w.yaml", wf), "--trust-workspace")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitFailed, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("fail"); n != 1 {
		t.Errorf("fail executed %d times, want 1", n)
	}
	run, inv := classifyOnly(t, c)
	if run.Status != journal.RunFailed || run.Error == nil || run.Error.Code != engine.CodeToolError || !strings.Contains(run.Error.Message, "boom") {
		t.Errorf("run %s error %+v, want failed with %s", run.Status, run.Error, engine.CodeToolError)
	}
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 1 || inv.Result == nil || !inv.Result.IsError ||
		!strings.Contains(string(inv.Result.Content), "boom") {
		t.Fatalf("invocation:%s\nresult %+v", describe([]journal.Invocation{inv}), inv.Result)
	}

	r = c.run("resume", run.ID.String(), "--trust-workspace")
	if r.code != exitFailed {
		t.Fatalf("resume: exit %d, want %d\n%s\n%s", r.code, exitFailed, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("fail"); n != 1 {
		t.Errorf("after resume fail executed %d times, want 1", n)
	}
	run, inv = classifyOnly(t, c)
	if run.Status != journal.RunFailed || inv.State != journal.StateCompleted || len(inv.Attempts) != 1 {
		t.Errorf("after resume: run %s, invocation:%s", run.Status, describe([]journal.Invocation{inv}))
	}
}
