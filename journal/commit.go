package journal

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// groupCommit shares one bbolt commit (and so one fsync) among the writers
// that arrive while a commit is in progress, without ever waiting on a
// timer: the first writer to find no commit running commits at once,
// together with whatever queued up during the previous commit. bbolt's own
// Batch waits up to MaxBatchDelay for company, which would add ~10 ms to
// every write of a lone sequential run.
type groupCommit struct {
	db *bolt.DB

	mu      sync.Mutex
	pending []*pendingWrite
	leading bool
	closed  bool
}

type pendingWrite struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// do runs fn in a read-write transaction and returns after that transaction
// committed and was fsynced, or after fn's error (then nothing of fn is
// written). fn may run more than once and must be free of side effects
// outside tx.
func (g *groupCommit) do(fn func(*bolt.Tx) error) error {
	w := &pendingWrite{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.pending = append(g.pending, w)
	if g.leading {
		g.mu.Unlock()
		return <-w.done
	}
	g.leading = true
	for len(g.pending) > 0 {
		batch := g.pending
		g.pending = nil
		g.mu.Unlock()
		g.commit(batch)
		g.mu.Lock()
	}
	g.leading = false
	g.mu.Unlock()
	return <-w.done
}

// commit writes batch in as few transactions as possible. When one write
// fails, the transaction is rolled back, that write gets its error alone,
// and the others are committed without it.
func (g *groupCommit) commit(batch []*pendingWrite) {
	for len(batch) > 0 {
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, w := range batch {
				if err := w.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, w := range batch {
				w.done <- err
			}
			return
		}
		batch[failed].done <- err
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

func (g *groupCommit) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}
