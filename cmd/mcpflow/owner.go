package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/server"
	"github.com/mcpflow/mcpflow/service"
)

// owner returns what a command that runs (run, resume, call) works
// through: the server's API when a process serves the journal, else the
// service here, which then holds the journal and serves the same API on
// the workspace socket for as long as the command goes (other terminals
// list, watch, cancel, approve and resolve through it; a second run is
// told who holds the journal). command says what holds it, never with
// its arguments' values. A journal several processes share (PostgreSQL)
// needs no owner: the service here is enough.
func (g *globals) owner(command string) (service.API, func(), error) {
	if g.served() || journal.IsPostgres(g.journalPath) {
		return g.backend(writeJournal)
	}
	svc, done, err := g.service(writeJournal)
	if err != nil {
		return nil, nil, err
	}
	local := &service.Local{Service: svc}
	srv, err := server.New(&server.Options{
		Service: svc, Workspace: g.workspace, Socket: g.socketPath(), By: osUser(),
		Owner: &server.Owner{PID: os.Getpid(), Command: command},
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		// Not served (another process took the socket first, a directory
		// that cannot hold one): the command goes on without; the journal's
		// lock says the rest.
		return local, done, nil
	}
	local.Observe = srv.Publish
	return local, func() {
		// The socket goes before the journal is let go.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
		done()
	}, nil
}

// whileHeld runs fn again, with wait, while another process holds the
// journal: until the command that holds it ends (it serves the journal
// and refuses a second run), or, when nothing serves it, until its lock
// is free. ctx (the first Ctrl-C) stops waiting.
func (g *globals) whileHeld(ctx context.Context, s ioStreams, wait bool, fn func() error) error {
	said := false
	for {
		err := fn()
		if !wait || !(errors.Is(err, journal.ErrLocked) || errors.Is(err, service.ErrUnreachable) || errors.Is(err, service.ErrStopping)) {
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
