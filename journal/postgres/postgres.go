package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mcpflow/mcpflow/journal"
)

// pgExportChunk is how many records Export and Archive read per query.
const pgExportChunk = 256

// pgPruneBatch is how many runs Prune removes per transaction.
const pgPruneBatch = 200

// SchemaVersion is the version of the tables this code uses in a
// PostgreSQL journal. Migrations from older versions run at open, in one
// transaction under an advisory lock (several workers may start at once);
// a database with a newer version is refused ([ErrNewerSchema]).
const SchemaVersion = 2

// pgMigrations[i] moves the schema from version i to i+1. The records are
// the bbolt journal's (the same JSON, checksum and sealing); the columns
// beside them are what the queries select on, readable from SQL (states
// and statuses by name, as the CLI prints them).
var pgMigrations = []string{
	`CREATE TABLE mcpflow_runs (
		id uuid PRIMARY KEY,
		status text NOT NULL,
		workflow text NOT NULL,
		started_at timestamptz NOT NULL,
		record bytea NOT NULL
	);
	CREATE INDEX mcpflow_runs_status ON mcpflow_runs (status, id);
	CREATE TABLE mcpflow_invocations (
		id uuid PRIMARY KEY,
		run_id uuid NOT NULL REFERENCES mcpflow_runs (id),
		state text NOT NULL,
		server text NOT NULL,
		tool text NOT NULL,
		tool_error boolean NOT NULL,
		created_at timestamptz NOT NULL,
		record bytea NOT NULL
	);
	CREATE INDEX mcpflow_invocations_run ON mcpflow_invocations (run_id, id);
	CREATE INDEX mcpflow_invocations_state ON mcpflow_invocations (state, id);
	CREATE INDEX mcpflow_invocations_tool ON mcpflow_invocations (server, tool, id);`,
	// Workers and leases (lease.go): which session works on each run, at
	// which epoch.
	`CREATE TABLE mcpflow_workers (
		id text PRIMARY KEY,
		session uuid NOT NULL UNIQUE,
		host text NOT NULL,
		pid integer NOT NULL,
		serves boolean NOT NULL,
		backend_pid integer NOT NULL,
		backend_start timestamptz,
		started_at timestamptz NOT NULL,
		heartbeat_at timestamptz NOT NULL,
		lease_until timestamptz NOT NULL
	);
	ALTER TABLE mcpflow_runs ADD COLUMN owner text, ADD COLUMN session uuid, ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
		ADD COLUMN cancel_reason text;
	CREATE INDEX mcpflow_runs_session ON mcpflow_runs (session) WHERE session IS NOT NULL;`,
}

// pgConnectTimeout bounds connecting when the URL does not.
const pgConnectTimeout = 10 * time.Second

// pgLock is the advisory lock key under which the schema is migrated.
const pgLock = 0x6d6370666c6f77 // "mcpflow"

// Store is a journal in a PostgreSQL database: the same contract as the
// bbolt file ([Store]), for journals that must outlive a machine or be
// shared by several workers. Every write is one transaction committed with
// synchronous_commit on before the write returns; concurrent writers share
// transactions (group commit) as with bbolt. It is safe for concurrent use.
type Store struct {
	journal.Writer
	sealer   *journal.Sealer // the writer's: nil when payloads are stored as given
	pool     *pgxpool.Pool
	where    string // the URL without its password, for messages
	readOnly bool
	gc       journal.GroupCommit[*write]

	leases *leases      // this process's worker session; nil when read-only
	recent recent       // records in flight this process wrote (pipeline.go)
	piped  atomic.Int64 // groups of writes committed in one pipeline

	// claimRead, in tests, is called once a claim's rows are read, before
	// its commit, with the claim's backend.
	claimRead func(pid uint32)

	closeOnce sync.Once
	closed    atomic.Bool
}

var _ journal.Store = (*Store)(nil)

// Open opens the journal in the database at rawURL (a libpq URL or
// keyword string; pool settings such as pool_max_conns go in it too),
// creating its tables or migrating them as needed. Options.Key, ReadOnly,
// Now, AfterCommit, OnCommit and LockTimeout (how long to wait for
// another writer, 1s by default) mean what they mean for the bbolt file.
// Connecting may take pgConnectTimeout, or the URL's connect_timeout.
func Open(ctx context.Context, rawURL string, opts *journal.Options) (*Store, error) {
	var o journal.Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	where := journal.RedactURL(rawURL)
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w: %v", where, journal.ErrInaccessible, redactErr(err, rawURL))
	}
	// The rule: an intent is durable before its call is sent.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if !o.ReadOnly {
		// A worker paused in the middle of a transaction must not keep the
		// rows it locked past its lease: the server ends such a
		// transaction (and its connection), so another worker can take
		// the run over.
		lease := o.Lease
		if lease <= 0 {
			lease = journal.DefaultLease
		}
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint((lease / 2).Milliseconds())
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout+o.LockTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w: %v", where, journal.ErrInaccessible, redactErr(err, rawURL))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open journal %s: %w: %v", where, journal.ErrInaccessible, redactErr(err, rawURL))
	}
	p := &Store{pool: pool, where: where, readOnly: o.ReadOnly, recent: newRecent()}
	p.sealer = journal.NewSealer(o.Key)
	p.Writer = journal.NewWriter(o.Now, p.sealer, p.storeWrite, p.storeLater)
	p.gc.Init(p.apply)
	p.gc.AfterCommit, p.gc.OnCommit = o.AfterCommit, o.OnCommit
	// A process paused in the middle of prepare past
	// idle_in_transaction_session_timeout (a worker stopped and
	// continued) finds its transaction ended by the server: nothing of it
	// committed, and it runs again, as apply's writes do.
	err = p.prepare(ctx, o)
	for try := 2; err != nil && try <= pgApplyTries && endedIdle(err); try++ {
		err = p.prepare(ctx, o)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open journal %s: %w", where, err)
	}
	if !o.ReadOnly {
		// Many writers share the database; each run is worked on by the
		// one that holds its lease (lease.go).
		if p.leases, err = join(ctx, pool, where, o, o.Now()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open journal %s: %w", where, err)
		}
	}
	return p, nil
}

// endedIdle reports whether err says the server ended the transaction
// for idling in it (SQLSTATE 25P03): prepare wraps some errors as text.
func endedIdle(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25P03" || strings.Contains(err.Error(), "SQLSTATE 25P03")
}

// prepare creates or migrates the tables and checks the key, all in one
// transaction under the advisory lock.
func (p *Store) prepare(ctx context.Context, o journal.Options) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", journal.ErrInaccessible, err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgLock)); err != nil {
		return err
	}
	var schema string
	var made bool
	if err := tx.QueryRow(ctx, `SELECT current_schema(), to_regclass('mcpflow_meta') IS NOT NULL`).Scan(&schema, &made); err != nil {
		return fmt.Errorf("%w: %v", journal.ErrInaccessible, err)
	}
	switch {
	case !made && o.ReadOnly:
		// Reading writes nothing, not even the tables.
		return noJournal("no journal in schema " + schema + " yet: nothing has run here (try 'mcpflow run FILE')")
	case !made:
		if _, err := tx.Exec(ctx, `CREATE TABLE mcpflow_meta (key text PRIMARY KEY, value text NOT NULL)`); err != nil {
			return fmt.Errorf("%w: %v", journal.ErrInaccessible, err)
		}
	}
	meta := map[string]string{}
	rows, _ := tx.Query(ctx, `SELECT key, value FROM mcpflow_meta`)
	var k, v string
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { meta[k] = v; return nil }); err != nil {
		return err
	}
	version := 0
	if s, ok := meta["version"]; ok {
		if _, err := fmt.Sscan(s, &version); err != nil {
			return fmt.Errorf("%w: schema version %q", journal.ErrDamaged, s)
		}
	}
	switch {
	case version > SchemaVersion:
		return fmt.Errorf("%w: the database has schema %d, this mcpflow knows %d: upgrade mcpflow", journal.ErrNewerSchema, version, SchemaVersion)
	case version < SchemaVersion && o.ReadOnly:
		return fmt.Errorf("schema %d must be migrated to %d first: open it read-write once", version, SchemaVersion)
	}
	for ; version < SchemaVersion; version++ {
		if _, err := tx.Exec(ctx, pgMigrations[version]); err != nil {
			return fmt.Errorf("migrate schema %d: %w", version, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mcpflow_meta (key, value) VALUES ('version', $1)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, fmt.Sprint(version+1)); err != nil {
			return err
		}
	}
	recorded := meta["keyid"]
	switch {
	case p.sealer == nil && recorded != "" && !o.ReadOnly:
		return fmt.Errorf("%w: its payloads are encrypted with key %s", journal.ErrKeyRequired, recorded)
	case p.sealer != nil && recorded != "" && recorded != p.sealer.KeyID:
		return fmt.Errorf("%w: it records key %s, this key is %s", journal.ErrWrongKey, recorded, p.sealer.KeyID)
	case p.sealer != nil && recorded == "" && !o.ReadOnly:
		if _, err := tx.Exec(ctx, `INSERT INTO mcpflow_meta (key, value) VALUES ('keyid', $1)`, p.sealer.KeyID); err != nil {
			return err
		}
	}
	if o.ReadOnly {
		return nil
	}
	return tx.Commit(ctx)
}

// noJournal is an empty database read: fs.ErrNotExist, as for a missing
// file, with its own words.
type noJournal string

func (e noJournal) Error() string { return string(e) }

func (e noJournal) Unwrap() error { return fs.ErrNotExist }

// apply runs fns in one transaction: groupCommit.apply. A transaction
// whose connection the database ended before its commit — a worker paused
// in the middle of it past idle_in_transaction_session_timeout (25P03 at
// the commit), a connection terminated while the writes went, one of the
// pool's connections left dead by a restart — committed nothing, and no
// write of it is at fault: fns run again in a new transaction, their
// fences checked again (fns may run more than once: groupCommit.do). A
// database that cannot be reached fails the write at once, as does a
// commit whose outcome is unknown — a connection lost at the commit, or a
// termination (57P01) the commit is the first to hear of, though nothing
// committed then either: the rule is to retry only what provably did not.
func (p *Store) apply(fns []func(*write) error) (int, error) {
	if p.readOnly {
		return -1, fmt.Errorf("journal %s was opened read-only", p.where)
	}
	if p.leases != nil {
		if failed, err, ok := p.applyPiped(fns); ok {
			return failed, err
		}
	}
	for try := 1; ; try++ {
		failed, ended, err := p.applyOnce(fns)
		if !ended || try == pgApplyTries || p.closed.Load() {
			return failed, err
		}
	}
}

// pgApplyTries bounds the transactions of one apply whose connection was
// ended before their commit (each new connection the pool hands out may be
// another one the database ended).
const pgApplyTries = 3

// applyOnce runs fns in one transaction; ended says the database ended the
// transaction before its commit (nothing of it committed).
func (p *Store) applyOnce(fns []func(*write) error) (failed int, ended bool, err error) {
	ctx := context.Background()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		var ce *pgconn.ConnectError
		return -1, !errors.As(err, &ce), p.connErr(err) // a dead pooled connection; not a database that is down
	}
	defer tx.Rollback(ctx)
	var puts []recentPut
	w := &write{tx: tx, puts: &puts}
	for i, fn := range fns {
		if err := fn(w); err != nil {
			if tx.Conn().IsClosed() {
				return -1, true, p.connErr(err)
			}
			return i, false, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		// The connection gone during the commit, it may have committed;
		// ended while idle, it did not: the commit never arrived.
		var pe *pgconn.PgError
		p.recent.forget(puts)
		return -1, errors.As(err, &pe) && pe.Code == pgIdleInTransactionTimeout, p.connErr(err)
	}
	p.recent.keep(puts)
	return -1, false, nil
}

// pgIdleInTransactionTimeout is the SQLSTATE of a session the database
// ended because its transaction sat idle (see Open).
const pgIdleInTransactionTimeout = "25P03"

func (p *Store) storeWrite(fn func(journal.Tx) error) error {
	return p.gc.Do(func(w *write) error { return fn(p.store(w)) })
}

func (p *Store) storeLater(fn func(journal.Tx) error) (*journal.Pending, error) {
	return p.gc.Later(func(w *write) error { return fn(p.store(w)) }, nil)
}

// connErr names the database in an error of the connection.
func (p *Store) connErr(err error) error {
	if p.closed.Load() {
		return journal.ErrClosed
	}
	if errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("journal %s: %w", p.where, err)
}

// pgStore is the store of one PostgreSQL transaction. Records are read
// FOR UPDATE: a write's read-modify-write holds its rows until commit.
// Every write for a run this process holds is fenced by its lease's epoch,
// checked when the write first reads or writes a record of the run: a
// worker that lost the run learns it before any rule of the write.
type pgStore struct {
	tx     pgx.Tx // nil in a pipelined write
	pipe   *pipe  // nil in a transaction
	puts   *[]recentPut
	recent *recent
	s      *journal.Sealer
	l      *leases                 // nil: read-only
	fenced map[journal.ID]struct{} // runs whose epoch this write has checked
}

func (p *Store) store(w *write) pgStore {
	return pgStore{tx: w.tx, pipe: w.pipe, puts: w.puts, recent: &p.recent, s: p.sealer, l: p.leases, fenced: map[journal.ID]struct{}{}}
}

// fence checks run's epoch once per write (see leases.fence).
func (st pgStore) fence(run journal.ID) error {
	_, held := st.l.epoch(run)
	if _, done := st.fenced[run]; !held || done {
		return nil // a run this process does not hold is not fenced (an operator's resolution, say)
	}
	_, err := st.HasRun(run)
	return err
}

var bg = context.Background()

func (st pgStore) Run(id journal.ID) (*journal.Run, error) {
	if st.pipe != nil {
		return st.pipedRun(id)
	}
	if err := st.fence(id); err != nil {
		return nil, err
	}
	var rec []byte
	err := st.tx.QueryRow(bg, `SELECT record FROM mcpflow_runs WHERE id = $1 FOR UPDATE`, uuidOf(id)).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, journal.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return journal.DecodeRun(st.s, rec)
}

func (st pgStore) Invocation(id journal.ID) (*journal.Invocation, error) {
	if st.pipe != nil {
		return st.pipedInvocation(id)
	}
	// The run's lease comes with the record: one round trip.
	var rec []byte
	var run [16]byte
	var session *[16]byte
	var epoch int64
	err := st.tx.QueryRow(bg, `SELECT i.record, r.id, r.session, r.epoch FROM mcpflow_invocations i JOIN mcpflow_runs r ON r.id = i.run_id
		WHERE i.id = $1 FOR UPDATE OF i FOR SHARE OF r`, uuidOf(id)).Scan(&rec, &run, &session, &epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("invocation %s: %w", id, journal.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if e, held := st.l.epoch(journal.ID(run)); held {
		if _, done := st.fenced[journal.ID(run)]; !done {
			mine := e != lostEpoch && session != nil && journal.ID(*session) == st.l.session && epoch == e
			if err := st.settle(journal.ID(run), mine); err != nil {
				return nil, err
			}
		}
	}
	return journal.DecodeInvocation(st.s, rec)
}

func (st pgStore) PutRun(old, r *journal.Run) error {
	b, err := journal.EncodeRun(st.s, r)
	if err != nil {
		return err
	}
	rec := journal.AddChecksum(b)
	if st.pipe != nil {
		return st.pipedPutRun(old, r, rec)
	}
	if old == nil {
		// A new run is its creator's, at epoch 1.
		_, err = st.tx.Exec(bg, `INSERT INTO mcpflow_runs (id, status, workflow, started_at, record, owner, session, epoch)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1)`,
			uuidOf(r.ID), r.Status.String(), r.Workflow, r.StartedAt, rec, st.l.worker, uuidOf(st.l.session))
		if err == nil {
			st.l.hold(r.ID, 1)
		}
	} else if err = st.fence(r.ID); err == nil {
		// A cancel request lasts while the run is running.
		_, err = st.tx.Exec(bg, `UPDATE mcpflow_runs SET status = $2, record = $3,
			cancel_reason = CASE WHEN $2 = 'running' THEN cancel_reason END WHERE id = $1`, uuidOf(r.ID), r.Status.String(), rec)
	}
	if err != nil {
		return err
	}
	// Kept for the next write of a running run this process holds, once
	// this one commits (pipeline.go).
	put := recentPut{id: r.ID, run: true}
	if _, held := st.held(r.ID); held && r.Status == journal.RunRunning {
		put.rec = rec
	}
	*st.puts = append(*st.puts, put)
	return nil
}

func (st pgStore) PutInvocation(old, inv *journal.Invocation) error {
	b, err := journal.EncodeInvocation(st.s, inv)
	if err != nil {
		return err
	}
	rec := journal.AddChecksum(b)
	if st.pipe != nil {
		return st.pipedPut(old, inv, rec)
	}
	if old == nil {
		err = st.insertInv(inv, rec)
	} else if err = st.fence(inv.RunID); err == nil {
		_, err = st.tx.Exec(bg, `UPDATE mcpflow_invocations SET state = $2, tool_error = $3, record = $4 WHERE id = $1`,
			uuidOf(inv.ID), inv.State.String(), inv.ToolError, rec)
	}
	if err != nil {
		return err
	}
	// Kept for the next write of a run this process holds, once this
	// one commits (pipeline.go).
	put := recentPut{id: inv.ID}
	if e, held := st.l.epoch(inv.RunID); held && e != lostEpoch {
		put.inv, put.rec = journal.CloneInvocation(inv), rec
	}
	*st.puts = append(*st.puts, put)
	return nil
}

// insertInv inserts a new invocation's record in one round trip: the run's
// existence is its foreign key, and the fence of a run this process holds
// is a condition of the insert. Only when nothing was inserted does it ask
// why: the id was taken, or the run is another worker's now.
func (st pgStore) insertInv(inv *journal.Invocation, rec []byte) error {
	args := []any{uuidOf(inv.ID), uuidOf(inv.RunID), inv.State.String(), inv.Server, inv.Tool, inv.ToolError, inv.CreatedAt, rec}
	sql := `INSERT INTO mcpflow_invocations (id, run_id, state, server, tool, tool_error, created_at, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`
	e, held := st.l.epoch(inv.RunID)
	_, done := st.fenced[inv.RunID]
	switch {
	case held && e == lostEpoch:
		return fmt.Errorf("run %s: %w", inv.RunID.Short(), journal.ErrLeaseLost)
	case held && !done:
		sql = `INSERT INTO mcpflow_invocations (id, run_id, state, server, tool, tool_error, created_at, record)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8
			WHERE EXISTS (SELECT 1 FROM mcpflow_runs WHERE id = $2 AND session = $9 AND epoch = $10 FOR SHARE)
			ON CONFLICT (id) DO NOTHING`
		args = append(args, uuidOf(st.l.session), e)
	}
	tag, err := st.tx.Exec(bg, sql, args...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation
		return fmt.Errorf("invocation %s: run %s: %w", inv.ID.Short(), inv.RunID, journal.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		if held {
			st.fenced[inv.RunID] = struct{}{}
		}
		return nil
	}
	if has, err := st.HasInvocation(inv.ID); err != nil || has {
		if err == nil {
			err = fmt.Errorf("invocation %s: %w", inv.ID, journal.ErrExists)
		}
		return err
	}
	if !held || done {
		return fmt.Errorf("invocation %s: run %s: %w", inv.ID.Short(), inv.RunID, journal.ErrNotFound)
	}
	// The run is gone, or another worker's (hasRun then says so).
	has, err := st.HasRun(inv.RunID)
	switch {
	case err != nil:
		return err
	case !has:
		return fmt.Errorf("invocation %s: run %s: %w", inv.ID.Short(), inv.RunID, journal.ErrNotFound)
	}
	return fmt.Errorf("invocation %s: not inserted, though its run is this worker's", inv.ID.Short())
}

// HasRun also fences a run this process holds, in the same round trip.
func (st pgStore) HasRun(id journal.ID) (bool, error) {
	if st.pipe != nil {
		return st.pipedHasRun(id)
	}
	e, held := st.l.epoch(id)
	_, done := st.fenced[id]
	switch {
	case held && e == lostEpoch:
		return false, fmt.Errorf("run %s: %w", id.Short(), journal.ErrLeaseLost)
	case !held || done:
		return exists(st.tx, `SELECT EXISTS (SELECT 1 FROM mcpflow_runs WHERE id = $1)`, id)
	}
	var mine bool
	err := st.tx.QueryRow(bg, `SELECT session IS NOT DISTINCT FROM $2 AND epoch = $3 FROM mcpflow_runs WHERE id = $1 FOR SHARE`,
		uuidOf(id), uuidOf(st.l.session), e).Scan(&mine)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, st.settle(id, mine)
}

// settle records the fence check of a run held at this write: a run
// another worker took is lost.
func (st pgStore) settle(run journal.ID, mine bool) error {
	if !mine {
		st.l.lose(run)
		return fmt.Errorf("run %s: %w", run.Short(), journal.ErrLeaseLost)
	}
	st.fenced[run] = struct{}{}
	return nil
}

func (st pgStore) HasInvocation(id journal.ID) (bool, error) {
	if st.pipe != nil {
		return false, errNotPiped
	}
	return exists(st.tx, `SELECT EXISTS (SELECT 1 FROM mcpflow_invocations WHERE id = $1)`, id)
}

func exists(q querier, sql string, id journal.ID) (bool, error) {
	var ok bool
	err := q.QueryRow(bg, sql, uuidOf(id)).Scan(&ok)
	return ok, err
}

func (st pgStore) FirstWhere(run journal.ID, match func(journal.State) bool) (*journal.Invocation, error) {
	if st.pipe != nil {
		return st.pipedFirstWhere(run, match)
	}
	return pgFirstWhere(st.tx, st.s, run, match)
}

// pgFirstWhere is the first invocation of run, in creation order, whose
// state matches, or nil.
func pgFirstWhere(q querier, s *journal.Sealer, run journal.ID, match func(journal.State) bool) (*journal.Invocation, error) {
	rows, err := q.Query(bg, `SELECT id, state FROM mcpflow_invocations WHERE run_id = $1 ORDER BY id`, uuidOf(run))
	if err != nil {
		return nil, err
	}
	var first [16]byte
	found := false
	var id [16]byte
	var state string
	_, err = pgx.ForEachRow(rows, []any{&id, &state}, func() error {
		if s, err := journal.ParseState(state); !found && err == nil && match(s) {
			first, found = id, true
		}
		return nil
	})
	if err != nil || !found {
		return nil, err
	}
	return pgInv(q, s, journal.ID(first))
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func uuidOf(id journal.ID) [16]byte { return [16]byte(id) }

func pgInv(q querier, s *journal.Sealer, id journal.ID) (*journal.Invocation, error) {
	var rec []byte
	err := q.QueryRow(bg, `SELECT record FROM mcpflow_invocations WHERE id = $1`, uuidOf(id)).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("invocation %s: %w", id, journal.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return journal.DecodeInvocation(s, rec)
}

// Run returns the run with the given id.
func (p *Store) Run(id journal.ID) (*journal.Run, error) {
	var rec []byte
	err := p.pool.QueryRow(bg, `SELECT record FROM mcpflow_runs WHERE id = $1`, uuidOf(id)).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, journal.ErrNotFound)
	}
	if err != nil {
		return nil, p.connErr(err)
	}
	return journal.DecodeRun(p.sealer, rec)
}

// Invocation returns the invocation with the given id.
func (p *Store) Invocation(id journal.ID) (*journal.Invocation, error) {
	inv, err := pgInv(p.pool, p.sealer, id)
	if err != nil && !errors.Is(err, journal.ErrNotFound) && !errors.Is(err, journal.ErrDamaged) {
		return nil, p.connErr(err)
	}
	return inv, err
}

// FindRun resolves a full id or a unique prefix of one to a run id.
func (p *Store) FindRun(prefix string) (journal.ID, error) {
	return p.find("mcpflow_runs", "run", prefix)
}

// FindInvocation resolves a full id or a unique prefix of one to an
// invocation id.
func (p *Store) FindInvocation(prefix string) (journal.ID, error) {
	return p.find("mcpflow_invocations", "invocation", prefix)
}

func (p *Store) find(table, what, prefix string) (journal.ID, error) {
	whole, half, hasHalf, err := journal.PrefixBytes(prefix)
	if err != nil {
		return journal.ID{}, err
	}
	var lo, hi [16]byte
	copy(lo[:], whole)
	copy(hi[:], whole)
	for i := len(whole); i < 16; i++ {
		hi[i] = 0xff
	}
	if hasHalf {
		lo[len(whole)] = half
		hi[len(whole)] = half | 0x0f
	}
	rows, err := p.pool.Query(bg, `SELECT id FROM `+table+` WHERE id BETWEEN $1 AND $2 ORDER BY id LIMIT `+strconv.Itoa(journal.MaxCandidates+1), lo, hi)
	if err != nil {
		return journal.ID{}, p.connErr(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
	switch {
	case err != nil:
		return journal.ID{}, p.connErr(err)
	case len(found) == 0:
		return journal.ID{}, fmt.Errorf("%s %q: %w", what, prefix, journal.ErrNotFound)
	case len(found) > 1:
		ids := make([]journal.ID, len(found))
		for i, f := range found {
			ids[i] = journal.ID(f)
		}
		return journal.ID{}, journal.Ambiguous(what, prefix, ids)
	}
	return journal.ID(found[0]), nil
}

// conditions builds a WHERE clause with $n placeholders.
type conditions struct {
	conds []string
	args  []any
}

func (w *conditions) add(cond string, arg any) {
	w.args = append(w.args, arg)
	w.conds = append(w.conds, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(w.args))))
}

func (w *conditions) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

func invWhere(f journal.Filter) *conditions {
	w := &conditions{}
	if !f.Run.IsZero() {
		w.add("run_id = ?", uuidOf(f.Run))
	}
	if f.State.Valid() {
		w.add("state = ?", f.State.String())
	}
	if f.Server != "" {
		w.add("server = ?", f.Server)
	}
	if f.Tool != "" {
		w.add("tool = ?", f.Tool)
	}
	if f.ToolError {
		w.add("tool_error = ?", true)
	}
	if !f.Since.IsZero() {
		w.add("created_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		w.add("created_at < ?", f.Until)
	}
	if !f.Before.IsZero() {
		w.add("id < ?", uuidOf(f.Before))
	}
	return w
}

func runWhere(f journal.RunFilter) *conditions {
	w := &conditions{}
	if f.Status.Valid() {
		w.add("status = ?", f.Status.String())
	}
	if f.Workflow != "" {
		w.add("workflow = ?", f.Workflow)
	}
	if !f.Since.IsZero() {
		w.add("started_at >= ?", f.Since)
	}
	if !f.Before.IsZero() {
		w.add("id < ?", uuidOf(f.Before))
	}
	return w
}

func limit(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" LIMIT %d", n)
}

// Invocations lists invocations matching f, newest first.
func (p *Store) Invocations(f journal.Filter) ([]journal.Invocation, error) {
	w := invWhere(f)
	return p.invocations(`SELECT record FROM mcpflow_invocations`+w.sql()+` ORDER BY id DESC`+limit(f.Limit), w.args...)
}

// RunInvocations returns a run's invocations in the order they were created.
func (p *Store) RunInvocations(run journal.ID) ([]journal.Invocation, error) {
	return p.invocations(`SELECT record FROM mcpflow_invocations WHERE run_id = $1 ORDER BY id`, uuidOf(run))
}

func (p *Store) invocations(sql string, args ...any) ([]journal.Invocation, error) {
	rows, err := p.pool.Query(bg, sql, args...)
	if err != nil {
		return nil, p.connErr(err)
	}
	var out []journal.Invocation
	var rec []byte
	_, err = pgx.ForEachRow(rows, []any{&rec}, func() error {
		inv, err := journal.DecodeInvocation(p.sealer, rec)
		if err != nil {
			return err
		}
		out = append(out, *inv)
		return nil
	})
	return out, err
}

// CountInvocations counts the invocations matching f (its Limit ignored),
// stopping at most: it returns most and true when there are more.
func (p *Store) CountInvocations(f journal.Filter, most int) (int, bool, error) {
	w := invWhere(f)
	return p.count(`SELECT 1 FROM mcpflow_invocations`+w.sql(), most, w.args)
}

// CountRuns counts the runs matching f (its Limit ignored), stopping at
// most: it returns most and true when there are more.
func (p *Store) CountRuns(f journal.RunFilter, most int) (int, bool, error) {
	w := runWhere(f)
	return p.count(`SELECT 1 FROM mcpflow_runs`+w.sql(), most, w.args)
}

func (p *Store) count(sub string, most int, args []any) (int, bool, error) {
	var n int
	err := p.pool.QueryRow(bg, `SELECT count(*) FROM (`+sub+limit(most+1)+`) AS matching`, args...).Scan(&n)
	if err != nil {
		return 0, false, p.connErr(err)
	}
	if n > most {
		return most, true, nil
	}
	return n, false, nil
}

// Runs lists runs matching f, newest first.
func (p *Store) Runs(f journal.RunFilter) ([]journal.Run, error) {
	w := runWhere(f)
	rows, err := p.pool.Query(bg, `SELECT record FROM mcpflow_runs`+w.sql()+` ORDER BY id DESC`+limit(f.Limit), w.args...)
	if err != nil {
		return nil, p.connErr(err)
	}
	var out []journal.Run
	var rec []byte
	_, err = pgx.ForEachRow(rows, []any{&rec}, func() error {
		r, err := journal.DecodeRun(p.sealer, rec)
		if err != nil {
			return err
		}
		out = append(out, *r)
		return nil
	})
	return out, err
}

// Export writes every invocation created at or after since as JSON Lines,
// oldest first, exactly as [bolt.Store.Export] does, reading pgExportChunk
// records per query.
func (p *Store) Export(w io.Writer, since time.Time, decrypt bool) error {
	if decrypt && p.sealer == nil {
		return fmt.Errorf("export: %w: decrypting needs the journal's key", journal.ErrKeyRequired)
	}
	var after [16]byte
	for {
		rows, err := p.pool.Query(bg, `SELECT id, record FROM mcpflow_invocations WHERE id > $1 AND created_at >= $2 ORDER BY id LIMIT $3`,
			after, since, pgExportChunk)
		if err != nil {
			return p.connErr(err)
		}
		var id [16]byte
		var rec []byte
		var lines [][]byte
		_, err = pgx.ForEachRow(rows, []any{&id, &rec}, func() error {
			after = id
			what := fmt.Sprintf("invocation %x", id)
			v, err := journal.StripChecksum(what, rec)
			if err != nil {
				return err
			}
			line, err := journal.ExportLine(p.sealer, what, v, decrypt)
			lines = append(lines, line)
			return err
		})
		if err != nil {
			return err
		}
		if err := journal.WriteLines(w, lines); err != nil {
			return err
		}
		if len(lines) < pgExportChunk {
			return nil
		}
	}
}

// Check verifies every record and invariant the bbolt Check verifies on
// records: each record decodes (its checksum holds), its columns agree
// with it, attempts, resolutions and approvals are consistent, and a
// succeeded run has no unsettled invocation. The database keeps its own
// pages; foreign keys keep every invocation's run.
func (p *Store) Check() (probs []journal.Problem, err error) {
	err = p.read(func(tx pgx.Tx) error { probs, err = p.check(tx); return err })
	return probs, err
}

// check is Check in tx.
func (p *Store) check(tx pgx.Tx) (probs []journal.Problem, err error) {
	add := func(rec, format string, args ...any) {
		probs = append(probs, journal.Problem{Record: rec, Message: fmt.Sprintf(format, args...)})
	}
	statuses := map[journal.ID]journal.RunStatus{}
	var id [16]byte
	var status, state string
	var workflow, server, tool string
	var toolError bool
	var rec []byte
	rows, _ := tx.Query(bg, `SELECT id, status, workflow, record FROM mcpflow_runs`)
	_, err = pgx.ForEachRow(rows, []any{&id, &status, &workflow, &rec}, func() error {
		r, err := journal.DecodeRun(p.sealer, rec)
		if err != nil {
			add(fmt.Sprintf("run %x", id), "%v", err)
			return nil
		}
		name := "run " + r.ID.String()
		if r.ID != journal.ID(id) {
			add(name, "stored under id %x", id)
		}
		if status != r.Status.String() || workflow != r.Workflow {
			add(name, "columns say %s %q, the record %s %q", status, workflow, r.Status, r.Workflow)
		}
		journal.CheckRun(r, add)
		statuses[r.ID] = r.Status
		return nil
	})
	if err != nil {
		return probs, p.connErr(err)
	}
	sawUnsettled := map[journal.ID]bool{} // runs whose first unsettled invocation was checked
	rows, _ = tx.Query(bg, `SELECT id, state, server, tool, tool_error, record FROM mcpflow_invocations ORDER BY id`)
	_, err = pgx.ForEachRow(rows, []any{&id, &state, &server, &tool, &toolError, &rec}, func() error {
		inv, err := journal.DecodeInvocation(p.sealer, rec)
		if err != nil {
			add(fmt.Sprintf("invocation %x", id), "%v", err)
			return nil
		}
		name := "invocation " + inv.ID.String()
		if inv.ID != journal.ID(id) {
			add(name, "stored under id %x", id)
		}
		if state != inv.State.String() || server != inv.Server || tool != inv.Tool || toolError != inv.ToolError {
			add(name, "columns say %s %s/%s, the record %s %s/%s", state, server, tool, inv.State, inv.Server, inv.Tool)
		}
		journal.CheckInvocation(inv, name, add)
		if st, ok := statuses[inv.RunID]; !ok {
			add(name, "belongs to missing run %s", inv.RunID)
		} else if inv.State.Unsettled() && !sawUnsettled[inv.RunID] {
			sawUnsettled[inv.RunID] = true
			journal.CheckSucceeded(inv.RunID, st, inv, add)
		}
		return nil
	})
	if err != nil {
		return probs, p.connErr(err)
	}
	return probs, nil
}

// inTx runs fn in a read-write transaction: a write of the group commit
// that is never pipelined.
func (p *Store) inTx(fn func(pgx.Tx) error) error {
	return p.gc.Do(func(w *write) error {
		if w.tx == nil {
			return errNotPiped
		}
		return fn(w.tx)
	})
}

// read runs fn in a read-only transaction that sees one snapshot.
func (p *Store) read(fn func(pgx.Tx) error) error {
	tx, err := p.pool.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return p.connErr(err)
	}
	defer tx.Rollback(bg)
	return fn(tx)
}

// Prune removes the runs that finished before before, with their
// invocations, keeping what [bolt.Store.Prune] keeps, in transactions of up
// to pgPruneBatch runs.
func (p *Store) Prune(before time.Time, dryRun bool) (journal.PruneReport, error) {
	var rep journal.PruneReport
	var after [16]byte
	for {
		var chunk journal.PruneReport
		var last [16]byte
		n := 0
		// A dry run only reads: no commit, and it works read-only.
		run, lock := p.inTx, " FOR UPDATE"
		if dryRun {
			run, lock = p.read, ""
		}
		err := run(func(tx pgx.Tx) error {
			chunk, n = journal.PruneReport{}, 0
			rows, err := tx.Query(bg, `SELECT id, record FROM mcpflow_runs WHERE id > $1 ORDER BY id LIMIT $2`+lock, after, pgPruneBatch)
			if err != nil {
				return err
			}
			var id [16]byte
			var rec []byte
			var runs []*journal.Run
			if _, err := pgx.ForEachRow(rows, []any{&id, &rec}, func() error {
				n++
				last = id
				r, err := journal.DecodeRun(p.sealer, rec)
				runs = append(runs, r)
				return err
			}); err != nil {
				return err
			}
			for _, r := range runs {
				keep, gone, err := journal.PruneVerdict(r, before, func(match func(journal.State) bool) (*journal.Invocation, error) {
					return pgFirstWhere(tx, p.sealer, r.ID, match)
				})
				switch {
				case err != nil:
					return err
				case keep != "":
					chunk.Kept = append(chunk.Kept, journal.KeptRun{ID: r.ID, Reason: keep})
				case gone:
					var invs int
					if err := tx.QueryRow(bg, `SELECT count(*) FROM mcpflow_invocations WHERE run_id = $1`, uuidOf(r.ID)).Scan(&invs); err != nil {
						return err
					}
					chunk.Runs++
					chunk.Invocations += invs
					if dryRun {
						continue
					}
					if _, err := tx.Exec(bg, `DELETE FROM mcpflow_invocations WHERE run_id = $1`, uuidOf(r.ID)); err != nil {
						return err
					}
					if _, err := tx.Exec(bg, `DELETE FROM mcpflow_runs WHERE id = $1`, uuidOf(r.ID)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.Runs += chunk.Runs
		rep.Invocations += chunk.Invocations
		rep.Kept = append(rep.Kept, chunk.Kept...)
		if n < pgPruneBatch {
			return rep, nil
		}
		after = last
	}
}

// Stats counts the journal's writes since it was opened (Pages is 0: the
// database keeps its own pages).
func (p *Store) Stats() journal.Stats {
	return journal.Stats{Commits: p.gc.Commits.Load(), Writes: p.gc.Writes.Load()}
}

// Close commits what is queued and closes the connections.
func (p *Store) Close() error {
	p.closeOnce.Do(func() {
		p.gc.Close()
		p.closed.Store(true)
		p.pool.Close()
		if p.leases != nil {
			p.leases.leave() // the runs still running go to other workers
		}
	})
	return nil
}

// Where is the database's URL without its password.
func (p *Store) Where() string { return p.where }

// redactErr is err's text without the password of rawURL.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}
