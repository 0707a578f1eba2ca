package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpflow/mcpflow/client"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

var (
	serverKills = flag.Int("server-kills", 0, "SIGKILLs of mcpflow server in TestServerKillCampaign (default 12)")
	serverSeed  = flag.Uint64("server-seed", 0, "seed of TestServerKillCampaign (default: from the clock; printed)")
)

// TestServerKillCampaign is the single-owner server's crash promise, kill
// after kill: `mcpflow server` on a workspace's bbolt journal runs the
// workflows submitted to it (run --detach, through its socket), mixing
// unsafe tools (ledger_append, not_idempotent) and safe ones (put_record,
// upper) on a stdio demo server it starts and an HTTP one that outlives
// it, every call delayed so that calls are in flight. The test SIGKILLs
// the server at random moments — mostly while an unsafe call is in
// flight, sometimes while it is still resuming the runs of the last kill —
// and starts it again, which resumes the interrupted runs under the
// replay rule. When the kills are over it lets every run end, resolves
// each outcome_unknown call from the ledger as an operator would, resumes
// the blocked runs, and checks: every run succeeded; no unsafe call ran
// twice; every completed result is the one an execution produced;
// `journal check` is clean; no process of a killed server outlived it. A
// longer campaign:
//
//	go test ./cmd/mcpflow -run TestServerKillCampaign -server-kills 150 -server-seed 7
func TestServerKillCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("the server kill campaign is long")
	}
	t.Parallel() // long, and mostly waiting: beside the other campaigns, after the rest
	kills := *serverKills
	if kills == 0 {
		kills = 12
	}
	seed := *serverSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("server kills: %d, seed %d (rerun: go test ./cmd/mcpflow -run TestServerKillCampaign -server-kills %d -server-seed %d)", kills, seed, kills, seed)
	rng := rand.New(rand.NewPCG(seed, 5))

	c := newCLI(t)
	c.env = quickExit("MCPFLOW_DEMO_DELAY=60ms")
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatalf("trust add: %s", r.stderr)
	}
	d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", c.env...)
	servers := []string{fmt.Sprintf("{url: %q, trust: true}", d.url), "{builtin: demo, trust: true}"}
	// The server and the processes it starts carry a tag of their own: a
	// killed server's are found, and must be gone with it.
	serverTag := uuid.NewString()
	t.Cleanup(func() {
		if pids := tagged(serverTag); len(pids) > 0 {
			t.Errorf("processes of mcpflow server left running: %v", pids)
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	var logs []func() result // every server process's, to count its resumes
	var started time.Time    // when the live server started
	start := func() *exec.Cmd {
		started = time.Now()
		cmd, wait := c.startServer(tagEnv + "=" + serverTag)
		logs = append(logs, wait)
		return cmd
	}
	srv := start()
	api := client.New(filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock"), nil)
	defer api.Close()

	// Submit runs, three commands at a time, until the kills are over. A
	// submission refused while the server is down is tried again (one cut
	// by a kill may have been journaled all the same: a run more).
	var fig figures
	var submitted, resubmits atomic.Int64
	// refused counts the submitters whose last try was refused (the
	// server down): each life of the server takes their runs before it is
	// killed. On a busy machine a server restarted with a backlog of runs
	// to resume was otherwise killed again and again before it took a
	// submission, for a minute.
	var refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sub := *c // startServer changes c.env while they submit
	for g := range 3 {
		wg.Add(1)
		// Each submitter writes its own workflows, from a seed of its own.
		grng := rand.New(rand.NewPCG(seed, uint64(10+g)))
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				src, _ := trialWorkflow(grng, servers[grng.IntN(len(servers))])
				f := filepath.Join(c.workspace, fmt.Sprintf("g%d-run%04d.yaml", g, i))
				if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
					t.Error(err)
					return
				}
				for first, tries := time.Now(), 0; ; tries++ {
					out, err := sub.command("run", f, "--detach").CombinedOutput()
					if err == nil {
						submitted.Add(1)
						if tries > 0 {
							refused.Add(-1)
						}
						break
					}
					if tries == 0 {
						refused.Add(1)
					}
					if time.Since(first) > time.Minute {
						t.Errorf("run --detach %s: refused for a minute: %v\n%s", filepath.Base(f), err, out)
						return
					}
					resubmits.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}

	// The kills: mostly once the server has sent an unsafe call of its
	// own (waiting up to 3 s for one, after a random while), now and then
	// at once, while it is still resuming the last kill's runs.
	for k := 0; k < kills; k++ {
		for deadline := time.Now().Add(30 * time.Second); refused.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if rng.IntN(6) == 0 {
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if unsafeInFlight(api, started) {
					fig.inFlight++
					break
				}
			}
		}
		wait := logs[len(logs)-1]
		if err := srv.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if r := wait(); r.code != -1 {
			t.Fatalf("mcpflow server ended before it was killed: exit %d (seed %d)\n%s", r.code, seed, r.stderr)
		}
		fig.kills++
		// Its stdio demo servers die with it; the HTTP one goes on.
		for deadline := time.Now().Add(5 * time.Second); len(tagged(serverTag)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("processes outlived the killed mcpflow server: %v (seed %d)", tagged(serverTag), seed)
			}
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		srv = start()
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// No more kills: every run ends, succeeded or blocked on a call whose
	// outcome is unknown.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		n, err := api.CountRuns(service.RunQuery{Status: journal.RunRunning.String()})
		if err != nil {
			t.Fatal(err)
		}
		if n.N == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still running a minute after the last kill (seed %d)", n.N, seed)
		}
	}

	// An operator resolves each unknown outcome from the ledger and
	// resumes the run, through the server.
	runs, err := api.Runs(service.RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(runs)); n < submitted.Load() || n > submitted.Load()+resubmits.Load() {
		t.Fatalf("%d runs journaled, %d submitted (%d submissions tried again)", n, submitted.Load(), resubmits.Load())
	}
	// A call that a killed server sent to the HTTP demo server may still
	// be going there: an operator checks the real system once it settled.
	time.Sleep(300 * time.Millisecond)
	blocked := 0
	for _, r := range runs {
		id := r.Run.ID.String()
		for round := 0; ; round++ {
			rep, err := api.RunDetail(id)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Run.Status == journal.RunSucceeded {
				break
			}
			if rep.Run.Status != journal.RunBlocked || round > 5 {
				t.Fatalf("run %s is %s after %d resumes (seed %d): %+v", rep.Run.ID.Short(), rep.Run.Status, round, seed, rep.Run.Error)
			}
			if round == 0 {
				blocked++
			}
			for _, inv := range rep.Invocations {
				if waitUnsettled(inv) {
					resolveFromLedger(t, c, inv)
					fig.resolved++
				}
			}
			if res := c.run("resume", id); res.code != 0 && res.code != exitBlocked {
				t.Fatalf("resume %s: exit %d\n%s%s", rep.Run.ID.Short(), res.code, res.stdout, res.stderr)
			}
		}
	}
	c.stopServer(srv, logs[len(logs)-1])
	for _, wait := range logs {
		fig.resumes += strings.Count(wait().stderr, "resuming run ")
	}

	// The promise, run by run, against the ledger; then the journal's own
	// check.
	rows := c.ledgerByKey()
	j := c.openJournal()
	all, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range all {
		if run.Status != journal.RunSucceeded {
			t.Errorf("run %s is %s (seed %d)", run.ID.Short(), run.Status, seed)
		}
		invs, err := j.RunInvocations(run.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkSettled(t, invs, rows, &fig, seed)
	}
	fig.resubmits = int(resubmits.Load())
	t.Logf("server kill campaign: %d runs (%d blocked on an unknown outcome, settled from the ledger); %v", len(all), blocked, fig)
	if r := c.run("journal", "check"); r.code != 0 {
		t.Errorf("journal check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if fig.inFlight < fig.kills/2 {
		t.Errorf("only %d of %d kills with an unsafe call in flight: the campaign proved little", fig.inFlight, fig.kills)
	}
}

// unsafeInFlight reports whether the server started at since has an
// unsafe call in flight: an intent it sent (not one a killed server left,
// which it has yet to decide on).
func unsafeInFlight(api *client.Client, since time.Time) bool {
	invs, err := api.Invocations(service.InvocationQuery{State: journal.StateIntent.String()})
	if err != nil {
		return false
	}
	for _, inv := range invs {
		if n := len(inv.Attempts); unsafeTool(inv.Tool) && n > 0 && inv.Attempts[n-1].SentAt.After(since) {
			return true
		}
	}
	return false
}
