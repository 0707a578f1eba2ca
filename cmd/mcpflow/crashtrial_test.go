package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// Crash trials: a seeded campaign that SIGKILLs mcpflow — and sometimes
// resume itself — at random moments of sequential and fan-out workflows,
// over stdio and streamable HTTP (whose server outlives the client), then
// finishes each run as an operator would: resume, and resolve every unknown
// outcome from the demo server's ledger (which records every real execution
// with its idempotency key). After each trial it checks the promise:
//
//   - no unsafe call executed twice (ledger rows per idempotency key);
//   - no result lost or changed (every completed invocation's result is the
//     one its execution produced);
//   - the run ends succeeded, `journal check` is clean, and a second resume
//     changes nothing;
//   - no process of the trial is left running.
//
// CI runs a seeded sample; a long campaign takes flags:
//
//	go test ./cmd/mcpflow -run TestCrashTrials -trials 2000 -seed 42
var (
	crashTrials = flag.Int("trials", 0, "crash trials to run (default 100 under CI=true, 12 otherwise)")
	crashSeed   = flag.Uint64("seed", 0, "seed of the crash trials (default: from the clock; printed on failure)")
)

// trialTools are the demo tools a trial calls: unsafe ones must never run
// twice; safe ones may be replayed.
var trialTools = []struct {
	name, with string
	unsafe     bool
}{
	{"ledger_append", `{entry: "${{ KEY }}"}`, true},
	{"not_idempotent", `{entry: "${{ KEY }}"}`, true},
	{"put_record", `{key: "${{ KEY }}", value: v}`, false},
	{"upper", `{text: "${{ KEY }}"}`, false},
}

type trialStats struct {
	trials, kills, resumeKills, resumes, resolutions, faults int
	duplicated, lost                                         int
}

func TestCrashTrials(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials are long")
	}
	t.Parallel() // long, and mostly waiting: beside the other campaigns, after the rest
	n := *crashTrials
	if n == 0 {
		n = 12
		if os.Getenv("CI") != "" {
			n = 100
		}
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash trials: %d, seed %d (rerun: go test ./cmd/mcpflow -run TestCrashTrials -trials %d -seed %d)", n, seed, n, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6d6370666c6f77))
	var st trialStats
	for i := 0; i < n; i++ {
		trialSeed := rng.Uint64()
		ok := t.Run(fmt.Sprintf("trial%03d", i), func(t *testing.T) {
			runTrial(t, trialSeed, &st)
		})
		if !ok {
			t.Fatalf("trial %d failed: rerun it alone with -trials %d -seed %d", i, n, seed)
		}
	}
	t.Logf("crash trials done: %d trials, %d kills of run, %d kills of resume, %d resumes, %d resolutions, %d HTTP servers outliving the client; %d duplicated unsafe calls, %d lost results",
		st.trials, st.kills, st.resumeKills, st.resumes, st.resolutions, st.faults, st.duplicated, st.lost)
	if st.duplicated != 0 || st.lost != 0 {
		t.Errorf("%d duplicated unsafe calls, %d lost results", st.duplicated, st.lost)
	}
}

// trialWorkflow writes a random workflow: three to five sequential steps,
// or a fan-out of six items two or three at a time, on a trusted server.
func trialWorkflow(rng *rand.Rand, server string) (string, []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "name: trial\nservers:\n  s: %s\nsteps:\n", server)
	var keys []string
	if rng.IntN(3) == 0 {
		tool := trialTools[rng.IntN(len(trialTools))]
		keys = []string{"f0", "f1", "f2", "f3", "f4", "f5"}
		fmt.Fprintf(&b, "  - id: fan\n    server: s\n    tool: %s\n    for_each: ${{ [\"f0\", \"f1\", \"f2\", \"f3\", \"f4\", \"f5\"] }}\n    concurrency: %d\n    with: %s\n",
			tool.name, 2+rng.IntN(2), strings.ReplaceAll(tool.with, "${{ KEY }}", "${{ item }}"))
		return b.String(), keys
	}
	steps := 3 + rng.IntN(3)
	for i := 0; i < steps; i++ {
		tool := trialTools[rng.IntN(len(trialTools))]
		key := fmt.Sprintf("s%d", i)
		keys = append(keys, key)
		fmt.Fprintf(&b, "  - {id: %s, server: s, tool: %s, with: %s}\n", key, tool.name, strings.ReplaceAll(tool.with, "${{ KEY }}", key))
	}
	return b.String(), keys
}

func runTrial(t *testing.T, seed uint64, st *trialStats) {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCLI(t)
	c.env = quickExit("MCPFLOW_DEMO_DELAY=" + fmt.Sprintf("%dms", 10+rng.IntN(50)))
	st.trials++
	server := "{builtin: demo, trust: true}"
	keep := -1 // the pid of a server that outlives mcpflow
	if rng.IntN(3) == 0 {
		d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", c.env...)
		server = fmt.Sprintf("{url: %q, trust: true}", d.url)
		keep = d.pid
		st.faults++
	}
	src, _ := trialWorkflow(rng, server)
	wf := c.workflow("trial.yaml", src)

	// The run, killed at a random moment (or not at all).
	cmd, wait := c.background("run", wf, "--trust-workspace")
	if rng.IntN(8) != 0 {
		time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond)
		if trialKill(t, c, cmd.Process, wait, keep) {
			st.kills++
		}
	}
	wait()

	// Killed before the run was journaled: nothing may have run.
	if !trialHasRun(t, c) {
		if rows := c.ledger(); len(rows) > 0 {
			t.Fatalf("no run journaled, yet the ledger has %d rows (seed %d)", len(rows), seed)
		}
		return
	}

	// Resume until the run is done, as an operator would: resolve what is
	// unknown from the ledger, and sometimes get killed again.
	var run *journal.Run
	for round := 0; ; round++ {
		if round > 12 {
			t.Fatalf("the run never finished (seed %d):\n%s", seed, src)
		}
		j := c.openJournal()
		var invs []journal.Invocation
		run, invs = c.onlyRun(j)
		j.Close()
		if run.Status == journal.RunSucceeded {
			break
		}
		if keep > 0 {
			// A server that outlived the client may still be executing a
			// call it received: an operator checks the real system only
			// once it has settled.
			time.Sleep(300 * time.Millisecond)
		}
		for _, inv := range invs {
			if inv.State == journal.StateOutcomeUnknown || inv.State == journal.StateAborted || inv.State == journal.StateTimedOut {
				st.resolutions++
				resolveFromLedger(t, c, inv)
			}
		}
		st.resumes++
		rcmd, rwait := c.background("resume", run.ID.String(), "--trust-workspace")
		if rng.IntN(5) == 0 {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			if trialKill(t, c, rcmd.Process, rwait, keep) {
				st.resumeKills++
			}
		}
		if r := rwait(); r.code != 0 && r.code != exitBlocked && r.code != -1 {
			t.Fatalf("resume: exit %d (seed %d)\n%s%s\nworkflow:\n%s", r.code, seed, r.stdout, r.stderr, src)
		}
	}
	dup, lost := checkTrial(t, c, seed, src)
	st.duplicated += dup
	st.lost += lost

	// A second resume changes nothing.
	before := len(c.ledger())
	if r := c.run("resume", run.ID.String(), "--trust-workspace"); r.code != 0 || !strings.Contains(r.stdout, "nothing to resume") {
		t.Errorf("second resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := len(c.ledger()); after != before {
		t.Errorf("a second resume executed %d more calls (seed %d)", after-before, seed)
	}
}

// trialKill SIGKILLs mcpflow unless it exited already, and waits until
// every process of the trial but keep is gone: the servers of a killed
// mcpflow must end with it. It reports whether it killed.
func trialKill(t *testing.T, c *cli, p *os.Process, wait func() result, keep int) bool {
	t.Helper()
	p.Signal(syscall.SIGKILL)
	killed := wait().code == -1 // not when it had exited already
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := slices.DeleteFunc(tagged(c.tag), func(pid int) bool { return pid == keep })
		if len(pids) == 0 {
			return killed
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived the killed mcpflow: %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resolveFromLedger resolves an invocation whose outcome mcpflow could not
// know, as an operator checking the real system would: it ran if the
// ledger holds a row with its idempotency key (then with that execution's
// result), otherwise it is approved to be sent again.
func resolveFromLedger(t *testing.T, c *cli, inv journal.Invocation) {
	t.Helper()
	var row map[string]any
	for _, r := range c.ledger() {
		if r["idempotency_key"] == inv.IdempotencyKey {
			row = r
		}
	}
	args := []string{"journal", "resolve", inv.ID.String()}
	if row == nil {
		args = append(args, "--as", "retry", "--reason", "not in the ledger")
	} else {
		seq := int(row["seq"].(float64))
		res := map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("appended row %d", seq)}}, "structuredContent": map[string]any{"row": seq}}
		b, _ := json.Marshal(res)
		file := filepath.Join(c.workspace, "result-"+inv.ID.Short()+".json")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--as", "completed", "--result", file, "--reason", fmt.Sprintf("ledger row %d", seq))
	}
	if r := c.run(args...); r.code != 0 {
		t.Fatalf("resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// checkTrial checks the ledger against the journal once the run succeeded,
// with the kill campaigns' check (checkSettled). It returns the duplicated
// unsafe calls and the lost results it found.
func checkTrial(t *testing.T, c *cli, seed uint64, src string) (duplicated, lost int) {
	t.Helper()
	j := c.openJournal()
	defer j.Close()
	_, invs := c.onlyRun(j)
	var f figures
	checkSettled(t, invs, c.ledgerByKey(), &f, seed)
	if f.duplicated+f.lost > 0 {
		t.Logf("workflow:\n%s\ninvocations:%s", src, describe(invs))
	}
	return f.duplicated, f.lost
}

// trialHasRun reports whether the journal exists and holds a run.
func trialHasRun(t *testing.T, c *cli) bool {
	t.Helper()
	if _, err := os.Stat(c.journalPath()); err != nil {
		return false
	}
	j := c.openJournal()
	defer j.Close()
	runs, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs) > 0
}
