package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// TestRedactedMarkersAgree: a server's log shows a secret as the journal
// and the output do.
func TestRedactedMarkersAgree(t *testing.T) {
	if upstream.Redacted != workflow.Redacted {
		t.Errorf("upstream.Redacted = %q, workflow.Redacted = %q", upstream.Redacted, workflow.Redacted)
	}
}

// holdingSession is a session that keeps a log, as *upstream.Session does:
// it records what the run lends it and when, beside its calls.
type holdingSession struct {
	memSession
	mu     sync.Mutex
	held   map[string]int
	events []string
}

func (h *holdingSession) HoldSecrets(values []string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, "hold "+strings.Join(values, ","))
	for _, v := range values {
		h.held[v]++
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, "release")
		for _, v := range values {
			h.held[v]--
		}
	}
}

func (h *holdingSession) Call(ctx context.Context, in journal.Intent, tool string, args json.RawMessage, p func(float64, float64, string)) (*mcp.CallToolResult, error) {
	h.mu.Lock()
	h.events = append(h.events, fmt.Sprintf("call %s holding %d", tool, h.held["pw-4417"]))
	h.mu.Unlock()
	return h.memSession.Call(ctx, in, tool, args, p)
}

// TestRunLendsSecretsToItsSessions: a run lends its secret values to each
// session it calls through once, before its first call, and takes them
// back at its end; a run without secrets lends nothing.
func TestRunLendsSecretsToItsSessions(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	for _, tc := range []struct {
		name, inputs string
		values       map[string]any
		want         []string
	}{
		{"secret", "inputs: {pw: {type: string, secret: true}, who: {type: string}}\n",
			map[string]any{"pw": "pw-4417", "who": "ann"},
			[]string{"hold pw-4417", "call echo holding 1", "call echo holding 1", "release"}},
		{"none", "inputs: {who: {type: string}}\n",
			map[string]any{"who": "ann"},
			[]string{"call echo holding 0", "call echo holding 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := &holdingSession{memSession: connectMem(t, srv), held: map[string]int{}}
			wf := load(t, "name: lend\n"+tc.inputs+`servers: {s: {builtin: demo}}
steps:
  - {id: one, server: s, tool: echo, with: {x: "${{ inputs.who }}"}}
  - {id: two, server: s, tool: echo}
`)
			run, err := newEngine(journaltest.Open(t, nil), sess).Run(context.Background(), wf, tc.values, t.TempDir())
			if err != nil || run.Status != journal.RunSucceeded {
				t.Fatalf("run: %v, %v", run, err)
			}
			if !slices.Equal(sess.events, tc.want) {
				t.Errorf("session saw %q, want %q", sess.events, tc.want)
			}
		})
	}
}
