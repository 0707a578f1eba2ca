package main

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// killAfterCommitEnv makes mcpflow under test SIGKILL itself right after
// its n-th journal commit is durable (a log append); killAfterApplyEnv
// right after the n-th background commit of the log into the file.
const (
	killAfterCommitEnv = "MCPFLOW_TEST_KILL_AFTER_COMMIT"
	killAfterApplyEnv  = "MCPFLOW_TEST_KILL_AFTER_APPLY"
)

// killAfterCommit arms the kills whose counts are numbers.
func killAfterCommit(commit, apply string) {
	commitAt, err1 := strconv.Atoi(commit)
	applyAt, err2 := strconv.Atoi(apply)
	if err1 != nil && err2 != nil {
		return
	}
	killAt := func(limit int) func() {
		var n atomic.Int64
		return func() {
			if n.Add(1) == int64(limit) {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // until the signal lands
			}
		}
	}
	testJournalOptions = func(o *journal.Options) {
		if err1 == nil {
			o.AfterCommit = killAt(commitAt)
		}
		if err2 == nil {
			// Applied as soon as written: a kill point after (nearly)
			// every commit, with more commits to come.
			o.AfterApply, o.ApplyIdle = killAt(applyAt), time.Nanosecond
		}
	}
}

// commitWorkflow chains safe and unsafe steps, each reading the result of
// the one before, with a skipped step and a for_each in between: every way
// a commit carries an outcome together with what follows it.
const commitWorkflow = `name: commits
servers:
  s: {builtin: demo, trust: true}
steps:
  - {id: s0, server: s, tool: ledger_append, with: {entry: first}}
  - {id: s1, server: s, tool: upper, with: {text: "row ${{ steps.s0.structuredContent.row }}"}}
  - {id: never, server: s, tool: upper, if: "${{ steps.s1.text == 'nothing' }}", with: {text: x}}
  - {id: s2, server: s, tool: not_idempotent, with: {entry: "${{ steps.s1.text }}"}}
  - id: s3
    server: s
    tool: put_record
    for_each: ${{ ["a", "b"] }}
    with: {key: "${{ item }}", value: "${{ string(steps.s2.structuredContent.row) }}"}
  - {id: s4, server: s, tool: ledger_append, with: {entry: "${{ steps.s3.items[1].structuredContent.value }}"}}
`

// readsFrom says which step's result each step's arguments (or condition)
// read.
var readsFrom = map[string]string{"s1": "s0", "never": "s1", "s2": "s1", "s3": "s2", "s4": "s3"}

// TestKillAtEveryCommit kills mcpflow right after each commit of a run in
// turn — each append to the journal's log, and each background commit of
// the log into the file — and checks what the journal holds at that
// moment: every call that was sent has its intent, and every result a
// later step used is there, completed. Then it finishes the run as an
// operator would and checks that no unsafe call ran twice and no result
// was lost.
func TestKillAtEveryCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("kills mcpflow once per commit")
	}
	for _, kind := range []struct{ name, plural, env string }{
		{"log append", "log appends", killAfterCommitEnv},
		{"apply", "applies of the log", killAfterApplyEnv},
	} {
		t.Run(kind.name, func(t *testing.T) {
			for n := 1; ; n++ {
				if n > 40 {
					t.Fatal("the run never completed without being killed")
				}
				c := newCLI(t)
				wf := c.workflow("commits.yaml", commitWorkflow)
				c.env = quickExit(kind.env + "=" + strconv.Itoa(n))
				r := c.run("run", wf, "--trust-workspace")
				c.env = quickExit()
				if r.code == 0 {
					t.Logf("a run makes %d %s; killed after each", n-1, kind.plural)
					if n < 4 {
						t.Errorf("only %d %s were tried", n-1, kind.plural)
					}
					return
				}
				if r.code != -1 {
					t.Fatalf("kill after %s %d: exit %d, want killed\n%s", kind.name, n, r.code, r.stderr)
				}
				checkCommitted(t, c, n)
				finishRun(t, c, n)
			}
		})
	}
}

// checkCommitted checks the journal as the kill after commit n left it.
func checkCommitted(t *testing.T, c *cli, n int) {
	t.Helper()
	if !trialHasRun(t, c) {
		if rows := c.ledger(); len(rows) > 0 {
			t.Fatalf("commit %d: no run journaled, yet %d calls ran", n, len(rows))
		}
		return
	}
	j := c.openJournal()
	_, invs := c.onlyRun(j)
	j.Close()
	keys := map[string]bool{}
	byStep := map[string][]journal.Invocation{}
	for _, inv := range invs {
		keys[inv.IdempotencyKey] = true
		byStep[inv.Step] = append(byStep[inv.Step], inv)
	}
	for _, row := range c.ledger() {
		if k, _ := row["idempotency_key"].(string); !keys[k] {
			t.Errorf("commit %d: a call ran (ledger %v) whose intent is not journaled\n%s", n, row, describe(invs))
		}
	}
	for step, invsOf := range byStep {
		from, ok := readsFrom[step]
		if !ok {
			continue
		}
		used := byStep[from]
		if len(used) == 0 {
			t.Errorf("commit %d: step %s is journaled but %s, whose result it read, is not\n%s", n, step, from, describe(invs))
		}
		for _, u := range used {
			if u.State != journal.StateCompleted || u.Result == nil {
				t.Errorf("commit %d: step %s is journaled (%d invocations) but %s, whose result it read, is %s\n%s", n, step, len(invsOf), u.Step, u.State, describe(invs))
			}
		}
	}
}

// finishRun resumes the run to success, resolving unknown outcomes from the
// demo ledger, and checks that no unsafe call ran twice and no result was
// lost.
func finishRun(t *testing.T, c *cli, n int) {
	t.Helper()
	if !trialHasRun(t, c) {
		return
	}
	for round := 0; ; round++ {
		if round > 8 {
			t.Fatalf("commit %d: the run never finished", n)
		}
		j := c.openJournal()
		run, invs := c.onlyRun(j)
		j.Close()
		if run.Status == journal.RunSucceeded {
			break
		}
		for _, inv := range invs {
			if inv.State == journal.StateOutcomeUnknown || inv.State == journal.StateAborted || inv.State == journal.StateTimedOut {
				resolveFromLedger(t, c, inv)
			}
		}
		if r := c.run("resume", run.ID.String(), "--trust-workspace"); r.code != 0 && r.code != exitBlocked {
			t.Fatalf("commit %d: resume: exit %d\n%s%s", n, r.code, r.stdout, r.stderr)
		}
	}
	if dup, lost := checkTrial(t, c, uint64(n), commitWorkflow); dup+lost > 0 {
		t.Errorf("commit %d: %d duplicated unsafe calls, %d lost results", n, dup, lost)
	}
	if rows := c.ledgerCount("ledger_append"); rows != 2 {
		t.Errorf("commit %d: ledger_append ran %d times, want 2", n, rows)
	}
	if r := c.run("journal", "check"); r.code != 0 || !strings.HasSuffix(r.stdout, ": OK\n") {
		t.Errorf("commit %d: journal check: exit %d\n%s%s", n, r.code, r.stdout, r.stderr)
	}
}
