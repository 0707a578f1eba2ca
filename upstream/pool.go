package upstream

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
)

// Pool holds one lazily connected session per server, shared by all the
// steps of a run. It is safe for concurrent use; Close stops every server.
type Pool struct {
	set  Set
	opts Options

	// shared, when set, holds the sessions of the servers whose entry
	// sets Sessions (see Share); sharedKeys are their keys there, by
	// server name, made once (a call asks for its session each time).
	shared     *Shared
	sharedKeys map[string]string

	mu       sync.Mutex
	sessions map[string]*poolEntry
	closed   bool
}

type poolEntry struct {
	ready chan struct{} // closed once connect finished
	sess  *Session
	err   error
}

// NewPool returns a pool over set. Nothing connects until first use.
func NewPool(set Set, opts *Options) *Pool {
	p := &Pool{set: set, sessions: map[string]*poolEntry{}}
	if opts != nil {
		p.opts = *opts
	}
	return p
}

// Share makes the pool take the sessions of the servers whose entry sets
// Sessions from h, shared with the other pools given h, instead of
// connecting sessions of its own; Close leaves those open (h.Close stops
// them). Its own http and sse sessions without an HTTPClient use h's HTTP
// transport: their connections, once idle, serve the sessions of the
// other pools given h. A pool that stands in for a client (Options.Peer)
// shares nothing. Call Share before the pool's first use.
func (p *Pool) Share(h *Shared) {
	p.shared = h
	if h != nil && p.opts.Peer == nil {
		p.opts.transport = h.transport()
	}
}

// sharedKey is srv's key in p.shared (see sharedKey); p.mu is held.
func (p *Pool) sharedKey(name string, srv *Server) string {
	key, ok := p.sharedKeys[name]
	if !ok {
		if p.sharedKeys == nil {
			p.sharedKeys = map[string]string{}
		}
		key = sharedKey(srv, &p.opts)
		p.sharedKeys[name] = key
	}
	return key
}

// Set returns the servers the pool knows.
func (p *Pool) Set() Set { return p.set }

// Session returns the live session for name, connecting on first use.
// A failed connect is not cached: the next call tries again.
func (p *Pool) Session(ctx context.Context, name string) (*Session, error) {
	srv, err := p.set.Lookup(name)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.shared != nil && shares(srv, &p.opts) && !p.closed {
		key := p.sharedKey(name, srv)
		p.mu.Unlock()
		return p.shared.session(ctx, key, srv, &p.opts)
	}
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("server pool is closed")
	}
	if e, ok := p.sessions[name]; ok {
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e.sess, nil
		}
		return p.retry(ctx, name, e)
	}
	e := &poolEntry{ready: make(chan struct{})}
	p.sessions[name] = e
	p.mu.Unlock()
	e.sess, e.err = Connect(ctx, srv, &p.opts)
	close(e.ready)
	if e.err != nil {
		p.forget(name, e)
	}
	return e.sess, e.err
}

func (p *Pool) retry(ctx context.Context, name string, failed *poolEntry) (*Session, error) {
	p.forget(name, failed)
	return p.Session(ctx, name)
}

func (p *Pool) forget(name string, e *poolEntry) {
	p.mu.Lock()
	if p.sessions[name] == e {
		delete(p.sessions, name)
	}
	p.mu.Unlock()
}

// Reconnect drops the session for name (stopping its server) and connects
// afresh: a new process or connection, a new initialize, and a fresh
// tools/list (while it connects with Options.ListTools, else at the next
// Tools call). Nothing of the old session carries over.
//
// A shared session (see Share) is not closed at once: the other runs'
// calls in flight on it may still be answered. It is closed when the last
// of them returned, and the next call gets another session.
func (p *Pool) Reconnect(ctx context.Context, name string, old *Session) (*Session, error) {
	if srv, err := p.set.Lookup(name); err == nil && p.shared != nil && shares(srv, &p.opts) {
		p.mu.Lock()
		key := p.sharedKey(name, srv)
		p.mu.Unlock()
		return p.shared.reconnect(ctx, key, srv, &p.opts, old)
	}
	p.mu.Lock()
	if e, ok := p.sessions[name]; ok {
		select {
		case <-e.ready:
			// e.sess is safe to read once ready is closed.
			if old == nil || e.sess == old {
				delete(p.sessions, name)
			}
		default:
			// A connect is in progress: another caller is already
			// reconnecting, and its new session is not old. Share it.
		}
	}
	p.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return p.Session(ctx, name)
}

// Close stops every server, all at once: a server that ignores the end of
// its input costs its grace period once, not once per server. It returns
// when every one has exited. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	entries := p.sessions
	p.sessions = map[string]*poolEntry{}
	p.mu.Unlock()
	return closeEntries(slices.Collect(maps.Values(entries)))
}

// closeEntries closes the sessions of entries at once (waiting for those
// still connecting), and returns when each has ended.
func closeEntries(entries []*poolEntry) error {
	errs := make([]error, 0, len(entries))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Go(func() {
			<-e.ready
			if e.sess == nil {
				return
			}
			if err := e.sess.Close(); err != nil && !errors.Is(err, context.Canceled) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
