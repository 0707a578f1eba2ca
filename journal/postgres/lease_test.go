package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

// openWorker opens a PostgreSQL journal as the worker id.
func openWorker(t *testing.T, location, id string, serves bool) *postgres.Store {
	t.Helper()
	s := journaltest.OpenStore(t, location, &journal.Options{Worker: id, Serves: serves, Lease: 3 * time.Second})
	return s.(*postgres.Store)
}

// lostRuns records what OnLost tells.
type lostRuns struct {
	mu  sync.Mutex
	ids []journal.ID
}

func (l *lostRuns) add(id journal.ID) { l.mu.Lock(); l.ids = append(l.ids, id); l.mu.Unlock() }
func (l *lostRuns) has(id journal.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.ids, id)
}

// TestLeasesShareRuns: several writers share a journal; a run is its
// creator's; another live worker can neither claim it nor acquire it
// (ErrHeld); once its creator closes, a running run is free and is claimed
// once, by one worker.
func TestLeasesShareRuns(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", false)
	b := openWorker(t, location, "b", true)
	c := openWorker(t, location, "c", true)
	run := newRun(t, a)
	if got, err := b.Claim(10); err != nil || len(got) != 0 {
		t.Fatalf("claim of a held run: %v, %v; want nothing", got, err)
	}
	if err := b.Acquire(run); !errors.Is(err, journal.ErrHeld) || !strings.Contains(err.Error(), "worker a") {
		t.Fatalf("acquire of a held run: %v; want ErrHeld naming worker a", err)
	}
	if err := a.Acquire(run); err != nil {
		t.Fatalf("acquire of a run one holds: %v", err)
	}
	ws, err := b.Workers()
	if err != nil {
		t.Fatal(err)
	}
	held := map[string][]journal.ID{}
	for _, w := range ws {
		if !w.Live {
			t.Errorf("worker %s not live", w.ID)
		}
		held[w.ID] = w.Runs
	}
	if len(ws) != 3 || !slices.Equal(held["a"], []journal.ID{run}) || len(held["b"]) != 0 {
		t.Fatalf("workers: %+v; want a, b, c with a holding %s", ws, run)
	}
	a.Close()
	var got []journal.ID
	for _, w := range []*postgres.Store{b, c, b} {
		ids, err := w.Claim(10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids...)
	}
	if !slices.Equal(got, []journal.ID{run}) {
		t.Fatalf("claims after the holder closed: %v; want %s once", got, run)
	}
	// A run that ended is not claimed, even when free.
	r, _ := b.Run(run)
	if _, err := b.EndRun(run, journal.RunSucceeded, nil, nil); err != nil {
		t.Fatalf("end the claimed run: %v", err)
	}
	if err := b.Release(run); err != nil {
		t.Fatal(err)
	}
	if ids, _ := c.Claim(10); len(ids) != 0 {
		t.Fatalf("claimed a %s run: %v", r.Status, ids)
	}
}

// TestLeaseFencing: a worker whose lease expired (paused, say) loses its
// run to the worker that claims it: its next write for the run is refused
// in the write's transaction (ErrLeaseLost) and changes nothing, and it is
// told; the new holder goes on.
func TestLeaseFencing(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	var lost lostRuns
	a.OnLost(lost.add)
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	in := begin(t, a, run, "srv", "pay")
	// a's heartbeat stops coming, as when it is paused: its lease expires.
	sql(t, location, `UPDATE mcpflow_workers SET lease_until = clock_timestamp() - interval '1 second' WHERE id = 'a'`)
	ids, err := b.Claim(10)
	if err != nil || !slices.Equal(ids, []journal.ID{run}) {
		t.Fatalf("claim after a's lease expired: %v, %v", ids, err)
	}
	before := raw(t, b.Invocation, in.ID)
	err = a.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{}})
	if !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("finish by the worker that lost the run: %v; want ErrLeaseLost", err)
	}
	if after := raw(t, b.Invocation, in.ID); string(after) != string(before) {
		t.Fatalf("a refused write changed the invocation:\n%s\n%s", before, after)
	}
	if !lost.has(run) {
		t.Errorf("OnLost was not told of run %s", run)
	}
	if err := a.SetRunStatus(run, journal.RunFailed, nil); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("a run write by the worker that lost the run: %v; want ErrLeaseLost", err)
	}
	if _, err := a.Begin(&journal.Invocation{RunID: run, Step: "t", Item: -1, Server: "srv", Tool: "pay"}); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("an intent by the worker that lost the run: %v; want ErrLeaseLost", err)
	}
	// The new holder resumes as after a crash.
	if err := b.Interrupted(in.ID, journal.Outcome{State: journal.StateAborted, Failure: "connection_lost",
		Error: &journal.Error{Code: "X", Message: "lost"}}); err != nil {
		t.Fatalf("the new holder: %v", err)
	}
}

// TestLeaseNoReclaimWhileTheLostRunGoesHere: a worker that lost a run
// (paused past its lease) does not claim it back while its own work on it
// may still write — a new epoch in the same process would let the stale
// work's writes through the fence (an attempt finished after another
// worker had started the next one) — and claims it once that work
// released it.
func TestLeaseNoReclaimWhileTheLostRunGoesHere(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	in := begin(t, a, run, "srv", "pay")
	sql(t, location, `UPDATE mcpflow_workers SET lease_until = clock_timestamp() - interval '1 second' WHERE id = 'a'`)
	if ids, err := b.Claim(10); err != nil || !slices.Equal(ids, []journal.ID{run}) {
		t.Fatalf("claim after a's lease expired: %v, %v", ids, err)
	}
	b.Close() // b dies: the run is free again
	sql(t, location, `UPDATE mcpflow_workers SET lease_until = clock_timestamp() + interval '1 minute' WHERE id = 'a'`)
	if ids, err := a.Claim(10); err != nil || len(ids) != 0 {
		t.Fatalf("claim by the worker whose work on the run may still write: %v, %v; want nothing", ids, err)
	}
	err := a.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{}})
	if !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("finish by the stale work: %v; want ErrLeaseLost", err)
	}
	if err := a.Release(run); err != nil {
		t.Fatal(err)
	}
	if ids, err := a.Claim(10); err != nil || !slices.Equal(ids, []journal.ID{run}) {
		t.Fatalf("claim once the stale work released the run: %v, %v; want it", ids, err)
	}
	if err := a.Interrupted(in.ID, journal.Outcome{State: journal.StateAborted, Failure: "connection_lost",
		Error: &journal.Error{Code: "X", Message: "lost"}}); err != nil {
		t.Fatalf("the new hold's write: %v", err)
	}
}

// TestLeaseHeartbeatKeepsARunBeingCreated: a run this worker holds whose
// creation has not committed yet (not in the table) is not lost: the
// heartbeat that ran in that window used to report it lost, and every
// later write of the run failed as taken over by another worker.
func TestLeaseHeartbeatKeepsARunBeingCreated(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := journaltest.OpenStore(t, location, &journal.Options{Worker: "a", Lease: 300 * time.Millisecond}).(*postgres.Store)
	var lost lostRuns
	a.OnLost(lost.add)
	creating := journal.NewID()
	a.HoldUncommitted(creating, 1)
	taken := newRun(t, a)
	sql(t, location, `UPDATE mcpflow_runs SET owner = 'b', session = gen_random_uuid(), epoch = epoch + 1`)
	deadline := time.Now().Add(5 * time.Second)
	for !lost.has(taken) { // heartbeats came, every 100 ms
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat did not find the lost run")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lost.has(creating) {
		t.Errorf("run %s, held while its creation commits, reported lost", creating)
	}
}

// TestLeaseHeartbeatFindsLostRuns: the heartbeat of a worker whose run
// was taken tells OnLost without waiting for a write.
func TestLeaseHeartbeatFindsLostRuns(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := journaltest.OpenStore(t, location, &journal.Options{Worker: "a", Lease: 300 * time.Millisecond}).(*postgres.Store)
	var lost lostRuns
	a.OnLost(lost.add)
	run := newRun(t, a)
	// Another worker took it while a was cut off (a's heartbeat, every
	// 100 ms, would win the race to renew an expired lease here).
	sql(t, location, `UPDATE mcpflow_runs SET owner = 'b', session = gen_random_uuid(), epoch = epoch + 1`)
	deadline := time.Now().Add(5 * time.Second)
	for !lost.has(run) {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat did not find the lost run")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaseDeadConnectionFreesRuns: a worker whose database connection is
// gone (its process died) holds nothing, though its lease has not expired.
func TestLeaseDeadConnectionFreesRuns(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := journaltest.OpenStore(t, location, &journal.Options{Worker: "a", Lease: time.Hour}).(*postgres.Store)
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	sql(t, location, `SELECT pg_terminate_backend(backend_pid) FROM mcpflow_workers WHERE id = 'a'`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		ids, err := b.Claim(1)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(ids, []journal.ID{run}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the run of a worker whose connection is gone was not claimed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkerIDInUse: two live processes cannot share a worker id; a
// worker restarted under its id after it died takes the id back.
func TestWorkerIDInUse(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := journaltest.OpenStore(t, location, &journal.Options{Worker: "w1", Lease: time.Hour}).(*postgres.Store)
	if _, err := door.OpenStore(location, &journal.Options{Worker: "w1"}); err == nil || !strings.Contains(err.Error(), `worker id "w1" is in use`) {
		t.Fatalf("second process as w1: %v; want 'in use'", err)
	}
	run := newRun(t, a)
	sql(t, location, `SELECT pg_terminate_backend(backend_pid) FROM mcpflow_workers WHERE id = 'w1'`)
	var again *postgres.Store
	deadline := time.Now().Add(5 * time.Second)
	for again == nil {
		s, err := door.OpenStore(location, &journal.Options{Worker: "w1", Serves: true})
		if err == nil {
			again = s.(*postgres.Store)
			defer again.Close()
		} else if time.Now().After(deadline) {
			t.Fatalf("restart as w1 after it died: %v", err)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if ids, err := again.Claim(5); err != nil || !slices.Equal(ids, []journal.ID{run}) {
		t.Fatalf("the restarted worker claims its old run: %v, %v", ids, err)
	}
}

// TestLeaseFencesANewIntent: the first write of a worker that lost its
// run may be a new intent: it is refused (ErrLeaseLost), and nothing of
// it is written.
func TestLeaseFencesANewIntent(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	sql(t, location, `UPDATE mcpflow_workers SET lease_until = clock_timestamp() - interval '1 second' WHERE id = 'a'`)
	if ids, err := b.Claim(1); err != nil || len(ids) != 1 {
		t.Fatalf("claim: %v, %v", ids, err)
	}
	_, err := a.Begin(&journal.Invocation{RunID: run, Step: "pay", Item: -1, Server: "srv", Tool: "pay"})
	if !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("intent by the worker that lost the run: %v; want ErrLeaseLost", err)
	}
	if invs, err := b.RunInvocations(run); err != nil || len(invs) != 0 {
		t.Fatalf("the refused intent was written: %d invocations, %v", len(invs), err)
	}
	if _, err := b.Begin(&journal.Invocation{RunID: journal.NewID(), Step: "pay", Item: -1, Server: "srv", Tool: "pay"}); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("intent of a run that does not exist: %v; want ErrNotFound", err)
	}
}

// TestLeaseSurvivesASlowDatabase: a heartbeat that takes longer than a
// third of the lease (its worker row locked here for 2.5 s) leaves the
// worker live: its connection stays open and its lease holds, so no other
// worker takes its run.
func TestLeaseSurvivesASlowDatabase(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := journaltest.OpenStore(t, location, &journal.Options{Worker: "a", Lease: 3 * time.Second}).(*postgres.Store)
	var lost lostRuns
	a.OnLost(lost.add)
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	ctx := context.Background()
	_, tx := lockRows(t, location, `SELECT 1 FROM mcpflow_workers WHERE id = 'a' FOR UPDATE`)
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ids, err := b.Claim(1); err != nil || len(ids) != 0 {
			tx.Rollback(ctx)
			t.Fatalf("while a's heartbeat waits: claimed %v, %v; want nothing", ids, err)
		}
	}
	tx.Rollback(ctx)
	time.Sleep(1500 * time.Millisecond) // a beat after the stall
	if ids, err := b.Claim(1); err != nil || len(ids) != 0 || lost.has(run) {
		t.Fatalf("after the stall: claimed %v, %v, lost %v; want nothing", ids, err, lost.has(run))
	}
}

// TestCancelRequests: a cancel asked in one process reaches the process
// holding the run through its heartbeat, with the reason; it lasts while
// the run is running and is gone once the run ends; a run that is not
// running cannot be asked.
func TestCancelRequests(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := journaltest.OpenStore(t, location, &journal.Options{Worker: "a", Lease: 300 * time.Millisecond}).(*postgres.Store)
	asked := make(chan string, 10)
	a.OnCancel(func(id journal.ID, reason string) { asked <- id.String() + " " + reason })
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	if ok, err := b.RequestCancel(run, "not today"); !ok || err != nil {
		t.Fatalf("request: %v, %v", ok, err)
	}
	select {
	case got := <-asked:
		if got != run.String()+" not today" {
			t.Fatalf("told %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder was never told")
	}
	if why, ok, err := b.CancelRequested(run); !ok || why != "not today" || err != nil {
		t.Fatalf("CancelRequested: %q %v %v", why, ok, err)
	}
	if err := a.SetRunStatus(run, journal.RunCancelled, &journal.Error{Code: "X", Message: "not today"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.CancelRequested(run); ok || err != nil {
		t.Fatalf("after the run ended: still asked (%v, %v)", ok, err)
	}
	if ok, err := b.RequestCancel(run, "again"); ok || err != nil {
		t.Fatalf("request for a cancelled run: %v, %v; want false", ok, err)
	}
}

// TestFreedRunsAreNotified: a serving worker is told at once when a
// running run becomes free — submitted and let go by another process, or
// left by a worker that stops — and is not told of a run that ended.
func TestFreedRunsAreNotified(t *testing.T) {
	location := journaltest.PostgresURL(t)
	w := openWorker(t, location, "w", true)
	freed := make(chan struct{}, 16)
	w.OnFreed(func() { freed <- struct{}{} })
	told := func(what string, want bool) {
		t.Helper()
		select {
		case <-freed:
			if !want {
				t.Errorf("%s: told a run was freed", what)
			}
		case <-time.After(2 * time.Second):
			if want {
				t.Errorf("%s: not told within 2s", what)
			}
		}
	}
	// The listener may still be connecting: a run freed before it listens
	// is found by polling. Submit until one is heard.
	sub := openWorker(t, location, "sub", false)
	heard := false
	for range 20 {
		if err := sub.Release(newRun(t, sub)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-freed:
			heard = true
		case <-time.After(200 * time.Millisecond):
		}
		if heard {
			break
		}
	}
	if !heard {
		t.Fatal("a submitted run was never notified")
	}
	for len(freed) > 0 {
		<-freed
	}
	ended := newRun(t, sub)
	if _, err := sub.EndRun(ended, journal.RunSucceeded, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := sub.Release(ended); err != nil {
		t.Fatal(err)
	}
	told("a run that ended, let go", false)
	other := openWorker(t, location, "other", true)
	newRun(t, other)
	other.Close()
	told("a worker that stopped with a running run", true)
}

// TestAcquireOfAHeldRunAsksNothing: a worker resuming a run it holds (its
// own claim, a moment ago) does not write the run's row again: with the
// row locked by another transaction, Acquire returns at once, where an
// UPDATE would wait for the lock. The run stays at its epoch.
func TestAcquireOfAHeldRunAsksNothing(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", false)
	run := newRun(t, a)
	conn := dbConn(t, location)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var epoch int64
	if err := tx.QueryRow(ctx, `SELECT epoch FROM mcpflow_runs WHERE id = $1::uuid FOR UPDATE`, run.String()).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Acquire(run) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acquire of a run one holds: %v", err)
		}
	case <-time.After(3 * time.Second):
		tx.Rollback(ctx) // let the UPDATE through, so the test ends
		<-done
		t.Fatal("acquire of a held run waited for the run's row: it wrote it again")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var after int64
	if err := conn.QueryRow(ctx, `SELECT epoch FROM mcpflow_runs WHERE id = $1::uuid`, run.String()).Scan(&after); err != nil || after != epoch {
		t.Fatalf("epoch %d after acquire (%v), want %d", after, err, epoch)
	}
}
