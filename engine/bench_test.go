package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// BenchmarkRuns measures whole runs (three journaled calls each, over
// go-sdk's in-memory transport, with a real journal file) with 1 and 64 runs
// in flight in one process. Each op is one run.
func BenchmarkRuns(b *testing.B) {
	for _, parallel := range []int{1, 64} {
		b.Run(fmt.Sprintf("concurrent=%d", parallel), func(b *testing.B) {
			j := journaltest.Open(b, nil)
			srv := mcp.NewServer(&mcp.Implementation{Name: "bench"}, nil)
			srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}, StructuredContent: map[string]any{"n": 1}}, nil
				})
			wf := loadB(b, `
name: bench
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t}
  - {id: b, server: s, tool: t, with: {n: "${{ steps.a.structuredContent.n }}"}}
  - {id: c, server: s, tool: t, with: {n: "${{ steps.b.structuredContent.n + 1 }}"}}
`)
			sessions := make([]memSession, parallel)
			for i := range sessions {
				sessions[i] = connectMemTB(b, srv)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			next := make(chan struct{})
			for w := range parallel {
				wg.Add(1)
				go func() {
					defer wg.Done()
					eng := newEngine(j, sessions[w])
					for range next {
						run, err := eng.Run(context.Background(), wf, map[string]any{}, "")
						if err != nil || run.Status != journal.RunSucceeded {
							b.Errorf("run: %v %v", err, run)
						}
					}
				}()
			}
			for range b.N {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
		})
	}
}
