package upstream

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	mcpmeta "github.com/mcpflow/mcpflow/internal/meta"
)

// BenchmarkCallAllocs is one tools/call of the demo's upper tool through a
// Session on a stdio server, the builtin demo in a subprocess (this test
// binary, see TestMain): what the client side of a call allocates in
// mcpflow's process, the server's work left out. Run it with:
//
//	go test ./upstream -run '^$' -bench CallAllocs -benchtime 2000x
func BenchmarkCallAllocs(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	s, err := Connect(ctx, &Server{Name: "demo", Builtin: "demo", Args: []string{"--ledger", ws + "/ledger.jsonl"}}, &Options{Self: exe, Workspace: ws})
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	args := json.RawMessage(`{"text":"hello"}`)
	meta := map[string]any{mcpmeta.IdempotencyKey: "01a2375e-e4c5-749b-af76-0985e8df43d8"}
	call := func() {
		res, err := s.Call(context.Background(), "upper", args, meta, nil)
		if err != nil || res.IsError {
			b.Fatalf("call: %v %v", err, res)
		}
	}
	call() // the first call sends the log level and warms go-sdk's caches
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}
