package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

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
}

// Options configures Connect.
type Options struct {
	// Self is the executable that serves builtin servers ("mcpflow
	// demo-server"). Default: os.Executable().
	Self string
	// Workspace is the directory builtin servers run in; logs go under
	// Workspace/.mcpflow/logs. Default: the current directory.
	Workspace string
	// Progress receives notifications/progress for calls made with a token.
	Progress func(token any, progress, total float64, message string)
}

// Session is a live connection to one server. It is safe for concurrent use.
type Session struct {
	server *Server
	cs     *mcp.ClientSession
	tap    *wireTap
	log    *os.File

	mu       sync.Mutex
	progress map[any]func(progress, total float64, message string)

	toolsMu sync.Mutex
	tools   map[string]Tool
}

// Connect starts (for stdio) and initializes a session with srv.
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
	s := &Session{server: srv, tap: newWireTap(), progress: map[any]func(float64, float64, string){}}
	cmd, err := s.command(o)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpflow", Version: Version}, &mcp.ClientOptions{
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
			s.toolsMu.Lock()
			s.tools = nil // rediscover on next use
			s.toolsMu.Unlock()
		},
	})
	transport := &wireTransport{inner: &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, tap: s.tap}
	if srv.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, srv.ConnectTimeout)
		defer cancel()
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		s.closeLog()
		return nil, fmt.Errorf("connect to server %q: %w%s", srv.Name, err, s.stderrTail())
	}
	s.cs = cs
	return s, nil
}

func (s *Session) command(o Options) (*exec.Cmd, error) {
	srv := s.server
	var cmd *exec.Cmd
	if srv.Builtin != "" {
		self := o.Self
		if self == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("server %q: find mcpflow's executable: %w", srv.Name, err)
			}
			self = exe
		}
		cmd = exec.Command(self, "demo-server")
		cmd.Dir = o.Workspace
	} else {
		cmd = exec.Command(srv.Command, srv.Args...)
		cmd.Dir = o.Workspace
		if srv.Cwd != "" {
			cmd.Dir = srv.Cwd
		}
	}
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(srv.Env))
	for k := range srv.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+os.ExpandEnv(srv.Env[k]))
	}
	setParentDeathSignal(cmd)
	logDir := filepath.Join(o.Workspace, ".mcpflow", "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("server %q: create log directory: %w", srv.Name, err)
	}
	f, err := os.OpenFile(filepath.Join(logDir, srv.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server %q: open log: %w", srv.Name, err)
	}
	s.log = f
	cmd.Stderr = f
	return cmd, nil
}

// stderrTail returns the end of the server's log, for error messages.
func (s *Session) stderrTail() string {
	if s.log == nil {
		return ""
	}
	b, err := os.ReadFile(s.log.Name())
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "\nserver stderr (" + s.log.Name() + "):\n" + strings.TrimRight(string(b), "\n")
}

func (s *Session) closeLog() {
	if s.log != nil {
		s.log.Close()
	}
}

// Server returns the configuration the session was made from.
func (s *Session) Server() *Server { return s.server }

// Tools lists the server's tools, following pagination, with annotations as
// declared. The listing is cached until the server says it changed.
func (s *Session) Tools(ctx context.Context) (map[string]Tool, error) {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if s.tools != nil {
		return s.tools, nil
	}
	tools := map[string]Tool{}
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools of server %q: %w", s.server.Name, err)
		}
		tool := Tool{Name: t.Name, Description: t.Description}
		if rt, ok := s.tap.raw(t.Name); ok {
			tool.Annotations, tool.InputSchema = rt.Annotations, rt.InputSchema
		}
		tools[t.Name] = tool
	}
	s.tools = tools
	return tools, nil
}

// Tool returns one tool, or an error naming the tools that exist.
func (s *Session) Tool(ctx context.Context, name string) (Tool, error) {
	tools, err := s.Tools(ctx)
	if err != nil {
		return Tool{}, err
	}
	if t, ok := tools[name]; ok {
		return t, nil
	}
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return Tool{}, fmt.Errorf("%w %q on server %q (it has: %s)", ErrUnknownTool, name, s.server.Name, strings.Join(names, ", "))
}

// Call sends one tools/call. meta is attached as _meta; progress, when not
// nil, receives the call's notifications/progress.
func (s *Session) Call(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, progress func(progress, total float64, message string)) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta}
	if progress != nil {
		token := fmt.Sprintf("%v", meta["io.mcpflow/idempotency-key"])
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
	return s.cs.CallTool(ctx, params)
}

// CallsSent is the number of tools/call requests this session wrote to the wire.
func (s *Session) CallsSent() int64 { return s.tap.calls.Load() }

// Close ends the session: stdin is closed, the server gets a moment to exit,
// then it is killed. Close is idempotent.
func (s *Session) Close() error {
	err := s.cs.Close()
	s.closeLog()
	return err
}
