package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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
