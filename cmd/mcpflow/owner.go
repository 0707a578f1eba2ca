package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
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

// heldBy is the refusal of a server whose socket a command answers on,
// which holds the journal for its one run: named, not taken for another
// server. nil when none does.
func heldBy(socket string) error {
	h, ok := client.Probe(socket)
	if !ok || h.Owner == nil {
		return nil
	}
	return &exitError{code: exitJournal, err: fmt.Errorf("%s: start mcpflow server once it ended", holder(h.Owner))}
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

// proxyDoor is how a proxy reaches the journal. A proxy calls its server
// on a session of its own (a stdio server's state lives in the process
// the proxy started), so it runs the engine itself, whoever holds the
// journal; and it holds the journal only while calls go (and a moment
// after, for the next), so that between an agent's calls 'mcpflow run',
// 'approve' or another proxy find it free. To write, it holds the journal
// itself when it is free — serving it on the workspace socket meanwhile,
// other proxies writing through it — or writes through the process that
// holds it (client.Journal). The session's run writes to sw, pointed at
// the journal as held for each call.
type proxyDoor struct {
	g       *globals
	command string
	warn    io.Writer
	server  string
	trust   bool
	sw      *service.JournalSwitch

	mu      sync.Mutex
	n       int          // calls (and opens, ends) holding the journal
	held    *heldJournal // while n > 0, and for linger after
	timer   *time.Timer  // lets held go, linger after n fell to 0
	settled bool         // sessions left by dead proxies were settled
}

// proxyLinger is how long a proxy keeps the journal after its last call,
// for the agent's next: a burst of calls opens it once.
const proxyLinger = 500 * time.Millisecond

// heldJournal is the journal as a proxy holds it for a while.
type heldJournal struct {
	j       engine.Journal
	svc     *service.Service // the service that opened it (nil: written through another process)
	srv     *door.Server     // this process serving it meanwhile (nil: not serving)
	publish func(engine.Event)
	done    func()
}

// acquire holds the journal for one call (or the run's start or end) and
// points the session's journal at it; release lets it go.
func (d *proxyDoor) acquire(ctx context.Context) (release func(), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.held == nil {
		if d.held, err = d.hold(ctx); err != nil {
			return nil, err
		}
	}
	d.n++
	d.sw.Set(d.held.j)
	var once sync.Once
	return func() { once.Do(d.release) }, nil
}

func (d *proxyDoor) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n--
	if d.n > 0 || d.held == nil {
		return
	}
	d.timer = time.AfterFunc(proxyLinger, d.letGo)
}

// letGo lets the journal go once nothing holds it — nor, when this
// process serves it, has another proxy written through it lately.
func (d *proxyDoor) letGo() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n > 0 || d.held == nil {
		return
	}
	if srv := d.held.srv; srv != nil && time.Since(srv.JournalUsed()) < proxyLinger {
		d.timer = time.AfterFunc(proxyLinger, d.letGo)
		return
	}
	d.held.done()
	d.held = nil
	d.sw.Set(nil)
}

// invalidate forgets the journal as held: the process written through is
// gone. The next acquire finds it again.
func (d *proxyDoor) invalidate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil && d.held.svc == nil {
		d.held.done()
		d.held = nil
	}
}

// hold finds the journal: through the process that serves it, or opened
// here. Proxies an MCP client starts at once race for it: the one that
// loses finds it locked before the winner serves it, and looks again.
func (d *proxyDoor) hold(ctx context.Context) (*heldJournal, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.g.serving = nil // who serves it may have changed
		h, err := d.holdOnce(ctx)
		if !errors.Is(err, journal.ErrLocked) || time.Now().After(deadline) {
			return h, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *proxyDoor) holdOnce(ctx context.Context) (*heldJournal, error) {
	if d.g.served() {
		j, err := client.New(d.g.socketPath(), nil).Journal(ctx)
		if err != nil {
			return nil, fmt.Errorf("write the journal through the process that holds it: %w", err)
		}
		return &heldJournal{j: j, publish: j.Publish, done: func() { j.Close() }}, nil
	}
	h := &heldJournal{}
	if !journal.IsPostgres(d.g.journalPath) {
		d.g.onOpen = func(svc *service.Service) {
			s, err := door.Own(svc, d.g.workspace, d.g.socketPath(), osUser(), d.command)
			if err != nil {
				fmt.Fprintf(d.warn, "mcpflow: not serving the journal to other commands (%v): they will find it locked until this proxy lets it go\n", err)
				return
			}
			h.srv = s
		}
	}
	svc, closeSvc, err := d.g.service(writeJournal)
	if err != nil {
		return nil, err
	}
	j, err := svc.Journal()
	if err != nil {
		closeSvc()
		return nil, err
	}
	h.j, h.svc = j, svc
	h.publish = func(ev engine.Event) {
		if h.srv != nil {
			h.srv.Publish(ev)
		}
	}
	h.done = func() {
		if h.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.srv.Stop(ctx)
		}
		closeSvc()
	}
	if !d.settled && !journal.IsPostgres(d.g.journalPath) {
		// This process holds the file alone: sessions of this server
		// whose proxy is gone are no one's, and are settled now.
		d.settled = true
		reps, errs := svc.SettleProxies(ctx, d.server, d.trust, h.publish)
		for _, rep := range reps {
			fmt.Fprintf(d.warn, "mcpflow proxy: settled run %s, left running by a proxy that ended: %s\n", rep.Run.ID.Short(), rep.Run.Status)
		}
		for _, err := range errs {
			fmt.Fprintf(d.warn, "mcpflow proxy: %v (mcpflow resume settles it)\n", err)
		}
	}
	return h, nil
}

// publish tells whoever follows the journal here of a run's event.
func (d *proxyDoor) publish(ev engine.Event) {
	d.mu.Lock()
	h := d.held
	d.mu.Unlock()
	if h != nil {
		h.publish(ev)
	}
}

// close lets the journal go for good.
func (d *proxyDoor) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.held != nil {
		d.held.done()
		d.held = nil
	}
	d.sw.Set(nil)
}
