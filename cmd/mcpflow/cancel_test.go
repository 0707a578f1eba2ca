package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// The demo server writes a ledger line for each call that ends unanswered
// (--ledger-ends): "cancelled" when notifications/cancelled reached it,
// "abandoned" when its connection ended under the call. These tests stop a
// call in flight the three ways a user can, and check that the server was
// told: a "cancelled" line with the invocation's key, no "abandoned" one.

const slowCall = `name: slow
servers: {demo: {builtin: demo}}
steps:
  - id: count
    server: demo
    tool: count_slowly
    with: {n: 1000, delay_ms: 20}
`

// wantCancelled waits for the ledger line that says how the call of invocation
// inv ended, and checks it is "cancelled".
func (c *cli) wantCancelled(inv journal.Invocation) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ends []string
		for _, row := range c.ledger() {
			if row["tool"] == "cancelled" || row["tool"] == "abandoned" {
				ends = append(ends, row["tool"].(string)+" "+row["idempotency_key"].(string))
			}
		}
		if len(ends) > 0 || time.Now().After(deadline) {
			if want := "cancelled " + inv.ID.String(); len(ends) != 1 || ends[0] != want {
				c.t.Errorf("the server saw the call end as %q, want [%s]: the client must send notifications/cancelled", ends, want)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// onlyInvocation is the run's one invocation, which must be in state with
// one attempt that failed as class says: telling the server changes
// nothing of what the journal says (the call may have run).
func (c *cli) onlyInvocation(state journal.State, class replay.Class) journal.Invocation {
	c.t.Helper()
	j := c.openJournal()
	defer j.Close()
	_, invs := c.onlyRun(j)
	if len(invs) != 1 || invs[0].State != state || len(invs[0].Attempts) != 1 || invs[0].Attempts[0].Failure != class {
		c.t.Fatalf("want one invocation %s with one attempt, %s:%s", state, class, describe(invs))
	}
	if n := c.ledgerCount("count_slowly"); n != 1 {
		c.t.Errorf("count_slowly ran %d times, want 1", n)
	}
	return invs[0]
}

// TestStepTimeoutCancelsTheCall: a step's timeout: tells the server. The
// call may have run all the same: on an untrusted server its outcome is
// unknown, as before.
func TestStepTimeoutCancelsTheCall(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_LEDGER_ENDS=1"}
	r := c.run("run", c.workflow("w.yaml", slowCall+"    timeout: 500ms\n"))
	if r.code != exitBlocked || !strings.Contains(r.stderr, "the call timed out after 500ms; it may have run") {
		t.Fatalf("exit %d, want %d with a timeout\n%s%s", r.code, exitBlocked, r.stdout, r.stderr)
	}
	c.wantCancelled(c.onlyInvocation(journal.StateOutcomeUnknown, replay.ClassTimedOut))
}

// TestInterruptCancelsTheCall: Ctrl-C (SIGINT) tells the server before
// mcpflow stops it.
func TestInterruptCancelsTheCall(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_LEDGER_ENDS=1"}
	cmd, wait := c.background("run", c.workflow("w.yaml", slowCall))
	c.waitLedger("count_slowly", 1)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if r := wait(); r.code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s%s", r.code, exitInterrupted, r.stdout, r.stderr)
	}
	c.wantCancelled(c.onlyInvocation(journal.StateAborted, replay.ClassAborted))
}

// TestRunsCancelCancelsTheCall: `runs cancel` from a second terminal tells
// the server, through the socket of the run that holds the journal (which
// then stops the server) and through `mcpflow server` (which keeps it).
func TestRunsCancelCancelsTheCall(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"owner", "server"} {
		t.Run(where, func(t *testing.T) {
			c := newCLI(t)
			c.env = []string{"MCPFLOW_DEMO_LEDGER_ENDS=1"}
			stop := func() {}
			if where == "server" {
				cmd, wait := c.startServer()
				stop = func() { c.stopServer(cmd, wait) }
			}
			_, wait := c.background("run", c.workflow("w.yaml", slowCall))
			waitServing(t, filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock"), "the run", wait)
			c.waitLedger("count_slowly", 1)
			id := strings.TrimSpace(c.run("runs", "list", "--status", "running", "--jq", ".[0].id").stdout)
			if r := c.run("runs", "cancel", id, "--reason", "enough"); r.code != 0 {
				t.Fatalf("runs cancel %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
			}
			if r := wait(); r.code != exitInterrupted {
				t.Fatalf("the run: exit %d, want %d\n%s%s", r.code, exitInterrupted, r.stdout, r.stderr)
			}
			stop() // the server keeps the session: the call ended while it went on
			c.wantCancelled(c.onlyInvocation(journal.StateAborted, replay.ClassAborted))
		})
	}
}
