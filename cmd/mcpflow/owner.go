package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpflow/mcpflow/client"
	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// owner returns what a command that runs (run, resume, call) works
// through: the API of the process that serves the journal, else the
// service here, which then serves the same API on the workspace socket
// from the moment it holds the journal (its lock taken) to the moment it
// lets it go: other terminals list, watch, cancel, approve and resolve
// through it, and a second run is told who holds the journal. command
// says what holds it, never with its arguments' values. A journal several
// processes share (PostgreSQL) needs no owner: the service here is enough.
func (g *globals) owner(command string, warn io.Writer) (service.API, func(), error) {
	if g.served() {
		// A command that holds the journal for its one run refuses ours:
		// said here, before anything of ours (--trust-workspace,
		// --servers) is refused for going through a server.
		if h, ok := client.Probe(g.socketPath()); ok && h.Owner != nil {
			return nil, nil, busyOf(h.Owner)
		}
		return g.backend(writeJournal)
	}
	if journal.IsPostgres(g.journalPath) {
		return g.backend(writeJournal)
	}
	var srv *door.Server
	local := &service.Local{}
	g.onOpen = func(svc *service.Service) {
		s, err := door.Own(svc, g.workspace, g.socketPath(), osUser(), command)
		if err != nil {
			fmt.Fprintf(warn, "mcpflow: not serving the journal to other commands (%v): they will find it locked until this command ends\n", err)
			return
		}
		srv = s
		local.Observe(s.Publish)
	}
	svc, done, err := g.service(writeJournal)
	if err != nil {
		return nil, nil, err
	}
	local.Service = svc
	return local, func() {
		// The socket goes before the journal is let go.
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Stop(ctx)
		}
		done()
	}, nil
}

// busyOf is the refusal of a command that holds the journal for its one
// run, from what its health says of it.
func busyOf(f map[string]string) error {
	pid, _ := strconv.Atoi(f["pid"])
	run, _ := journal.ParseID(f["run"])
	return &service.BusyError{PID: pid, Command: f["command"], Run: run}
}

// whileHeld runs fn again, with wait, while another process holds the
// journal: until the command that holds it ends (it serves the journal
// and refuses a second run), or, when nothing serves it, until its lock
// is free. Only a refusal before anything started is tried again: a run
// started, then lost with the process serving it (*service.LostError),
// is not started twice. ctx (the first Ctrl-C) stops waiting.
func (g *globals) whileHeld(ctx context.Context, s ioStreams, wait bool, fn func() error) error {
	said := false
	for {
		err := fn()
		var lost *service.LostError
		if !wait || errors.As(err, &lost) || !(errors.Is(err, journal.ErrLocked) || errors.Is(err, service.ErrUnreachable) || errors.Is(err, service.ErrStopping)) {
			return err
		}
		if !said {
			fmt.Fprintf(s.Err, "mcpflow: %v; waiting for it to end (--wait)\n", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		g.serving = nil // asked again: the owner may be gone
	}
}

// proxyService returns the service a proxy session works through, the
// journal its run writes, and where the run's events go. A proxy calls its
// server on a session of its own (a stdio server's state lives in the
// process the proxy started), so it runs the engine here whoever holds the
// journal: it holds the journal itself when it is free, serving it on the
// workspace socket meanwhile (owned is then true: no other process can be
// running a session of it), and writes through the process that holds it
// otherwise (client.Journal), which then counts the session's run as
// going, not abandoned.
func (g *globals) proxyService(command string, warn io.Writer) (proxied, error) {
	// Proxies an MCP client starts all at once race for the journal: the
	// one that loses finds it locked before the winner serves it, and
	// looks again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := g.proxyJournal(command, warn)
		if !errors.Is(err, journal.ErrLocked) || time.Now().After(deadline) {
			return p, err
		}
		time.Sleep(100 * time.Millisecond)
		g.serving = nil
	}
}

func (g *globals) proxyJournal(command string, warn io.Writer) (p proxied, err error) {
	if g.served() {
		// Another process holds the journal (mcpflow server, a run, or
		// another proxy): the session's run is written through it.
		p.svc, p.done, err = g.service(writeJournal) // never opens the journal: the session writes p.remote
		if err != nil {
			return p, err
		}
		j, err := client.New(g.socketPath(), nil).Journal(context.Background())
		if err != nil {
			p.done()
			return p, fmt.Errorf("write the journal through the process that holds it: %w", err)
		}
		p.remote = j
		closeSvc := p.done
		p.done = func() { j.Close(); closeSvc() }
		return p, nil
	}
	if journal.IsPostgres(g.journalPath) {
		p.svc, p.done, err = g.service(writeJournal)
		return p, err
	}
	var srv atomic.Pointer[door.Server]
	g.onOpen = func(svc *service.Service) {
		s, err := door.Own(svc, g.workspace, g.socketPath(), osUser(), command)
		if err != nil {
			fmt.Fprintf(warn, "mcpflow: not serving the journal to other commands (%v): they will find it locked until this command ends\n", err)
			return
		}
		srv.Store(s)
	}
	svc, closeSvc, err := g.service(writeJournal)
	if err != nil {
		return p, err
	}
	if _, err := svc.Journal(); err != nil { // opened now: locked is known now
		closeSvc()
		return p, err
	}
	return proxied{svc: svc, owned: true,
		publish: func(ev engine.Event) {
			if s := srv.Load(); s != nil {
				s.Publish(ev)
			}
		},
		done: func() {
			if s := srv.Load(); s != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.Stop(ctx)
			}
			closeSvc()
		}}, nil
}

// proxied is what proxyService returns.
type proxied struct {
	svc *service.Service
	// remote is the journal over the socket of the process that holds it
	// (nil: the service's own).
	remote engine.Journal
	// owned: this process holds the journal alone.
	owned   bool
	publish func(engine.Event)
	done    func()
}

// proxyDoor is how a proxy reaches the journal over its life: as
// proxyService found it first, and again once the process it wrote
// through is gone (the proxy that held the journal ended): then this one
// holds the journal, or writes through whichever process holds it now.
type proxyDoor struct {
	g       *globals
	command string
	warn    io.Writer

	mu  sync.Mutex
	cur *proxied
	old []*proxied // replaced: closed at the end, their sessions may live on
}

// current is the way to the journal now, found again when the process
// written through is gone; renewed says it was.
func (d *proxyDoor) current() (p *proxied, renewed bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		if d.cur.remote == nil {
			return d.cur, false, nil
		}
		if _, ok := client.Probe(d.g.socketPath()); ok {
			return d.cur, false, nil
		}
		d.old = append(d.old, d.cur)
		d.cur = nil
		d.g.serving = nil
		renewed = true
	}
	n, err := d.g.proxyService(d.command, d.warn)
	if err != nil {
		return nil, renewed, err
	}
	d.cur = &n
	return d.cur, renewed, nil
}

// journal is the journal a session's run is written to through p.
func (p *proxied) journal() (engine.Journal, error) {
	if p.remote != nil {
		return p.remote, nil
	}
	return p.svc.Journal()
}

func (d *proxyDoor) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		d.cur.done()
	}
	for _, p := range d.old {
		p.done()
	}
}
