package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// pipedWorkflow makes four calls on an untrusted server, two of them
// appends that are never replayed: killed mid-call, a run of it would end
// outcome_unknown on resume.
const pipedWorkflow = `name: piped
servers: {demo: {builtin: demo}}
steps:
  - {id: one, server: demo, tool: greet, with: {name: a}}
  - {id: two, server: demo, tool: ledger_append, with: {entry: b}}
  - {id: three, server: demo, tool: greet, with: {name: c}}
  - {id: four, server: demo, tool: ledger_append, with: {entry: d}}
`

// TestClosedPipe: output is a view. When the reader of stdout goes away
// after its first line (mcpflow run wf.yaml | head -1), the command is not
// killed (SIGPIPE) mid-call: the run goes on to its end, journaled as
// always, the exit code is the run's, and nothing is said of the pipe. So
// for run, run -o jsonl, runs watch, and run through mcpflow server.
func TestClosedPipe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server bool
		delay  string // of each call: the run goes on well after the first line
		args   func(c *cli, wf string) []string
	}{
		{"run", false, "200ms", func(_ *cli, wf string) []string { return []string{"run", wf} }},
		{"run-jsonl", false, "200ms", func(_ *cli, wf string) []string { return []string{"run", wf, "-o", "jsonl"} }},
		{"run-through-server", true, "200ms", func(_ *cli, wf string) []string { return []string{"run", wf} }},
		// The run is going when watch, a process started after run
		// --detach, comes to follow it.
		{"runs-watch", true, "1s", func(c *cli, wf string) []string {
			r := c.run("run", "--detach", wf)
			if r.code != 0 || !runIDLine.MatchString(r.stdout) {
				t.Fatalf("run --detach: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			return []string{"runs", "watch", strings.TrimSpace(r.stdout)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.env = []string{"MCPFLOW_DEMO_DELAY=" + tc.delay}
			wf := c.workflow("piped.yaml", pipedWorkflow)
			var stop func()
			if tc.server {
				srv, wait := c.startServer()
				stop = func() { c.stopServer(srv, wait) }
			}
			code, stderr := runHeadOne(t, c, tc.args(c, wf)...)
			if stop != nil {
				stop()
			}
			if code != exitOK || strings.Contains(stderr, "pipe") {
				t.Errorf("exit %d, want the run's 0, and nothing said of the pipe; stderr:\n%s", code, stderr)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunSucceeded || len(invs) != 4 {
				t.Fatalf("run %s with %d invocations, want succeeded with 4", run.Status, len(invs))
			}
			for _, inv := range invs {
				if inv.State != journal.StateCompleted {
					t.Errorf("step %s ended %s, want completed", inv.Step, inv.State)
				}
			}
			if n := c.ledgerCount("ledger_append"); n != 2 {
				t.Errorf("ledger_append ran %d times, want 2", n)
			}
		})
	}
}

// runHeadOne runs mcpflow with stdout a pipe whose reader reads one line
// and goes away, as head -1 does, and returns how it exited; it fails the
// test if a signal ended it.
func runHeadOne(t *testing.T, c *cli, args ...string) (code int, stderr string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.command(args...)
	var errb lockedBuffer
	cmd.Stdout, cmd.Stderr = w, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if err != nil {
		t.Errorf("no first line on stdout: %q, %v", line, err)
	}
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("%v: killed by %v after its first line %q; stderr:\n%s", args, ws.Signal(), line, errb.String())
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

// TestClosedOutputEndsAReport: a command that only reports, whose reader
// went away, ends quietly with exit code 141; after the first write that
// found the pipe closed, no write is attempted.
func TestClosedOutputEndsAReport(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r.Close()
	var errb strings.Builder
	if code := run([]string{"version"}, strings.NewReader(""), w, &errb); code != exitPipe || errb.Len() != 0 {
		t.Errorf("version into a closed pipe: exit %d, stderr %q; want %d and nothing said", code, errb.String(), exitPipe)
	}

	out := viewOf(w)
	if _, err := out.Write([]byte("x\n")); !errors.Is(err, errOutputClosed) || !errors.Is(err, syscall.EPIPE) {
		t.Errorf("first write: %v, want EPIPE as errOutputClosed", err)
	}
	w.Close() // a write attempted now would fail with os.ErrClosed
	if _, err := out.Write([]byte("y\n")); err != errOutputClosed {
		t.Errorf("later write: %v, want errOutputClosed at once", err)
	}
	if err := ignoreClosedOutput(fmt.Errorf("print: %w", errOutputClosed)); err != nil {
		t.Errorf("ignoreClosedOutput of closed output = %v", err)
	}
	if err := ignoreClosedOutput(os.ErrPermission); err != os.ErrPermission {
		t.Errorf("ignoreClosedOutput of another error = %v", err)
	}
}
