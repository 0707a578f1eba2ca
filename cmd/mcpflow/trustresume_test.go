package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestResumeKeepsTheTrustItStartedWith: a run started with
// --trust-workspace, in a workspace the store does not trust, is not
// resumed without the flag unless the user confirms — on a terminal by
// answering the question, elsewhere with --untrusted — and a refusal
// journals nothing. With the flag, or once the workspace is trusted, no
// question is asked.
func TestResumeKeepsTheTrustItStartedWith(t *testing.T) {
	c := newCLI(t)
	failTrusted(c)
	j := c.openJournal()
	run, before := c.onlyRun(j)
	j.Close()
	id := run.ID.Short()

	r := c.run("resume", id)
	if r.code != exitUsage || !strings.Contains(r.stderr, "was started with --trust-workspace") || !strings.Contains(r.stderr, "--untrusted") {
		t.Errorf("resume without the flag: exit %d, want 2 naming the flag\n%s", r.code, r.stderr)
	}
	j = c.openJournal()
	_, after := c.onlyRun(j)
	got, _ := j.Run(run.ID)
	j.Close()
	if describe(after) != describe(before) || got.UpdatedAt != run.UpdatedAt {
		t.Errorf("a refused resume wrote to the journal:\n%s\nwas\n%s", describe(after), describe(before))
	}

	// On a terminal the user is asked; no refuses, yes goes on.
	for _, answer := range []string{"n", "y"} {
		code, out := ptyAnswer(t, c, "Resume without workspace trust? [y/N] ", answer, "resume", id)
		if answer == "n" && (code != exitUsage || !strings.Contains(out, "not resumed")) {
			t.Errorf("answered no: exit %d\n%s", code, out)
		}
		if answer == "y" && (code == exitUsage || strings.Contains(out, "not resumed")) {
			t.Errorf("answered yes: exit %d\n%s", code, out)
		}
	}
	for _, args := range [][]string{{"--untrusted"}, {"--trust-workspace"}} {
		if r := c.run(append([]string{"resume", id}, args...)...); r.code == exitUsage {
			t.Errorf("resume %v: exit 2\n%s", args, r.stderr)
		}
	}
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := c.run("resume", id); r.code == exitUsage || strings.Contains(r.stderr, "--trust-workspace") {
		t.Errorf("resume in a trusted workspace: exit %d\n%s", r.code, r.stderr)
	}
}

// failTrusted runs hello.yaml with --trust-workspace in c's workspace,
// which the trust store does not trust; its ledger_append fails, so the
// run can be resumed.
func failTrusted(c *cli) {
	c.t.Helper()
	c.env = []string{"MCPFLOW_DEMO_FAULT=reject-before-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	if r := c.run("run", repoFile("examples", "workflows", "hello.yaml"), "--trust-workspace"); r.code != exitFailed {
		c.t.Fatalf("run: exit %d, want 1\n%s", r.code, r.stderr)
	}
	c.env = nil
}

// ptyAnswer runs mcpflow on a pseudo-terminal, answers the question when it
// is asked, and returns the exit code and everything written.
func ptyAnswer(t *testing.T, c *cli, question, answer string, args ...string) (int, string) {
	t.Helper()
	return ptyKeys(t, c, question, answer+"\n", args...)
}

// ptyKeys runs mcpflow on a pseudo-terminal, types keys as they are when
// question is asked, and returns the exit code and everything written. A
// command still going 20 s later is killed and fails the test.
func ptyKeys(t *testing.T, c *cli, question, keys string, args ...string) (int, string) {
	t.Helper()
	cmd := c.command(args...)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	var out lockedBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&out, ptmx) // ends with EIO once the child's side is closed
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), question) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("never asked %q:\n%s", question, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ptmx.Write([]byte(keys))
	hung := time.AfterFunc(20*time.Second, func() {
		t.Errorf("still going 20 s after %q was typed; killed", keys)
		cmd.Process.Kill()
	})
	defer hung.Stop()
	err = cmd.Wait()
	<-copied
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// TestResumeAsksThroughAServer: through mcpflow server, resume refuses a
// run started with --trust-workspace the same way (exit 2, the same
// sentinel read back from the wire), advises only what goes through a
// server (not the flag it refuses), and on a terminal asks the same
// question; yes resumes it in the server.
func TestResumeAsksThroughAServer(t *testing.T) {
	c := newCLI(t)
	failTrusted(c)
	id := strings.TrimSpace(c.run("runs", "list", "--jq", ".[0].id").stdout)[:18]
	srv, wait := c.startServer()
	defer c.stopServer(srv, wait)

	r := c.run("resume", id)
	if r.code != exitUsage || !strings.Contains(r.stderr, "was started with --trust-workspace") || !strings.Contains(r.stderr, "--untrusted") {
		t.Errorf("resume through the server: exit %d, want 2 naming --untrusted\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "resume with --trust-workspace") {
		t.Errorf("through the server, the refusal advises the flag the server refuses:\n%s", r.stderr)
	}
	code, out := ptyAnswer(t, c, "Resume without workspace trust? [y/N] ", "y", "resume", id)
	if code == exitUsage || strings.Contains(out, "not resumed") || !strings.Contains(out, "run "+id) {
		t.Errorf("answered yes through the server: exit %d\n%s", code, out)
	}
}

// TestBlockedByATimeoutSaysSoFirst: a step whose timeout cut its call
// short is blocked (the call may have run, the demo server is not
// trusted); the report says first what happened — the timeout, and after
// how long — then why the call is not sent again.
func TestBlockedByATimeoutSaysSoFirst(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("slow.yaml", `name: slow
servers: {demo: {builtin: demo}}
steps:
  - {id: count, server: demo, tool: count_slowly, timeout: 1s, with: {n: 40, delay_ms: 100}}
`)
	r := c.run("run", wf)
	if r.code != exitBlocked {
		t.Fatalf("run: exit %d, want %d\n%s%s", r.code, exitBlocked, r.stdout, r.stderr)
	}
	what := strings.Index(r.stderr, "what happened: the call timed out after 1s; it may have run")
	why := strings.Index(r.stderr, "not replayed: ")
	if what < 0 || why < 0 || what > why {
		t.Errorf("the blocked report does not say first that the call timed out:\n%s", r.stderr)
	}
}
