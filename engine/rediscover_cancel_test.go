package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/upstream"
)

type scriptedSess struct {
	toolFn func(ctx context.Context) (upstream.Tool, error)
	callFn func(n int) (*mcp.CallToolResult, error)
	mu     sync.Mutex
	n      *int
}

func (s *scriptedSess) Tool(ctx context.Context, _ string) (upstream.Tool, error) {
	return s.toolFn(ctx)
}
func (s *scriptedSess) Call(context.Context, journal.Intent, string, json.RawMessage, func(float64, float64, string)) (*mcp.CallToolResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.n++
	return s.callFn(*s.n)
}

var idem = json.RawMessage(`{"idempotentHint":true}`)

// TestCtrlCDuringRediscoveryKeepsTheDecision: Ctrl-C while the fresh
// session lists tools after a lost connection ends the run cancelled; the
// journaled decision to replay stands for resume, and nothing is decided
// on a listing that did not finish.
func TestCtrlCDuringRediscoveryKeepsTheDecision(t *testing.T) {
	j := journaltest.Open(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	first := &scriptedSess{n: &n, toolFn: func(context.Context) (upstream.Tool, error) { return upstream.Tool{Name: "t", Annotations: idem}, nil },
		callFn: func(int) (*mcp.CallToolResult, error) { return nil, fmt.Errorf("calling: %w", io.EOF) }}
	second := &scriptedSess{n: &n, toolFn: func(ctx context.Context) (upstream.Tool, error) {
		cancel() // Ctrl-C arrives while tools/list is in flight
		return upstream.Tool{}, fmt.Errorf("list tools: %w", context.Canceled)
	}}
	eng := newEngine(j, first)
	eng.Reconnect = func(context.Context, string, engine.Session) (engine.Session, error) { return second, nil }
	eng.Trust = func(string) journal.Trust { return journal.Trust{Server: true, Workspace: true} }
	wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: a, server: s, tool: t}]\n")
	run, err := eng.Run(ctx, wf, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	invs, _ := j.RunInvocations(run.ID)
	if invs[0].State != journal.StateIntent || run.Status != journal.RunCancelled || len(invs[0].Decisions) != 1 {
		t.Errorf("run %s, invocation %s, decisions %+v; want cancelled with the replay decision standing", run.Status, invs[0].State, invs[0].Decisions)
	}
}

// TestRetryAfterMayHaveRunIsJudged: attempt 1 times out (it may have
// run), its retry is rejected; sending again is still a replay of attempt 1,
// so with trust revoked neither the run nor resume sends it again.
func TestRetryAfterMayHaveRunIsJudged(t *testing.T) {
	j := journaltest.Open(t, nil)
	n := 0
	sess := &scriptedSess{n: &n, toolFn: func(context.Context) (upstream.Tool, error) { return upstream.Tool{Name: "t", Annotations: idem}, nil },
		callFn: func(n int) (*mcp.CallToolResult, error) {
			switch n {
			case 1:
				return nil, context.DeadlineExceeded
			case 2:
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "busy"}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		}}
	eng := newEngine(j, sess)
	trusted := true
	eng.Trust = func(string) journal.Trust { return journal.Trust{Server: trusted, Workspace: trusted} }
	wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: a, server: s, tool: t, retry: {attempts: 2, backoff: 1ms}}]\n")
	run, err := eng.Run(context.Background(), wf, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if invs, _ := j.RunInvocations(run.ID); len(invs[0].Attempts) != 2 {
		t.Errorf("after the run: %d attempts, want 2", len(invs[0].Attempts))
	}
	trusted = false // server and workspace no longer trusted
	run, _, err = eng.Resume(context.Background(), run, wf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n > 2 {
		t.Errorf("a call that may have run (attempt 1 timed out) was sent again with trust revoked: %d sends", n)
	}
}
