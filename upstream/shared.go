package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
)

// Shared holds the sessions that the runs of one process share: those of
// the servers whose entry sets Sessions (see [Server.Sessions]). A Pool
// given one (Pool.Share) takes such a server's sessions from it instead of
// connecting one of its own, and its Close leaves them open; Shared.Close
// stops them. The pool's other http and sse sessions use the Shared's
// HTTP transport, so that a connection one run's session left idle serves
// the next; Shared.Close closes the idle ones. It is safe for concurrent
// use.
//
// Sessions are shared by entry: the same configuration (every field the
// entry was read with but where, the variables its ${VAR} may read included) in the
// same workspace, with the same capabilities (sampling declared or not).
// Each call goes to the live session with the fewest calls in flight; a
// new session is connected while every open one has a call in flight and
// fewer than Sessions are open.
type Shared struct {
	mu     sync.Mutex
	groups map[string][]*poolEntry
	closed bool
	// retiring are the sessions dropped after a lost connection, each
	// closed by a goroutine of its own once its last call returned.
	retiring sync.WaitGroup
	stop     chan struct{} // closed by Close: retiring sessions close now

	// httpOnce makes http, the transport of the http and sse sessions of
	// the pools given h (Pool.Share), once; Close closes its idle
	// connections.
	httpOnce sync.Once
	http     *http.Transport
}

// transport is the transport of the sessions of the pools given h that
// bring no HTTP client (nil when http.DefaultTransport is not an
// *http.Transport: each session then has its own).
func (h *Shared) transport() *http.Transport {
	h.httpOnce.Do(func() { h.http = newSessionTransport() })
	return h.http
}

// NewShared returns an empty set of shared sessions.
func NewShared() *Shared {
	return &Shared{groups: map[string][]*poolEntry{}, stop: make(chan struct{})}
}

// sharedKey names the sessions runs may share: the entry as read, where
// it runs, and what the session declares.
func sharedKey(srv *Server, o *Options) string {
	entry := *srv
	entry.Origin = "" // where it was read: the same entry in two files, or a file edited, is one
	cfg, _ := json.Marshal(struct {
		S       *Server
		Allowed []string
		W       string
		Self    string
		Sample  bool
	}{&entry, srv.EnvAllowed, o.Workspace, o.Self, o.CreateMessage != nil})
	return string(cfg)
}

// shares reports whether a pool with options o takes srv's sessions from
// a Shared: the entry asks for it, and the pool stands in for no client
// (mcpflow proxy's session is its client's own).
func shares(srv *Server, o *Options) bool { return srv.Sessions > 0 && o.Peer == nil }

// session returns a session of srv (key: sharedKey) for a call: the live one with the
// fewest calls in flight, or a new one while all are busy and fewer than
// srv.Sessions are open. A failed connect is not kept; a caller that
// waited for it tries once more.
func (h *Shared) session(ctx context.Context, key string, srv *Server, o *Options) (*Session, error) {
	for try := 0; ; try++ {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, errors.New("shared sessions are closed")
		}
		e, mine := h.pick(key, srv.Sessions)
		h.mu.Unlock()
		if mine {
			return h.connect(ctx, key, e, srv, o)
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil || try > 0 {
			return e.sess, e.err
		}
	}
}

// connect connects e, a new entry of key's sessions: a failed connect is
// not kept.
func (h *Shared) connect(ctx context.Context, key string, e *poolEntry, srv *Server, o *Options) (*Session, error) {
	e.sess, e.err = Connect(ctx, srv, o)
	close(e.ready)
	if e.err != nil {
		h.drop(key, e)
	}
	return e.sess, e.err
}

// pick chooses the entry for a call under h.mu; mine says the caller must
// connect it.
func (h *Shared) pick(key string, max int) (e *poolEntry, mine bool) {
	entries := h.groups[key]
	var best *poolEntry
	bestLoad := int64(-1)
	for i, c := range entries {
		load := int64(1) // connecting: as busy as one call
		select {
		case <-c.ready:
			if c.err != nil {
				continue // failed: its connector drops it
			}
			load = c.sess.InFlight()
		default:
		}
		if best == nil || load < bestLoad {
			best, bestLoad = entries[i], load
		}
	}
	if best != nil && (bestLoad == 0 || len(entries) >= max) {
		return best, false
	}
	e = &poolEntry{ready: make(chan struct{})}
	h.groups[key] = append(entries, e)
	return e, true
}

// drop removes e from the sessions of key.
func (h *Shared) drop(key string, e *poolEntry) {
	h.mu.Lock()
	h.groups[key] = slices.DeleteFunc(h.groups[key], func(c *poolEntry) bool { return c == e })
	if len(h.groups[key]) == 0 {
		delete(h.groups, key)
	}
	h.mu.Unlock()
}

// reconnect drops old (its connection was lost) and returns a new session
// in its place, connected for this caller: never another open one, which
// the same failure (the server restarted, say) may have broken too, and
// whose tool list would not be the fresh one the replay rule asks for
// after a lost connection. The other calls in flight on old are not cut
// short — on streamable HTTP one request can fail while the session lives
// — : old is closed once its last call returned (or at Close).
func (h *Shared) reconnect(ctx context.Context, key string, srv *Server, o *Options, old *Session) (*Session, error) {
	if old != nil {
		h.mu.Lock()
		var found *poolEntry
		for _, c := range h.groups[key] {
			select {
			case <-c.ready:
				if c.sess == old {
					found = c
				}
			default:
			}
		}
		closed := h.closed
		if found != nil && !closed {
			h.retiring.Go(func() {
				select {
				case <-old.Idle():
				case <-h.stop:
				}
				old.Close()
			})
		}
		h.mu.Unlock()
		if found != nil {
			h.drop(key, found)
		}
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("shared sessions are closed")
	}
	e := &poolEntry{ready: make(chan struct{})}
	h.groups[key] = append(h.groups[key], e)
	h.mu.Unlock()
	return h.connect(ctx, key, e, srv, o)
}

// Close stops every shared session, all at once, and returns when each
// has ended (see Pool.Close). It is idempotent.
func (h *Shared) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.stop)
	groups := h.groups
	h.groups = map[string][]*poolEntry{}
	h.mu.Unlock()
	var entries []*poolEntry
	for _, g := range groups {
		entries = append(entries, g...)
	}
	err := closeEntries(entries)
	h.retiring.Wait()
	// The pools given h close their sessions first (a Service's runs end
	// before it closes): what is idle now is all there is. No transport
	// is made from now on.
	h.httpOnce.Do(func() {})
	if h.http != nil {
		h.http.CloseIdleConnections()
	}
	return err
}
