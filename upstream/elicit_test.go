package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
)

// TestURLElicitationCompletedByTheServer: a server asks during a call for
// a person to open a URL, then notifies that the interaction there is
// complete; the call's asker sees the notice (and answers), over
// streamable HTTP. A question asked with no call in flight is refused.
func TestURLElicitationCompletedByTheServer(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "url", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		go func() {
			time.Sleep(50 * time.Millisecond)
			// On the call's own stream, as the spec asks of a notice related
			// to a request.
			req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "e-1"})
		}()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", URL: "https://example.com/authorize", Message: "Log in", ElicitationID: "e-1"})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "login " + res.Action}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	sess, err := upstream.Connect(context.Background(), &upstream.Server{Name: "url", URL: hs.URL}, &upstream.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })

	var asked *mcp.ElicitParams
	ctx := upstream.WithAsker(context.Background(), &upstream.Asker{Elicit: func(ctx context.Context, p *mcp.ElicitParams, completed <-chan struct{}) (*mcp.ElicitResult, error) {
		asked = p
		select {
		case <-completed:
			return &mcp.ElicitResult{Action: "accept"}, nil
		case <-time.After(10 * time.Second):
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
	}})
	res, err := sess.Call(ctx, "login", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "login accept" || asked == nil || asked.URL != "https://example.com/authorize" {
		t.Errorf("result %q, asked %+v: want the completion to answer it", got, asked)
	}
	// No call in flight with an asker: refused, not hung.
	if _, err := sess.Call(context.Background(), "login", nil, nil, nil); err == nil {
		t.Error("a question with nobody to ask was answered")
	}
}

// TestReadAnsweredWithInputRequired: a server that answers resources/read
// with input_required (protocol 2026-07-28) has not served the read: the
// session says so as a rejection, never as a read with no contents.
func TestReadAnsweredWithInputRequired(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "asks", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "file:///secret.txt", Name: "secret"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{InputRequests: mcp.InputRequestMap{"why": &mcp.ElicitParams{Message: "Why?"}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	sess, err := upstream.Connect(context.Background(), &upstream.Server{Name: "asks", URL: hs.URL}, &upstream.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	// A stateless streamable HTTP server speaks 2026-07-28, the protocol
	// of input_required (go-sdk-facts.md).
	if v := sess.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("negotiated %s: no input_required to test", v)
	}
	res, err := sess.ReadResource(context.Background(), "file:///secret.txt", nil)
	if err == nil || upstream.Classify(err) != replay.ClassRejected || !strings.Contains(err.Error(), "input_required") {
		t.Errorf("read: %+v, %v (class %s), want a rejection naming input_required", res, err, upstream.Classify(err))
	}
}
