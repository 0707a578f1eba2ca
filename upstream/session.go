package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpflow/mcpflow/internal/didyoumean"
	mcpmeta "github.com/mcpflow/mcpflow/internal/meta"
	"github.com/mcpflow/mcpflow/oauth"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is reported to servers as the client version.
var Version = "dev"

// Tool is a tool as discovered from a server.
type Tool struct {
	Name        string
	Description string
	// Annotations is the raw JSON of the tool's annotations exactly as the
	// server sent them; nil when the tool sent none.
	Annotations json.RawMessage
	InputSchema json.RawMessage
	// OutputSchema is the raw outputSchema, nil when the tool has none.
	OutputSchema json.RawMessage
}

// Options configures Connect.
type Options struct {
	// Self is the executable that serves builtin servers ("mcpflow
	// demo-server"). Default: os.Executable().
	Self string
	// Workspace is the directory stdio servers run in (unless their cwd
	// says otherwise) and that a relative cwd is relative to; their stderr
	// goes to Workspace/.mcpflow/logs/NAME.log. Default: the current
	// directory.
	Workspace string
	// Progress receives notifications/progress for calls made with a token.
	Progress func(token any, progress, total float64, message string)
	// HTTPClient is the base client of http and sse servers; each session
	// wraps its Transport to add the server's headers. Its Timeout must be
	// zero: responses stream. Default: the transport of the pool's Shared
	// (Pool.Share), whose connections the sessions of every pool given it
	// share; without one, a client of the session's own, with a clone of
	// http.DefaultTransport, whose idle connections Close closes.
	HTTPClient *http.Client
	// LookupEnv resolves ${VAR} references in the entry. Default
	// os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// CreateMessage answers the server's sampling/createMessage requests;
	// server is the entry's name. When it is set the session declares the
	// sampling capability (without tools); when it is nil it declares none
	// and refuses a server that asks anyway (ErrNoSampling). Its error goes
	// back to the server as the JSON-RPC error's message: it must hold no
	// secret.
	CreateMessage func(ctx context.Context, server string, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	// Logins keeps the logins of servers with oauth: (mcpflow servers
	// login). Default: oauth.DefaultStore().
	Logins *oauth.Store
	// Peer, when set, is the client the session stands in for (mcpflow
	// proxy): the session declares the peer's capabilities, and passes the
	// server's requests and notifications on to it (see Peer).
	// CreateMessage is then not used.
	Peer Peer
	// ListTools makes Connect list the server's tools (see
	// [Session.Tools]) while the session opens, beside logging/setLevel
	// and the standalone stream: one round trip less before the first
	// call of a session that calls tools. The first Tools call returns
	// the listing, or the error the server answered it with.
	ListTools bool

	// transport, when set, is the base transport of http and sse sessions
	// without an HTTPClient: that of the Shared the pool was given
	// (Pool.Share), whose Close closes its idle connections.
	transport *http.Transport
}

// DefaultConnectTimeout bounds starting and initializing a session whose
// configuration sets no connect_timeout (npx may download the server first).
const DefaultConnectTimeout = 60 * time.Second

// DefaultReconnectTimeout bounds reconnecting after a lost connection whose
// configuration sets no reconnect_timeout: long enough for a server that
// restarts after a crash to come back.
const DefaultReconnectTimeout = 30 * time.Second

// Session is a live connection to one server. It is safe for concurrent use.
type Session struct {
	server *Server
	cs     *mcp.ClientSession
	tap    *wireTap

	// stdio only
	cmd *exec.Cmd

	// The server's log: a stdio server's stderr, and every server's log
	// notifications (notifications/message). An http or sse server's log
	// is opened when its first message arrives.
	workspace string
	logPath   string
	logMu     sync.Mutex
	log       *os.File
	logClosed bool
	// stderr copies a stdio server's stderr into the log (nil for http
	// and sse); secrets are scrubbed from both (HoldSecrets).
	stderr  *stderrPump
	secrets secretSet
	// logInMeta: the server logs, and the protocol wants the log level in
	// each request's _meta.
	logInMeta bool

	// http and sse: the transport made for this session, if any
	ownHTTP *http.Transport
	// http and sse: the session's HTTP client, and the transport in it
	// that adds the server's headers
	hc     *http.Client
	header *headerTransport
	// streamable HTTP: the endpoint, and the standalone stream once
	// started (startStream)
	endpoint string
	stream   *standaloneStream

	mu       sync.Mutex
	progress map[any]func(progress, total float64, message string)
	// askers answer the server's requests during a call (WithAsker), by
	// call; a request goes to the one call in flight that has one.
	askers map[uint64]*Asker
	asks   uint64
	// completed has a channel per URL elicitation in flight, closed when
	// the server notifies its completion.
	completed map[string]chan struct{}
	// roots are the roots the session declares (fixed for the session).
	roots []*mcp.Root

	toolsMu sync.Mutex
	// tools is the last listing, shared with the sessions whose listing
	// was the same (sharedTools).
	tools      *toolList
	toolsStale atomic.Bool // the server said its tools changed
	listErr    error       // the listing at connect failed so (listTools); under toolsMu

	// inflight counts the calls in flight (the load a Shared balances);
	// idle, when set, is closed when it falls to zero (see Idle).
	inflight atomic.Int64
	idle     chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// InFlight is the number of requests of the session (tools/call,
// resources/read, prompts/get) that have not returned.
func (s *Session) InFlight() int64 { return s.inflight.Load() }

// Idle returns a channel closed once the session has no call in flight
// (at once when it has none now).
func (s *Session) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight.Load() == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

// callDone counts a call out of InFlight and wakes Idle's waiters at zero.
func (s *Session) callDone() {
	if s.inflight.Add(-1) != 0 {
		return
	}
	s.mu.Lock()
	if s.idle != nil && s.inflight.Load() == 0 {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// terminateDuration is how long Close waits for a stdio server to exit
// after its stdin closed, before it is sent SIGTERM (and later killed).
const terminateDuration = 500 * time.Millisecond

// httpReconnects bounds go-sdk's GET reconnects on streamable HTTP (of the
// standalone stream, and of a call's response stream with Last-Event-ID,
// which re-sends nothing). POSTs are never re-sent: neither go-sdk nor
// net/http retries a POST. Kept low so that a dead server breaks the
// session within seconds rather than after ~22 s.
const httpReconnects = 2

// Connect starts (for stdio) or reaches (for http and sse) srv and
// initializes a session. ${VAR} references in the entry are expanded here;
// an unset variable is an error wrapping ErrUnsetVariable. Every transport
// goes through the wire tap, so [Tool.Annotations] are as declared and
// [Session.CallsSent] counts tools/call requests on all of them.
func Connect(ctx context.Context, srv *Server, opts *Options) (*Session, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := srv.Validate(); err != nil {
		return nil, err
	}
	if o.Workspace == "" {
		o.Workspace = "."
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	o.LookupEnv = srv.lookup(o.LookupEnv)
	roots, err := srv.roots(o.Workspace)
	if err != nil {
		return nil, err
	}
	s := &Session{server: srv, tap: newWireTap(), progress: map[any]func(float64, float64, string){},
		workspace: o.Workspace, logPath: filepath.Join(logDir(o.Workspace), logName(srv.Name))}
	s.tap.secrets = &s.secrets
	inner, err := s.transport(o)
	if err != nil {
		s.release()
		return nil, err
	}
	copts := &mcp.ClientOptions{
		// Roots are declared even when there are none (roots: []): a
		// server that confines itself to its roots then refuses every
		// path instead of falling back to its own. They are fixed for the
		// session: no list_changed. Elicitation is declared in form and
		// URL mode (see ElicitationHandler).
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		// Every journaled attempt must put exactly one tools/call on the wire.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			p := req.Params
			s.mu.Lock()
			f := s.progress[p.ProgressToken]
			s.mu.Unlock()
			if f != nil {
				f(p.Progress, p.Total, p.Message)
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			// Rediscover on next use. No lock: this may run on the
			// connection's reader while Tools waits for a page.
			s.toolsStale.Store(true)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			s.logMessage(req.Params)
		},
		// Declared: a call's elicitation is answered by its step or an
		// operator (multi-round-trip requests carry it in the result;
		// older protocols ask during the call), in form mode and in URL
		// mode (the operator is shown the URL; the server's completion
		// notification, or the operator, says it is done).
		ElicitationHandler:         s.elicit,
		ElicitationCompleteHandler: s.elicitationComplete,
		// Declared only with a provider (Options.CreateMessage), which
		// go-sdk adds to Capabilities; without one, refuseSampling answers.
		CreateMessageHandler: s.sample(o.CreateMessage),
	}
	if o.Peer != nil {
		s.peerOptions(o.Peer, copts)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpflow", Version: Version}, copts)
	switch {
	case o.Peer != nil:
		client.AddReceivingMiddleware(peerRequests(o.Peer))
	case o.CreateMessage == nil:
		client.AddReceivingMiddleware(refuseSampling)
	}
	client.AddReceivingMiddleware(s.tap.countHandled)
	client.AddRoots(roots...) // before Connect: no session to notify
	s.roots = roots
	transport := &wireTransport{inner: inner, tap: s.tap}
	if _, ok := inner.(*mcp.StreamableClientTransport); ok {
		// Requests after initialize carry the negotiated version, and the
		// standalone stream (startStream) reaches go-sdk through the tap.
		transport.merge = true
		s.tap.initialized = s.header.setProtocol
	}
	timeout := srv.ConnectTimeout
	if timeout == 0 {
		timeout = DefaultConnectTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var sopts *mcp.ClientSessionOptions
	if o.Peer != nil {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: o.Peer.ProtocolVersion()}
	}
	cs, err := client.Connect(cctx, transport, sopts)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = fmt.Errorf("no answer to initialize within %s (set connect_timeout on the server to wait longer): %w", timeout, err)
	}
	if err != nil {
		transport.closeConn() // go-sdk does not close it on every failure path
		s.stopStderr()        // the server's last words reach its log
		tail := s.stderrTail()
		s.release()
		return nil, fmt.Errorf("connect to server %q (%s): %w%s%s", srv.Name, srv.Transport(), err, tail, authHint(srv, err))
	}
	s.cs = cs
	activeSessions.Add(1)
	opened := func() {}
	if transport.merge {
		s.header.setProtocol(s.ProtocolVersion())
		transport.mu.Lock()
		conn := transport.conn
		transport.mu.Unlock()
		opened = s.startStream(cctx, conn)
	}
	// logging/setLevel and tools/list go while the stream's GET waits
	// for its answer: two round trips less before the first call.
	listed := s.listTools(cctx, o.ListTools)
	s.askForLogs(cctx)
	opened()
	listed()
	return s, nil
}

// transport builds the go-sdk transport for the server's kind.
func (s *Session) transport(o Options) (mcp.Transport, error) {
	srv := s.server
	if srv.Transport() == TransportStdio {
		cmd, err := s.command(o)
		if err != nil {
			return nil, err
		}
		s.cmd = cmd
		return &stdioTransport{cmd: cmd, terminate: terminateDuration, maxSize: int(srv.maxMessageSize())}, nil
	}
	endpoint, err := srv.expand("url", srv.URL, o.LookupEnv)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, k := range sortedKeys(srv.Headers) {
		v, err := srv.expand(placeKey("headers", k), srv.Headers[k], o.LookupEnv)
		if err != nil {
			return nil, err
		}
		headers.Set(k, v)
	}
	hc := s.httpClient(o, endpoint, headers)
	s.hc = hc
	if srv.Transport() == TransportSSE {
		return &detachedTransport{inner: &mcp.SSEClientTransport{Endpoint: endpoint, HTTPClient: hc}}, nil
	}
	s.endpoint = endpoint
	if srv.OAuth != nil {
		cfg, err := srv.OAuthConfig(o.Workspace, o.LookupEnv)
		if err != nil {
			return nil, err
		}
		store := o.Logins
		if store == nil {
			if store, err = oauth.DefaultStore(); err != nil {
				return nil, err
			}
		}
		// The session's requests carry the token, renewed as needed (the
		// standalone stream's GET too); the authorization server gets
		// none of the server's headers.
		hc.Transport = oauth.Transport(hc.Transport, srv.Name, endpoint, cfg, store, o.HTTPClient)
	}
	return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: httpReconnects}, nil
}

func (s *Session) command(o Options) (*exec.Cmd, error) {
	srv := s.server
	expand := func(what, v string) (string, error) { return srv.expand(what, v, o.LookupEnv) }
	args := make([]string, len(srv.Args))
	for i, a := range srv.Args {
		var err error
		if args[i], err = expand(fmt.Sprintf("args[%d]", i), a); err != nil {
			return nil, err
		}
	}
	self := o.Self
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("server %q: find mcpflow's executable: %w", srv.Name, err)
		}
		self = exe
	}
	var cmd *exec.Cmd
	if srv.Builtin != "" {
		cmd = exec.Command(self, append([]string{"demo-server"}, args...)...)
	} else {
		name, err := expand("command", srv.Command)
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = o.Workspace
	if srv.Cwd != "" {
		dir, err := expand("cwd", srv.Cwd)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(o.Workspace, dir)
		}
		cmd.Dir = dir
	}
	if srv.Builtin != "" {
		cmd.Env = os.Environ() // mcpflow's own demo server: mcpflow itself
	} else {
		cmd.Env = defaultEnv()
	}
	if srv.EnvFile != "" {
		path, err := expand("env_file", srv.EnvFile)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(o.Workspace, path)
		}
		vars, err := readEnvFile(path)
		if err != nil {
			return nil, fmt.Errorf("server %q: env_file: %w", srv.Name, err)
		}
		for _, k := range sortedKeys(vars) {
			if _, own := srv.Env[k]; !own {
				cmd.Env = append(cmd.Env, k+"="+vars[k])
			}
		}
	}
	for _, k := range sortedKeys(srv.Env) {
		v, err := expand(placeKey("env", k), srv.Env[k])
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if srv.Builtin == "" {
		// Every process the server starts ends with it (Supervise).
		cmd = supervised(cmd, self)
	}
	setParentDeathSignal(cmd)
	f, err := openLog(o.Workspace, srv.Name)
	if err != nil {
		return nil, err
	}
	s.log = f // not yet shared: the connection starts later
	pump, err := newStderrPump(&s.secrets, s.appendLog)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", srv.Name, err)
	}
	s.stderr = pump
	cmd.Stderr = pump.w
	return cmd, nil
}

// DefaultEnv lists the variables a command server inherits from mcpflow's
// environment, as the official MCP SDKs do; everything else it gets only
// when its configuration's env names it.
var DefaultEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"}

func defaultEnv() []string {
	var out []string
	for _, k := range DefaultEnv {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// authHint says what to do when an HTTP server refused mcpflow for want of
// authorization: mcpflow does not do OAuth; a token goes in a header.
func authHint(srv *Server, err error) string {
	if srv.URL == "" || err == nil {
		return ""
	}
	msg := err.Error()
	if srv.OAuth != nil || !strings.Contains(msg, "Unauthorized") && !strings.Contains(msg, "Forbidden") && !strings.Contains(msg, "401") && !strings.Contains(msg, "403") {
		return ""
	}
	return fmt.Sprintf(" (the server wants authorization: add oauth: to server %q and log in with mcpflow servers login %s, or give it oauth: {grant: client_credentials, client_id: …, client_secret: ${SECRET}}; or pass a token in a header from an environment variable, e.g. headers: {Authorization: \"Bearer ${TOKEN}\"})", srv.Name, srv.Name)
}

// logName is a safe file name for a server's log: names from imported
// files may hold any character, including / and "..".
func logName(server string) string {
	b := []byte(server)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b) + ".log"
}

// LogPath is the server's log file: a stdio server's stderr goes there,
// and every server's log notifications, one line each (an http or sse
// server's file exists once its first message arrived).
func (s *Session) LogPath() string { return s.logPath }

// PID is the process id of a stdio server; 0 for http and sse servers.
func (s *Session) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// stderrTail returns the end of a stdio server's log, for error messages.
func (s *Session) stderrTail() string {
	if s.cmd == nil {
		return ""
	}
	b, err := os.ReadFile(s.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "\nserver stderr (" + s.logPath + "):\n" + strings.TrimRight(string(b), "\n")
}

// stopStderr closes a stdio server's stderr pump, once the server has
// exited: what it wrote is in the log when it returns.
func (s *Session) stopStderr() {
	if s.stderr != nil {
		s.stderr.close()
	}
}

// release frees what a session holds besides its MCP connection, once the
// server has exited (or was never started).
func (s *Session) release() {
	s.stopStream()
	s.stopStderr()
	s.logMu.Lock()
	if s.log != nil {
		s.log.Close()
	}
	s.logClosed = true
	s.logMu.Unlock()
	if s.ownHTTP != nil {
		s.ownHTTP.CloseIdleConnections()
	}
}

// Server returns the configuration the session was made from.
func (s *Session) Server() *Server { return s.server }

// Tools lists the server's tools, following pagination, with annotations as
// declared. The listing is cached until the server says it changed. The
// map is shared with other sessions whose listing was the same: callers
// must not change it.
func (s *Session) Tools(ctx context.Context) (map[string]Tool, error) {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if s.tools != nil && !s.toolsStale.Load() {
		return s.tools.tools, nil
	}
	if err := s.listErr; err != nil {
		s.listErr = nil // the next call asks again
		return nil, err
	}
	s.toolsStale.Store(false) // a change announced from now on relists again
	tools := map[string]Tool{}
	s.tap.forgetTools() // nothing from an earlier listing may leak into this one
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools of server %q: %w", s.server.Name, err)
		}
		if ok, _ := s.server.Allows(t.Name); !ok {
			continue // the configuration excludes it: not listed, never called
		}
		tool := Tool{Name: t.Name, Description: t.Description}
		if rt, ok := s.tap.raw(t.Name); ok {
			tool.Annotations, tool.InputSchema, tool.OutputSchema = rt.Annotations, rt.InputSchema, rt.OutputSchema
		}
		tools[t.Name] = tool
	}
	s.tap.forgetTools() // the listing is in tools now
	s.tools = sharedTools(tools)
	return s.tools.tools, nil
}

// listTools starts listing the server's tools when want is set and the
// server declares tools, and returns a func that waits for the listing.
// Its error is the first Tools call's.
func (s *Session) listTools(ctx context.Context, want bool) (wait func()) {
	res := s.cs.InitializeResult()
	if !want || res == nil || res.Capabilities == nil || res.Capabilities.Tools == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := s.Tools(ctx); err != nil && ctx.Err() == nil {
			// The server's own answer: the first Tools call reports it
			// rather than ask again. (Past the connect's deadline, it
			// lists again under its own context.)
			s.toolsMu.Lock()
			s.listErr = err
			s.toolsMu.Unlock()
		}
	}()
	return func() { <-done }
}

// Tool returns one tool, or an error naming the tools that exist (and the
// one likely meant, for a typo).
func (s *Session) Tool(ctx context.Context, name string) (Tool, error) {
	tools, err := s.Tools(ctx)
	if err != nil {
		return Tool{}, err
	}
	if t, ok := tools[name]; ok {
		return t, nil
	}
	if ok, why := s.server.Allows(name); !ok {
		return Tool{}, fmt.Errorf("%w %q: %s", ErrUnknownTool, name, why)
	}
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	if guess := didyoumean.Closest(name, names); guess != "" {
		return Tool{}, fmt.Errorf("%w %q on server %q (did you mean %q? it has: %s)", ErrUnknownTool, name, s.server.Name, guess, strings.Join(names, ", "))
	}
	return Tool{}, fmt.Errorf("%w %q on server %q (it has: %s)", ErrUnknownTool, name, s.server.Name, strings.Join(names, ", "))
}

// Call sends one tools/call. meta is attached as _meta (with the log level
// asked for, on a server that logs under protocol 2026-07-28); progress,
// when not nil, receives the call's notifications/progress. The server's
// CallTimeout, if set, bounds the call: it then fails with
// context.DeadlineExceeded, and the tool may have run.
func (s *Session) Call(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, progress func(progress, total float64, message string)) (*mcp.CallToolResult, error) {
	return s.call(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta}, progress)
}

// Continued is what a continued call carries besides its arguments (MCP
// multi-round-trip requests, protocol 2026-07-28): the answers to the
// server's input requests (an inputResponses object) and the requestState
// it asked to have echoed.
type Continued struct {
	Responses json.RawMessage
	State     string
}

// Continue sends tools/call again with the answers to the input a result
// asked for (see [mcp.CallToolResult.NeedsInput]), under the same _meta:
// one tools/call on the wire, like Call.
func (s *Session) Continue(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, c Continued, progress func(progress, total float64, message string)) (*mcp.CallToolResult, error) {
	var responses mcp.InputResponseMap
	if err := json.Unmarshal(c.Responses, &responses); err != nil {
		return nil, fmt.Errorf("continue tools/call %s: the journaled answers are not input responses: %w", tool, err)
	}
	return s.call(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta, InputResponses: responses, RequestState: c.State}, progress)
}

func (s *Session) call(ctx context.Context, params *mcp.CallToolParams, progress func(progress, total float64, message string)) (*mcp.CallToolResult, error) {
	tool, meta := params.Name, params.Meta
	s.inflight.Add(1)
	defer s.callDone()
	if a, ok := ctx.Value(askerKey{}).(*Asker); ok {
		s.mu.Lock()
		if s.askers == nil {
			s.askers = map[uint64]*Asker{}
		}
		s.asks++
		n := s.asks
		s.askers[n] = a
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.askers, n)
			s.mu.Unlock()
		}()
	}
	if s.logInMeta {
		m := make(map[string]any, len(meta)+1)
		maps.Copy(m, meta)
		m[mcpmeta.LogLevel] = LogLevel
		params.Meta = m
	}
	if progress != nil {
		token := fmt.Sprintf("%v", meta[mcpmeta.IdempotencyKey])
		if token == "<nil>" {
			token = tool
		}
		params.SetProgressToken(token)
		s.mu.Lock()
		s.progress[token] = progress
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.progress, token)
			s.mu.Unlock()
		}()
	}
	if t := s.server.CallTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	res, err := s.cs.CallTool(ctx, params)
	if err == nil {
		// What the server said before its answer (progress, log
		// messages) is handled before the answer is used.
		s.tap.afterNotifications(time.Second)
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// go-sdk tells the server (notifications/cancelled) from a
		// goroutine, after returning: Close waits for it.
		s.tap.owe()
	}
	if err != nil && s.tap.tooLarge.Load() {
		return nil, fmt.Errorf("%w: server %q answered with a message larger than %s (raise max_message_size on the server): %v", ErrResultTooLarge, s.server.Name, sizeText(s.server.maxMessageSize()), err)
	}
	return res, err
}

// CallsSent is the number of tools/call requests this session wrote to the wire.
func (s *Session) CallsSent() int64 { return s.tap.calls.Load() }

// activeSessions counts the sessions connected and not yet closed in this
// process.
var activeSessions atomic.Int64

// ActiveSessions is the number of server sessions open in this process.
func ActiveSessions() int { return int(activeSessions.Load()) }

// ID is the MCP session id the server assigned (Streamable HTTP), or "".
func (s *Session) ID() string { return s.cs.ID() }

// ProtocolVersion is the MCP protocol version the server agreed to at
// initialize, or "" when it is not known.
func (s *Session) ProtocolVersion() string {
	if res := s.cs.InitializeResult(); res != nil {
		return res.ProtocolVersion
	}
	return ""
}

// Transport is the session's transport: stdio, http or sse.
func (s *Session) Transport() string { return s.server.Transport() }

// cancelGrace bounds how long Close waits for the notifications/cancelled
// of calls that were cancelled just before it (go-sdk writes them from a
// goroutine, after the call returned).
const cancelGrace = time.Second

// Close ends the session. The server is first told of every call that was
// cancelled (notifications/cancelled, within cancelGrace): a session closed
// the moment a cancelled call returns (Ctrl-C, runs cancel) does not leave
// the server to find out only from the end of its input. Then a stdio
// server has its stdin closed, gets half a second to exit, then SIGTERM and
// two seconds, then SIGKILL; it has been reaped when Close returns. An http
// session ends with a DELETE of its session, an sse session by closing its
// stream. Close is idempotent.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		activeSessions.Add(-1)
		s.tap.awaitCancels(cancelGrace)
		// The stream first: the server ends it once the session is
		// deleted, and it is not to be reconnected.
		s.stopStream()
		s.closeErr = s.cs.Close()
		s.release()
	})
	return s.closeErr
}

// Asker answers what a server asks during a call (protocols without
// multi-round-trip requests), bounded by the call's own context.
type Asker struct {
	// Elicit answers an elicitation: from the step, or by waiting for an
	// operator. For a URL elicitation, completed is closed when the server
	// notifies that the interaction at the URL is complete (nil in form
	// mode).
	Elicit func(ctx context.Context, params *mcp.ElicitParams, completed <-chan struct{}) (*mcp.ElicitResult, error)
	// Sample answers a sampling/createMessage (journaled with the call,
	// approved when asked); nil: the session's CreateMessage hook does.
	Sample func(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
}

type askerKey struct{}

// WithAsker returns ctx carrying a: a call made with it has what its
// server asks during it answered by a.
func WithAsker(ctx context.Context, a *Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// askerNow is the asker of the one call in flight on the session; with
// none or several in flight it says why there is none (the protocol does
// not say which call a request belongs to: it is refused, not guessed).
func (s *Session) askerNow(what string) (*Asker, error) {
	s.mu.Lock()
	var a *Asker
	n := len(s.askers)
	for _, f := range s.askers {
		a = f
	}
	s.mu.Unlock()
	// A read, a prompt or a call without an asker in flight beside the
	// call could be the one asking, on a session runs share: several.
	if inflight := int(s.inflight.Load()); n == 1 && inflight > 1 {
		n = inflight
	}
	switch {
	case n == 0:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcpflow answers " + what + " only during a tools/call of a workflow step"}
	case n > 1:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcpflow has %d calls in flight on this session and cannot tell which one asks; a server that asks during a call should use multi-round-trip requests (protocol 2026-07-28)", n)}
	}
	return a, nil
}

// elicit hands a server's elicitation/create to the asker of the one call
// in flight on the session.
func (s *Session) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a, err := s.askerNow("elicitation")
	if err != nil {
		return nil, err
	}
	var completed chan struct{}
	if id := req.Params.ElicitationID; id != "" && req.Params.Mode == "url" {
		completed = make(chan struct{})
		s.mu.Lock()
		if s.completed == nil {
			s.completed = map[string]chan struct{}{}
		}
		s.completed[id] = completed
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.completed, id)
			s.mu.Unlock()
		}()
	}
	res, err := a.Elicit(ctx, req.Params, completed)
	if err == nil && res != nil && res.Action == "accept" && res.Content == nil &&
		req.Params.Mode != "url" && req.Params.RequestedSchema != nil {
		// An answer that accepts without fields (a step's elicit: {})
		// takes the schema's defaults (SEP-1034): go-sdk applies them to
		// content it has, and would send none.
		res.Content = map[string]any{}
	}
	return res, err
}

// sample hands a server's sampling/createMessage to the asker of the one
// call in flight on the session, which journals it with the call; hook
// answers one made outside a call (it refuses: see package service).
func (s *Session) sample(hook func(context.Context, string, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)) func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	if hook == nil {
		return nil
	}
	return func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		if a, err := s.askerNow("sampling"); err == nil && a.Sample != nil {
			return a.Sample(ctx, req.Params)
		}
		return hook(ctx, s.server.Name, req.Params)
	}
}

// elicitationComplete hands the server's notice that a URL elicitation is
// complete to the call that waits for it.
func (s *Session) elicitationComplete(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.completed[req.Params.ElicitationID]; ok {
		close(ch)
		delete(s.completed, req.Params.ElicitationID)
	}
}

// Roots is the roots/list answer of the session: the roots it declares.
func (s *Session) Roots() *mcp.ListRootsResult {
	return &mcp.ListRootsResult{Roots: append([]*mcp.Root{}, s.roots...)}
}
