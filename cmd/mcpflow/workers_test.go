package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

var (
	workerRuns = flag.Int("worker-runs", 200, "runs the multi-worker test submits")
	workerSeed = flag.Uint64("worker-seed", 0, "seed of the multi-worker test's kills (default: from the clock; printed)")
)

// worker is one `mcpflow server` process on the shared journal, which the
// test kills and restarts under the same worker id.
type worker struct {
	c    *cli
	id   string
	args []string

	mu    sync.Mutex
	cmd   []*workerProc // every process it ran, the live one last
	kills int
}

type workerProc struct {
	pid  int
	wait func() result
}

func startWorker(c *cli, id string, extra ...string) *worker {
	w := &worker{c: c, id: id, args: append([]string{"server", "--worker-id", id, "--socket", filepath.Join(c.t.TempDir(), id+".sock"), "--grace", "1s"}, extra...)}
	w.start()
	return w
}

func (w *worker) start() {
	cmd, wait := w.c.background(w.args...)
	w.mu.Lock()
	w.cmd = append(w.cmd, &workerProc{pid: cmd.Process.Pid, wait: wait})
	w.mu.Unlock()
}

func (w *worker) live() *workerProc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmd[len(w.cmd)-1]
}

// kill SIGKILLs the live process and waits for it.
func (w *worker) kill() {
	p := w.live()
	syscall.Kill(p.pid, syscall.SIGKILL)
	p.wait()
	w.mu.Lock()
	w.kills++
	w.mu.Unlock()
}

// stop SIGTERMs the live process and checks it exits cleanly.
func (w *worker) stop(t *testing.T) {
	t.Helper()
	p := w.live()
	syscall.Kill(p.pid, syscall.SIGTERM)
	if r := p.wait(); r.code != 0 {
		t.Errorf("worker %s: exit %d after SIGTERM\n%s", w.id, r.code, r.stderr)
	}
}

// openShared opens the shared journal read-only for the test's checks.
func openShared(t *testing.T, location string) journal.Store {
	t.Helper()
	// The first worker to start makes the tables.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		j, err := journal.OpenStore(location, &journal.Options{ReadOnly: true, Key: testKey(t)})
		if err == nil {
			return j
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// testKey is the journal key the test's commands use (the config
// directory's key file is shared through MCPFLOW_JOURNAL_KEY).
func testKey(t *testing.T) *journal.Key {
	t.Helper()
	k, err := journal.ParseKey(workersKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// workersKey encrypts the shared journal's payloads: every worker and
// command of the test has it, as every worker of a deployment must.
var workersKey = journal.NewKey().Encode()

// TestWorkersShareRunsAndSurviveKills is the multi-worker promise: three
// `mcpflow server` workers on one PostgreSQL journal share 200 submitted
// runs mixing safe and unsafe calls against the demo server's ledger,
// while the test SIGKILLs a random worker every second or two and
// restarts it. Every run ends; a call in flight in a killed worker is
// replayed by the worker that takes the run over only when the replay
// rule clears it (safe tool, trusted server and workspace), otherwise it
// is outcome_unknown and the run blocks until an operator resolves it
// from the ledger; no unsafe call runs twice; no result is lost; `journal
// check` passes. A longer campaign:
//
//	go test ./cmd/mcpflow -run TestWorkersShareRuns -worker-runs 2000 -worker-seed 7
func TestWorkersShareRunsAndSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("the multi-worker campaign is long")
	}
	location := journaltest.PostgresURL(t)
	seed := *workerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := *workerRuns
	t.Logf("multi-worker: %d runs, seed %d (rerun: go test ./cmd/mcpflow -run TestWorkersShareRuns -worker-runs %d -worker-seed %d)", n, seed, n, seed)
	rng := rand.New(rand.NewPCG(seed, 3))

	c := newCLI(t)
	c.env = quickExit("MCPFLOW_JOURNAL="+location, journal.KeyEnv+"="+workersKey, "MCPFLOW_DEMO_DELAY=40ms")
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatalf("trust add: %s", r.stderr)
	}
	d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", c.env...)
	http := fmt.Sprintf("{url: %q, trust: true}", d.url)
	stdio := "{builtin: demo, trust: true}"

	workers := []*worker{}
	for i := 1; i <= 3; i++ {
		workers = append(workers, startWorker(c, fmt.Sprintf("w%d", i), "--lease", "2s", "--max-runs", "6"))
	}

	// Submit every run, four commands at a time, each for any worker.
	files := make([]string, n)
	for i := range files {
		server := http
		if rng.IntN(4) == 0 {
			server = stdio // its server process dies with the worker
		}
		src, _ := trialWorkflow(rng, server)
		files[i] = c.workflow(fmt.Sprintf("run%03d.yaml", i), src)
	}
	submitted := make(chan error, n)
	var wg sync.WaitGroup
	next := make(chan string)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range next {
				cmd := c.command("run", f, "--detach")
				out, err := cmd.CombinedOutput()
				if err != nil {
					err = fmt.Errorf("run --detach %s: %v\n%s", filepath.Base(f), err, out)
				}
				submitted <- err
			}
		}()
	}
	go func() {
		for _, f := range files {
			next <- f
		}
		close(next)
	}()

	// Kill a random worker every 0.5–2 s until every run has ended.
	j := openShared(t, location)
	defer j.Close()
	deadline := time.Now().Add(6 * time.Minute)
	kills, done := 0, 0
	for {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
	drain:
		for {
			select {
			case err := <-submitted:
				done++
				if err != nil {
					t.Fatal(err)
				}
			default:
				break drain
			}
		}
		running, _, err := j.CountRuns(journal.RunFilter{Status: journal.RunRunning}, n)
		if err != nil {
			t.Fatal(err)
		}
		if done == n && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs still running after 6 minutes (%d submitted, %d kills, seed %d)", running, n, done, kills, seed)
		}
		w := workers[rng.IntN(len(workers))]
		w.kill()
		kills++
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		w.start()
	}
	wg.Wait()
	for _, w := range workers {
		w.stop(t)
	}
	t.Logf("%d kills", kills)
	if kills < 3 {
		t.Errorf("only %d kills: the campaign proved little", kills)
	}

	// Every run ended: succeeded, or blocked on a call whose outcome is
	// unknown. An operator settles each blocked one from the ledger and
	// resumes it.
	runs, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Fatalf("%d runs journaled, want %d", len(runs), n)
	}
	blocked := 0
	for _, run := range runs {
		for round := 0; run.Status != journal.RunSucceeded; round++ {
			if run.Status != journal.RunBlocked || round > 5 {
				t.Fatalf("run %s is %s after %d resumes (seed %d): %+v", run.ID.Short(), run.Status, round, seed, run.Error)
			}
			if round == 0 {
				blocked++
			}
			invs, err := j.RunInvocations(run.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, inv := range invs {
				if inv.State == journal.StateOutcomeUnknown || inv.State == journal.StateAborted || inv.State == journal.StateTimedOut {
					resolveFromLedger(t, c, inv)
				}
			}
			if r := c.run("resume", run.ID.String()); r.code != 0 && r.code != exitBlocked {
				t.Fatalf("resume %s: exit %d\n%s%s", run.ID.Short(), r.code, r.stdout, r.stderr)
			}
			got, err := j.Run(run.ID)
			if err != nil {
				t.Fatal(err)
			}
			run = *got
		}
	}
	t.Logf("%d runs blocked on an unknown outcome, settled from the ledger", blocked)

	// The promise, run by run, against the ledger.
	rows := map[string]int{}
	for _, r := range c.ledger() {
		k, _ := r["idempotency_key"].(string)
		rows[k]++
	}
	replayed := 0
	for _, run := range runs {
		invs, err := j.RunInvocations(run.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, inv := range invs {
			unsafe := false
			for _, tool := range trialTools {
				if tool.name == inv.Tool {
					unsafe = tool.unsafe
				}
			}
			if unsafe && rows[inv.IdempotencyKey] > 1 {
				t.Errorf("unsafe %s (invocation %s) executed %d times (seed %d)", inv.Tool, inv.ID.Short(), rows[inv.IdempotencyKey], seed)
			}
			if inv.State != journal.StateCompleted {
				t.Errorf("invocation %s of a succeeded run is %s", inv.ID.Short(), inv.State)
			}
			if rows[inv.IdempotencyKey] == 0 {
				t.Errorf("%s (invocation %s) is completed but never executed (seed %d)", inv.Tool, inv.ID.Short(), seed)
			}
			for _, dec := range inv.Decisions {
				switch {
				case dec.View == verdict.Operator:
					// The operator's resolution from the ledger, above.
				case unsafe && dec.Verdict == verdict.Replay:
					t.Errorf("unsafe %s (invocation %s) was decided replay: %s, %s (seed %d)", inv.Tool, inv.ID.Short(), dec.Reason, dec.View, seed)
				case !unsafe && dec.Verdict == verdict.OutcomeUnknown:
					t.Errorf("safe %s (invocation %s), trusted, was decided outcome_unknown: %s (seed %d)", inv.Tool, inv.ID.Short(), dec.Reason, seed)
				case dec.Verdict == verdict.Replay:
					replayed++
				}
			}
		}
	}
	t.Logf("%d calls in flight at a kill replayed by the worker that took over", replayed)
	if r := c.run("journal", "check"); r.code != 0 {
		t.Errorf("journal check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPausedWorkerIsFenced: a worker stopped with SIGSTOP in the middle of
// a call, past its lease, loses the run to another worker, which resumes
// it as after a crash (the safe call replayed, then the next step). When
// the paused worker is continued, its writes for the run are refused and
// it stops working on it: it journals nothing more and never sends the
// next (unsafe) step, which ran once, in the worker that took over.
func TestPausedWorkerIsFenced(t *testing.T) {
	location := journaltest.PostgresURL(t)
	c := newCLI(t)
	c.env = quickExit("MCPFLOW_JOURNAL="+location, journal.KeyEnv+"="+workersKey)
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatalf("trust add: %s", r.stderr)
	}
	d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", append(slices.Clone(c.env), "MCPFLOW_DEMO_DELAY=1500ms")...)
	wf := c.workflow("pay.yaml", fmt.Sprintf(`name: pay
servers:
  s: {url: %q, trust: true}
steps:
  - {id: check, server: s, tool: upper, with: {text: amount}}
  - {id: pay, server: s, tool: ledger_append, with: {entry: paid}}
`, d.url))
	w1 := startWorker(c, "w1", "--lease", "2s")
	j := openShared(t, location)
	defer j.Close()
	r := c.run("run", wf, "--detach")
	if r.code != 0 {
		t.Fatalf("run --detach: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)

	// w1 claims the run and sends its first call, which the server
	// answers 1.5 s later: pause w1 while it waits for the answer.
	for deadline := time.Now().Add(20 * time.Second); ; {
		invs, err := j.RunInvocations(mustID(t, id))
		if err != nil {
			t.Fatal(err)
		}
		if len(invs) == 1 && invs[0].State == journal.StateIntent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("w1 never sent the first call: %s", describe(invs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(w1.live().pid, syscall.SIGSTOP)
	paused := true
	defer func() {
		if paused {
			syscall.Kill(w1.live().pid, syscall.SIGCONT)
		}
	}()
	w2 := startWorker(c, "w2", "--lease", "2s")
	deadline := time.Now().Add(30 * time.Second)
	var run *journal.Run
	for {
		var err error
		if run, err = j.Run(mustID(t, id)); err != nil {
			t.Fatal(err)
		}
		if run.Status != journal.RunRunning {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(w1.live().pid, syscall.SIGCONT)
			w1.stop(t)
			w2.stop(t)
			t.Fatalf("w2 never finished the run of the paused w1\nw1:\n%s\nw2:\n%s", w1.live().wait().stderr, w2.live().wait().stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded {
		b, _ := json.MarshalIndent(invs, "", " ")
		t.Fatalf("run taken over by w2: %s, want succeeded\n%s", run.Status, b)
	}
	before, _ := json.Marshal(invs)
	if len(invs) != 2 || len(invs[0].Attempts) != 2 || invs[0].Decisions[0].Verdict != verdict.Replay {
		t.Fatalf("w2 resumed the run as after a crash: want check replayed (2 attempts), then pay; got%s", describe(invs))
	}

	// Continue w1: it wakes up with the answer to its call, and a run that
	// is no longer its own.
	syscall.Kill(w1.live().pid, syscall.SIGCONT)
	paused = false
	time.Sleep(3 * time.Second)
	if got := c.ledgerCount("ledger_append"); got != 1 {
		t.Fatalf("the unsafe step ran %d times, want once (by w2)", got)
	}
	invs, err = j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := json.Marshal(invs); string(after) != string(before) {
		t.Fatalf("the fenced worker changed the journal:\nbefore %s\nafter  %s", before, after)
	}
	w1.stop(t)
	w2.stop(t)
	if logs := w1.live().wait().stderr; !strings.Contains(logs, journal.ErrLeaseLost.Error()) {
		t.Errorf("w1 does not say it lost the run:\n%s", logs)
	}
	if r := c.run("journal", "check"); r.code != 0 {
		t.Errorf("journal check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func mustID(t *testing.T, s string) journal.ID {
	t.Helper()
	id, err := journal.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRunGoesToWorkers: with a live worker on the journal, `mcpflow run`
// submits the run and follows it from the journal to its end, as with a
// local server; `runs cancel` from anywhere cancels a run the worker
// holds; and a submitted run cancelled before any worker claimed it ends
// cancelled in the worker that claims it, without calling anything.
func TestRunGoesToWorkers(t *testing.T) {
	location := journaltest.PostgresURL(t)
	c := newCLI(t)
	c.env = quickExit("MCPFLOW_JOURNAL="+location, journal.KeyEnv+"="+workersKey)

	// Submitted while no worker is up, then cancelled: nothing may run.
	early := c.workflow("early.yaml", "name: early\nservers:\n  demo: {builtin: demo}\nsteps:\n  - {id: pay, server: demo, tool: ledger_append, with: {entry: early}}\n")
	r := c.run("run", early, "--detach")
	if r.code != 0 {
		t.Fatalf("run --detach without workers: exit %d\n%s", r.code, r.stderr)
	}
	earlyID := strings.TrimSpace(r.stdout)
	if r := c.run("runs", "cancel", earlyID, "--reason", "changed my mind"); r.code != 0 {
		t.Fatalf("cancel a submitted run: exit %d\n%s", r.code, r.stderr)
	}

	w := startWorker(c, "w1", "--lease", "2s")
	j := openShared(t, location)
	defer j.Close()
	waitRun := func(id string, want journal.RunStatus) *journal.Run {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			run, err := j.Run(mustID(t, id))
			if err != nil {
				t.Fatal(err)
			}
			if run.Status == want {
				return run
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is %s, want %s", id, run.Status, want)
			}
		}
	}
	run := waitRun(earlyID, journal.RunCancelled)
	if !strings.Contains(run.Error.Message, "changed my mind") || c.ledgerCount("ledger_append") != 0 {
		t.Fatalf("the early run: %+v, %d ledger rows; want cancelled for the reason given, nothing run", run.Error, c.ledgerCount("ledger_append"))
	}

	// run follows the run the worker runs.
	r = c.run("run", repoFile("examples", "workflows", "hello.yaml"), "--input", "name=Ada")
	if r.code != 0 || !strings.Contains(r.stdout, "HELLO, ADA!") || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("run with a worker: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// runs cancel reaches the worker holding the run.
	slow := c.workflow("slow.yaml", "name: slow\nservers:\n  demo: {builtin: demo}\nsteps:\n  - {id: count, server: demo, tool: count_slowly, with: {n: 200, delay_ms: 100}}\n")
	r = c.run("run", slow, "--detach")
	if r.code != 0 {
		t.Fatalf("run --detach: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		invs, err := j.RunInvocations(mustID(t, id))
		if err != nil {
			t.Fatal(err)
		}
		if len(invs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never sent the slow call")
		}
	}
	if r := c.run("runs", "cancel", id, "--reason", "too slow"); r.code != 0 {
		t.Fatalf("runs cancel: exit %d\n%s", r.code, r.stderr)
	}
	run = waitRun(id, journal.RunCancelled)
	if !strings.Contains(run.Error.Message, "too slow") {
		t.Errorf("the cancelled run's error: %+v", run.Error)
	}
	w.stop(t)
	logs := w.live().wait().stderr
	for _, want := range []string{"claimed run " + earlyID[:18], "claimed run " + id[:18]} {
		if !strings.Contains(logs, want) {
			t.Errorf("worker log lacks %q:\n%s", want, logs)
		}
	}
}
