package upstream

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSmallBuffersCarryLargeMessages: a session's own connections have
// buffers of httpBufferSize, and a request with a header and arguments
// larger than them, and its answer, cross whole, in an event stream and
// in a JSON response alike.
func TestSmallBuffersCarryLargeMessages(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
		srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
		token := strings.Repeat("t", 3*httpBufferSize)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Token") != token {
				http.Error(w, "bad token", http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		s, err := Connect(context.Background(), &Server{Name: "echo", URL: hs.URL, Headers: map[string]string{"X-Token": token}}, &Options{Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if rb, wb := s.ownHTTP.ReadBufferSize, s.ownHTTP.WriteBufferSize; rb != httpBufferSize || wb != httpBufferSize {
			t.Errorf("buffers of %d and %d bytes, want %d", rb, wb, httpBufferSize)
		}
		args, _ := json.Marshal(map[string]string{"v": strings.Repeat("a", 50*httpBufferSize)})
		res, err := s.Call(context.Background(), "echo", args, nil, nil)
		if err != nil {
			t.Fatalf("JSON response %v: %v", jsonResponse, err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != string(args) {
			t.Errorf("JSON response %v: the answer has %d bytes, want the %d sent", jsonResponse, len(got), len(args))
		}
	}
}

// TestSharedTransport: the http sessions of pools given one Shared use
// its transport, whose connections a run's session leaves idle for the
// next run's; Shared.Close closes those. A pool without a Shared has a
// transport of its own per session.
func TestSharedTransport(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(echoTool("a"))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewUnstartedServer(h)
	var mu sync.Mutex
	conns := map[net.Conn]http.ConnState{}
	hs.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		conns[c] = s
		mu.Unlock()
	}
	hs.Start()
	t.Cleanup(hs.Close)
	idle := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range conns {
			if s == http.StateIdle {
				n++
			}
		}
		return n
	}
	set := Set{"echo": {Name: "echo", URL: hs.URL}}
	o := &Options{Workspace: t.TempDir()}
	shared := NewShared()
	run := func(p *Pool) *Session {
		t.Helper()
		s, err := p.Session(context.Background(), "echo")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Call(context.Background(), "a", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	first, second := NewPool(set, o), NewPool(set, o)
	first.Share(shared)
	second.Share(shared)
	a, b := run(first), run(second)
	if a.header.base != shared.transport() || b.header.base != shared.transport() || a.ownHTTP != nil {
		t.Error("the sessions of pools given one Shared have transports of their own")
	}
	waitFor(t, "a connection left idle", func() bool { return idle() > 0 })
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Shared.Close to close the idle connections", func() bool { return idle() == 0 })

	c := run(NewPool(set, o))
	if c.ownHTTP == nil || c.header.base != c.ownHTTP {
		t.Error("a session of a pool without a Shared has no transport of its own")
	}
}
