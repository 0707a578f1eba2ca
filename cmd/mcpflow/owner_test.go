package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/client"
)

// TestSecondTerminalWhileARunGoes: with no mcpflow server, a `mcpflow run`
// that holds the journal serves it on the workspace socket. From another
// terminal (real processes) runs list, journal list, runs watch, approve
// and runs cancel --reason work through it; a second run is told who
// holds the journal and what it can do, and with --wait runs once the
// first ends. The socket goes with its owner.
func TestSecondTerminalWhileARunGoes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ship := c.workflow("ship.yaml", `name: ship
servers: {demo: {builtin: demo}}
steps:
  - {id: build, server: demo, tool: greet, with: {name: build}}
  - {id: deploy, server: demo, tool: greet, approve: "Deploy?", with: {name: deploy}}
`)
	slow := c.workflow("slow.yaml", `name: slow
servers: {demo: {builtin: demo}}
steps:
  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 60}}
`)
	if r := c.run("run", ship); r.code != exitBlocked {
		t.Fatalf("ship: exit %d, want 3 (waits for approval)\n%s", r.code, r.stderr)
	}
	shipID := strings.TrimSpace(c.run("runs", "list", "--jq", ".[0].id").stdout)

	owner, ownerDone := c.background("run", slow)
	socket := filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock")
	waitServing(t, socket, "the run", ownerDone)
	var slowID string
	for deadline := time.Now().Add(20 * time.Second); slowID == ""; time.Sleep(20 * time.Millisecond) {
		r := c.run("runs", "list", "--status", "running", "--jq", ".[0].id")
		if r.code != 0 {
			t.Fatalf("runs list from a second terminal: exit %d\n%s", r.code, r.stderr)
		}
		if slowID = strings.TrimSpace(r.stdout); slowID == "null" {
			slowID = ""
		}
		if time.Now().After(deadline) {
			owner.Process.Kill()
			or := ownerDone()
			t.Fatalf("the slow run never showed as running: %q %q; the run: exit %d\n%s%s", r.stdout, r.stderr, or.code, or.stdout, or.stderr)
		}
	}

	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := c.run("journal", "list", "--tool", "count_slowly")
		if r.code != 0 {
			t.Fatalf("journal list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "count_slowly") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal list never showed the slow call:\n%s", r.stdout)
		}
	}
	if r := c.run("approve", shipID, "deploy", "--reason", "looks good"); r.code != 0 {
		t.Errorf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	_, watchDone := c.background("runs", "watch", slowID)

	// A second run: who holds the journal, and the choices.
	r := c.run("run", ship)
	pid := strconv.Itoa(owner.Process.Pid)
	for _, want := range []string{"held by 'mcpflow run " + slow + "'", "pid " + pid, "run " + slowID[:18], "--wait", "mcpflow server"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("second run: no %q in\n%s", want, r.stderr)
		}
	}
	if r.code != exitJournal {
		t.Errorf("second run: exit %d, want %d", r.code, exitJournal)
	}
	if r := c.run("journal", "compact"); r.code != exitJournal || !strings.Contains(r.stderr, "'mcpflow run "+slow+"' (pid "+pid+") holds it") {
		t.Errorf("journal compact while the run goes: exit %d, want %d naming the run\n%s", r.code, exitJournal, r.stderr)
	}
	srv, srvDone := c.background("server")
	stray := time.AfterFunc(20*time.Second, func() { srv.Process.Kill() }) // it served: fail, not hang
	if r := srvDone(); r.code != exitJournal || !strings.Contains(r.stderr, "held by 'mcpflow run "+slow+"' (pid "+pid+", run "+slowID[:18]+")") || strings.Contains(r.stderr, "another mcpflow server") {
		t.Errorf("server while the run goes: exit %d, want %d naming the run\n%s", r.code, exitJournal, r.stderr)
	}
	stray.Stop()
	waiter := c.command("resume", shipID, "--wait")
	var waiterOut, waiterErr lockedBuffer
	waiter.Stdout, waiter.Stderr = &waiterOut, &waiterErr
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Process.Kill() })
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(waiterErr.String(), "waiting for it to end"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("resume --wait never said it waits:\n%s", waiterErr.String())
		}
	}

	// A run waits too: two waiters, one after the other.
	_, runnerDone := c.background("run", "--wait", repoFile("examples", "workflows", "hello.yaml"), "--input", "name=Ada")
	if r := c.run("runs", "cancel", slowID, "--reason", "enough"); r.code != 0 {
		t.Errorf("runs cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ownerDone(); r.code != exitInterrupted || !strings.Contains(r.stdout+r.stderr, "cancelled: enough") {
		t.Errorf("the run cancelled from another terminal: exit %d, want %d\n%s", r.code, exitInterrupted, r.stderr)
	}
	if r := watchDone(); !strings.Contains(r.stdout, "progress") || !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("runs watch: exit %d; want progress, then the run cancelled\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := waiter.Wait(); err != nil || !strings.Contains(waiterOut.String(), "step deploy") || !strings.Contains(waiterOut.String(), "succeeded") {
		t.Errorf("resume --wait: %v, want the approved step run\n%s%s", err, waiterOut.String(), waiterErr.String())
	}
	if r := runnerDone(); r.code != 0 || !strings.Contains(r.stdout, "Hello, Ada!") {
		t.Errorf("run --wait: exit %d, want the run done once the journal was free\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket outlived its owners: %v", err)
	}
}

// TestKilledOwnersSocketIsReplaced: a run killed with -9 leaves its socket
// behind; other commands see nothing answers there and open the journal
// themselves, and the next run replaces the stale socket and serves,
// saying of the killed run that it goes nowhere.
func TestKilledOwnersSocketIsReplaced(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	slow := c.workflow("slow.yaml", `name: slow
servers: {demo: {builtin: demo}}
steps:
  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 60}}
`)
	socket := filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock")
	first, firstDone := c.background("run", slow)
	waitServing(t, socket, "the first run", firstDone)
	running := func() string {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			id := strings.TrimSpace(c.run("runs", "list", "--status", "running", "--limit", "1", "--jq", ".[0].id").stdout)
			if id != "" && id != "null" {
				return id
			}
			if time.Now().After(deadline) {
				t.Fatal("no run ever showed as running")
			}
		}
	}
	killed := running() // journaled: the kill leaves a run behind
	if _, err := os.Lstat(socket); err != nil {
		t.Fatal(err)
	}
	first.Process.Kill()
	firstDone()
	if r := c.run("runs", "list", "--status", "running"); r.code != 0 || !strings.Contains(r.stdout, "slow") {
		t.Errorf("runs list beside a stale socket: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	second, secondDone := c.background("run", slow)
	waitServing(t, socket, "the second run", secondDone)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(c.run("runs", "list", "--status", "running").stdout, "slow") && len(strings.Fields(c.run("runs", "list", "--status", "running", "--jq", ".[].id").stdout)) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second run never showed as running")
		}
	}
	if h, ok := client.Probe(socket); !ok || h.Owner["pid"] != strconv.Itoa(second.Process.Pid) {
		t.Errorf("the socket is not the second run's: %+v", h)
	}
	// Through the second run, watching the killed one says it goes
	// nowhere, at once, as without a server.
	if r := c.run("runs", "watch", killed); r.code != exitFailed || !strings.Contains(r.stderr, "is not going anywhere") || !strings.Contains(r.stderr, "mcpflow resume") {
		t.Errorf("runs watch of the killed run through the second: exit %d, want %d\n%s", r.code, exitFailed, r.stderr)
	}
	if r := c.run("runs", "cancel", running()); r.code != 0 {
		t.Errorf("runs cancel through the second run: exit %d\n%s", r.code, r.stderr)
	}
	if r := secondDone(); r.code != exitInterrupted {
		t.Errorf("the second run, cancelled: exit %d, want %d\n%s", r.code, exitInterrupted, r.stderr)
	}
}

// waitServing waits, up to 20 s, until what (a command started with
// background, done its wait) serves the journal on socket.
func waitServing(t *testing.T, socket, what string, done func() result) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !client.On(socket); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			r := done()
			t.Fatalf("%s never served the journal on %s: exit %d\n%s", what, socket, r.code, r.stderr)
		}
	}
}
