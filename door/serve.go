package door

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/service"
)

// Server is mcpflow's HTTP API over a service that holds the journal:
// the workspace socket, and TCP when asked (see package httpapi).
type Server struct{ s *httpapi.Server }

// ServeOptions are those of `mcpflow server` (each means what it means in
// httpapi.Options).
type ServeOptions struct {
	Workspace    string
	Socket       string
	Listen       string
	Token        string
	Grace        time.Duration
	By           string
	MaxRuns      int
	AllowedHosts []string
	Version      string
	Logf         func(format string, args ...any)
}

// NewServer makes the server of `mcpflow server` over svc; an error is an
// option it refuses. Start serves.
func NewServer(svc *service.Service, o ServeOptions) (*Server, error) {
	s, err := httpapi.New(&httpapi.Options{
		Service: svc, Workspace: o.Workspace, Socket: o.Socket, Listen: o.Listen, Token: o.Token,
		Grace: o.Grace, By: o.By, MaxRuns: o.MaxRuns, AllowedHosts: o.AllowedHosts, Logf: o.Logf, Version: o.Version,
	})
	if err != nil {
		return nil, err
	}
	return &Server{s}, nil
}

// Own serves the journal svc holds for a command's one run (command names
// it, never with its arguments' values) on the workspace socket, as long
// as the command holds it: other commands list, watch, cancel, approve and
// resolve through it, and a second run is told who holds the journal.
// Publish tells it of the run's events.
func Own(svc *service.Service, workspace, socket, by, command string) (*Server, error) {
	s, err := httpapi.New(&httpapi.Options{
		Service: svc, Workspace: workspace, Socket: socket, By: by,
		Owner: &httpapi.Owner{PID: os.Getpid(), Command: command},
	})
	if err != nil {
		return nil, err
	}
	srv := &Server{s}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return srv, nil
}

// Start serves on the socket (and the TCP address, when given).
func (s *Server) Start() error { return s.s.Start() }

// Publish tells the server of an event of a run going in this process.
func (s *Server) Publish(ev engine.Event) { s.s.Publish(ev) }

// Worker is the server's worker id on a shared journal ("" otherwise).
func (s *Server) Worker() string { return s.s.Worker() }

// Addr is the TCP address served, or nil.
func (s *Server) Addr() net.Addr { return s.s.Addr() }

// JournalUsed is when another process last wrote the journal through
// this one (mcpflow proxy, with client.Journal); zero when none has.
func (s *Server) JournalUsed() time.Time { return s.s.JournalUsed() }

// Stop stops serving: calls in flight have the grace period to finish.
func (s *Server) Stop(ctx context.Context) error { return s.s.Stop(ctx) }
