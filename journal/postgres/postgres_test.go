package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// sql runs statements on the database of a journal URL, as an operator
// (or an attacker) with psql would.
func sql(t *testing.T, location string, stmt string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), location)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// dbConn is a connection of the test's own to the database of a journal
// URL, closed when the test ends.
func dbConn(t *testing.T, location string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), location)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// lockRows locks the rows stmt (SELECT … FOR UPDATE) selects, in a
// transaction of a connection of its own; the writes that need them wait
// until the caller rolls it back (or the test ends). It returns the
// connection, for the test's other statements.
func lockRows(t *testing.T, location, stmt string) (*pgx.Conn, pgx.Tx) {
	t.Helper()
	conn := dbConn(t, location)
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(context.Background(), stmt); err != nil {
		t.Fatal(err)
	}
	return conn, tx
}

// TestPostgresSealedPayloads: with a key, payloads are encrypted in the
// database's rows; reading needs the key; another key, or a write without
// one, is refused.
func TestPostgresSealedPayloads(t *testing.T) {
	location := journaltest.PostgresURL(t)
	key := journal.NewKey()
	j := journaltest.OpenStore(t, location, &journal.Options{Key: key})
	r := &journal.Run{Workflow: "wf", Inputs: map[string]any{"token": "SECRET-INPUT-1"}, Secrets: []string{"token"}}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	in, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "s", Tool: "t", Arguments: json.RawMessage(`{"card":"SECRET-ARG-2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"SECRET-RESULT-3"}]`)}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), location)
	if err != nil {
		t.Fatal(err)
	}
	var rows string
	err = conn.QueryRow(context.Background(), `SELECT string_agg(encode(record, 'escape'), ' ') FROM (SELECT record FROM mcpflow_runs UNION ALL SELECT record FROM mcpflow_invocations) AS r`).Scan(&rows)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SECRET-INPUT-1", "SECRET-ARG-2", "SECRET-RESULT-3"} {
		if strings.Contains(rows, s) {
			t.Errorf("%s is in the database in clear", s)
		}
	}
	inv, err := j.Invocation(in.ID)
	if err != nil || !strings.Contains(string(inv.Arguments), "SECRET-ARG-2") {
		t.Errorf("with the key: %v %s", err, inv.Arguments)
	}
	if _, err := door.OpenStore(location, nil); !errors.Is(err, journal.ErrKeyRequired) {
		t.Errorf("write without the key: %v", err)
	}
	if _, err := door.OpenStore(location, &journal.Options{Key: journal.NewKey()}); !errors.Is(err, journal.ErrWrongKey) {
		t.Errorf("another key: %v", err)
	}
	ro, err := door.OpenStore(location, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if inv, err := ro.Invocation(in.ID); err != nil || inv.Arguments != nil || inv.Sealed == "" || inv.State != journal.StateCompleted {
		t.Errorf("without the key: %v %+v, want the payload sealed and the rest readable", err, inv)
	}
	if err := ro.Skip(&journal.Invocation{RunID: r.ID, Step: "x", Item: -1, Server: "s", Tool: "t"}); err == nil {
		t.Error("a read-only journal wrote")
	}
}

// TestPostgresReadingAnEmptyDatabase: a read-only open of a schema where
// nothing has run says so, names the schema, and creates nothing.
func TestPostgresReadingAnEmptyDatabase(t *testing.T) {
	location := journaltest.PostgresURL(t)
	_, err := door.OpenStore(location, &journal.Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nothing has run here") || !strings.Contains(err.Error(), "search_path=t_") {
		t.Fatalf("read-only open of an empty schema: %v", err)
	}
	conn, err := pgx.Connect(context.Background(), location)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var made bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass('mcpflow_meta') IS NOT NULL`).Scan(&made); err != nil || made {
		t.Errorf("tables made by a read-only open: %v %v", made, err)
	}
}

// TestPostgresNewerSchemaRefused: a database migrated by a newer mcpflow is
// refused and left as it is.
func TestPostgresNewerSchemaRefused(t *testing.T) {
	location := journaltest.PostgresURL(t)
	journaltest.CheckAndClose(t, journaltest.OpenStore(t, location, nil))
	sql(t, location, `UPDATE mcpflow_meta SET value = '99' WHERE key = 'version'`)
	_, err := door.OpenStore(location, nil)
	if !errors.Is(err, journal.ErrNewerSchema) || !strings.Contains(err.Error(), "schema 99") {
		t.Fatalf("open: %v, want ErrNewerSchema naming schema 99", err)
	}
}

// TestPostgresCheckFindsDamage: a record whose bytes were changed, and a
// column that disagrees with its record, are reported by Check.
func TestPostgresCheckFindsDamage(t *testing.T) {
	location := journaltest.PostgresURL(t)
	j, err := door.OpenStore(location, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	run := newRun(t, j)
	a := begin(t, j, run, "srv", "t")
	b := begin(t, j, run, "srv", "t")
	finish(t, j, b, journal.StateCompleted)
	if probs, err := j.Check(); err != nil || len(probs) != 0 {
		t.Fatalf("healthy: %v %v", probs, err)
	}
	sql(t, location, `UPDATE mcpflow_invocations SET record = overlay(record placing '\x00'::bytea from 10 for 1) WHERE id = $1`, [16]byte(a.ID))
	sql(t, location, `UPDATE mcpflow_invocations SET state = 'intent' WHERE id = $1`, [16]byte(b.ID))
	probs, err := j.Check()
	if err != nil {
		t.Fatal(err)
	}
	var damaged, column bool
	for _, p := range probs {
		damaged = damaged || strings.Contains(p.String(), "checksum mismatch")
		column = column || (strings.Contains(p.Record, b.ID.String()) && strings.Contains(p.Message, "columns say"))
	}
	if !damaged || !column {
		t.Errorf("problems %v, want the changed record and the disagreeing column", probs)
	}
	if _, err := j.Invocation(a.ID); !errors.Is(err, journal.ErrDamaged) {
		t.Errorf("reading the changed record: %v, want ErrDamaged", err)
	}
}

// TestPostgresErrorsHideThePassword: a database that refuses the login is
// reported with its address, never the password.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	u, err := url.Parse(journaltest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2-not-the-password")
	_, err = door.OpenStore(u.String(), &journal.Options{LockTimeout: 5e9})
	if !errors.Is(err, journal.ErrInaccessible) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), u.Host) {
		t.Fatalf("open with a wrong password: %v; want ErrInaccessible naming %s without the password", err, u.Host)
	}
}

// TestPostgresReadersBesideWriters: readers share the database with
// writers, and a dry-run prune only reads: it works read-only and commits
// nothing.
func TestPostgresReadersBesideWriters(t *testing.T) {
	location := journaltest.PostgresURL(t)
	j := journaltest.OpenStore(t, location, nil)
	newRun(t, j)
	ro, err := door.OpenStore(location, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reader beside the writer: %v", err)
	}
	defer ro.Close()
	if _, err := ro.Prune(time.Now(), true); err != nil || ro.Stats().Commits != 0 {
		t.Errorf("prune --dry-run, read-only: %v, %d commits", err, ro.Stats().Commits)
	}
	// Another schema of the same database is another journal.
	other := journaltest.OpenStore(t, journaltest.PostgresURL(t), nil)
	if runs, err := other.Runs(journal.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("another schema: %d runs, %v; want none", len(runs), err)
	}
}
