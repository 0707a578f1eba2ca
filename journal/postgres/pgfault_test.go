package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

// Faults of the database under a PostgreSQL journal's writers: a
// connection ended in the middle of a transaction or of a release, a
// database that is down. The worker campaign's database restarts and
// pauses (cmd/mcpflow TestWorkersSurviveDatabaseRestarts) found each.

// TestOpenStoreErrorIsNil: a journal that cannot be opened — a database
// that is down (a worker started while it restarts), a file that is not
// there — gives an error and a nil Store, never a nil *Postgres inside a
// Store, which a caller takes for an open journal and calls (mcpflow
// server panicked so).
func TestOpenStoreErrorIsNil(t *testing.T) {
	for _, location := range []string{
		"postgres://mcpflow:x@127.0.0.1:1/mcpflow?sslmode=disable&connect_timeout=2", // nothing listens on port 1
		filepath.Join(t.TempDir(), "missing.db"),
	} {
		j, err := door.OpenStore(location, &journal.Options{ReadOnly: true})
		if err == nil || j != nil {
			t.Errorf("OpenStore(%s) = %#v, %v; want nil and an error", journal.Redact(location), j, err)
		}
		if journal.IsPostgres(location) && !errors.Is(err, journal.ErrInaccessible) {
			t.Errorf("OpenStore(%s): %v, want ErrInaccessible", journal.Redact(location), err)
		}
	}
}

// openNamed opens location as worker id, its connections named so that
// the test can end them, and no other test's.
func openNamed(t *testing.T, location, id string) (*postgres.Store, string) {
	t.Helper()
	name := fmt.Sprintf("%s-%x", id, rand.Uint64())
	j := journaltest.OpenStore(t, location+"&application_name="+name, &journal.Options{Worker: id, Lease: 3 * time.Second})
	return j.(*postgres.Store), name
}

// TestLeaseReleaseThatFailedIsRetried: a release whose statement fails
// (its connection ended) leaves the run the session's in the database; the
// session lives on, so no worker could claim the run while the process
// lives — a run running for ever. The heartbeat frees it once the
// database answers: another worker claims it.
func TestLeaseReleaseThatFailedIsRetried(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a, name := openNamed(t, location, "a")
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	// End a's pool's connections (not its session's own).
	sql(t, location, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
		WHERE application_name = $1 AND pid NOT IN (SELECT backend_pid FROM mcpflow_workers)`, name)
	if err := a.Release(run); err == nil {
		t.Fatal("release on an ended connection succeeded: the test ended nothing")
	}
	deadline := time.Now().Add(5 * time.Second) // a's heartbeat comes every second
	for {
		ids, err := b.Claim(1)
		if err == nil && slices.Equal(ids, []journal.ID{run}) {
			break
		}
		if time.Now().After(deadline) {
			ws, _ := b.Workers()
			t.Fatalf("the run whose release failed was never freed: claim %v, %v; workers %+v", ids, err, ws)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ws, err := b.Workers(); err != nil || len(ws) != 2 || !ws[0].Live || !ws[1].Live {
		t.Fatalf("workers: %+v, %v; want a and b live", ws, err)
	}
}

// TestRunTakenBackAfterAFailedReleaseStaysHeld: a release that failed is
// retried by the heartbeat at the epoch the run was held at; when the
// process takes the run back first (an operator resolved it, and this
// server resumes it), the retry must not free the run under it — a worker
// would claim a healthy run going here. Taking it back raises the epoch,
// so a retry that lands late matches nothing.
func TestRunTakenBackAfterAFailedReleaseStaysHeld(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a, name := openNamed(t, location, "a")
	b := openWorker(t, location, "b", true)
	run := newRun(t, a)
	conn := dbConn(t, location)
	var session string
	var epoch int64
	if err := conn.QueryRow(context.Background(), `SELECT session::text, epoch FROM mcpflow_runs WHERE id = $1::uuid`, run.String()).Scan(&session, &epoch); err != nil {
		t.Fatal(err)
	}
	sql(t, location, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
		WHERE application_name = $1 AND pid NOT IN (SELECT backend_pid FROM mcpflow_workers)`, name)
	if err := a.Release(run); err == nil {
		t.Fatal("release on an ended connection succeeded: the test ended nothing")
	}
	if err := a.Acquire(run); err != nil {
		t.Fatalf("taking the run back: %v", err)
	}
	// The heartbeat's retry of the release, landing after the take-back.
	sql(t, location, `UPDATE mcpflow_runs SET owner = NULL, session = NULL WHERE id = $1::uuid AND session = $2::uuid AND epoch = $3`, run.String(), session, epoch)
	time.Sleep(1500 * time.Millisecond) // a heartbeat or more
	if ids, err := b.Claim(1); err != nil || len(ids) != 0 {
		t.Fatalf("another worker claimed %v (%v): a run taken back was freed under its holder", ids, err)
	}
	if err := a.SetRunStatus(run, journal.RunBlocked, &journal.Error{Code: "TEST", Message: "blocked"}); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
}

// TestWriteWhoseTransactionWasEndedIsRetried: the database ends a write's
// transaction before its commit (here the write waits for a row lock when
// its connection is terminated; a worker paused past
// idle_in_transaction_session_timeout is ended the same way). Nothing of
// it committed: the write runs again on another connection and succeeds,
// instead of failing a run that nothing is wrong with.
func TestWriteWhoseTransactionWasEndedIsRetried(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a, name := openNamed(t, location, "a")
	run := newRun(t, a)
	ctx := context.Background()
	conn, tx := lockRows(t, location, `SELECT 1 FROM mcpflow_runs FOR UPDATE`)
	done := make(chan error, 1)
	go func() {
		done <- a.SetRunStatus(run, journal.RunBlocked, &journal.Error{Code: "TEST", Message: "blocked"})
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var ended bool
		err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid, 5000)), false) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, name).Scan(&ended)
		if err != nil {
			t.Fatal(err)
		}
		if ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never waited for the row")
		}
	}
	tx.Rollback(ctx)
	if err := <-done; err != nil {
		t.Fatalf("write whose transaction the database ended: %v; want it run again, and committed", err)
	}
	if r, err := a.Run(run); err != nil || r.Status != journal.RunBlocked {
		t.Fatalf("run after the write: %+v, %v; want blocked", r, err)
	}
}

// TestClaimEndedBeforeItsCommitStrandsNothing: a claim whose connection
// ends once its rows are read, before its commit, claims nothing: the
// runs stay free for any worker, this one's next claim included. (A claim
// committed as it ran would leave them this live session's in the
// database, unknown to the process: no worker could claim them while it
// lives.)
func TestClaimEndedBeforeItsCommitStrandsNothing(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a, _ := openNamed(t, location, "a")
	b := openWorker(t, location, "b", true)
	var runs []journal.ID
	for range 3 {
		run := newRun(t, b)
		if err := b.Release(run); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	ended := false
	a.OnClaimRead(func(pid uint32) {
		if !ended {
			ended = true
			sql(t, location, `SELECT pg_terminate_backend($1, 5000)`, int64(pid))
		}
	})
	if ids, err := a.Claim(3); err == nil {
		t.Fatalf("a claim whose connection ended before its commit took %v", ids)
	}
	if !ended {
		t.Fatal("the claim read no rows: the test ended nothing")
	}
	ids, err := a.Claim(3)
	if err != nil {
		t.Fatal(err)
	}
	byID := func(x, y journal.ID) int { return bytes.Compare(x[:], y[:]) }
	slices.SortFunc(ids, byID)
	slices.SortFunc(runs, byID)
	if !slices.Equal(ids, runs) {
		t.Fatalf("the next claim took %v, want the three free runs %v", ids, runs)
	}
	if err := a.SetRunStatus(runs[0], journal.RunBlocked, &journal.Error{Code: "TEST", Message: "blocked"}); err != nil {
		t.Fatalf("a write of a run claimed: %v", err)
	}
}
