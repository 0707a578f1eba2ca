package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/telemetry"
	"github.com/mcpflow/mcpflow/upstream"
)

// Options configure a Server. Service is required.
type Options struct {
	// Service owns the journal, opened for writing.
	Service *service.Service
	// Workspace is the service's workspace: workflow files submitted by a
	// relative path are read from it.
	Workspace string
	// Socket is the unix socket to serve on ("": none). It is created mode
	// 0600; a stale one (nothing answers on it) is replaced.
	Socket string
	// Listen is a TCP address to serve on as well ("": none).
	Listen string
	// Token is the bearer token TCP requests must carry (the header
	// "Authorization: Bearer TOKEN", or the cookie the UI sets). Required
	// when Listen is not a loopback address.
	Token string
	// Grace is how long Stop lets calls in flight finish. Default 10s.
	Grace time.Duration
	// By names who acts through the API (resolutions, approvals,
	// cancels). Default: "api".
	By string
	// Logf, when set, receives a line per notable event.
	Logf func(format string, args ...any)
	// MaxRuns is how many runs a worker on a shared journal (PostgreSQL)
	// keeps going at once, counting its own; it claims free runs up to
	// it. Default 32.
	MaxRuns int
	// Poll is how often a worker looks for free runs. Default 1s.
	Poll time.Duration
	// AllowedHosts are host names a TCP listener answers to besides
	// localhost, loopback addresses and the host of Listen (see
	// hosts.allow): the names the operator reaches it by.
	AllowedHosts []string
	// Limits bound the connections of clients (see Limits; zero values
	// are defaults).
	Limits Limits
	// Version is mcpflow's version, as the MCP endpoint (/mcp) gives it.
	Version string
	// Owner, when set, makes the server the API of a command that holds
	// the journal for one run (mcpflow run, resume or call without
	// mcpflow server): for as long as it holds it, the same API answers
	// queries, cancels, approvals and resolutions from other terminals,
	// and streams the command's run (see Publish); a request to start a
	// run is refused with who holds the journal (*service.BusyError). It
	// resumes nothing at start.
	Owner *Owner
}

// Owner is the command that holds the journal, as other terminals are
// told of it.
type Owner struct {
	PID     int
	Command string
}

// Server is one long-running owner of a journal. Start it, then Stop it.
type Server struct {
	o   Options
	svc *service.Service
	hub hub
	ui  *ui
	// metrics is /metrics: counts from the journal, latencies of this
	// process.
	metrics *telemetry.Metrics

	// base is the context of every run; stopping cancels it (cause
	// engine.ErrStopping) once the grace period is over.
	base     context.Context
	stopRuns context.CancelCauseFunc
	stopping atomic.Bool
	runs     sync.WaitGroup // the goroutines of the runs going
	going    atomic.Int64   // how many runs go
	quit     chan struct{}  // closed by Stop: the worker stops claiming
	poked    chan struct{}  // a run was submitted here, or one ended: claim now
	working  sync.WaitGroup // the worker's claim loop

	servers   []*http.Server
	serving   sync.WaitGroup
	listeners []net.Listener
	tcpAddr   net.Addr
	hosts     hosts       // what a TCP listener answers to
	socket    os.FileInfo // the socket listened on, to remove at Stop

	ownerRun atomic.Pointer[journal.ID] // the owner's run, once started

	// mcp is the MCP endpoint (/mcp); nil for a command's owner, which
	// runs nothing for others, and without a workspace.
	mcp http.Handler
	// journalUsed is when another process last wrote the journal through
	// this one (UnixNano; see JournalUsed).
	journalUsed atomic.Int64
}

// New checks o and returns a Server that is not serving yet.
func New(o *Options) (*Server, error) {
	if o == nil || o.Service == nil {
		return nil, errors.New("server: a service is required")
	}
	s := &Server{o: *o, svc: o.Service}
	if s.o.Grace <= 0 {
		s.o.Grace = 10 * time.Second
	}
	if s.o.By == "" {
		s.o.By = "api"
	}
	if s.o.MaxRuns <= 0 {
		s.o.MaxRuns = 32
	}
	if s.o.Poll <= 0 {
		s.o.Poll = time.Second
	}
	s.o.Limits = s.o.Limits.withDefaults()
	s.hosts = newHosts(s.o.Listen, s.o.AllowedHosts)
	s.quit, s.poked = make(chan struct{}), make(chan struct{}, 1)
	if s.o.Listen != "" && s.o.Token == "" && !loopback(s.o.Listen) {
		return nil, fmt.Errorf("--listen %s is not a loopback address: a token is required (--token-file)", s.o.Listen)
	}
	ui, err := newUI()
	if err != nil {
		return nil, fmt.Errorf("server: the web UI: %w", err)
	}
	s.ui = ui
	if s.o.Owner == nil && s.o.Workspace != "" {
		if s.mcp, err = s.mcpHandler(); err != nil {
			return nil, fmt.Errorf("server: the MCP endpoint: %w", err)
		}
	}
	s.metrics = telemetry.NewMetrics(s.svc.Journal, upstream.ActiveSessions)
	s.base, s.stopRuns = context.WithCancelCause(context.Background())
	s.hub.init()
	return s, nil
}

// loopback reports whether addr (host:port) is on a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start listens on the socket and the TCP address, serves, and resumes the
// runs that were running when the journal's last owner stopped — on a
// journal shared by workers, it claims free runs (see work) until Stop. It
// returns once listening.
func (s *Server) Start() error {
	if s.o.Socket != "" {
		l, st, err := listenSocket(s.o.Socket)
		if err != nil {
			return err
		}
		s.socket = st
		s.serve(l, s.socketServer(s.Handler(false)))
	}
	if s.o.Listen != "" {
		l, err := net.Listen("tcp", s.o.Listen)
		if err != nil {
			s.closeListeners()
			s.removeSocket()
			return fmt.Errorf("listen %s: %w", s.o.Listen, err)
		}
		s.tcpAddr = l.Addr()
		s.serve(capPerClient(l, s.o.Limits.PerClient), s.o.Limits.httpServer(s.Handler(true)))
	}
	if s.o.Owner != nil {
		return nil
	}
	if p, ok := s.pool(); ok {
		s.working.Add(1)
		go s.work(p)
		return nil
	}
	return s.resumeInterrupted()
}

// Publish streams an event of a run going in the owner's command (see
// Options.Owner) to the API's subscribers, as a run the server starts
// streams its own.
func (s *Server) Publish(ev engine.Event) {
	if ev.Kind == engine.RunStarted && s.o.Owner != nil {
		id := ev.Run
		s.ownerRun.Store(&id)
	}
	s.hub.publish(service.EventOf(ev))
}

// abandoned reports, in a server that is the API of the journal's owner
// (Options.Owner), whether run is journaled as running though it goes
// nowhere: not here, and the owner resumes nothing (a crashed process's
// run). The owner's runs go here before they can be read (see
// engine.Engine.Creating); one that ended since run was read is not; a
// proxy session goes in the proxy's process.
func (s *Server) abandoned(run *journal.Run) bool {
	if s.o.Owner == nil || run.Status != journal.RunRunning || s.svc.Going(run.ID) || service.ProxyAlive(run) {
		return false
	}
	rep, err := s.svc.RunDetail(run.ID.String())
	return err == nil && rep.Run.Status == journal.RunRunning && !s.svc.Going(run.ID)
}

// busy refuses to start a run in a server that is the API of the
// journal's owner (Options.Owner), saying who holds the journal.
func (s *Server) busy() error {
	if s.o.Owner == nil {
		return nil
	}
	e := &service.BusyError{PID: s.o.Owner.PID, Command: s.o.Owner.Command}
	if id := s.ownerRun.Load(); id != nil {
		e.Run = *id
	}
	return e
}

// Addr is the TCP address served on (nil without Listen).
func (s *Server) Addr() net.Addr { return s.tcpAddr }

// socketServer serves the unix socket, private to the journal's owner:
// no bound on how long the owner's requests take, only on a request's
// headers and an idle connection.
func (s *Server) socketServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: s.o.Limits.ReadHeader, IdleTimeout: s.o.Limits.Idle}
}

func (s *Server) serve(l net.Listener, srv *http.Server) {
	s.servers = append(s.servers, srv)
	s.listeners = append(s.listeners, l)
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logf("serve %s: %v", l.Addr(), err)
		}
	}()
}

func (s *Server) closeListeners() {
	for _, l := range s.listeners {
		l.Close()
	}
}

// listenSocket listens on a unix socket at path, mode 0600. A socket that
// nothing answers on is stale (its server died) and is replaced; one that
// answers is another server's. Anything else at path — a file, a
// directory, a link — is refused, never removed. It returns the socket's
// file, which Stop removes only if it is still there.
func listenSocket(path string) (net.Listener, os.FileInfo, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, err
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, nil, fmt.Errorf("--socket %s: %s is there, not a socket: refusing to replace it (remove it yourself, or choose another --socket)", path, fileKind(st.Mode()))
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return nil, nil, fmt.Errorf("another mcpflow server is serving on %s", path)
		case errors.Is(err, fs.ErrNotExist):
			// gone since: nothing to remove
		case errors.Is(err, syscall.ECONNREFUSED):
			// Stale: remove it, if it is still the socket looked at.
			if now, err := os.Lstat(path); err == nil && os.SameFile(st, now) {
				if err := os.Remove(path); err != nil {
					return nil, nil, fmt.Errorf("--socket %s: remove the stale socket: %w", path, err)
				}
			}
		case errors.Is(err, fs.ErrPermission):
			return nil, nil, fmt.Errorf("--socket %s: a socket you may not use is there (another user's, or left by a server run as root): remove it, or choose another --socket", path)
		default:
			return nil, nil, fmt.Errorf("--socket %s: a socket is there and cannot be told stale: %v", path, err)
		}
	}
	var l net.Listener
	err := private(func() (err error) {
		l, err = net.Listen("unix", path)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Closing must not remove what is at path then: see Stop.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	st, err := os.Lstat(path)
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, st, nil
}

// fileKind names what a file mode is, for messages.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	}
	return "a file of another kind"
}

// resumeInterrupted resumes, in the background, every run the journal has
// as running: its owner crashed or stopped while it went.
func (s *Server) resumeInterrupted() error {
	runs, err := s.svc.Runs(service.RunQuery{Status: journal.RunRunning.String()})
	if err != nil {
		return err
	}
	for _, r := range runs {
		id := r.Run.ID
		if service.ProxyAlive(&r.Run) {
			continue // a proxy session going in its own process
		}
		s.logf("resuming run %s (%s), interrupted when the journal's owner stopped", id.Short(), r.Run.Workflow)
		if _, err := s.resume(s.base, service.ResumeRequest{Run: id.String()}); err != nil {
			s.logf("resume %s: %v", id.Short(), err)
		}
	}
	return nil
}

// Stop removes the socket, stops taking work, closes the listeners, lets the runs going finish
// within the grace period, then aborts what is still in flight (journaled
// as a crash would leave it; the runs stay running for the next start) and
// waits for the runs' goroutines. ctx bounds the whole of it.
func (s *Server) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	// The socket goes first, while its listener still answers on it, so
	// that it is surely this server's. Removed once the listener had
	// closed, it could be another's: a server started meanwhile finds it
	// stale, replaces it, and the new socket may have the same inode (the
	// file system reuses it). That server then went on, unreachable,
	// holding the journal.
	s.removeSocket()
	close(s.quit)
	s.working.Wait()
	s.hub.close() // event streams end: their requests return
	// Requests under way (a resolve, an approval, a run's last read by a
	// client that followed it) finish, for a moment; then what is left
	// is cut.
	shut, cancel := context.WithTimeout(ctx, shutdownWait)
	for _, srv := range s.servers {
		if srv.Shutdown(shut) != nil {
			srv.Close()
		}
	}
	cancel()
	s.serving.Wait()
	done := make(chan struct{})
	go func() {
		s.runs.Wait()
		close(done)
	}()
	grace := time.NewTimer(s.o.Grace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		s.logf("grace period over: aborting the calls still in flight")
		s.stopRuns(engine.ErrStopping)
	case <-ctx.Done():
		s.stopRuns(engine.ErrStopping)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// shutdownWait is how long Stop lets requests under way finish.
const shutdownWait = 2 * time.Second

// removeSocket removes the socket listened on if it is still there: not a
// file put in its place since.
func (s *Server) removeSocket() {
	if st, err := os.Lstat(s.o.Socket); err == nil && s.socket != nil && os.SameFile(st, s.socket) {
		os.Remove(s.o.Socket)
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.o.Logf != nil {
		s.o.Logf(format, args...)
	}
}

// authorized wraps h with the token check of a TCP listener: the header
// "Authorization: Bearer TOKEN", or the cookie the UI's login sets. The
// login page and the UI's static files need no token; a browser asking for
// a page without one is sent to the login page.
func (s *Server) authorized(h http.Handler) http.Handler {
	if s.o.Token == "" {
		return h
	}
	want := []byte("Bearer " + s.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" || (r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/ui/")) {
			h.ServeHTTP(w, r)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if t, ok := cookieToken(r); ok && len(got) == 0 {
			got = []byte("Bearer " + t)
		}
		if subtle.ConstantTimeCompare(got, want) != 1 {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/mcp" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", "a token is required: Authorization: Bearer TOKEN")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tokenCookie carries the token for a browser (see the UI's login).
const tokenCookie = "mcpflow_token"

// sameOrigin refuses a state-changing request a browser sends from another
// site: a form posted cross-site carries Sec-Fetch-Site: cross-site (or an
// Origin that is not this host). Clients that are not browsers send
// neither header.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		return o == "http://"+r.Host || o == "https://"+r.Host
	}
	return r.Header.Get("Origin") != "null"
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
