package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/client"
	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

var (
	workerRuns   = flag.Int("worker-runs", 0, "runs the multi-worker campaign submits (default 200; 60 with database restarts)")
	workerSeed   = flag.Uint64("worker-seed", 0, "seed of the multi-worker campaign's faults (default: from the clock; printed)")
	workerPauses = flag.Float64("worker-pauses", 0.3, "share of the multi-worker campaign's faults that pause a worker (SIGSTOP, SIGCONT later) rather than kill it")
	pgRestarts   = flag.Int("pg-restarts", 2, "database restarts of TestWorkersSurviveDatabaseRestarts (run with "+pgRestartEnv+"=1)")
)

// pgRestartEnv opts in to the campaign that restarts the database: a
// restart breaks every other test using it at that moment, so it runs on
// its own, never in the parallel `go test ./...`.
const pgRestartEnv = "MCPFLOW_TEST_PG_RESTART"

// worker is one `mcpflow server` process on the shared journal, which the
// test kills and restarts under the same worker id.
type worker struct {
	c      *cli
	id     string
	socket string
	args   []string

	mu  sync.Mutex
	cmd []*workerProc // every process it ran, the live one last
}

type workerProc struct {
	pid  int
	wait func() result
}

func startWorker(c *cli, id string, extra ...string) *worker {
	w := &worker{c: c, id: id, socket: filepath.Join(c.t.TempDir(), id+".sock")}
	w.args = append([]string{"server", "--worker-id", id, "--socket", w.socket, "--grace", "1s"}, extra...)
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

// kill SIGKILLs the live process (stopped or not) and waits for it.
func (w *worker) kill() {
	p := w.live()
	syscall.Kill(p.pid, syscall.SIGKILL)
	p.wait()
}

// stop SIGTERMs the live process and checks it exits cleanly. It waits
// (up to 30 s) for the process to answer on its socket first: a SIGTERM
// that comes before Go has installed the handler kills it, and a worker
// the campaign restarted a moment ago may not have got that far. (A
// killed predecessor's socket file is stale: it does not answer.)
func (w *worker) stop(t *testing.T) {
	t.Helper()
	p := w.live()
	for deadline := time.Now().Add(30 * time.Second); !client.On(w.socket) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(p.pid, syscall.SIGTERM)
	if r := p.wait(); r.code != 0 {
		t.Errorf("worker %s: exit %d after SIGTERM\n%s", w.id, r.code, r.stderr)
	}
}

// logs is what every process the worker ran wrote to stderr.
func (w *worker) logs() string {
	w.mu.Lock()
	procs := slices.Clone(w.cmd)
	w.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		b.WriteString(p.wait().stderr)
	}
	return b.String()
}

// openShared opens the shared journal read-only for the test's checks.
func openShared(t *testing.T, location string) journal.Store {
	t.Helper()
	// The first worker to start makes the tables.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		j, err := door.OpenStore(location, &journal.Options{ReadOnly: true, Key: testKey(t)})
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
// while the test, every second or two, SIGKILLs a random worker and
// restarts it, or pauses one (SIGSTOP) for a moment or past its lease and
// continues it (SIGCONT). Every run ends; a call in flight in a killed or
// paused worker is replayed by the worker that takes the run over only
// when the replay rule clears it (safe tool, trusted server and
// workspace), otherwise it is outcome_unknown and the run blocks until an
// operator resolves it from the ledger; a paused worker that lost its runs
// writes nothing more for them; no unsafe call runs twice; no result is
// lost; `journal check` passes. A longer campaign:
//
//	go test ./cmd/mcpflow -run TestWorkersShareRuns -worker-runs 2000 -worker-seed 7
func TestWorkersShareRunsAndSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("the multi-worker campaign is long")
	}
	workerCampaign(t, journaltest.PostgresURL(t), 200, 0)
}

// TestWorkersSurviveDatabaseRestarts is the same campaign, on fewer runs
// by default, with the database restarted (`pg_ctlcluster VERSION NAME
// restart`, fast or immediate shutdown) while runs go: every connection of
// every worker breaks, in the middle of transactions and calls. Workers
// live through it, every run ends without a fault helping it along, and
// the promise holds. It restarts the local cluster serving
// MCPFLOW_TEST_POSTGRES, which breaks any other test using it at that
// moment: it runs only with MCPFLOW_TEST_PG_RESTART=1, on its own, and is
// never t.Parallel (a sequential test runs alone in its package).
//
//	MCPFLOW_TEST_PG_RESTART=1 go test ./cmd/mcpflow -run TestWorkersSurviveDatabaseRestarts -worker-runs 700 -pg-restarts 5 -worker-seed 7
func TestWorkersSurviveDatabaseRestarts(t *testing.T) {
	if os.Getenv(pgRestartEnv) != "1" {
		t.Skipf("restarts the database, breaking every other test using it: run it on its own with %s=1", pgRestartEnv)
	}
	location := journaltest.PostgresURL(t)
	pgCluster(t, location) // fail early on a database this cannot restart
	workerCampaign(t, location, 60, max(*pgRestarts, 1))
}

// workerCampaign submits runs (-worker-runs, or runs) to three workers on
// the journal at location while it kills and pauses them at random, and
// restarts the database restarts times, at even intervals of the
// submissions; then it lets every run end, settles the runs blocked on an
// unknown outcome from the ledger, and checks the promise.
func workerCampaign(t *testing.T, location string, runs, restarts int) {
	seed := *workerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := runs
	if *workerRuns > 0 {
		n = *workerRuns
	}
	pauseShare := *workerPauses
	rerun := fmt.Sprintf("go test ./cmd/mcpflow -run %s -worker-runs %d -worker-seed %d -worker-pauses %g", t.Name(), n, seed, pauseShare)
	if restarts > 0 {
		rerun = fmt.Sprintf("%s=1 %s -pg-restarts %d", pgRestartEnv, rerun, restarts)
	}
	t.Logf("multi-worker: %d runs, seed %d (rerun: %s)", n, seed, rerun)
	rng := rand.New(rand.NewPCG(seed, 3))
	const lease = 2 * time.Second

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
		workers = append(workers, startWorker(c, fmt.Sprintf("w%d", i), "--lease", lease.String(), "--max-runs", "6"))
	}

	// Submit every run, four commands at a time, each for any worker.
	// While the database restarts, a submission fails: it is tried again
	// (the first try may have committed all the same, one run more).
	files := make([]string, n)
	for i := range files {
		server := http
		if rng.IntN(4) == 0 {
			server = stdio // its server process dies with the worker
		}
		src, _ := trialWorkflow(rng, server)
		files[i] = c.workflow(fmt.Sprintf("run%03d.yaml", i), src)
	}
	var fig figures
	var resubmits atomic.Int64
	submitted := make(chan error, n)
	var wg sync.WaitGroup
	next := make(chan string)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range next {
				var err error
				for try := 0; ; try++ {
					out, e := c.command("run", f, "--detach").CombinedOutput()
					if e == nil {
						err = nil
						break
					}
					err = fmt.Errorf("run --detach %s: %v\n%s", filepath.Base(f), e, out)
					if restarts == 0 || try == 30 {
						break
					}
					resubmits.Add(1)
					time.Sleep(500 * time.Millisecond)
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

	// Faults, one every 0.5–2 s, until every run was submitted (and the
	// database restarted as often as asked): kill a random worker and
	// start it again, or pause one for 0.1–1.5 s, or past its lease for
	// 2.5–6 s. A worker continues when its pause is over.
	var cluster [2]string
	if restarts > 0 {
		cluster = pgCluster(t, location)
	}
	j := openShared(t, location)
	defer j.Close()
	began := time.Now()
	deadline := began.Add(2*time.Minute + time.Duration(n)*time.Second + time.Duration(restarts)*30*time.Second)
	paused := make([]time.Time, len(workers)) // when each paused worker continues
	done, restarted := 0, 0
	nextFault := time.Now().Add(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
	for {
		time.Sleep(50 * time.Millisecond)
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
		now := time.Now()
		for i, w := range workers {
			if !paused[i].IsZero() && now.After(paused[i]) {
				sendSignal(t, w.live().pid, syscall.SIGCONT)
				paused[i] = time.Time{}
			}
			if p := w.live(); paused[i].IsZero() && exited(p.pid) {
				// Started while the database was down, a worker cannot
				// open its journal and says so (exit 4): a supervisor
				// starts it again. Any other exit is a fault of its own.
				r := p.wait()
				if r.code != exitJournal || strings.Contains(r.stdout, "mcpflow server: journal") {
					t.Errorf("worker %s exited by itself (seed %d): exit %d\n%s%s", w.id, seed, r.code, r.stdout, r.stderr)
				}
				fig.refused++
				w.start()
			}
		}
		if restarted < restarts && done >= n*(restarted+1)/(restarts+1) {
			restartCluster(t, cluster, rng)
			restarted++
			fig.restarts++
			continue
		}
		if done == n && restarted == restarts {
			break
		}
		if now.After(deadline) {
			t.Fatalf("%d of %d runs submitted after %v (%v, seed %d)", done, n, time.Since(began).Round(time.Second), fig, seed)
		}
		if now.Before(nextFault) {
			continue
		}
		nextFault = now.Add(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(len(workers))
		w := workers[i]
		if rng.Float64() < pauseShare {
			if !paused[i].IsZero() {
				continue // paused already
			}
			pause := time.Duration(100+rng.IntN(1400)) * time.Millisecond
			if rng.IntN(2) == 0 {
				pause = time.Duration(2500+rng.IntN(3500)) * time.Millisecond
				fig.longPauses++
			}
			sendSignal(t, w.live().pid, syscall.SIGSTOP)
			paused[i] = now.Add(pause)
			fig.pauses++
			continue
		}
		w.kill() // a paused worker too: SIGKILL ends a stopped process
		paused[i] = time.Time{}
		fig.kills++
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		w.start()
	}
	wg.Wait()
	fig.resubmits = int(resubmits.Load())
	for i, w := range workers {
		if !paused[i].IsZero() {
			sendSignal(t, w.live().pid, syscall.SIGCONT)
		}
	}
	if fig.kills < 3 {
		t.Errorf("only %d kills: the campaign proved little", fig.kills)
	}

	// No more faults: every run ends on its own, succeeded or blocked on a
	// call whose outcome is unknown. A run left running now is one no
	// fault can help along any more.
	j.Close()
	j = openShared(t, location) // connections made after the last restart
	defer j.Close()
	for quiet := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		running, err := j.Runs(journal.RunFilter{Status: journal.RunRunning})
		if err != nil {
			t.Fatal(err)
		}
		if len(running) == 0 {
			break
		}
		if time.Now().After(quiet) {
			var held string
			if p, ok := j.(*postgres.Store); ok {
				ws, _ := p.Workers()
				b, _ := json.MarshalIndent(ws, "", " ")
				held = string(b)
			}
			for _, w := range workers {
				w.stop(t)
				t.Logf("worker %s:\n%s", w.id, w.logs())
			}
			t.Fatalf("%d runs still running a minute after the last fault (seed %d): %s…\nworkers: %s", len(running), seed, running[0].ID, held)
		}
	}
	for _, w := range workers {
		w.stop(t)
		fig.resumes += strings.Count(w.logs(), "claimed run ")
	}

	// An operator settles each blocked run from the ledger and resumes it.
	all, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < n || len(all) > n+fig.resubmits {
		t.Fatalf("%d runs journaled, want %d (and up to %d more, submissions tried again)", len(all), n, fig.resubmits)
	}
	fig.resumes -= len(all) // a run's first claim starts it
	blocked := 0
	for _, run := range all {
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
				if waitUnsettled(inv) {
					resolveFromLedger(t, c, inv)
					fig.resolved++
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

	// The promise, run by run, against the ledger.
	rows := c.ledgerByKey()
	for _, run := range all {
		invs, err := j.RunInvocations(run.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkSettled(t, invs, rows, &fig, seed)
	}
	t.Logf("multi-worker campaign: %d runs (%d blocked on an unknown outcome, settled from the ledger); %v", len(all), blocked, fig)
	if r := c.run("journal", "check"); r.code != 0 {
		t.Errorf("journal check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// pgCluster is the local PostgreSQL cluster (version and name, as
// pg_ctlcluster takes them) serving location, found by its port.
func pgCluster(t *testing.T, location string) [2]string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	out, err := exec.Command("pg_lsclusters", "--no-header").Output()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v: the database restarts need a local cluster run by pg_ctlcluster", err)
	}
	for _, l := range lines(string(out)) {
		if f := strings.Fields(l); len(f) >= 3 && f[2] == port {
			return [2]string{f[0], f[1]}
		}
	}
	t.Fatalf("no local cluster on port %s (pg_lsclusters):\n%s", port, out)
	return [2]string{}
}

// restartCluster restarts the cluster as an operator does (pg_ctlcluster
// as root), with a fast shutdown (every transaction rolled back, every
// connection closed) or an immediate one (a crash: recovery at start).
func restartCluster(t *testing.T, cluster [2]string, rng *rand.Rand) {
	t.Helper()
	mode := "fast"
	if rng.IntN(2) == 0 {
		mode = "immediate"
	}
	start := time.Now()
	out, err := exec.Command("pg_ctlcluster", "-m", mode, cluster[0], cluster[1], "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctlcluster -m %s %s %s restart: %v\n%s", mode, cluster[0], cluster[1], err, out)
	}
	t.Logf("database restarted (%s shutdown) in %v", mode, time.Since(start).Round(time.Millisecond))
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
