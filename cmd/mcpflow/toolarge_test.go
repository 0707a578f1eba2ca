package main

import (
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// TestResultTooLarge: a stdio server's answer over max_message_size is not a
// lost connection: the call is not replayed (it would fail the same way),
// even for a trusted safe tool, and the error says what happened.
func TestResultTooLarge(t *testing.T) {
	c := newCLI(t)
	wf := `name: big
servers:
  s: {builtin: demo, trust: true, max_message_size: 16KiB}
steps:
  - {id: shout, server: s, tool: upper, with: {text: "` + strings.Repeat("a", 20000) + `"}}
`
	r := c.run("run", c.workflow("big.yaml", wf), "--trust-workspace")
	if r.code != exitFailed || !strings.Contains(r.stdout+r.stderr, "larger than 16 KiB") {
		t.Fatalf("exit %d, want 1 naming the limit\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("upper"); n != 1 {
		t.Errorf("upper ran %d times, want 1", n)
	}
	j := c.openJournal()
	defer j.Close()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunFailed || run.Error == nil || run.Error.Code != engine.CodeResultTooLarge {
		t.Errorf("run %s %+v", run.Status, run.Error)
	}
	if len(invs) != 1 || invs[0].State != journal.StateFailed || len(invs[0].Attempts) != 1 || invs[0].Attempts[0].Failure != "result_too_large" {
		t.Errorf("invocations:%s", describe(invs))
	}
}
