package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mcpflow/mcpflow/journal"
)

// A step's commit, the outcome of the previous call and the intent of the
// next (journal.Writer.FinishLater, then Begin), is one round trip to the
// database: its statements go in one pipeline that the server runs as one
// implicit transaction, committed (WAL flushed, synchronous_commit on) at
// the pipeline's Sync, before the results come back. The transaction a
// write otherwise needs costs five round trips: BEGIN, reading the
// invocation FOR UPDATE, UPDATE, INSERT, COMMIT.
//
// A pipelined write cannot read the database: what the writer's rules
// read, the records this process last wrote for the runs it holds, comes
// from a cache (recent), and each statement checks in the database what
// the cache assumed, failing (and so rolling back the whole pipeline) when
// it does not hold:
//
//   - an UPDATE sets the record only where the stored record is still the
//     one read from the cache and the run is still this session's at its
//     epoch (the fence); otherwise it sets NULL, which the NOT NULL
//     constraint refuses;
//   - an INSERT gives the run's id only where the run is still this
//     session's at its epoch; otherwise NULL, refused the same way. A taken
//     id or a missing run fail on their constraints.
//
// Any failure of a pipelined write, or any read or write it cannot make
// (a record not in the cache, a run's record, a run this process does not
// hold), and the whole group of writes runs again as a transaction
// (applyOnce), whose reads decide the error each write gets: the pipeline
// is only ever a faster way to the same commit.

// errNotPiped stops a pipelined write that needs the database's answer
// before it can go on: the group runs as a transaction instead.
var errNotPiped = errors.New("postgres: write needs a transaction")

// recentMax bounds the cache of records written; past it, it starts over.
const recentMax = 8192

// recent holds the newest record of each invocation in flight (state
// intent) that this process wrote for a run it held: the record as
// decoded, and as stored, which a pipelined UPDATE checks is still there;
// and the record of each running run it wrote, as stored.
type recent struct {
	mu   sync.Mutex
	m    map[journal.ID]recentInv
	runs map[journal.ID][]byte
}

func newRecent() recent {
	return recent{m: map[journal.ID]recentInv{}, runs: map[journal.ID][]byte{}}
}

func (c *recent) run(id journal.ID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.runs[id]
	return r, ok
}

type recentInv struct {
	inv *journal.Invocation // never changed: readers change clones (journal.Tx)
	rec []byte              // as stored, checksum included
}

func (c *recent) get(id journal.ID) (recentInv, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[id]
	return r, ok
}

// keep records what a committed write stored: an invocation in flight is
// kept, any other is forgotten (its next write, if any, reads the
// database).
func (c *recent) keep(puts []recentPut) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range puts {
		if p.run {
			if p.rec == nil {
				delete(c.runs, p.id)
				continue
			}
			if len(c.runs) >= recentMax {
				clear(c.runs)
			}
			c.runs[p.id] = p.rec
			continue
		}
		if p.inv == nil || p.inv.State != journal.StateIntent {
			delete(c.m, p.id)
			continue
		}
		if len(c.m) >= recentMax {
			clear(c.m)
		}
		c.m[p.id] = recentInv{inv: p.inv, rec: p.rec}
	}
}

// forget drops the records of puts: a write of them whose outcome is
// unknown, or that found the cache out of date.
func (c *recent) forget(puts []recentPut) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, put := range puts {
		delete(c.m, put.id)
		delete(c.runs, put.id)
	}
}

// recentPut is a record a write stores, kept in recent once it committed:
// an invocation's (inv nil forgets id), or a run's (rec nil forgets it).
type recentPut struct {
	id  journal.ID
	run bool
	inv *journal.Invocation
	rec []byte
}

// write is where a group of writes goes: a transaction, or a pipeline.
type write struct {
	tx   pgx.Tx       // nil: pipelined
	pipe *pipe        // nil: in a transaction
	puts *[]recentPut // in a transaction: the records to keep once it commits
}

// pipe is the state of one pipelined group of writes.
type pipe struct {
	b    pgx.Batch
	read map[journal.ID][]byte // records read: what each UPDATE expects stored
	// checked are the records read that an UPDATE of the group checks: a
	// read no statement checks (a rule that read a record and wrote
	// nothing of it) needs the transaction's read.
	checked map[journal.ID]bool
	wrote   map[journal.ID]recentInv // records written so far in the group
	runs    map[journal.ID][]byte    // runs' records read or written so far in the group
	// absent are the runs HasRun said do not exist, which only the INSERT
	// of each (PutRun, refused on a taken id) may check; none are the
	// states FirstWhere said no invocation of a run is in, which the next
	// UPDATE of the run checks.
	absent map[journal.ID]bool
	none   map[journal.ID][]string
	held   []journal.ID // new runs the group made this session's (undone when it does not commit)
	puts   []recentPut
}

// applyPiped runs fns as one pipeline (see above). ok false: fns could not
// be pipelined, or the pipeline failed before anything of it could have
// committed; they are to run as a transaction.
func (p *Store) applyPiped(fns []func(*write) error) (failed int, err error, ok bool) {
	w := &write{pipe: &pipe{read: map[journal.ID][]byte{}, checked: map[journal.ID]bool{}, wrote: map[journal.ID]recentInv{}, runs: map[journal.ID][]byte{},
		absent: map[journal.ID]bool{}, none: map[journal.ID][]string{}}}
	defer func() {
		if !ok {
			// The transaction holds them again if it makes them.
			for _, id := range w.pipe.held {
				p.leases.unhold(id, 1)
			}
		}
	}()
	for _, fn := range fns {
		if err := fn(w); err != nil {
			// errNotPiped, or a rule's error found on cached records: the
			// transaction reads them afresh and decides.
			return 0, nil, false
		}
	}
	if w.pipe.b.Len() == 0 || len(w.pipe.absent) > 0 || len(w.pipe.none) > 0 || len(w.pipe.checked) < len(w.pipe.read) {
		return 0, nil, false // nothing to write, or an assumption nothing checks
	}
	br := p.pool.SendBatch(bg, &w.pipe.b)
	var tags []pgconn.CommandTag
	var stmtErr error
	for range w.pipe.b.Len() {
		tag, err := br.Exec()
		if err != nil {
			stmtErr = err
			break
		}
		tags = append(tags, tag)
	}
	err = br.Close()
	if stmtErr != nil {
		err = stmtErr
	}
	var pe *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pe) && (stmtErr != nil || pe.Severity == "ERROR"):
		// A statement failed, or the server ended the connection while a
		// statement ran (a FATAL in its place): nothing committed, for the
		// commit comes after every statement. Or the commit itself was
		// refused (an ERROR): it rolled back. The cache may be out of date.
		p.recent.forget(w.pipe.puts)
		return 0, nil, false
	case pgconn.SafeToRetry(err) || errors.As(err, new(pgx.ErrPreprocessingBatch)):
		// Nothing reached the server, or only the statements' preparation
		// (no Execute, no Sync: nothing to commit).
		return 0, nil, false
	default:
		// Lost with the connection: it may have committed. The
		// database says whether it did (a pooled connection that died
		// with a restart of the server fails so before anything of the
		// pipeline reached it); when it cannot, as with a commit whose
		// outcome is unknown, no write is retried.
		p.recent.forget(w.pipe.puts)
		switch committed, known := p.pipelineCommitted(w.pipe.puts); {
		case known && !committed:
			return 0, nil, false
		case !known:
			return -1, p.connErr(err), true
		}
	}
	for _, tag := range tags {
		if tag.RowsAffected() != 1 {
			// A record that vanished under a run this process holds (the
			// constraints refuse every other failure): the other writes
			// committed, but no write of the group can be trusted to have.
			p.recent.forget(w.pipe.puts)
			return -1, fmt.Errorf("journal %s: a pipelined write changed no row (%s)", p.where, tag), true
		}
	}
	p.recent.keep(w.pipe.puts)
	p.piped.Add(1)
	return -1, nil, true
}

// pipelineCommitted reads whether a pipeline whose connection was lost
// committed: the record of one invocation it wrote is stored as it wrote
// it, or not (a transaction's writes commit together). known is false
// when the pipeline wrote no invocation or the database does not answer.
func (p *Store) pipelineCommitted(puts []recentPut) (committed, known bool) {
	i := slices.IndexFunc(puts, func(put recentPut) bool { return !put.run && put.rec != nil })
	if i < 0 {
		return false, false
	}
	for range 3 { // the pool may hand out another connection that died with the server
		var rec []byte
		err := p.pool.QueryRow(bg, `SELECT record FROM mcpflow_invocations WHERE id = $1`, uuidOf(puts[i].id)).Scan(&rec)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return false, true
		case err == nil:
			return bytes.Equal(rec, puts[i].rec), true
		}
	}
	return false, false
}

// pipedInvocation is Invocation in a pipelined write: the record this
// process last wrote, for a run it holds.
func (st pgStore) pipedInvocation(id journal.ID) (*journal.Invocation, error) {
	r, ok := st.pipe.wrote[id]
	if !ok {
		r, ok = st.recent.get(id)
	}
	if !ok {
		return nil, errNotPiped
	}
	if e, held := st.l.epoch(r.inv.RunID); !held || e == lostEpoch {
		return nil, errNotPiped
	}
	st.pipe.read[id] = r.rec
	return r.inv, nil
}

// pipedPut queues the write of inv (new when old is nil) in the pipeline,
// fenced by its run's epoch, as the comment at the top of this file says.
func (st pgStore) pipedPut(old, inv *journal.Invocation, rec []byte) error {
	e, held := st.l.epoch(inv.RunID)
	if !held || e == lostEpoch {
		return errNotPiped
	}
	if old == nil {
		st.pipe.b.Queue(`INSERT INTO mcpflow_invocations (id, run_id, state, server, tool, tool_error, created_at, record)
			SELECT $1, CASE WHEN EXISTS (SELECT 1 FROM mcpflow_runs WHERE id = $2 AND session = $9 AND epoch = $10 FOR SHARE) THEN $2::uuid END,
				$3, $4, $5, $6, $7, $8`,
			uuidOf(inv.ID), uuidOf(inv.RunID), inv.State.String(), inv.Server, inv.Tool, inv.ToolError, inv.CreatedAt, rec,
			uuidOf(st.l.session), e)
	} else {
		was, ok := st.pipe.read[old.ID]
		if !ok || old.ID != inv.ID {
			return errNotPiped
		}
		st.pipe.checked[old.ID] = true
		st.pipe.b.Queue(`UPDATE mcpflow_invocations i SET state = $2, tool_error = $3,
				record = CASE WHEN i.record = $5 AND EXISTS (SELECT 1 FROM mcpflow_runs WHERE id = $6 AND session = $7 AND epoch = $8 FOR SHARE)
					THEN $4::bytea END
			WHERE i.id = $1`,
			uuidOf(inv.ID), inv.State.String(), inv.ToolError, rec, was, uuidOf(inv.RunID), uuidOf(st.l.session), e)
	}
	kept := recentInv{inv: journal.CloneInvocation(inv), rec: rec}
	st.pipe.wrote[inv.ID] = kept // a later write of the group reads this one's record
	st.pipe.puts = append(st.pipe.puts, recentPut{id: inv.ID, inv: kept.inv, rec: rec})
	return nil
}

// held is the epoch of a run this process holds and has not lost.
func (st pgStore) held(run journal.ID) (int64, bool) {
	e, held := st.l.epoch(run)
	return e, held && e != lostEpoch
}

// pipedRun is Run in a pipelined write: the record this process last wrote
// for a run it holds, decoded afresh for the caller.
func (st pgStore) pipedRun(id journal.ID) (*journal.Run, error) {
	if _, held := st.held(id); !held {
		return nil, errNotPiped
	}
	rec, ok := st.pipe.runs[id]
	if !ok {
		if rec, ok = st.recent.run(id); !ok {
			return nil, errNotPiped
		}
		st.pipe.read[id] = rec
	}
	return journal.DecodeRun(st.s, rec)
}

// pipedHasRun answers for a run this process does not hold: it does not
// exist, which only a PutRun that inserts it may check (see pipe.absent).
func (st pgStore) pipedHasRun(id journal.ID) (bool, error) {
	if _, held := st.l.epoch(id); held {
		return false, errNotPiped
	}
	if _, ok := st.pipe.runs[id]; ok {
		return false, errNotPiped
	}
	st.pipe.absent[id] = true
	return false, nil
}

// pipedFirstWhere answers for a run this process holds: no invocation
// matches, which the run's next UPDATE checks (see pipe.none).
func (st pgStore) pipedFirstWhere(run journal.ID, match func(journal.State) bool) (*journal.Invocation, error) {
	if _, held := st.held(run); !held {
		return nil, errNotPiped
	}
	var states []string
	for _, s := range journal.States() {
		if match(s) {
			states = append(states, s.String())
		}
	}
	st.pipe.none[run] = append(st.pipe.none[run], states...)
	return nil, nil
}

// pipedPutRun queues the write of a run's record: the INSERT of a new run,
// which becomes this session's at epoch 1, or the UPDATE of a run this
// process holds, checked as an invocation's is.
func (st pgStore) pipedPutRun(old, r *journal.Run, rec []byte) error {
	if old == nil {
		if !st.pipe.absent[r.ID] {
			return errNotPiped
		}
		delete(st.pipe.absent, r.ID)
		st.pipe.b.Queue(`INSERT INTO mcpflow_runs (id, status, workflow, started_at, record, owner, session, epoch)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1)`,
			uuidOf(r.ID), r.Status.String(), r.Workflow, r.StartedAt, rec, st.l.worker, uuidOf(st.l.session))
		st.l.hold(r.ID, 1)
		st.pipe.held = append(st.pipe.held, r.ID)
	} else {
		e, held := st.held(r.ID)
		was, ok := st.pipe.runs[r.ID]
		if !ok {
			was, ok = st.pipe.read[r.ID]
		}
		if !held || !ok || old.ID != r.ID {
			return errNotPiped
		}
		st.pipe.checked[r.ID] = true
		none := st.pipe.none[r.ID]
		delete(st.pipe.none, r.ID)
		if none == nil {
			none = []string{}
		}
		st.pipe.b.Queue(`UPDATE mcpflow_runs r SET status = $2,
				record = CASE WHEN r.record = $4 AND r.session = $5 AND r.epoch = $6
					AND NOT EXISTS (SELECT 1 FROM mcpflow_invocations i WHERE i.run_id = r.id AND i.state = ANY($7::text[]))
					THEN $3::bytea END,
				cancel_reason = CASE WHEN $2 = 'running' THEN r.cancel_reason END
			WHERE r.id = $1`,
			uuidOf(r.ID), r.Status.String(), rec, was, uuidOf(st.l.session), e, none)
	}
	st.pipe.runs[r.ID] = rec
	put := recentPut{id: r.ID, run: true}
	if r.Status == journal.RunRunning {
		put.rec = rec
	}
	st.pipe.puts = append(st.pipe.puts, put)
	return nil
}
