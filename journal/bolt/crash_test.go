package bolt_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestCrashDurability re-runs the test binary as a child that writes journal
// records from several goroutines and SIGKILLs it at random moments. The
// child prints "doing ID FACT" before each write and "ok ID FACT" after the
// write returned. After each kill the journal must open, pass Check, and
// hold every acknowledged fact; a fact only announced may or may not be
// there. One file is reused across kills, so it grows and each child also
// resumes what the previous one left in flight.
func TestCrashDurability(t *testing.T) {
	t.Parallel()
	kills := 30
	switch {
	case os.Getenv("JOURNAL_CRASH_KILLS") != "":
		kills, _ = strconv.Atoi(os.Getenv("JOURNAL_CRASH_KILLS"))
	case os.Getenv("CI") == "true":
		kills = 200
	case testing.Short():
		kills = 10
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("JOURNAL_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with JOURNAL_CRASH_SEED=%d), %d kills", seed, seed, kills)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "journal.db")

	acked := map[string]string{}   // id → fact
	pending := map[string]string{} // id → fact announced, not acknowledged
	start, writes := time.Now(), 0
	for i := range kills {
		c := startChild(t, "crash", path, fmt.Sprintf("JOURNAL_TEST_SEED=%d", seed+uint64(i)))
		if rng.IntN(10) == 0 {
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // may hit Open
		} else {
			c.waitFor(t, "ready")
			time.Sleep(time.Duration(5+rng.IntN(56)) * time.Millisecond)
		}
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("seed %d, kill %d: %v", seed, i, err)
		}
		for l := range c.lines {
			f := strings.SplitN(l, " ", 3)
			switch {
			case len(f) == 3 && f[0] == "doing":
				pending[f[1]] = f[2]
			case len(f) == 3 && f[0] == "ok":
				if pending[f[1]] != f[2] {
					t.Fatalf("seed %d, kill %d: child acknowledged %q it never announced", seed, i, l)
				}
				acked[f[1]] = f[2]
				delete(pending, f[1])
				writes++
			case strings.HasPrefix(l, "error"):
				t.Fatalf("seed %d, kill %d: child: %s", seed, i, l)
			}
		}
		_ = c.cmd.Wait()
		if _, err := os.Stat(path); os.IsNotExist(err) {
			continue // killed before it created the journal
		}
		j := journaltest.OpenPath(t, path, nil)
		probs, err := j.Check()
		if err != nil || len(probs) > 0 {
			t.Fatalf("seed %d, kill %d: check: %v %v", seed, i, err, probs)
		}
		now := facts(t, j)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		for id, want := range acked {
			got, ok := now[id]
			if p, isPending := pending[id]; isPending && got == p {
				continue
			}
			if !ok || got != want {
				t.Fatalf("seed %d, kill %d: %s is %q, acknowledged %q (announced %q)", seed, i, id, got, want, pending[id])
			}
		}
		for id, p := range pending {
			if got, ok := now[id]; ok && got != p && got != acked[id] {
				t.Fatalf("seed %d, kill %d: %s is %q, announced %q, acknowledged %q", seed, i, id, got, p, acked[id])
			}
		}
		for id := range pending {
			if got, ok := now[id]; ok {
				acked[id] = got
			}
			delete(pending, id)
		}
		for id := range now {
			if _, ok := acked[id]; !ok {
				t.Fatalf("seed %d, kill %d: %s in the journal but never announced", seed, i, id)
			}
		}
	}
	if writes < kills {
		t.Errorf("seed %d: only %d acknowledged writes in %d kills", seed, writes, kills)
	}
	st, _ := os.Stat(path)
	t.Logf("%d kills, %d acknowledged writes, %d records, file %d KiB, %v", kills, writes, len(acked), st.Size()>>10, time.Since(start).Round(time.Millisecond))
}

// facts reads every run and invocation as the child describes them
// (invocations from the export, decoding only what a fact needs).
func facts(t *testing.T, j *bolt.Store) map[string]string {
	out := map[string]string{}
	runs, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		out[r.ID.String()] = runFact(r.Status)
	}
	var buf bytes.Buffer
	if err := j.Export(&buf, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var inv struct {
			ID       journal.ID    `json:"id"`
			RunID    journal.ID    `json:"run_id"`
			State    journal.State `json:"state"`
			Attempts []struct {
				EndedAt *time.Time `json:"ended_at"`
			} `json:"attempts"`
		}
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &inv); err != nil {
			t.Fatal(err)
		}
		n := len(inv.Attempts)
		out[inv.ID.String()] = invFact(inv.RunID, inv.State, n, n == 0 || inv.Attempts[n-1].EndedAt != nil)
	}
	return out
}

func runFact(s journal.RunStatus) string { return "run:" + s.String() }

func invFact(run journal.ID, s journal.State, attempts int, ended bool) string {
	return fmt.Sprintf("inv:%s:%s:%d:%v", run, s, attempts, ended)
}

// crashChild writes records until it is killed (or for 20 s).
func crashChild(path, seedText string) int {
	seed, _ := strconv.ParseUint(seedText, 10, 64)
	j, err := bolt.Open(path, &journal.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	fail := func(err error) int { say("error: %v", err); return 1 }
	say("ready")
	// Resume what the previous child left: in-flight invocations, running runs.
	invs, err := j.Invocations(journal.Filter{State: journal.StateIntent})
	if err != nil {
		return fail(err)
	}
	for _, inv := range invs {
		n := len(inv.Attempts)
		if last := inv.LastAttempt(); last.EndedAt == nil {
			say("doing %s %s", inv.ID, invFact(inv.RunID, journal.StateOutcomeUnknown, n, true))
			if err := j.Interrupted(inv.ID, journal.Outcome{State: journal.StateOutcomeUnknown, Failure: "crash"}); err != nil {
				return fail(err)
			}
			say("ok %s %s", inv.ID, invFact(inv.RunID, journal.StateOutcomeUnknown, n, true))
			continue
		}
		say("doing %s %s", inv.ID, invFact(inv.RunID, journal.StateIntent, n+1, false))
		if _, err := j.Again(inv.ID, journal.NextAttempt{Kind: journal.KindReplay}); err != nil {
			return fail(err)
		}
		say("ok %s %s", inv.ID, invFact(inv.RunID, journal.StateIntent, n+1, false))
	}
	runs, err := j.Runs(journal.RunFilter{Status: journal.RunRunning})
	if err != nil {
		return fail(err)
	}
	for _, r := range runs {
		say("doing %s %s", r.ID, runFact(journal.RunCancelled))
		if err := j.SetRunStatus(r.ID, journal.RunCancelled, nil); err != nil {
			return fail(err)
		}
		say("ok %s %s", r.ID, runFact(journal.RunCancelled))
	}

	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			work := func(format string, args ...any) { // a call in flight, a step's own work
				say(format, args...)
				if strings.HasPrefix(format, "ok") {
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				}
			}
			for time.Now().Before(deadline) {
				if err := childRun(j, rng, work); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fail(err)
	}
	return 0
}

// childRun writes one run: a few invocations with various outcomes, then
// the run's status.
func childRun(j *bolt.Store, rng *rand.Rand, say func(string, ...any)) error {
	r := &journal.Run{ID: journal.NewID(), Workflow: "crash", Definition: []byte("name: crash\n")}
	say("doing %s %s", r.ID, runFact(journal.RunRunning))
	if err := j.CreateRun(r); err != nil {
		return err
	}
	say("ok %s %s", r.ID, runFact(journal.RunRunning))
	status := journal.RunSucceeded
	for range 1 + rng.IntN(3) {
		inv := &journal.Invocation{ID: journal.NewID(), RunID: r.ID, Step: "s", Item: -1, Server: "srv", Tool: fmt.Sprint("t", rng.IntN(3)),
			Arguments: []byte(`{"payload":"` + strings.Repeat("x", rng.IntN(200)) + `"}`)}
		say("doing %s %s", inv.ID, invFact(r.ID, journal.StateIntent, 1, false))
		in, err := j.Begin(inv)
		if err != nil {
			return err
		}
		say("ok %s %s", inv.ID, invFact(r.ID, journal.StateIntent, 1, false))
		if rng.IntN(3) == 0 { // connection lost, replayed
			say("doing %s %s", inv.ID, invFact(r.ID, journal.StateIntent, 1, true))
			if err := j.Finish(in, journal.Outcome{State: journal.StateIntent, Failure: "connection_lost"}); err != nil {
				return err
			}
			say("ok %s %s", inv.ID, invFact(r.ID, journal.StateIntent, 1, true))
			say("doing %s %s", inv.ID, invFact(r.ID, journal.StateIntent, 2, false))
			if in, err = j.Again(inv.ID, journal.NextAttempt{Kind: journal.KindReplay}); err != nil {
				return err
			}
			say("ok %s %s", inv.ID, invFact(r.ID, journal.StateIntent, 2, false))
		}
		s := journal.StateCompleted
		if rng.IntN(4) == 0 {
			s, status = journal.StateOutcomeUnknown, journal.RunBlocked
		}
		say("doing %s %s", inv.ID, invFact(r.ID, s, in.Attempt, true))
		if err := j.Finish(in, journal.Outcome{State: s, Result: &journal.Result{Content: []byte(`[]`)}}); err != nil {
			return err
		}
		say("ok %s %s", inv.ID, invFact(r.ID, s, in.Attempt, true))
		if s != journal.StateCompleted {
			break
		}
	}
	say("doing %s %s", r.ID, runFact(status))
	if err := j.SetRunStatus(r.ID, status, nil); err != nil {
		return err
	}
	say("ok %s %s", r.ID, runFact(status))
	return nil
}
