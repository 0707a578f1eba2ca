package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/workflow"
)

// TestSecretsKeptFaithfullyAndPrivately: with payloads encrypted at rest,
// the journal keeps what was sent and received exactly — a one-letter
// secret no longer mangles results — and secret inputs too, so resume needs
// no retyping and refuses a different value (which would send other
// arguments under the same idempotency key). The file never holds a secret
// in clear; what is shown is redacted; export --decrypt is the one faithful
// view.
func TestSecretsKeptFaithfullyAndPrivately(t *testing.T) {
	c := newCLI(t)
	const token = "ACCT-SECRET-7731"
	wf := c.workflow("secret.yaml", `name: secret
inputs:
  token: {type: string, secret: true}
  l: {type: string, secret: true}
servers: {demo: {builtin: demo}}
steps:
  - {id: hi, server: demo, tool: greet, with: {name: world}}
  - {id: pay, server: demo, tool: ledger_append, with: {entry: "${{ inputs.token }}"}}
`)
	c.env = []string{"MCPFLOW_DEMO_FAULT=reject-before-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	r := c.run("run", wf, "--input", "token="+token, "--input", "l=l")
	if r.code != exitFailed || strings.Contains(r.stdout+r.stderr, token) {
		t.Fatalf("run: exit %d, want 1 without the secret shown\n%s%s", r.code, r.stdout, r.stderr)
	}
	raw, err := os.ReadFile(c.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(token)) || bytes.Contains(raw, []byte("Hello, world!")) {
		t.Error("the journal file holds payloads in clear")
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if run.Inputs["token"] != token || run.Inputs["l"] != "l" {
		t.Errorf("journaled inputs %v, want the secrets kept (encrypted)", run.Inputs)
	}
	if !strings.Contains(string(invs[0].Result.Content), "Hello, world!") {
		t.Errorf("greet's journaled result %s: a secret %q mangled it", invs[0].Result.Content, "l")
	}

	// Shown: redacted. Exported without --decrypt: sealed.
	for _, args := range [][]string{{"runs", "show", run.ID.String(), "-o", "json"}, {"journal", "show", invs[1].ID.String(), "--payload"}, {"journal", "export"}} {
		if r := c.run(args...); r.code != 0 || strings.Contains(r.stdout, token) {
			t.Errorf("%v shows the secret (exit %d)\n%s", args, r.code, r.stdout)
		}
	}
	if r := c.run("runs", "show", run.ID.String()); !strings.Contains(r.stdout, "Inputs:\n  l: "+workflow.Redacted+"\n  token: "+workflow.Redacted+"\n") {
		t.Errorf("runs show: want the inputs listed, redacted (exit %d)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("journal", "export", "--decrypt"); r.code != 0 || !strings.Contains(r.stdout, token) {
		t.Errorf("export --decrypt: exit %d, want the faithful arguments\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A different secret on resume is refused; none at all uses the kept one.
	c.env = nil
	if r := c.run("resume", run.ID.String(), "--input", "token=ACCT-OTHER"); r.code != exitUsage || !strings.Contains(r.stderr, "differs from the value run") {
		t.Errorf("resume with another secret: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("resume", run.ID.String()); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if rows := ledgerRowsBy(c, "ledger_append", "entry"); rows[token] != 1 || len(rows) != 1 {
		t.Errorf("ledger %v, want the original secret sent once", rows)
	}
	j = c.openJournal()
	got, _ := j.Run(run.ID)
	j.Close()
	if got.Status != journal.RunSucceeded {
		t.Errorf("after resume: %s", got.Status)
	}
}
