package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcpflow/mcpflow/oauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// wireLog records what a streamable HTTP test server was sent: the GETs
// of the standalone stream, and the Mcp-Protocol-Version of each
// tools/call.
type wireLog struct {
	mu           sync.Mutex
	gets         int
	callVersions []string
	getSeen      chan struct{} // closed at the first GET
}

// serveStreamable serves s over streamable HTTP (go-sdk's handler) on a
// test server; with noGET, GETs are answered 405 Method Not Allowed, as by
// a server that offers no standalone stream.
func serveStreamable(t *testing.T, s *mcp.Server, noGET bool) (string, *wireLog) {
	t.Helper()
	log := &wireLog{getSeen: make(chan struct{})}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			log.mu.Lock()
			log.gets++
			if log.gets == 1 {
				close(log.getSeen)
			}
			log.mu.Unlock()
			if noGET {
				w.Header().Set("Allow", "POST, DELETE")
				http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
				return
			}
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct{ Method string }
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				log.mu.Lock()
				log.callVersions = append(log.callVersions, r.Header.Get("Mcp-Protocol-Version"))
				log.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, log
}

func echoTool(name string) (*mcp.Tool, mcp.ToolHandler) {
	return &mcp.Tool{Name: name, InputSchema: &jsonschema.Schema{Type: "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s", what)
		}
	}
}

// streamGoroutines counts the goroutines running a standalone stream.
func streamGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "upstream.(*standaloneStream).run")
}

// TestStandaloneStream: over streamable HTTP, what the server sends
// outside a request reaches the session on the standalone stream — a
// tool added after connect (notifications/tools/list_changed) is listed
// next time, and a log message lands in the server's log, scrubbed of the
// secrets held — and later requests carry Mcp-Protocol-Version. Close ends
// the stream's goroutine.
func TestStandaloneStream(t *testing.T) {
	before := streamGoroutines()
	srv := mcp.NewServer(&mcp.Implementation{Name: "grows", Version: "1"}, nil)
	srv.AddTool(echoTool("a"))
	url, wire := serveStreamable(t, srv, false)
	ws := t.TempDir()
	s, err := Connect(context.Background(), &Server{Name: "grows", URL: url}, &Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if v := s.ProtocolVersion(); v == "" || v >= newProtocol {
		t.Fatalf("negotiated %q: no standalone stream to test", v)
	}
	tools, err := s.Tools(context.Background())
	if err != nil || len(tools) != 1 {
		t.Fatalf("tools %v, %v; want a", tools, err)
	}
	select {
	case <-wire.getSeen:
	case <-time.After(5 * time.Second):
		t.Fatal("the session opened no standalone stream")
	}

	srv.AddTool(echoTool("b"))
	waitFor(t, "notifications/tools/list_changed", s.toolsStale.Load)
	tools, err = s.Tools(context.Background())
	if _, ok := tools["b"]; err != nil || !ok {
		t.Errorf("after list_changed, tools %v, %v; want b listed", tools, err)
	}

	release := s.HoldSecrets([]string{"pw-secret"})
	defer release()
	for ss := range srv.Sessions() {
		if err := ss.Log(context.Background(), &mcp.LoggingMessageParams{Level: "error", Logger: "bg", Data: "outside a call pw-secret"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the log message", func() bool {
		b, _ := os.ReadFile(s.LogPath())
		return strings.Contains(string(b), "bg: outside a call")
	})
	if b, _ := os.ReadFile(s.LogPath()); !strings.Contains(string(b), "[error] bg: outside a call [redacted]\n") {
		t.Errorf("log %q, want the message with its secret redacted", b)
	}

	res, err := s.Call(context.Background(), "b", nil, nil, nil)
	if err != nil || res.IsError {
		t.Fatalf("call b: %v %+v", err, res)
	}
	wire.mu.Lock()
	versions := append([]string(nil), wire.callVersions...)
	wire.mu.Unlock()
	if len(versions) != 1 || versions[0] != s.ProtocolVersion() {
		t.Errorf("tools/call sent with Mcp-Protocol-Version %q, want [%s]", versions, s.ProtocolVersion())
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.stream.done:
	default:
		t.Error("the standalone stream runs on after Close")
	}
	// The goroutine closed done as it returned: it is gone at once, or
	// about to be.
	waitFor(t, "the stream's goroutine to end", func() bool { return streamGoroutines() == before })
}

// TestStandaloneElicitation: a server that asks during a call, on the
// standalone stream (a request not related to the call, as some SDKs
// send it), is answered by the call's asker, and the answer goes back.
func TestStandaloneElicitation(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asks", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: &jsonschema.Schema{Type: "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A context without the call's id: go-sdk sends the request on
		// the standalone stream.
		actx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 10*time.Second)
		defer cancel()
		res, err := req.Session.Elicit(actx, &mcp.ElicitParams{Message: "Name?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + res.Content["name"].(string)}}}, nil
	})
	url, _ := serveStreamable(t, srv, false)
	s, err := Connect(context.Background(), &Server{Name: "asks", URL: url}, &Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ctx = WithAsker(ctx, &Asker{Elicit: func(_ context.Context, p *mcp.ElicitParams, _ <-chan struct{}) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}})
	res, err := s.Call(ctx, "ask", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "accept Ada" {
		t.Errorf("result %+v, want the elicitation answered", res)
	}
}

// TestNoStandaloneStream: a server that answers the stream's GET with 405
// works as before: calls go through (with Mcp-Protocol-Version), and the
// stream ends quietly (nothing in the log).
func TestNoStandaloneStream(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	srv.AddTool(echoTool("a"))
	url, wire := serveStreamable(t, srv, true)
	s, err := Connect(context.Background(), &Server{Name: "plain", URL: url}, &Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.stream == nil {
		t.Fatal("no standalone stream was tried")
	}
	select {
	case <-s.stream.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end on 405")
	}
	res, err := s.Call(context.Background(), "a", nil, nil, nil)
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "a" {
		t.Fatalf("call a: %v %+v", err, res)
	}
	wire.mu.Lock()
	gets, versions := wire.gets, wire.callVersions
	wire.mu.Unlock()
	if gets != 1 {
		t.Errorf("%d GETs, want 1 (405 is not retried)", gets)
	}
	if len(versions) != 1 || versions[0] != s.ProtocolVersion() {
		t.Errorf("tools/call sent with Mcp-Protocol-Version %q, want [%s]", versions, s.ProtocolVersion())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(s.LogPath()); strings.Contains(string(b), "standalone stream") {
		t.Errorf("log %q: a server without the stream is no failure", b)
	}
}

func TestSSEEvents(t *testing.T) {
	in := ": keep-alive\n\n" +
		"id: 1\n\n" + // priming: an id, no data
		"event: message\ndata: {\"a\":\r\ndata: 1}\nid: 2\n\n" +
		"data:no space\nretry: 300\n\n" +
		"event: other\ndata: x\n\n" +
		"data: dropped: no blank line after it"
	var got []string
	for ev, err := range sseEvents(strings.NewReader(in), 100) {
		if err != nil {
			t.Fatal(err)
		}
		id := "-"
		if ev.id != nil {
			id = *ev.id
		}
		got = append(got, ev.name+"|"+string(ev.data)+"|"+id+"|"+ev.retry)
	}
	want := []string{"||1|", "message|{\"a\":\n1}|2|", "|no space|-|300", "other|x|-|"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var err error
	for _, e := range sseEvents(strings.NewReader("data: "+strings.Repeat("x", 60)+"\ndata: "+strings.Repeat("y", 60)+"\n\n"), 100) {
		err = e
	}
	if err != errEventTooLarge {
		t.Errorf("an event over the limit: %v, want errEventTooLarge", err)
	}
	// A line longer than the buffer sseEvents starts with is read whole.
	long := strings.Repeat("z", 20*sseStartBuffer)
	got = nil
	for ev, err := range sseEvents(strings.NewReader("data: "+long+"\n\ndata: after\n\n"), len(long)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.data))
	}
	if len(got) != 2 || got[0] != long || got[1] != "after" {
		t.Errorf("a long line: %d events, want it and the next", len(got))
	}
}

func FuzzSSEEvents(f *testing.F) {
	f.Add("event: message\ndata: {}\nid: 1\n\n")
	f.Add(": c\r\ndata: a\r\ndata: b\r\n\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		n := 0
		for ev, err := range sseEvents(strings.NewReader(in), 64) {
			if err != nil {
				break
			}
			if len(ev.data) > 64 {
				t.Fatalf("event of %d bytes over the 64-byte limit", len(ev.data))
			}
			if n++; n > len(in) {
				t.Fatal("more events than bytes")
			}
		}
	})
}

// TestElicitationDefaults: an answer that accepts a form without fields
// reaches the server with the schema's defaults (SEP-1034), as the
// conformance scenario elicitation-sep1034-client-defaults checks.
func TestElicitationDefaults(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "defaults", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: &jsonschema.Schema{Type: "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Defaults?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
			"name": {Type: "string", Default: json.RawMessage(`"John Doe"`)},
			"age":  {Type: "integer", Default: json.RawMessage(`30`)},
		}}})
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(res.Content)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + string(b)}}}, nil
	})
	url, _ := serveStreamable(t, srv, false)
	s, err := Connect(context.Background(), &Server{Name: "defaults", URL: url}, &Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := WithAsker(context.Background(), &Asker{Elicit: func(context.Context, *mcp.ElicitParams, <-chan struct{}) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	res, err := s.Call(ctx, "ask", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `accept {"age":30,"name":"John Doe"}` {
		t.Errorf("the server got %s, want the defaults", got)
	}
}

// TestStandaloneGetHeaders: the stream's GET carries what go-sdk's own
// would: the session id, Last-Event-ID when resuming, and, through the
// session's client, the OAuth token (oauth.Transport), Mcp-Protocol-Version
// and the configured headers.
func TestStandaloneGetHeaders(t *testing.T) {
	var got http.Header
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}))
	t.Cleanup(hs.Close)
	s := &Session{}
	hc := s.httpClient(Options{HTTPClient: hs.Client()}, hs.URL, http.Header{"X-Team": {"blue"}})
	s.header.setProtocol("2025-11-25")
	store := &oauth.Store{Dir: t.TempDir()}
	if err := store.Save(&oauth.Login{URL: hs.URL, Token: &oauth2.Token{AccessToken: "tok-1"}}); err != nil {
		t.Fatal(err)
	}
	hc.Transport = oauth.Transport(hc.Transport, "s", hs.URL, oauth.Config{}, store, nil)
	st := &standaloneStream{url: hs.URL, client: hc, sessionID: "sid-1"}
	resp, err := st.get(context.Background(), "ev-7")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ok, again := streamAnswer(resp); ok || again {
		t.Errorf("405: ok %v, again %v; want neither (no stream)", ok, again)
	}
	for k, want := range map[string]string{
		"Accept": "text/event-stream", "Mcp-Session-Id": "sid-1", "Last-Event-Id": "ev-7",
		"Authorization": "Bearer tok-1", "Mcp-Protocol-Version": "2025-11-25", "X-Team": "blue",
	} {
		if v := got.Get(k); v != want {
			t.Errorf("%s: %q, want %q", k, v, want)
		}
	}
}
