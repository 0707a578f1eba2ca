package journal

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// groupCommit shares one bbolt commit (and so one fsync) among the writers
// that arrive while a commit is in progress, without ever waiting on a
// timer. Writers queue their write, then either find it committed by
// someone else or take the committer's token and commit everything queued,
// their own write included. A lone writer takes the free token at once;
// under load each commit carries every write that queued during the
// previous one. bbolt's own Batch waits up to MaxBatchDelay for company,
// which would add ~10 ms to every write of a lone sequential run.
//
// The committer is always a writer whose own write is in the batch, so it
// returns as soon as that commit is durable: no goroutine is stuck leading
// while others keep arriving.
type groupCommit struct {
	db    *bolt.DB
	path  string
	token chan struct{} // capacity 1: held by the goroutine that commits

	mu      sync.Mutex
	pending []*pendingWrite
	closed  bool

	writes, commits atomic.Int64
	afterCommit     func()       // see Options.AfterCommit
	onCommit        func(Commit) // see Options.OnCommit
}

type pendingWrite struct {
	fn   func(*bolt.Tx) error
	done chan struct{} // closed once err is set
	err  error
}

func (w *pendingWrite) finish(err error) {
	w.err = err
	close(w.done)
}

func (g *groupCommit) init(db *bolt.DB, path string) {
	g.db, g.path, g.token = db, path, make(chan struct{}, 1)
}

// do runs fn in a read-write transaction and returns after that transaction
// committed and was fsynced, or after fn's error (then nothing of fn is
// written). fn may run more than once and must be free of side effects
// outside tx.
func (g *groupCommit) do(fn func(*bolt.Tx) error) error {
	w, err := g.enqueue(fn)
	if err != nil {
		return err
	}
	return g.wait(w)
}

// enqueue queues fn for the next commit without starting one: it rides
// with the next write that commits (see wait), and is ordered before it.
func (g *groupCommit) enqueue(fn func(*bolt.Tx) error) (*pendingWrite, error) {
	w := &pendingWrite{fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	g.pending = append(g.pending, w)
	return w, nil
}

// wait returns once w is committed (or failed): committed by another
// writer's commit, or by this one, which takes the committer's token and
// commits everything queued, w included.
func (g *groupCommit) wait(w *pendingWrite) error {
	select {
	case <-w.done:
		return w.err
	case g.token <- struct{}{}:
	}
	// The previous committer finished all its writes before it gave the
	// token back: w is either done or still queued.
	select {
	case <-w.done:
		<-g.token
		return w.err
	default:
	}
	g.mu.Lock()
	batch := g.pending
	g.pending = nil
	g.mu.Unlock()
	g.commit(batch)
	<-g.token
	<-w.done
	return w.err
}

// commit writes batch in as few transactions as possible. When one write
// fails, the transaction is rolled back, that write gets its error alone,
// and the others are committed without it.
func (g *groupCommit) commit(batch []*pendingWrite) {
	for len(batch) > 0 {
		var start time.Time
		if g.onCommit != nil {
			start = time.Now()
		}
		failed, err := g.update(batch)
		if g.onCommit != nil {
			g.onCommit(Commit{Start: start, Duration: time.Since(start), Writes: len(batch), Err: err})
		}
		if failed < 0 {
			if err == nil {
				g.commits.Add(1)
				g.writes.Add(int64(len(batch)))
				if g.afterCommit != nil {
					g.afterCommit()
				}
			}
			for _, w := range batch {
				w.finish(err)
			}
			return
		}
		batch[failed].finish(err)
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// update runs batch in one transaction. It returns the index of the write
// that failed (or -1 when the commit itself failed or succeeded). A panic
// inside bbolt (a damaged page) is that write's error, not the process's end.
func (g *groupCommit) update(batch []*pendingWrite) (failed int, err error) {
	cur := -1
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			failed, err = cur, fmt.Errorf("journal %s: %w: %v", g.path, ErrDamaged, r)
		}
	}()
	err = g.db.Update(func(tx *bolt.Tx) error {
		for i, w := range batch {
			cur = i
			if err := w.fn(tx); err != nil {
				return err
			}
		}
		cur = -1
		return nil
	})
	switch {
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return -1, ErrClosed
	case errors.Is(err, berrors.ErrDatabaseReadOnly):
		return -1, fmt.Errorf("journal %s was opened read-only: %w", g.path, err)
	}
	return cur, err
}

// close refuses new writes. Writes still queued (enqueued, never waited
// for) are committed first: a deferred write is never dropped by Close.
func (g *groupCommit) close() {
	g.mu.Lock()
	g.closed = true
	last := (*pendingWrite)(nil)
	if n := len(g.pending); n > 0 {
		last = g.pending[n-1]
	}
	g.mu.Unlock()
	if last != nil {
		g.wait(last)
	}
}
