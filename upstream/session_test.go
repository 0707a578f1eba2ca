package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

// declaredAnnotations is what servers/demo/tools.go declares, byte for byte
// as it goes on the wire; "" means no annotations object at all.
var declaredAnnotations = map[string]string{
	"greet":              `{"readOnlyHint":true}`,
	"upper":              `{"idempotentHint":true}`,
	"ledger_append":      ``,
	"put_record":         `{"destructiveHint":true,"idempotentHint":true}`,
	"not_idempotent":     `{"idempotentHint":false}`,
	"contradictory_read": `{"readOnlyHint":true,"idempotentHint":false}`,
	"ledger_count":       `{"readOnlyHint":true,"destructiveHint":false}`,
	"count_slowly":       `{"readOnlyHint":true}`,
	"fail":               `{"readOnlyHint":true}`,
	"media":              `{"readOnlyHint":true}`,
	"log":                `{"readOnlyHint":true}`,
	"transfer":           `{"destructiveHint":true,"idempotentHint":false}`,
	"roots":              `{"readOnlyHint":true}`,
}

// serveDemoHTTP runs the demo server in-process for cfg (HTTPAddr or
// SSEAddr set) and returns the URL from its "listening on" line. Cleanup
// stops it and waits for Serve to return.
func serveDemoHTTP(t *testing.T, cfg demo.Config) string {
	t.Helper()
	url, _ := startDemoHTTP(t, cfg)
	return url
}

// startDemoHTTP is serveDemoHTTP, with a func that stops the server before
// the test ends (a server that goes down, to be started again on its
// address); cleanup stops it if the test did not.
func startDemoHTTP(t *testing.T, cfg demo.Config) (url string, stop func()) {
	t.Helper()
	if cfg.Ledger == "" {
		cfg.Ledger = filepath.Join(t.TempDir(), "ledger.jsonl")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- demo.Serve(ctx, cfg, strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("demo.Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("demo.Serve did not return after cancel")
			}
			for range lines {
			}
		})
	}
	t.Cleanup(stop)
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			t.Fatalf("demo server said %q, want \"listening on …\"", line)
		}
		return url, stop
	case err := <-done:
		t.Fatalf("demo.Serve returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("demo server did not say where it listens")
	}
	return "", stop
}

// wireCounter is the base RoundTripper of test sessions: it counts the
// JSON-RPC methods of the POSTs that reach the network and keeps the last
// request's headers.
type wireCounter struct {
	base http.RoundTripper

	mu      sync.Mutex
	posts   map[string]int
	headers http.Header
}

func newWireCounter(t *testing.T) *wireCounter {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &wireCounter{base: tr, posts: map[string]int{}}
}

func (c *wireCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.headers = req.Header.Clone()
	c.mu.Unlock()
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		var msg struct {
			Method string `json:"method"`
		}
		json.Unmarshal(body, &msg)
		c.mu.Lock()
		c.posts[msg.Method]++
		c.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return c.base.RoundTrip(req)
}

func (c *wireCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.posts[method]
}

func (c *wireCounter) header(k string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.headers.Get(k)
}

func connect(t *testing.T, srv *Server, opts *Options) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, srv, opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// connectDemo connects to srv, a demo server, with ws as the workspace
// (its log under ws/.mcpflow/logs) and the ledger in ws.
func connectDemo(t *testing.T, srv *Server, ws string) *Session {
	t.Helper()
	return connect(t, srv, &Options{Self: self(t), Workspace: ws, LookupEnv: func(k string) (string, bool) {
		if k == "MCPFLOW_DEMO_LEDGER" {
			return filepath.Join(ws, "ledger.jsonl"), true
		}
		return "", false
	}})
}

// checkDiscovery lists the tools and compares their annotations with what
// the demo declares, byte for byte.
func checkDiscovery(t *testing.T, s *Session) map[string]Tool {
	t.Helper()
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != len(declaredAnnotations) {
		t.Errorf("found %d tools, want %d: %v", len(tools), len(declaredAnnotations), keys(tools))
	}
	for name, want := range declaredAnnotations {
		tool, ok := tools[name]
		if !ok {
			t.Errorf("tool %s not discovered", name)
			continue
		}
		if got := string(tool.Annotations); got != want {
			t.Errorf("tool %s annotations = %s, want %s (as declared)", name, orNone(got), orNone(want))
		}
		if len(tool.InputSchema) == 0 {
			t.Errorf("tool %s has no input schema", name)
		}
	}
	return tools
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func keys[V any](m map[string]V) []string { return sortedKeys(m) }

// callGreet calls greet and checks the answer and that exactly one
// tools/call went on the wire for it.
func callGreet(t *testing.T, s *Session, who string) {
	t.Helper()
	before := s.CallsSent()
	res, err := s.Call(context.Background(), "greet", json.RawMessage(`{"name":"`+who+`"}`), nil, nil)
	if err != nil {
		t.Fatalf("greet: %v", err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("greet result = %+v", res)
	}
	if got, want := res.Content[0].(*mcp.TextContent).Text, "Hello, "+who+"!"; got != want {
		t.Errorf("greet said %q, want %q", got, want)
	}
	if got := s.CallsSent() - before; got != 1 {
		t.Errorf("CallsSent grew by %d for one call, want 1", got)
	}
}

func TestConnectStreamableHTTP(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})
	wire := newWireCounter(t)
	srv := &Server{Name: "remote", URL: url, Headers: map[string]string{
		"Authorization": "Bearer ${DEMO_TOKEN}",
		"X-Tenant":      "${DEMO_TENANT:-acme}",
	}}
	env := map[string]string{"DEMO_TOKEN": "s3cret"}
	s := connect(t, srv, &Options{
		HTTPClient: &http.Client{Transport: wire},
		LookupEnv:  func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if want := filepath.Join(".mcpflow", "logs", "remote.log"); s.PID() != 0 || s.LogPath() != want {
		t.Errorf("http session: PID %d, LogPath %q; want 0 and %q", s.PID(), s.LogPath(), want)
	}
	if _, err := os.Stat(s.LogPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an http server's log exists before any message: %v", err)
	}
	checkDiscovery(t, s)
	callGreet(t, s, "http")
	callGreet(t, s, "again")
	if got := wire.count("tools/call"); got != 2 {
		t.Errorf("%d tools/call POSTs reached the network for 2 calls, want 2", got)
	}
	if got := wire.header("Authorization"); got != "Bearer s3cret" {
		t.Errorf("Authorization header = %q, want the expanded ${DEMO_TOKEN}", got)
	}
	if got := wire.header("X-Tenant"); got != "acme" {
		t.Errorf("X-Tenant header = %q, want the default acme", got)
	}
}

func TestConnectSSE(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{SSEAddr: "127.0.0.1:0"})
	wire := newWireCounter(t)
	srv := &Server{Name: "legacy", URL: url, Type: "sse", Headers: map[string]string{"X-Test": "yes"}, ConnectTimeout: 10 * time.Second}
	if srv.Transport() != "sse" {
		t.Fatalf("Transport() = %q", srv.Transport())
	}
	// The connect context ends right after Connect: the session must not
	// depend on it (go-sdk's SSE client would tie its stream to it).
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Connect(ctx, srv, &Options{HTTPClient: &http.Client{Transport: wire}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	time.Sleep(50 * time.Millisecond) // let a wrongly tied stream notice the cancel
	checkDiscovery(t, s)
	callGreet(t, s, "sse")
	if got := wire.count("tools/call"); got != 1 {
		t.Errorf("%d tools/call POSTs reached the network for 1 call, want 1", got)
	}
	if got := wire.header("X-Test"); got != "yes" {
		t.Errorf("X-Test header = %q, want yes", got)
	}
}

func TestConnectStdioBuiltin(t *testing.T) {
	ws := t.TempDir()
	srv := &Server{Name: "demo", Builtin: "demo", Env: map[string]string{"MCPFLOW_DEMO_LEDGER": "${LEDGER_DIR}/ledger.jsonl"}}
	s := connect(t, srv, &Options{
		Self:      self(t),
		Workspace: ws,
		LookupEnv: func(k string) (string, bool) {
			if k == "LEDGER_DIR" {
				return ws, true
			}
			return "", false
		},
	})
	checkDiscovery(t, s)
	callGreet(t, s, "stdio")
	if want := filepath.Join(ws, ".mcpflow", "logs", "demo.log"); s.LogPath() != want {
		t.Errorf("LogPath() = %q, want %q", s.LogPath(), want)
	} else if _, err := os.Stat(want); err != nil {
		t.Errorf("log file: %v", err)
	}
	if s.PID() <= 0 {
		t.Errorf("PID() = %d for a stdio server", s.PID())
	}
	if _, err := os.Stat(filepath.Join(ws, "ledger.jsonl")); err != nil {
		t.Errorf("the ledger is not where env said (${LEDGER_DIR} expanded): %v", err)
	}
}

// TestDiscoveryPages lists tools two per page on every transport: all
// are found, annotations intact.
func TestDiscoveryPages(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		wire := newWireCounter(t)
		url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", PageSize: 2})
		s := connect(t, &Server{Name: "paged", URL: url}, &Options{HTTPClient: &http.Client{Transport: wire}})
		checkDiscovery(t, s)
		// The sample tool, not listed to a client without sampling, still
		// takes its place on a page.
		if got, want := wire.count("tools/list"), (len(declaredAnnotations)+1+1)/2; got != want {
			t.Errorf("%d tools/list requests, want %d pages of at most 2", got, want)
		}
	})
	t.Run("sse", func(t *testing.T) {
		url := serveDemoHTTP(t, demo.Config{SSEAddr: "127.0.0.1:0", PageSize: 2})
		s := connect(t, &Server{Name: "paged", URL: url, Type: "sse"}, nil)
		checkDiscovery(t, s)
	})
	t.Run("stdio", func(t *testing.T) {
		ws := t.TempDir()
		s := connect(t, &Server{Name: "paged", Builtin: "demo", Env: map[string]string{"MCPFLOW_DEMO_PAGE_SIZE": "2"}}, &Options{Self: self(t), Workspace: ws})
		checkDiscovery(t, s)
	})
	t.Run("stdio-args", func(t *testing.T) {
		ws := t.TempDir()
		s := connect(t, &Server{Name: "paged", Builtin: "demo", Args: []string{"--page-size", "2", "--ledger", filepath.Join(ws, "l.jsonl")}}, &Options{Self: self(t), Workspace: ws})
		checkDiscovery(t, s)
	})
}

// TestUnknownTool: an unknown tool is an ErrUnknownTool naming the tools
// the server has, and the one likely meant when the name is a typo.
func TestUnknownTool(t *testing.T) {
	s := connect(t, &Server{Name: "demo", URL: serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})}, nil)
	for _, tc := range []struct{ name, want string }{
		{"gret", `unknown tool "gret" on server "demo" (did you mean "greet"? it has: contradictory_read, count_slowly, fail, greet, `},
		{"no_such_tool", `unknown tool "no_such_tool" on server "demo" (it has: contradictory_read, `},
	} {
		_, err := s.Tool(context.Background(), tc.name)
		if !errors.Is(err, ErrUnknownTool) || !strings.HasPrefix(fmt.Sprint(err), tc.want) {
			t.Errorf("Tool(%q) = %v, want an ErrUnknownTool starting %q", tc.name, err, tc.want)
		}
	}
}

func TestConnectUnsetVariable(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, srv := range []*Server{
		{Name: "h", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer ${NO_SUCH_TOKEN}"}},
		{Name: "u", URL: "http://${NO_SUCH_HOST}/mcp"},
		{Name: "e", Command: "true", Env: map[string]string{"K": "${NO_SUCH_VAR}"}},
	} {
		_, err := Connect(context.Background(), srv, &Options{Workspace: t.TempDir(), LookupEnv: none})
		if !errors.Is(err, ErrUnsetVariable) {
			t.Errorf("server %s: err = %v, want ErrUnsetVariable", srv.Name, err)
		} else if !strings.Contains(err.Error(), "NO_SUCH_") || !strings.Contains(err.Error(), "server \""+srv.Name+"\"") {
			t.Errorf("server %s: error %q should name the server and the variable", srv.Name, err)
		}
	}
}

func TestConnectFailureShowsStderr(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	ws := t.TempDir()
	srv := &Server{Name: "broken/../x", Command: "sh", Args: []string{"-c", "echo boom-from-server >&2; exit 3"}}
	_, err := Connect(context.Background(), srv, &Options{Workspace: ws})
	if err == nil {
		t.Fatal("Connect to a server that exits succeeded")
	}
	if !strings.Contains(err.Error(), "boom-from-server") {
		t.Errorf("error %q does not show the server's stderr", err)
	}
	// The name is made safe for the file system: no escape from logs/.
	if _, err := os.Stat(filepath.Join(ws, ".mcpflow", "logs", "broken_.._x.log")); err != nil {
		t.Errorf("log file: %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})
	s := connect(t, &Server{Name: "slow", URL: url, CallTimeout: 100 * time.Millisecond}, nil)
	start := time.Now()
	_, err := s.Call(context.Background(), "count_slowly", json.RawMessage(`{"n":10,"delay_ms":50}`), nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded from call_timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("call_timeout of 100ms took %v", d)
	}
	if s.CallsSent() != 1 {
		t.Errorf("CallsSent = %d, want 1", s.CallsSent())
	}
}

// TestPoolCloseStopsServers: after Pool.Close, no demo server started by
// the pool is left running (nor unreaped).
func TestPoolCloseStopsServers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ws := t.TempDir()
	pool := NewPool(Set{
		"a": {Name: "a", Builtin: "demo"},
		"b": {Name: "b", Builtin: "demo"},
	}, &Options{Self: self(t), Workspace: ws})
	var pids []int
	for _, name := range []string{"a", "b"} {
		s, err := pool.Session(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		callGreet(t, s, name)
		pids = append(pids, s.PID())
	}
	// A reconnect stops the old process too.
	old, _ := pool.Session(context.Background(), "a")
	s, err := pool.Reconnect(context.Background(), "a", old)
	if err != nil {
		t.Fatal(err)
	}
	if alive(pids[0]) {
		t.Errorf("server process %d still exists after Reconnect", pids[0])
	}
	pids = append(pids, s.PID())
	start := time.Now()
	if err := pool.Close(); err != nil {
		t.Errorf("Pool.Close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Pool.Close took %v; the demo exits on stdin EOF", d)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("server process %d still exists after Pool.Close", pid)
		}
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes left after Pool.Close: %v", kids)
	}
	if _, err := pool.Session(context.Background(), "a"); err == nil {
		t.Error("Session after Close succeeded")
	}
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// children lists the processes whose parent is this test process.
func children(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at the last ')'.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) > 1 {
			if ppid, _ := strconv.Atoi(f[1]); ppid == me {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestWireTapCountsOnlyCalls: tools/list and other requests are not
// counted, every tools/call is, including one the server rejects.
func TestWireTapCountsOnlyCalls(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})
	s := connect(t, &Server{Name: "d", URL: url}, nil)
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.CallsSent() != 0 {
		t.Fatalf("CallsSent = %d after tools/list only", s.CallsSent())
	}
	var n atomic.Int64
	for range 3 {
		s.Call(context.Background(), "no_such_tool", nil, nil, nil)
		n.Add(1)
	}
	if s.CallsSent() != n.Load() {
		t.Errorf("CallsSent = %d, want %d", s.CallsSent(), n.Load())
	}
}

type recordRT struct{ reqs []*http.Request }

func (r *recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.reqs = append(r.reqs, req)
	return &http.Response{StatusCode: 204, Body: http.NoBody, Request: req}, nil
}

// TestHeaderTransport: configured headers go to the endpoint's host only,
// and never replace what the MCP transport set.
func TestHeaderTransport(t *testing.T) {
	rec := &recordRT{}
	s := &Session{}
	hc := s.httpClient(Options{HTTPClient: &http.Client{Transport: rec}}, "https://mcp.example.com/mcp",
		http.Header{"Authorization": {"Bearer t"}, "Accept": {"text/plain"}})
	for _, u := range []string{"https://mcp.example.com/mcp", "https://elsewhere.example.com/mcp"} {
		req, _ := http.NewRequest(http.MethodPost, u, nil)
		req.Header.Set("Accept", "application/json, text/event-stream")
		if _, err := hc.Do(req); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.reqs[0].Header.Get("Authorization"); got != "Bearer t" {
		t.Errorf("endpoint host: Authorization = %q", got)
	}
	if got := rec.reqs[0].Header.Get("Accept"); got != "application/json, text/event-stream" {
		t.Errorf("the transport's Accept was replaced: %q", got)
	}
	if got := rec.reqs[1].Header.Get("Authorization"); got != "" {
		t.Errorf("another host received the credentials: %q", got)
	}
}

// TestConnectTimeoutStopsServer: a stdio server that never answers is
// given connect_timeout, then stopped (stdin closed, SIGTERM after the
// grace period): nothing is left running.
func TestConnectTimeoutStopsServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	srv := &Server{Name: "mute", Command: "sleep", Args: []string{"60"}, ConnectTimeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := Connect(context.Background(), srv, &Options{Workspace: t.TempDir()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > terminateDuration+3*time.Second {
		t.Errorf("Connect took %v to give up", d)
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes left after a failed connect: %v", kids)
	}
}
