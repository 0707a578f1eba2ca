package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

// TestSamplingCapability: a session with Options.CreateMessage declares
// sampling, and the demo server (which lists its sample tool only to
// clients that declare it) sees it; the server's request reaches the hook
// and its answer the tool. Without the hook the session declares nothing
// and refuses a server that asks anyway, saying what to configure. On
// every transport, on the protocol before 2026-07-28 (a request of the
// server's during the call).
func TestSamplingCapability(t *testing.T) {
	const legacy = "2025-11-25"
	transports := map[string]func(t *testing.T) *Server{
		"stdio": func(t *testing.T) *Server {
			return &Server{Name: "demo", Builtin: "demo", Args: []string{"--protocol", legacy},
				Env: map[string]string{"MCPFLOW_DEMO_LEDGER": filepath.Join(t.TempDir(), "ledger.jsonl")}}
		},
		"http": func(t *testing.T) *Server {
			return &Server{Name: "demo", URL: serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", Protocol: legacy})}
		},
		"sse": func(t *testing.T) *Server {
			return &Server{Name: "demo", Type: "sse", URL: serveDemoHTTP(t, demo.Config{SSEAddr: "127.0.0.1:0", Protocol: legacy})}
		},
	}
	for name, newServer := range transports {
		t.Run(name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				asked []string
			)
			hook := func(_ context.Context, server string, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, server+": "+req.Messages[0].Content.(*mcp.TextContent).Text)
				return &mcp.CreateMessageResult{Role: "assistant", Model: "stub", StopReason: "endTurn", Content: &mcp.TextContent{Text: "Rayleigh scattering."}}, nil
			}
			s := connect(t, newServer(t), &Options{Self: self(t), Workspace: t.TempDir(), CreateMessage: hook})
			if v := s.ProtocolVersion(); v != legacy {
				t.Errorf("protocol %s, want %s", v, legacy)
			}
			if _, err := s.Tool(context.Background(), "sample"); err != nil {
				t.Fatalf("the server does not see sampling declared: %v", err)
			}
			res, err := s.Call(context.Background(), "sample", json.RawMessage(`{"prompt":"Why is the sky blue?"}`), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "Rayleigh scattering." {
				t.Fatalf("result %+v", res)
			}
			if len(asked) != 1 || asked[0] != "demo: Why is the sky blue?" {
				t.Errorf("hook asked %q", asked)
			}
		})
		t.Run(name+" without a provider", func(t *testing.T) {
			s := connect(t, newServer(t), &Options{Self: self(t), Workspace: t.TempDir()})
			if _, err := s.Tool(context.Background(), "sample"); !errors.Is(err, ErrUnknownTool) {
				t.Fatalf("sample is listed to a session without sampling: %v", err)
			}
			// Called anyway, it asks; the refusal reaches the server, which
			// fails the call with it.
			res, err := s.Call(context.Background(), "sample", json.RawMessage(`{"prompt":"hi"}`), nil, nil)
			msg := ""
			switch {
			case err != nil:
				msg = err.Error()
			case res.IsError && len(res.Content) == 1:
				msg = res.Content[0].(*mcp.TextContent).Text
			}
			t.Logf("the call failed with: %s", msg)
			for _, want := range []string{"mcpflow has no sampling provider configured", "sampling: section in the workspace's mcpflow.yaml"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the call's failure %q (result %+v) does not say %q", msg, res, want)
				}
			}
		})
	}
}

// TestSamplingCapabilityNewestProtocol: on 2026-07-28 the capability
// travels in each request's _meta; the server sees it the same way.
func TestSamplingCapabilityNewestProtocol(t *testing.T) {
	srv := &Server{Name: "demo", Builtin: "demo", Env: map[string]string{"MCPFLOW_DEMO_LEDGER": filepath.Join(t.TempDir(), "ledger.jsonl")}}
	hook := func(context.Context, string, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return nil, errors.New("not called")
	}
	with := connect(t, srv, &Options{Self: self(t), Workspace: t.TempDir(), CreateMessage: hook})
	without := connect(t, srv, &Options{Self: self(t), Workspace: t.TempDir()})
	if v := with.ProtocolVersion(); v != "2026-07-28" {
		t.Errorf("protocol %s", v)
	}
	if _, err := with.Tool(context.Background(), "sample"); err != nil {
		t.Errorf("with a provider: %v", err)
	}
	if _, err := without.Tool(context.Background(), "sample"); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("without a provider: %v", err)
	}
}

func TestSamplingRefusal(t *testing.T) {
	err := SamplingRefusal()
	var rpc *jsonrpc.Error
	if !errors.Is(err, ErrNoSampling) || !errors.As(err, &rpc) || rpc.Code != CodeSamplingRefused || rpc.Message != err.Error() {
		t.Errorf("refusal %v (%+v)", err, rpc)
	}
}
