package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/client"
)

// startServer starts `mcpflow server` in the workspace, with env added to
// its environment (the demo servers it starts inherit it), and returns
// once it answers on its socket (a command holding the journal for its
// one run answers there too, and is not taken for it).
func (c *cli) startServer(env ...string) (*exec.Cmd, func() result) {
	c.t.Helper()
	saved := c.env
	c.env = append(slices.Clone(saved), env...)
	cmd, wait := c.background("server", "--grace", "100ms")
	c.env = saved
	socket := filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock")
	deadline := time.Now().Add(20 * time.Second)
	for h, ok := client.Probe(socket); !ok || h.Owner != nil; h, ok = client.Probe(socket) {
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			r := wait()
			c.t.Fatalf("mcpflow server never answered on %s: exit %d\n%s%s", socket, r.code, r.stdout, r.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, wait
}

// stopServer stops the server as SIGTERM does and checks it exited cleanly.
func (c *cli) stopServer(cmd *exec.Cmd, wait func() result) {
	c.t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	if r := wait(); r.code != 0 {
		c.t.Fatalf("mcpflow server: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

const quickWorkflow = `name: quick
inputs:
  token: {type: string, secret: true}
servers:
  demo: {builtin: demo, trust: true}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: "${{ inputs.token }}"}}
  - {id: count, server: demo, tool: count_slowly, with: {n: 3, delay_ms: 10}}
outputs:
  counted: "${{ steps.count.structuredContent.count }}"
`

// hangWorkflow's second call hangs once it ran, with
// MCPFLOW_DEMO_FAULT=hang-after-commit: the run goes until it is cancelled.
const hangWorkflow = `name: hang
servers:
  demo: {builtin: demo}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: x}}
  - {id: append, server: demo, tool: ledger_append, with: {entry: charge}}
`

var runIDLine = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$`)

// TestDetachWithoutServerTakesNothing: run --detach with no server to
// take the run, on a bbolt journal, is refused without opening the
// journal or serving its socket: a server starting meanwhile (a restart,
// while a script submits runs) finds both free.
func TestDetachWithoutServerTakesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	quick := c.workflow("quick.yaml", quickWorkflow)
	if r := c.run("run", "--detach", quick, "--input", "token=x"); r.code != exitUsage || !strings.Contains(r.stderr, "--detach needs mcpflow server") {
		t.Fatalf("run --detach without a server: exit %d, stderr %q", r.code, r.stderr)
	}
	if entries, err := os.ReadDir(filepath.Join(c.workspace, ".mcpflow")); !os.IsNotExist(err) {
		t.Fatalf("the refused run --detach made .mcpflow: %v %v", entries, err)
	}
}

// TestServerClient runs the CLI against `mcpflow server`: while a run
// goes in the server, other commands read the journal and start runs of
// their own (they would get "journal in use" without it); runs watch
// follows a run that runs cancel stops; exclusive commands refuse.
func TestServerClient(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	quick := c.workflow("quick.yaml", quickWorkflow)
	hang := c.workflow("hang.yaml", hangWorkflow)
	srv, stopped := c.startServer("MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append")

	r := c.run("run", "--detach", hang)
	if r.code != 0 || !runIDLine.MatchString(r.stdout) || !strings.Contains(r.stderr, "mcpflow runs watch") {
		t.Fatalf("run --detach: exit %d, stdout %q, stderr %q; want 0 and the run id", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	c.waitLedger("ledger_append", 1) // its call is in flight, and stays

	// The journal is read while the run goes.
	r = c.run("journal", "list", "--run", id, "--jq", `.[] | "\(.step) \(.state)"`)
	if r.code != 0 || r.stdout != "append intent\ngreet completed\n" {
		t.Fatalf("journal list: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = c.run("runs", "show", id, "--jq", ".status")
	if r.code != 0 || r.stdout != "running\n" {
		t.Fatalf("runs show: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = c.run("resume", id)
	if r.code != exitUsage || !strings.Contains(r.stderr, "is running; follow it with 'mcpflow runs watch") {
		t.Fatalf("resume of a run going: exit %d, stderr %q; want 2 and how to watch it", r.code, r.stderr)
	}

	// Two runs started at once from two processes, one streaming events.
	_, waitTable := c.background("run", quick, "--input", "token=hunter2")
	_, waitJSONL := c.background("run", quick, "-o", "jsonl", "--input", "token=hunter2")
	table, jsonl := waitTable(), waitJSONL()
	if table.code != 0 || !regexp.MustCompile(`(?m)^step count +completed +demo/count_slowly .*→ counted to 3$`).MatchString(table.stdout) ||
		!strings.Contains(table.stdout, "outputs:\n  counted: 3\n") || !strings.Contains(table.stdout, "Hello, [redacted]!") {
		t.Fatalf("run: exit %d\n%s%s", table.code, table.stdout, table.stderr)
	}
	if jsonl.code != 0 {
		t.Fatalf("run -o jsonl: exit %d\n%s%s", jsonl.code, jsonl.stdout, jsonl.stderr)
	}
	checkEventLines(t, jsonl.stdout, "succeeded", []string{"run_started", "step_started", "step_finished", "step_started", "step_finished", "run_finished"})
	for _, out := range []string{table.stdout, table.stderr, jsonl.stdout, jsonl.stderr} {
		if strings.Contains(out, "hunter2") {
			t.Fatalf("a secret input was printed:\n%s", out)
		}
	}

	// runs watch follows the hung run from its start — its header and the
	// step that completed before it attached — then runs cancel ends it.
	watch := c.command("runs", "watch", id)
	var watchOut, watchErr lockedBuffer
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watch.Process.Kill() })
	attached := regexp.MustCompile(`(?s)run ` + id[:18] + `[0-9a-f-]* started: hang\n.*step greet +completed +demo/greet`)
	for deadline := time.Now().Add(20 * time.Second); !attached.MatchString(watchOut.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("runs watch did not show the run from its start:\n%s%s", watchOut.String(), watchErr.String())
		}
	}
	watched := func() result {
		watch.Wait()
		return result{watch.ProcessState.ExitCode(), watchOut.String(), watchErr.String()}
	}
	r = c.run("runs", "cancel", id, "--reason", "enough")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "cancelling run "+id[:18]) {
		t.Fatalf("runs cancel: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	w := watched()
	if w.code != exitInterrupted || !strings.Contains(w.stderr, "was interrupted; continue it with: mcpflow resume "+id[:18]) {
		t.Fatalf("runs watch: exit %d, want %d\n%s%s", w.code, exitInterrupted, w.stdout, w.stderr)
	}
	r = c.run("runs", "show", id, "--jq", `.status, (.steps[] | "\(.step) \(.state)"), (.error.message | test("cancelled: enough"))`)
	if r.stdout != "cancelled\ngreet completed\nappend aborted\ntrue\n" {
		t.Fatalf("runs show after cancel (the reason in the run's error): %q", r.stdout)
	}
	if r = c.run("runs", "cancel", id); r.code != exitFailed || !strings.Contains(r.stderr, "is cancelled: nothing to cancel") {
		t.Fatalf("runs cancel of a cancelled run: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Fatalf("ledger_append ran %d times, want 1", n)
	}

	// call, resolve, export and check go through the server too.
	r = c.run("call", "demo", "greet", "--arg", "name=Ada", "--workflow", quick)
	if r.code != 0 || r.stdout != "Hello, Ada!\n" {
		t.Fatalf("call: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = c.run("journal", "resolve", id[:18], "--as", "failed", "--reason", "checked: not charged")
	if r.code != exitUsage || !strings.Contains(r.stderr, id[:18]) {
		t.Fatalf("journal resolve of a run id: exit %d, stderr %q; want 2, an unknown invocation", r.code, r.stderr)
	}
	aborted := c.run("journal", "list", "--state", "aborted", "--jq", ".[0].id")
	r = c.run("journal", "resolve", strings.TrimSpace(aborted.stdout), "--as", "failed", "--reason", "checked: not charged")
	if r.code != 0 || !strings.Contains(r.stdout, "resolved as failed") {
		t.Fatalf("journal resolve: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = c.run("journal", "export"); r.code != 0 || len(lines(r.stdout)) != 7 {
		t.Fatalf("journal export: exit %d, %d lines, want 7 (2 + 2×2 + 1)\n%s%s", r.code, len(lines(r.stdout)), r.stdout, r.stderr)
	}
	if r = c.run("journal", "check"); r.code != 0 || !strings.HasSuffix(r.stdout, ": OK\n") {
		t.Fatalf("journal check: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// Interrupted while following, the run goes on; with
	// --cancel-on-interrupt it is cancelled.
	for _, tc := range []struct {
		flags  []string
		status string
		stderr string
	}{
		{nil, "running", "goes on in mcpflow server; follow it with: mcpflow runs watch"},
		{[]string{"--cancel-on-interrupt"}, "cancelled", "was interrupted; continue it with: mcpflow resume"},
	} {
		n := c.ledgerCount("ledger_append")
		cmd, wait := c.background(append([]string{"run", hang}, tc.flags...)...)
		c.waitLedger("ledger_append", n+1)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := wait()
		if r.code != exitInterrupted || !strings.Contains(r.stderr, tc.stderr) {
			t.Fatalf("run %v, interrupted: exit %d, want %d and %q\n%s%s", tc.flags, r.code, exitInterrupted, tc.stderr, r.stdout, r.stderr)
		}
		s := c.run("runs", "list", "--limit", "1", "--jq", ".[0].status")
		if s.stdout != tc.status+"\n" {
			t.Fatalf("run %v, interrupted: the run is %q, want %s", tc.flags, s.stdout, tc.status)
		}
	}

	// Commands that need the journal to themselves refuse.
	for _, args := range [][]string{{"journal", "compact"}, {"journal", "prune", "--before", "1h"}} {
		if r := c.run(args...); r.code != exitJournal || !strings.Contains(r.stderr, "stop mcpflow server first") {
			t.Fatalf("%v: exit %d, stderr %q; want 4 and stop the server first", args, r.code, r.stderr)
		}
	}
	c.stopServer(srv, stopped)

	// Without a server: embedded, as before.
	if r := c.run("run", "--detach", quick, "--input", "token=x"); r.code != exitUsage || !strings.Contains(r.stderr, "--detach needs mcpflow server") {
		t.Fatalf("run --detach without a server: exit %d, stderr %q", r.code, r.stderr)
	}
	r = c.run("run", quick, "-o", "jsonl", "--input", "token=x")
	if r.code != 0 {
		t.Fatalf("run -o jsonl embedded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkEventLines(t, r.stdout, "succeeded", []string{"run_started", "step_started", "step_finished", "step_started", "step_finished", "run_finished"})
	r = c.run("runs", "watch", id)
	if r.code != exitInterrupted || !strings.Contains(r.stderr, "run "+id[:18]+" ended ") {
		t.Fatalf("runs watch of a cancelled run, embedded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	running := c.run("runs", "list", "--status", "running", "--jq", ".[0].id")
	r = c.run("runs", "watch", strings.TrimSpace(running.stdout))
	if r.code != exitFailed || !strings.Contains(r.stderr, "is not going anywhere") {
		t.Fatalf("runs watch of a run left running, embedded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("runs", "cancel", strings.TrimSpace(running.stdout))
	if r.code != exitFailed || !strings.Contains(r.stderr, "no mcpflow server runs in this workspace") {
		t.Fatalf("runs cancel embedded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// checkEventLines checks run -o jsonl: one event a line with the kinds
// wanted (progress aside), then the run, which ends with status.
func checkEventLines(t *testing.T, out, status string, kinds []string) {
	t.Helper()
	ls := lines(out)
	var got []string
	var run string
	for _, l := range ls[:len(ls)-1] {
		var e struct {
			Kind, Run, Status string
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event line %q: %v", l, err)
		}
		if run == "" {
			run = e.Run
		}
		if e.Run != run {
			t.Fatalf("an event of run %s among run %s's", e.Run, run)
		}
		if e.Kind == "run_finished" && e.Status != status {
			t.Fatalf("run_finished with status %q, want %s", e.Status, status)
		}
		if e.Kind != "step_progress" {
			got = append(got, e.Kind)
		}
	}
	if !slices.Equal(got, kinds) {
		t.Fatalf("event kinds %v, want %v\n%s", got, kinds, out)
	}
	var last struct{ ID, Status string }
	if err := json.Unmarshal([]byte(ls[len(ls)-1]), &last); err != nil || last.ID != run || last.Status != status {
		t.Fatalf("last line %q: want run %s %s (%v)", ls[len(ls)-1], run, status, err)
	}
}

// TestServerKilledMidCall kills mcpflow server while two calls are in
// flight; started again, it resumes both runs under the replay rule: the
// unsafe call becomes outcome_unknown and its run blocks, the safe one is
// replayed; the demo ledger shows the unsafe call ran once.
func TestServerKilledMidCall(t *testing.T) {
	c := newCLI(t)
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatalf("trust add: %d %s", r.code, r.stderr)
	}
	unsafe := c.workflow("unsafe.yaml", `name: unsafe
servers:
  demo: {builtin: demo, trust: true}
steps:
  - {id: append, server: demo, tool: ledger_append, with: {entry: charge}}
`)
	safe := c.workflow("safe.yaml", `name: safe
servers:
  demo: {builtin: demo, trust: true}
steps:
  - {id: shout, server: demo, tool: upper, with: {text: hello}}
`)
	srv, died := c.startServer("MCPFLOW_DEMO_FAULT=hang-after-commit")
	var ids []string
	for _, f := range []string{unsafe, safe} {
		r := c.run("run", "--detach", f)
		if r.code != 0 || !runIDLine.MatchString(r.stdout) {
			t.Fatalf("run --detach %s: exit %d\n%s%s", f, r.code, r.stdout, r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	c.waitLedger("ledger_append", 1)
	c.waitLedger("upper", 1)
	if err := srv.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	died()

	srv, stopped := c.startServer()
	r := c.run("runs", "watch", ids[0])
	if r.code != exitBlocked || !strings.Contains(r.stderr, "step append, demo/ledger_append (outcome_unknown)") {
		t.Fatalf("runs watch of the unsafe run: exit %d, want %d\n%s%s", r.code, exitBlocked, r.stdout, r.stderr)
	}
	r = c.run("runs", "watch", ids[1])
	if r.code != 0 {
		t.Fatalf("runs watch of the safe run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("journal", "list", "--jq", `.[] | "\(.tool) \(.state) replays=\(.replays)"`)
	if r.stdout != "upper completed replays=1\nledger_append outcome_unknown replays=0\n" {
		t.Fatalf("journal list after the restart:\n%s%s", r.stdout, r.stderr)
	}
	c.stopServer(srv, stopped)
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Fatalf("ledger_append ran %d times, want 1 (never replayed)", n)
	}
	if n := c.ledgerCount("upper"); n != 2 {
		t.Fatalf("upper ran %d times, want 2 (sent, then replayed)", n)
	}
}
