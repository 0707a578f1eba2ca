package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// TestCtrlCWhileResumeReconnects: Ctrl-C while resume reconnects to a
// server, to re-send a timed-out call the replay rule cleared, ends the run
// as cancelled with exit 130 — not as "server unavailable" — and sends
// nothing.
func TestCtrlCWhileResumeReconnects(t *testing.T) {
	c := newCLI(t)
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatalf("trust add: %+v", r)
	}
	conf := filepath.Join(c.workspace, "mcpflow.yaml")
	if err := os.WriteFile(conf, []byte("servers:\n  demo: {builtin: demo, trust: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wf := c.workflow("put.yaml", `name: put
steps:
  - id: put
    server: demo
    tool: put_record
    with: {key: k, value: v}
    timeout: 300ms
`)
	c.env = append(c.env, "MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=put_record")
	if r := c.run("run", wf); r.code != exitFailed || !strings.Contains(r.stdout+r.stderr, "timed out") {
		t.Fatalf("run: exit %d, want 1 with a timeout\n%s%s", r.code, r.stdout, r.stderr)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if len(invs) != 1 || invs[0].State != journal.StateTimedOut {
		t.Fatalf("after the run: %s", describe(invs))
	}

	// Now the server never finishes starting: resume hangs reconnecting.
	if err := os.WriteFile(conf, []byte("servers:\n  demo: {command: sleep, args: [\"30\"], trust: true, connect_timeout: 60s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(c.workspace, ".mcpflow", "logs")
	if err := os.RemoveAll(logs); err != nil {
		t.Fatal(err)
	}
	cmd, wait := c.background("resume", run.ID.String())
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(logs, "demo.log")); err == nil {
			break // the server process is started: resume is connecting
		}
		if time.Now().After(deadline) {
			t.Fatalf("resume never started the server: %+v", wait())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := wait()
	if r.code != exitInterrupted || !strings.Contains(r.stdout+r.stderr, "interrupted while reconnecting to server demo") {
		t.Fatalf("resume after Ctrl-C: exit %d, want 130 and the interruption named\n%s%s", r.code, r.stdout, r.stderr)
	}
	j = c.openJournal()
	defer j.Close()
	got, err := j.Run(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	invs, _ = j.RunInvocations(run.ID)
	if got.Status != journal.RunCancelled || len(invs) != 1 || len(invs[0].Attempts) != 1 {
		t.Errorf("after Ctrl-C: run %s, %s; want cancelled with the one attempt", got.Status, describe(invs))
	}
	if n := c.ledgerCount("put_record"); n != 1 {
		t.Errorf("put_record ran %d times, want 1", n)
	}
}
