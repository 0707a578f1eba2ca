package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/upstream"
)

// TestSharedQuestionDuringAReadIsRefused: on a shared session, a server's
// question during run B's resources/read, while run A has the one
// tools/call in flight, is refused: answered by A's asker, A's answer
// would end up in B's read.
func TestSharedQuestionDuringAReadIsRefused(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		time.Sleep(800 * time.Millisecond)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///r", Name: "r"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "token?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"token": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, err
		}
		tok, _ := res.Content["token"].(string)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///r", Text: "got " + res.Action + " " + tok}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	set := upstream.Set{"x": {Name: "x", URL: hs.URL, Sessions: 1}}
	h := upstream.NewShared()
	defer h.Close()
	o := &upstream.Options{Workspace: t.TempDir()}
	a, b := upstream.NewPool(set, o), upstream.NewPool(set, o)
	a.Share(h)
	b.Share(h)
	sa, err := a.Session(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := b.Session(context.Background(), "x")
	if sa != sb {
		t.Fatal("sessions: 1 gave two runs two sessions")
	}
	ctxA := upstream.WithAsker(context.Background(), &upstream.Asker{Elicit: func(ctx context.Context, p *mcp.ElicitParams, _ <-chan struct{}) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"token": "RUN-A-SECRET"}}, nil
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sa.Call(ctxA, "slow", nil, nil, nil)
	}()
	time.Sleep(100 * time.Millisecond)
	res, err := sb.ReadResource(context.Background(), "file:///r", nil)
	<-done
	if err == nil {
		t.Errorf("run B's read was answered with run A's answer: %q", res.Contents[0].Text)
	} else if !strings.Contains(err.Error(), "cannot tell which one asks") {
		t.Errorf("run B's read: %v, want the question refused as one mcpflow cannot attribute", err)
	}
}
