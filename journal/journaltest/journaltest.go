// Package journaltest opens temporary journals for tests — bbolt files,
// and PostgreSQL schemas when a database is there — and checks their
// integrity when the test ends.
package journaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

// Open opens a fresh journal in t.TempDir(). On cleanup it runs Check,
// fails the test on any problem, and closes the journal.
func Open(t testing.TB, opts *journal.Options) *bolt.Store {
	t.Helper()
	return OpenPath(t, filepath.Join(t.TempDir(), "journal.db"), opts)
}

// OpenPath opens (or creates) the journal at path, with the same cleanup as
// Open. A journal the test closed itself (after CheckAndClose, say) is left
// alone on cleanup.
func OpenPath(t testing.TB, path string, opts *journal.Options) *bolt.Store {
	t.Helper()
	j, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	checkAtCleanup(t, j)
	return j
}

// checkAtCleanup checks and closes j when t ends, unless the test closed
// it itself.
func checkAtCleanup(t testing.TB, j journal.Store) {
	t.Cleanup(func() {
		if _, err := j.Invocations(journal.Filter{Limit: 1}); errors.Is(err, journal.ErrClosed) {
			return
		}
		CheckAndClose(t, j)
	})
}

// CheckAndClose runs Check, reports every problem, and closes j.
func CheckAndClose(t testing.TB, j journal.Store) {
	t.Helper()
	probs, err := j.Check()
	if err != nil {
		t.Errorf("journal check: %v", err)
	}
	for _, p := range probs {
		t.Errorf("journal check: %s", p)
	}
	if err := j.Close(); err != nil {
		t.Errorf("close journal: %v", err)
	}
}

// CheckFile opens the journal at path read-only, runs Check and closes it.
func CheckFile(t testing.TB, path string) {
	t.Helper()
	j, err := bolt.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open journal %s: %v", path, err)
	}
	CheckAndClose(t, j)
}

// Backend is a journal backend the conformance tests run on.
type Backend struct {
	Name string
	// New returns the location of a fresh, empty journal for t: a file
	// path, or a PostgreSQL URL of a schema of its own, dropped when t
	// ends.
	New func(t testing.TB) string
}

// Backends are bbolt and PostgreSQL. Tests run on PostgreSQL when
// MCPFLOW_TEST_POSTGRES names a database (.ci/run sets it); without it
// they are skipped there with a message, except under CI, where they fail.
var Backends = []Backend{
	{"bbolt", func(t testing.TB) string { return filepath.Join(t.TempDir(), "journal.db") }},
	{"postgres", PostgresURL},
}

// Each runs fn on a fresh journal of every backend, each in a subtest,
// checked and closed when the subtest ends.
func Each(t *testing.T, opts *journal.Options, fn func(t *testing.T, j journal.Store)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			fn(t, OpenStore(t, b.New(t), opts))
		})
	}
}

// EachLocation runs fn with the location of a fresh journal of every
// backend, each in a subtest, for tests that open and reopen it.
func EachLocation(t *testing.T, fn func(t *testing.T, location string)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) { fn(t, b.New(t)) })
	}
}

// OpenStore opens the journal at location, a PostgreSQL URL or a file
// path (as door.OpenStore does), with Open's cleanup.
func OpenStore(t testing.TB, location string, opts *journal.Options) journal.Store {
	t.Helper()
	var j journal.Store
	var err error
	if journal.IsPostgres(location) {
		j, err = postgres.Open(context.Background(), location, opts)
	} else {
		j, err = bolt.Open(location, opts)
	}
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	checkAtCleanup(t, j)
	return j
}

// RequirePostgres returns the test database's URL (MCPFLOW_TEST_POSTGRES).
// Without one it skips t, or fails it under CI.
func RequirePostgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv("MCPFLOW_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("MCPFLOW_TEST_POSTGRES is not set: CI runs every PostgreSQL test (.ci/run starts the database and sets it)")
		}
		t.Skip("no PostgreSQL: set MCPFLOW_TEST_POSTGRES=postgres://USER:PASSWORD@127.0.0.1:5432/DB to run this on PostgreSQL (.ci/run does)")
	}
	return base
}

// PostgresURL returns the URL of a new, empty schema in the test database
// (MCPFLOW_TEST_POSTGRES), dropped when t ends. Without a database it
// skips t, or fails it under CI.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := RequirePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no PostgreSQL at MCPFLOW_TEST_POSTGRES: %v", err)
		}
		t.Fatalf("PostgreSQL at MCPFLOW_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("t_%d_%x", time.Now().UnixNano(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(base, schema)
}

// WithSearchPath is the URL base with its search_path set to schema.
func WithSearchPath(base, schema string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// NewRun creates a run for a test and returns its id.
func NewRun(t testing.TB, j journal.Store) journal.ID {
	t.Helper()
	r := &journal.Run{Workflow: "wf", Definition: []byte("name: wf\n"), Inputs: map[string]any{"n": 1.0}, Workspace: "/ws"}
	if err := j.CreateRun(r); err != nil {
		t.Fatalf("create run: %v", err)
	}
	return r.ID
}

// Begin journals the intent of a read-only call of tool on server in
// run, trusted.
func Begin(t testing.TB, j journal.Store, run journal.ID, server, tool string) journal.Intent {
	t.Helper()
	in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: server, Tool: tool,
		Arguments: json.RawMessage(`{"a":1}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`),
		Trust: journal.Trust{Server: true}})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return in
}

// Finish ends the attempt of in as s: completed with an empty result, or
// failed as a lost connection.
func Finish(t testing.TB, j journal.Store, in journal.Intent, s journal.State) {
	t.Helper()
	o := journal.Outcome{State: s}
	if s == journal.StateCompleted {
		o.Result = &journal.Result{Content: json.RawMessage(`[]`)}
	} else {
		o.Failure, o.Error = "connection_lost", &journal.Error{Code: "X", Message: "lost"}
	}
	if err := j.Finish(in, o); err != nil {
		t.Fatalf("finish %s: %v", s, err)
	}
}

// StateOf is the state of invocation id.
func StateOf(t testing.TB, j journal.Store, id journal.ID) journal.State {
	t.Helper()
	inv, err := j.Invocation(id)
	if err != nil {
		t.Fatalf("invocation %s: %v", id, err)
	}
	return inv.State
}

// Raw is a record as the journal returns it (get is j.Run or
// j.Invocation), as JSON: what a refused write must leave unchanged, on
// every backend.
func Raw[T any](t testing.TB, get func(journal.ID) (T, error), id journal.ID) []byte {
	t.Helper()
	rec, err := get(id)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	b, _ := json.Marshal(rec)
	return b
}
