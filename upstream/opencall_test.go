package upstream

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientGoroutines are the stacks of the goroutines of this process on the
// client's side of a session: upstream's, go-sdk's client, net/http's
// client connections in use (the test server's, the test's own, and the
// two of each idle connection, kept for a later request, are not counted).
func clientGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	idle := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "net/http.(*persistConn).readLoop") && strings.Contains(g, "net/http.(*persistConn).Read(") {
			idle++ // waiting for a response to begin: no request on it
			continue
		}
		if strings.Contains(g, "net/http.(*conn).serve") || strings.Contains(g, "mcp.(*ServerSession)") || strings.Contains(g, "testing.") {
			continue // the test server's, or the test's own
		}
		if strings.Contains(g, "mcpflow/upstream.") || strings.Contains(g, "mcp.(*streamableClientConn)") ||
			strings.Contains(g, "mcp.(*ClientSession)") || strings.Contains(g, "net/http.(*persistConn)") {
			out = append(out, g)
		}
	}
	// An idle connection's writer waits as a busy one's does: drop one
	// writer per idle connection.
	for i := len(out) - 1; i >= 0 && idle > 0; i-- {
		if strings.Contains(out[i], "net/http.(*persistConn).writeLoop") {
			out = append(out[:i], out[i+1:]...)
			idle--
		}
	}
	return out
}

// settled calls count until it returns the same number twice in a row,
// 50 ms apart (at most for 5 s: goroutines of earlier tests, and those a
// call starts, come and go), and returns that number.
func settled(count func() int) int {
	n := count()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		m := count()
		if m == n {
			return m
		}
		n = m
	}
	return n
}

// TestOpenCallHolds: a session whose call waits for the answer to a
// question its server asked during the call (streamable HTTP, before
// 2026-07-28) holds nine goroutines on the client's side: the caller's;
// go-sdk's reader of the session, its reader of the call's response
// stream, and its handler of the question (here waiting for the answer);
// the standalone stream's reader; and, for each of the two connections in
// use (the call's POST, the stream's GET), net/http's reader and writer.
// The wire tap adds none of its own.
func TestOpenCallHolds(t *testing.T) {
	before := settled(func() int { return len(clientGoroutines()) })
	srv := mcp.NewServer(&mcp.Implementation{Name: "asks", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: &jsonschema.Schema{Type: "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Go?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"go": {Type: "boolean"}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil
	})
	url, _ := serveStreamable(t, srv, false)
	s, err := Connect(context.Background(), &Server{Name: "asks", URL: url}, &Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	asked, answer := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = WithAsker(ctx, &Asker{Elicit: func(ctx context.Context, _ *mcp.ElicitParams, _ <-chan struct{}) (*mcp.ElicitResult, error) {
		close(asked)
		select {
		case <-answer:
		case <-ctx.Done():
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"go": true}}, nil
	}})
	done := make(chan error, 1)
	go func() { // owned by the test: it waits for done below
		_, err := s.Call(ctx, "ask", nil, nil, nil)
		done <- err
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never asked")
	}
	var gs []string
	settled(func() int { gs = clientGoroutines(); return len(gs) })
	if n := len(gs) - before; n != 9 {
		t.Errorf("an open call holds %d goroutines, want 9:\n%s", n, strings.Join(gs, "\n\n"))
	}
	close(answer)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
