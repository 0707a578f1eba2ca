package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mcpflow/mcpflow/journal"
)

// liveSession is the SQL condition "the session s is live": its worker's
// lease holds and the database connection it registered is still open
// (a process that died lets its runs go at once; one that is paused keeps
// them until its lease expires).
func liveSession(s string) string {
	return `EXISTS (SELECT 1 FROM mcpflow_workers lw JOIN pg_stat_activity la ON la.pid = lw.backend_pid
		AND (la.backend_start IS NULL OR la.backend_start = lw.backend_start)
		WHERE lw.session = ` + s + ` AND lw.lease_until > clock_timestamp())`
}

// leases is this process's session and the runs it holds.
type leases struct {
	worker  string
	session journal.ID
	ttl     time.Duration
	serves  bool
	pool    *pgxpool.Pool
	where   string

	mu     sync.Mutex
	held   map[journal.ID]int64 // run: the epoch this session took it at, or lostEpoch
	lost   func(journal.ID)
	cancel func(journal.ID, string)
	freed  func()
	owner  *pgx.Conn // the session's connection: its liveness is the process's
	stop   chan struct{}
	beaten sync.WaitGroup // the heartbeat and the listener

	// channel is the schema's channel on which the statements that free a
	// running run (free, leave) notify, with their commit, the workers
	// that listen.
	channel  string
	unlisten context.CancelFunc // stops the listener

	// unfreed (under mu) are runs let go whose release failed (the
	// database was restarting, say), at the epochs they were held at: the
	// database still gives them to this live session, so no worker would
	// claim them while the process lives. The heartbeat frees them.
	unfreed map[journal.ID]int64
}

// lostEpoch marks a run this session lost: its writes stay refused for as
// long as the process lives (unless it takes the run again).
const lostEpoch = -1

// join registers the session (see Options.Worker) and starts its
// heartbeat.
func join(ctx context.Context, pool *pgxpool.Pool, where string, o journal.Options, now time.Time) (*leases, error) {
	l := &leases{worker: o.Worker, session: journal.NewID(), ttl: o.Lease, serves: o.Serves, pool: pool, where: where,
		held: map[journal.ID]int64{}, unfreed: map[journal.ID]int64{}, stop: make(chan struct{})}
	if l.ttl <= 0 {
		l.ttl = journal.DefaultLease
	}
	host, _ := os.Hostname()
	if l.worker == "" {
		l.worker = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	owner, err := l.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", journal.ErrInaccessible, err)
	}
	l.owner = owner
	// A worker restarted under its id right after it died may find its old
	// session still live for a moment: wait for it as for a locked file.
	deadline := time.Now().Add(o.LockTimeout)
	for {
		err = l.register(ctx, host)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if time.Now().After(deadline) {
			var h string
			var pid int
			l.owner.QueryRow(ctx, `SELECT host, pid FROM mcpflow_workers WHERE id = $1`, l.worker).Scan(&h, &pid)
			l.owner.Close(bg)
			return nil, fmt.Errorf("worker id %q is in use by a live process (pid %d on %s): give each worker its own --worker-id", l.worker, pid, h)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		l.owner.Close(bg)
		return nil, fmt.Errorf("%w: register worker %q: %v", journal.ErrInaccessible, l.worker, err)
	}
	// Sessions of commands that ended long ago are forgotten (servers stay
	// listed while their rows say when they were last seen).
	l.owner.Exec(ctx, `DELETE FROM mcpflow_workers w WHERE NOT serves AND lease_until < clock_timestamp() - interval '1 hour'
		AND NOT EXISTS (SELECT 1 FROM mcpflow_runs r WHERE r.session = w.session)`)
	if err := l.owner.QueryRow(ctx, `SELECT 'mcpflow_freed_' || md5(current_schema())`).Scan(&l.channel); err != nil {
		l.owner.Close(bg)
		return nil, fmt.Errorf("%w: %v", journal.ErrInaccessible, err)
	}
	l.beaten.Add(1)
	go l.heartbeat()
	lctx, unlisten := context.WithCancel(context.Background())
	l.unlisten = unlisten
	if l.serves { // only a server claims runs
		l.beaten.Add(1)
		go l.listen(lctx)
	}
	return l, nil
}

// listen waits, on a connection of its own, for the notifications that a
// run was freed (see channel) and tells the freed callback, until ctx is
// done. A connection that breaks is made again after a pause; meanwhile
// workers find free runs by polling.
func (l *leases) listen(ctx context.Context) {
	defer l.beaten.Done()
	for ctx.Err() == nil {
		c, err := l.pool.Acquire(ctx)
		if err == nil {
			conn := c.Hijack()
			if _, err = conn.Exec(ctx, `LISTEN `+pgx.Identifier{l.channel}.Sanitize()); err == nil {
				for {
					if _, err = conn.WaitForNotification(ctx); err != nil {
						break
					}
					l.mu.Lock()
					freed := l.freed
					l.mu.Unlock()
					if freed != nil {
						freed()
					}
				}
			}
			conn.Close(bg)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// register writes the session's row, taking over the worker id's row when
// its session is not live; pgx.ErrNoRows when it is.
func (l *leases) register(ctx context.Context, host string) error {
	var took bool
	return l.owner.QueryRow(ctx, `INSERT INTO mcpflow_workers AS w
			(id, session, host, pid, serves, backend_pid, backend_start, started_at, heartbeat_at, lease_until)
		SELECT $1, $2, $3, $4, $5, a.pid, a.backend_start, clock_timestamp(), clock_timestamp(), clock_timestamp() + $6::interval
		FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()
		ON CONFLICT (id) DO UPDATE SET session = excluded.session, host = excluded.host, pid = excluded.pid,
			serves = excluded.serves, backend_pid = excluded.backend_pid, backend_start = excluded.backend_start,
			started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, lease_until = excluded.lease_until
		WHERE NOT `+liveSession("w.session")+`
		RETURNING true`, l.worker, uuidOf(l.session), host, os.Getpid(), l.serves, l.ttl.String()).Scan(&took)
}

// heartbeat extends the session's lease every third of it, and finds the
// runs another worker took over (while this process was paused, say): they
// are lost, and the owner of the lost callback stops working on them.
func (l *leases) heartbeat() {
	defer l.beaten.Done()
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.beat()
	}
}

// beat renews the lease and reads the held runs' rows. Its statements are
// bounded by the session's statement_timeout, set on the database side: a
// client-side deadline would close the session's connection, and a closed
// connection says the process died — its runs would go to another worker
// while it is alive. A connection that broke all the same is replaced, and
// the session's row made to name the new one.
func (l *leases) beat() {
	renew := `UPDATE mcpflow_workers SET heartbeat_at = clock_timestamp(), lease_until = clock_timestamp() + $2::interval
		WHERE session = $1`
	if l.owner.IsClosed() {
		c, err := l.connect(context.Background())
		if err != nil {
			return // the next beat tries again; writes stay fenced meanwhile
		}
		l.owner = c
		renew = `UPDATE mcpflow_workers w SET heartbeat_at = clock_timestamp(), lease_until = clock_timestamp() + $2::interval,
			backend_pid = a.pid, backend_start = a.backend_start FROM pg_stat_activity a
			WHERE a.pid = pg_backend_pid() AND w.session = $1`
	}
	tag, err := l.owner.Exec(bg, renew, uuidOf(l.session), l.ttl.String())
	if err != nil {
		return
	}
	if tag.RowsAffected() == 0 {
		// The row was taken by a process that thought this one dead:
		// every run is lost.
		l.loseAll()
		return
	}
	l.freeAgain()
	l.mu.Lock()
	took := make(map[journal.ID]int64, len(l.held)) // the runs held now, at their epochs
	ids := make([][16]byte, 0, len(l.held))
	for id, e := range l.held {
		if e != lostEpoch {
			took[id] = e
			ids = append(ids, uuidOf(id))
		}
	}
	l.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	// A run held but not in the table is one whose creation has not
	// committed yet (hold comes first, inside the creating transaction):
	// not lost. A run in the table that another session holds, or holds
	// at another epoch, is.
	rows, err := l.owner.Query(bg, `SELECT id, epoch, session IS NOT DISTINCT FROM $2, cancel_reason FROM mcpflow_runs WHERE id = ANY($1)`, ids, uuidOf(l.session))
	if err != nil {
		return
	}
	cancels := map[journal.ID]string{}
	var id [16]byte
	var epoch int64
	var mine bool
	var reason *string
	gone := map[journal.ID]int64{}
	if _, err := pgx.ForEachRow(rows, []any{&id, &epoch, &mine, &reason}, func() error {
		run := journal.ID(id)
		if e := took[run]; !mine || epoch != e {
			gone[run] = e
		} else if reason != nil {
			cancels[run] = *reason
		}
		return nil
	}); err != nil {
		return
	}
	for run, e := range gone {
		l.loseAt(run, e)
	}
	l.mu.Lock()
	asked := l.cancel
	l.mu.Unlock()
	for id, why := range cancels {
		if asked != nil {
			asked(id, why)
		}
	}
}

// connect takes a connection of the pool as the session's own, its
// statements bounded on the database side (see beat).
func (l *leases) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET statement_timeout = %d", (l.ttl/3).Milliseconds())); err != nil {
		conn.Close(bg)
		return nil, err
	}
	return conn, nil
}

// epoch is the epoch run was taken at, if this session holds it.
func (l *leases) epoch(run journal.ID) (int64, bool) {
	if l == nil {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.held[run]
	return e, ok
}

func (l *leases) hold(run journal.ID, epoch int64) {
	l.mu.Lock()
	l.held[run] = epoch
	delete(l.unfreed, run) // taken again: not to be freed
	l.mu.Unlock()
}

// unhold forgets run, held at epoch by a write that did not commit.
func (l *leases) unhold(run journal.ID, epoch int64) {
	l.mu.Lock()
	if l.held[run] == epoch {
		delete(l.held, run)
	}
	l.mu.Unlock()
}

// free lets run go in the database if this session still holds it at
// epoch.
func (l *leases) free(q querier, run journal.ID, epoch int64) error {
	_, err := q.Exec(bg, `WITH freed AS (UPDATE mcpflow_runs SET owner = NULL, session = NULL WHERE id = $1 AND session = $2 AND epoch = $3
			RETURNING status)
		SELECT pg_notify($4, '') FROM freed WHERE status = 'running'`,
		uuidOf(run), uuidOf(l.session), epoch, l.channel)
	return err
}

// freeAgain retries the releases that failed (see Postgres.Release); a
// run taken again since (hold) is no longer one of them.
func (l *leases) freeAgain() {
	l.mu.Lock()
	retry := maps.Clone(l.unfreed)
	l.mu.Unlock()
	for id, e := range retry {
		l.mu.Lock()
		_, still := l.unfreed[id]
		l.mu.Unlock()
		if !still {
			continue
		}
		if err := l.free(l.owner, id, e); err != nil {
			return // the next beat tries again
		}
		l.mu.Lock()
		if l.unfreed[id] == e {
			delete(l.unfreed, id)
		}
		l.mu.Unlock()
	}
}

// lose marks a held run lost and tells the lost callback, once. The
// callback runs inside the write that found the loss (or the heartbeat):
// it must not block, nor write to the journal.
func (l *leases) lose(run journal.ID) { l.loseAt(run, 0) }

// loseAt is lose, when run is still held at epoch (0: any epoch): a run
// released, or taken again, since the caller looked is not lost.
func (l *leases) loseAt(run journal.ID, epoch int64) {
	l.mu.Lock()
	e, had := l.held[run]
	if !had || e == lostEpoch || (epoch != 0 && e != epoch) {
		l.mu.Unlock()
		return
	}
	l.held[run] = lostEpoch
	lost := l.lost
	l.mu.Unlock()
	if lost != nil {
		lost(run)
	}
}

func (l *leases) loseAll() {
	l.mu.Lock()
	clear(l.unfreed) // the session is gone: nothing of it holds them
	ids := make([]journal.ID, 0, len(l.held))
	for id, e := range l.held {
		if e != lostEpoch {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	for _, id := range ids {
		l.lose(id)
	}
}

// leave lets every run go (a run still running is free at once for
// another worker to take) and removes the session.
func (l *leases) leave() {
	close(l.stop)
	l.unlisten()
	l.beaten.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.owner.Exec(ctx, `WITH freed AS (UPDATE mcpflow_runs SET owner = NULL, session = NULL WHERE session = $1 RETURNING status)
		SELECT pg_notify($2, '') WHERE EXISTS (SELECT 1 FROM freed WHERE status = 'running')`, uuidOf(l.session), l.channel)
	l.owner.Exec(ctx, `DELETE FROM mcpflow_workers WHERE session = $1`, uuidOf(l.session))
	l.owner.Close(bg)
}

// OnLost sets what is told of each run this process loses to another
// worker (its lease expired and the run was taken): the run's work here
// must stop; its writes are refused already ([ErrLeaseLost]).
func (p *Store) OnLost(fn func(journal.ID)) {
	if p.leases == nil {
		return
	}
	p.leases.mu.Lock()
	p.leases.lost = fn
	p.leases.mu.Unlock()
}

// OnFreed sets what is told when a running run may have become free to
// claim: another process submitted it or let it go (released it, or
// stopped). It runs on the listener's goroutine and must not block.
func (p *Store) OnFreed(fn func()) {
	if p.leases == nil {
		return
	}
	p.leases.mu.Lock()
	p.leases.freed = fn
	p.leases.mu.Unlock()
}

// OnCancel sets what is told of a run this process holds that someone
// asked to cancel ([Store.RequestCancel]), within a third of a lease.
func (p *Store) OnCancel(fn func(run journal.ID, reason string)) {
	if p.leases == nil {
		return
	}
	p.leases.mu.Lock()
	p.leases.cancel = fn
	p.leases.mu.Unlock()
}

// RequestCancel asks the process that holds a running run, whichever it
// is, to cancel it: its heartbeat finds the request and cancels the run
// there (no new call is sent; a call in flight is aborted under the replay
// rule). A run that nobody holds is cancelled by the worker that claims
// it. It returns false when the run is not running.
func (p *Store) RequestCancel(run journal.ID, reason string) (bool, error) {
	tag, err := p.pool.Exec(bg, `UPDATE mcpflow_runs SET cancel_reason = $2 WHERE id = $1 AND status = 'running'`, uuidOf(run), reason)
	if err != nil {
		return false, p.connErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// Worker is the id of this process's session ("" when read-only).
func (p *Store) Worker() string {
	if p.leases == nil {
		return ""
	}
	return p.leases.worker
}

// Acquire makes this process the holder of run, which it is about to
// resume: at once when it is free (a new epoch fences off the worker that
// had it), [ErrHeld] when a live worker holds it. Holding it already is
// not an error, and is not checked with the database: were the run taken
// since, the resume's first write fails with [journal.ErrLeaseLost].
func (p *Store) Acquire(run journal.ID) error {
	l := p.leases
	if l == nil {
		return fmt.Errorf("journal %s was opened read-only", p.where)
	}
	// A run this process holds now (a worker's claim, a moment ago) keeps
	// its epoch, and the database is not asked again: the statement would
	// commit, a flush, to change nothing; and were the run taken since
	// (this process paused past its lease), the epoch each write checks
	// fences this process off all the same. One it let go (a release that
	// failed, retried by the heartbeat at the old epoch) or lost is taken
	// at a new epoch, which fences off the retry and any write left of
	// the old hold.
	if e, holding := l.epoch(run); holding && e != lostEpoch {
		return nil
	}
	var epoch int64
	err := p.pool.QueryRow(bg, `UPDATE mcpflow_runs r SET owner = $2, session = $3, epoch = r.epoch + 1
		WHERE id = $1 AND (r.session IS NULL OR r.session = $3 OR NOT `+liveSession("r.session")+`)
		RETURNING epoch`, uuidOf(run), l.worker, uuidOf(l.session)).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		var owner string
		if err := p.pool.QueryRow(bg, `SELECT coalesce(owner, '') FROM mcpflow_runs WHERE id = $1`, uuidOf(run)).Scan(&owner); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
		}
		return fmt.Errorf("run %s is going in worker %s: %w", run.Short(), owner, journal.ErrHeld)
	}
	if err != nil {
		return p.connErr(err)
	}
	l.hold(run, epoch)
	return nil
}

// Release lets run go: another worker may take it (if it is still
// running) at once.
func (p *Store) Release(run journal.ID) error {
	l := p.leases
	if l == nil {
		return nil
	}
	e, ok := l.epoch(run)
	if !ok {
		return nil
	}
	// A write of the run still queued commits fenced, before the run
	// goes.
	p.gc.Flush()
	if e == lostEpoch {
		// Its work here has stopped: the run may be claimed here again
		// (see Claim). The database keeps it fenced from this session.
		l.mu.Lock()
		if l.held[run] == lostEpoch {
			delete(l.held, run)
		}
		l.mu.Unlock()
		return nil
	}
	l.mu.Lock()
	delete(l.held, run)
	l.mu.Unlock()
	if err := l.free(p.pool, run, e); err != nil {
		// The run stays this live session's in the database, out of every
		// other worker's reach while this process lives: the heartbeat
		// frees it once the database answers.
		l.mu.Lock()
		l.unfreed[run] = e
		l.mu.Unlock()
		return p.connErr(err)
	}
	return nil
}

// Claim takes up to n free running runs — submitted for any worker, or
// left by a worker that died or lost its lease — oldest first, skipping
// the ones another worker is taking (FOR UPDATE SKIP LOCKED). The caller
// resumes each exactly as a crash is resumed.
//
// A run this process still holds is never claimed, even when the database
// says another worker took it since: its work here (lost, or about to be
// found lost) may still be writing, and a new epoch in this same process
// would let those writes through the fence. It is claimable here again
// once Release says that work stopped.
func (p *Store) Claim(n int) ([]journal.ID, error) {
	l := p.leases
	if l == nil || n <= 0 {
		return nil, nil
	}
	l.mu.Lock()
	here := make([][16]byte, 0, len(l.held))
	for id := range l.held {
		here = append(here, uuidOf(id))
	}
	l.mu.Unlock()
	// One transaction, committed once every row is read: a claim whose
	// rows were not all read (its connection ended midway) commits
	// nothing, where a lone statement would have committed runs that
	// this process never hears of — this live session's in the database,
	// out of every worker's reach, its own included.
	tx, err := p.pool.Begin(bg)
	if err != nil {
		return nil, p.connErr(err)
	}
	defer tx.Rollback(bg) // after Commit, nothing
	rows, err := tx.Query(bg, `UPDATE mcpflow_runs r SET owner = $2, session = $3, epoch = r.epoch + 1
		FROM (SELECT id FROM mcpflow_runs c WHERE c.status = 'running'
			AND (c.session IS NULL OR NOT `+liveSession("c.session")+`)
			AND c.id <> ALL($4::uuid[])
			ORDER BY c.id LIMIT $1 FOR UPDATE SKIP LOCKED) free
		WHERE r.id = free.id RETURNING r.id, r.epoch`, n, l.worker, uuidOf(l.session), here)
	if err != nil {
		return nil, p.connErr(err)
	}
	type claimed struct {
		id    journal.ID
		epoch int64
	}
	var took []claimed
	var id [16]byte
	var epoch int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &epoch}, func() error {
		took = append(took, claimed{journal.ID(id), epoch})
		return nil
	}); err != nil {
		return nil, p.connErr(err)
	}
	if p.claimRead != nil {
		p.claimRead(tx.Conn().PgConn().PID())
	}
	if err := tx.Commit(bg); err != nil {
		// Committed or not, nobody can tell: the heartbeat frees each
		// run this session may now hold in the database (at its new
		// epoch: one that did not commit matches nothing).
		l.mu.Lock()
		for _, c := range took {
			l.unfreed[c.id] = c.epoch
		}
		l.mu.Unlock()
		return nil, p.connErr(err)
	}
	ids := make([]journal.ID, len(took))
	for i, c := range took {
		l.hold(c.id, c.epoch)
		ids[i] = c.id
	}
	return ids, nil
}

// Workers lists the workers registered on the journal, live ones first,
// with the runs each holds.
func (p *Store) Workers() ([]journal.Worker, error) {
	rows, err := p.pool.Query(bg, `SELECT w.id, w.host, w.pid, w.serves, w.started_at, w.heartbeat_at, w.lease_until,
			`+liveSession("w.session")+`,
			coalesce((SELECT array_agg(r.id ORDER BY r.id) FROM mcpflow_runs r WHERE r.session = w.session), '{}')
		FROM mcpflow_workers w ORDER BY 8 DESC, w.id`)
	if err != nil {
		return nil, p.connErr(err)
	}
	var out []journal.Worker
	var w journal.Worker
	var runs [][16]byte
	_, err = pgx.ForEachRow(rows, []any{&w.ID, &w.Host, &w.PID, &w.Serves, &w.StartedAt, &w.HeartbeatAt, &w.LeaseUntil, &w.Live, &runs}, func() error {
		w.Runs = make([]journal.ID, len(runs))
		for i, r := range runs {
			w.Runs[i] = journal.ID(r)
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, p.connErr(err)
	}
	return out, nil
}

// CancelRequested says whether someone asked to cancel run
// ([Store.RequestCancel]), and why.
func (p *Store) CancelRequested(run journal.ID) (string, bool, error) {
	var reason *string
	err := p.pool.QueryRow(bg, `SELECT cancel_reason FROM mcpflow_runs WHERE id = $1`, uuidOf(run)).Scan(&reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
	}
	if err != nil {
		return "", false, p.connErr(err)
	}
	if reason == nil {
		return "", false, nil
	}
	return *reason, true, nil
}

var _ journal.Shared = (*Store)(nil)
