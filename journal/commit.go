package journal

import (
	"sync"
	"sync/atomic"
	"time"
)

// GroupCommit shares one commit (a log append on the bbolt journal, a
// transaction on PostgreSQL; one fsync either way) among the writers
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
type GroupCommit[T any] struct {
	// apply runs fns in one transaction of the backend and commits it
	// durably; failed is the index of the write that failed (the
	// transaction is then rolled back), or -1 when the commit itself
	// failed or succeeded.
	apply func(fns []func(T) error) (failed int, err error)
	token chan struct{} // capacity 1: held by the goroutine that commits

	mu      sync.Mutex
	pending []*pendingWrite[T]
	closed  bool

	Writes, Commits atomic.Int64
	AfterCommit     func()       // see Options.AfterCommit
	OnCommit        func(Commit) // see Options.OnCommit
}

type pendingWrite[T any] struct {
	fn   func(T) error
	done chan struct{} // closed once err is set
	err  error
}

func (w *pendingWrite[T]) finish(err error) {
	w.err = err
	close(w.done)
}

func (g *GroupCommit[T]) Init(apply func(fns []func(T) error) (int, error)) {
	g.apply, g.token = apply, make(chan struct{}, 1)
}

// Do runs fn in a read-write transaction and returns after that transaction
// committed and was fsynced, or after fn's error (then nothing of fn is
// written). fn may run more than once and must be free of side effects
// outside tx.
func (g *GroupCommit[T]) Do(fn func(T) error) error {
	w, err := g.enqueue(fn)
	if err != nil {
		return err
	}
	return g.wait(w)
}

// enqueue queues fn for the next commit without starting one: it rides
// with the next write that commits (see wait), and is ordered before it.
func (g *GroupCommit[T]) enqueue(fn func(T) error) (*pendingWrite[T], error) {
	w := &pendingWrite[T]{fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	g.pending = append(g.pending, w)
	return w, nil
}

// Later queues fn for the next commit (see enqueue) as a Pending whose
// Wait commits it if no other write has. after, when not nil, is given
// the commit's outcome when Wait returns.
func (g *GroupCommit[T]) Later(fn func(T) error, after func(error)) (*Pending, error) {
	w, err := g.enqueue(fn)
	if err != nil {
		return nil, err
	}
	return &Pending{wait: func() error {
		err := g.wait(w)
		if after != nil {
			after(err)
		}
		return err
	}, done: w.done}, nil
}

// wait returns once w is committed (or failed): committed by another
// writer's commit, or by this one, which takes the committer's token and
// commits everything queued, w included.
func (g *GroupCommit[T]) wait(w *pendingWrite[T]) error {
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
	g.commitQueued()
	<-g.token
	<-w.done
	return w.err
}

// commitQueued commits every write queued so far (the caller holds the
// token), and reports whether the group commit is closed.
func (g *GroupCommit[T]) commitQueued() (closed bool) {
	g.mu.Lock()
	batch, closed := g.pending, g.closed
	g.pending = nil
	g.mu.Unlock()
	g.commit(batch)
	return closed
}

// commit writes batch in as few transactions as possible. When one write
// fails, the transaction is rolled back, that write gets its error alone,
// and the others are committed without it.
func (g *GroupCommit[T]) commit(batch []*pendingWrite[T]) {
	for len(batch) > 0 {
		var start time.Time
		if g.OnCommit != nil {
			start = time.Now()
		}
		fns := make([]func(T) error, len(batch))
		for i, w := range batch {
			fns[i] = w.fn
		}
		failed, err := g.apply(fns)
		if g.OnCommit != nil {
			g.OnCommit(Commit{Start: start, Duration: time.Since(start), Writes: len(batch), Err: err})
		}
		if failed < 0 {
			if err == nil {
				g.Commits.Add(1)
				g.Writes.Add(int64(len(batch)))
				if g.AfterCommit != nil {
					g.AfterCommit()
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

// Exclusive runs fn while no commit is in progress or can start, after
// committing what is queued.
func (g *GroupCommit[T]) Exclusive(fn func() error) error {
	g.token <- struct{}{}
	defer func() { <-g.token }()
	if closed := g.commitQueued(); closed {
		return ErrClosed
	}
	return fn()
}

// Flush commits the writes queued so far (enqueued, never waited for).
func (g *GroupCommit[T]) Flush() {
	g.mu.Lock()
	last := (*pendingWrite[T])(nil)
	if n := len(g.pending); n > 0 {
		last = g.pending[n-1]
	}
	g.mu.Unlock()
	if last != nil {
		g.wait(last)
	}
}

// Close refuses new writes and waits for a commit in progress. Writes
// still queued (enqueued, never waited for) are committed first: a deferred
// write is never dropped by Close.
func (g *GroupCommit[T]) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.token <- struct{}{} // once the committer, if any, is done
	g.commitQueued()
	<-g.token
}
