package proxy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What mcpflow proxy adds to a call: the same tools/call of the demo
// server's greet, over stdio, made directly and through the proxy (intent
// and outcome journaled, each durable before it is acted on). The journal
// is on the test's temporary directory: the difference is mostly its
// flushes.
//
//	go test -run '^$' -bench 'Call' -benchtime 2000x ./proxy
func BenchmarkDirectCall(b *testing.B) {
	dir := b.TempDir()
	cmd := exec.Command(mcpflowBin, "--workspace", dir, "demo-server")
	cmd.Env = append(os.Environ(), "MCPFLOW_DEMO_LEDGER="+filepath.Join(dir, "ledger.jsonl"))
	benchCalls(b, cmd)
}

func BenchmarkProxyCall(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mcpflow.yaml"), []byte(demoConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(mcpflowBin, "--workspace", dir, "proxy", "demo")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+b.TempDir())
	benchCalls(b, cmd)
}

func benchCalls(b *testing.B, cmd *exec.Cmd) {
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}}
	if _, err := cs.CallTool(ctx, params); err != nil { // the server started, the tool discovered
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("greet: %v %v", err, res)
		}
	}
}
