package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// These tests kill -9 mcpflow at chosen moments of a run, then resume it to
// the end, and check in the demo server's ledger that no unsafe call ran
// twice and no completed call ran again. (Killing during a single call is in
// resume_test.go.)

// killRunAndLeftovers kill -9s the mcpflow process of cmd, waits for it, then SIGKILLs
// what it leaves behind (servers get SIGTERM from the kernel when mcpflow
// dies; a shell's child may outlive it) and waits until none of this test's
// processes is left, so that nothing writes the ledger afterwards.
func killRunAndLeftovers(t *testing.T, c *cli, cmd interface{ Kill() error }, wait func() result) {
	t.Helper()
	if err := cmd.Kill(); err != nil {
		t.Fatal(err)
	}
	if r := wait(); r.code != -1 {
		t.Fatalf("mcpflow exited by itself (exit %d) before it was killed\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := tagged(c.tag)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running after the kill: %v", pids)
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ledgerRowsBy counts the ledger rows of tool by the value of argument arg.
func ledgerRowsBy(c *cli, tool, arg string) map[string]int {
	n := map[string]int{}
	for _, row := range c.ledger() {
		if row["tool"] != tool {
			continue
		}
		args, _ := row["args"].(map[string]any)
		n[fmt.Sprint(args[arg])]++
	}
	return n
}

// TestResumeKillBetweenSteps: mcpflow is killed after step 1 completed,
// while step 2's server is still starting (so step 2 has no intent yet).
// resume does not call step 1 again and runs step 2 once.
func TestResumeKillBetweenSteps(t *testing.T) {
	c := newCLI(t)
	c.env = quickExit()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Server b takes 2s to start; the test binary acts as mcpflow in it
	// because its configuration passes MCPFLOW_TEST_AS_MAIN=1 (a command
	// server inherits only a small default environment), and the test's tag
	// so that a leftover would be found.
	wf := fmt.Sprintf(`name: between-steps
env: [MCPFLOW_TEST_TAG, GORACE]
servers:
  a: {builtin: demo}
  b: {command: sh, args: ["-c", "sleep 2; exec \"$0\" demo-server", %q], env: {MCPFLOW_TEST_AS_MAIN: "1", MCPFLOW_TEST_TAG: "${MCPFLOW_TEST_TAG}", GORACE: "${GORACE}"}}
steps:
  - {id: one, server: a, tool: ledger_append, with: {entry: one}}
  - {id: two, server: b, tool: ledger_append, with: {entry: two}}
`, exe)
	cmd, wait := c.background("run", c.workflow("w.yaml", wf))
	c.waitLedger("", 1)
	time.Sleep(200 * time.Millisecond) // step 1's outcome is journaled; b is sleeping
	killRunAndLeftovers(t, c, cmd.Process, wait)

	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	if run.Status != journal.RunRunning || len(invs) != 1 || invs[0].Step != "one" || invs[0].State != journal.StateCompleted {
		t.Fatalf("after the kill: run %s, invocations:%s\nwant running, step one completed and no invocation of step two", run.Status, describe(invs))
	}
	if got := ledgerRowsBy(c, "ledger_append", "entry"); got["one"] != 1 || got["two"] != 0 {
		t.Fatalf("ledger after the kill %v, want one:1 two:0", got)
	}

	r := c.run("resume", run.ID.String())
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := ledgerRowsBy(c, "ledger_append", "entry"); got["one"] != 1 || got["two"] != 1 || len(got) != 2 {
		t.Errorf("ledger after resume %v, want one:1 two:1", got)
	}
	j = c.openJournal()
	run, invs = c.onlyRun(j)
	if run.Status != journal.RunSucceeded || len(invs) != 2 {
		t.Fatalf("after resume: run %s, invocations:%s", run.Status, describe(invs))
	}
	for _, inv := range invs {
		if inv.State != journal.StateCompleted || len(inv.Attempts) != 1 {
			t.Errorf("after resume:%s", describe([]journal.Invocation{inv}))
		}
	}
}

// fanOutWorkflow is one for_each step over six items, two at a time, on a
// trusted demo server; arg is the tool's argument that gets the item.
func fanOutWorkflow(tool, arg string) string {
	return fmt.Sprintf(`name: fan-out
servers:
  demo: {builtin: demo, trust: true}
steps:
  - id: fan
    server: demo
    tool: %s
    for_each: ${{ ["i0", "i1", "i2", "i3", "i4", "i5"] }}
    concurrency: 2
    with: {%s: "${{ item }}"}
`, tool, arg)
}

var fanItems = []string{"i0", "i1", "i2", "i3", "i4", "i5"}

// fanOutSnapshot is what the journal and the ledger say right after the kill.
type fanOutSnapshot struct {
	run       journal.ID
	completed map[string]bool // items whose invocation completed
	inFlight  map[string]bool // items with an open attempt
	rows      map[string]int  // ledger rows per item
}

// killMidFanOut starts the fan-out with a 300ms delay before every
// execution and kill -9s mcpflow once three items executed: by then the
// first two items completed (the next pair starts only when a slot frees),
// the third — and maybe the fourth — is in flight after executing, and the
// last ones never started.
func killMidFanOut(t *testing.T, c *cli, tool, arg string, trust bool) fanOutSnapshot {
	t.Helper()
	args := []string{"run", c.workflow("w.yaml", fanOutWorkflow(tool, arg))}
	if trust {
		args = append(args, "--trust-workspace")
	}
	c.env = quickExit("MCPFLOW_DEMO_DELAY=300ms")
	cmd, wait := c.background(args...)
	c.env = quickExit()
	c.waitLedger("", 3)
	killRunAndLeftovers(t, c, cmd.Process, wait)

	s := fanOutSnapshot{completed: map[string]bool{}, inFlight: map[string]bool{}, rows: ledgerRowsBy(c, tool, arg)}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	s.run = run.ID
	if run.Status != journal.RunRunning {
		t.Fatalf("after the kill: run %s, want running", run.Status)
	}
	for _, inv := range invs {
		item := fanItems[inv.Item]
		switch last := inv.LastAttempt(); {
		case inv.State == journal.StateCompleted:
			s.completed[item] = true
		case inv.State == journal.StateIntent && last != nil && last.EndedAt == nil:
			s.inFlight[item] = true
		default:
			t.Fatalf("after the kill, item %s:%s", item, describe([]journal.Invocation{inv}))
		}
	}
	for _, item := range fanItems {
		switch {
		case s.completed[item] && s.rows[item] != 1:
			t.Fatalf("completed item %s has %d ledger rows", item, s.rows[item])
		case !s.completed[item] && !s.inFlight[item] && s.rows[item] != 0:
			t.Fatalf("item %s was never journaled but has %d ledger rows", item, s.rows[item])
		case s.rows[item] > 1:
			t.Fatalf("item %s has %d ledger rows before resume", item, s.rows[item])
		}
	}
	t.Logf("at the kill: completed %v, in flight %v, executed %v", fanKeys(s.completed), fanKeys(s.inFlight), s.rows)
	return s
}

func fanKeys(m map[string]bool) []string {
	var out []string
	for _, item := range fanItems {
		if m[item] {
			out = append(out, item)
		}
	}
	return out
}

// TestResumeKillMidFanOutUnsafe: an unsafe tool (ledger_append declares
// nothing). resume blocks if an item was in flight — its outcome is unknown
// — and otherwise finishes; either way no item runs twice and no completed
// item runs again.
func TestResumeKillMidFanOutUnsafe(t *testing.T) {
	c := newCLI(t)
	s := killMidFanOut(t, c, "ledger_append", "entry", false)

	r := c.run("resume", s.run.String())
	want := 0
	if len(s.inFlight) > 0 {
		want = exitBlocked
	}
	if r.code != want {
		t.Fatalf("resume: exit %d, want %d (in flight at the kill: %v)\n%s\n%s", r.code, want, fanKeys(s.inFlight), r.stdout, r.stderr)
	}
	rows := ledgerRowsBy(c, "ledger_append", "entry")
	for _, item := range fanItems {
		switch {
		case rows[item] > 1:
			t.Errorf("item %s executed %d times", item, rows[item])
		case s.completed[item] && rows[item] != 1:
			t.Errorf("completed item %s executed %d times in all, want 1", item, rows[item])
		case s.inFlight[item] && rows[item] != s.rows[item]:
			t.Errorf("in-flight item %s was sent again: %d rows, %d at the kill", item, rows[item], s.rows[item])
		case want == 0 && rows[item] != 1:
			t.Errorf("item %s executed %d times, want 1", item, rows[item])
		}
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	unknown := 0
	for _, inv := range invs {
		item := fanItems[inv.Item]
		if s.completed[item] && (inv.State != journal.StateCompleted || len(inv.Attempts) != 1) {
			t.Errorf("completed item %s changed:%s", item, describe([]journal.Invocation{inv}))
		}
		if inv.Tally().Replays != 0 {
			t.Errorf("item %s was replayed:%s", item, describe([]journal.Invocation{inv}))
		}
		if inv.State == journal.StateOutcomeUnknown {
			unknown++
			if !s.inFlight[item] {
				t.Errorf("item %s is outcome_unknown but was not in flight at the kill", item)
			}
		}
	}
	if want == exitBlocked && (run.Status != journal.RunBlocked || unknown == 0) {
		t.Errorf("run %s with %d outcome_unknown invocations, want blocked:%s", run.Status, unknown, describe(invs))
	}
	if want == 0 && (run.Status != journal.RunSucceeded || len(invs) != len(fanItems)) {
		t.Errorf("run %s, invocations:%s", run.Status, describe(invs))
	}
}

// TestResumeKillMidFanOutSafe: a safe tool (upper declares idempotentHint)
// on a trusted server in a trusted workspace. resume replays what was in
// flight and finishes: every item completes, an item in flight at the kill
// ran at most twice, and an item completed before the kill exactly once.
func TestResumeKillMidFanOutSafe(t *testing.T) {
	c := newCLI(t)
	s := killMidFanOut(t, c, "upper", "text", true)

	r := c.run("resume", s.run.String(), "--trust-workspace")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rows := ledgerRowsBy(c, "upper", "text")
	for _, item := range fanItems {
		want := 1 // completed before the kill, or first sent by resume
		if s.inFlight[item] {
			want = s.rows[item] + 1 // replayed if it had executed, else first executed now
		}
		if rows[item] != want || rows[item] > 2 {
			t.Errorf("item %s executed %d times, want %d (at the kill: %d rows, in flight %v)", item, rows[item], want, s.rows[item], s.inFlight[item])
		}
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunSucceeded || len(invs) != len(fanItems) {
		t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
	}
	for _, inv := range invs {
		item := fanItems[inv.Item]
		wantAttempts := 1
		if s.inFlight[item] {
			wantAttempts = 2
		}
		if inv.State != journal.StateCompleted || len(inv.Attempts) != wantAttempts || inv.Tally().Replays != wantAttempts-1 {
			t.Errorf("item %s:%s\nwant completed after %d attempts", item, describe([]journal.Invocation{inv}), wantAttempts)
		}
		if inv.Result == nil || !strings.Contains(string(inv.Result.StructuredContent), strings.ToUpper(item)) {
			t.Errorf("item %s result %+v", item, inv.Result)
		}
	}
}
