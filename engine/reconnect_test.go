package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/upstream"
)

// flakySession loses the connection on its first call; every call after
// that succeeds.
type flakySession struct {
	mu    sync.Mutex
	calls int
}

func (f *flakySession) Tool(context.Context, string) (upstream.Tool, error) {
	return upstream.Tool{Name: "t", Annotations: json.RawMessage(`{"idempotentHint":true}`)}, nil
}

func (f *flakySession) Call(context.Context, journal.Intent, string, json.RawMessage, func(float64, float64, string)) (*mcp.CallToolResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls == 1 {
		return nil, fmt.Errorf("calling \"tools/call\": %w", io.EOF)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}

// TestReconnectWaitsForARestartingServer: a server that takes a while to
// come back after its side effect committed is reconnected to within the
// server's reconnect budget, with each try reported, and the safe call is
// replayed; past the budget the step fails as unavailable.
func TestReconnectWaitsForARestartingServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		down    time.Duration
		budget  time.Duration
		replays int
		status  journal.RunStatus
	}{
		{"back within the budget", 1200 * time.Millisecond, 10 * time.Second, 1, journal.RunSucceeded},
		{"not back within the budget", time.Hour, 500 * time.Millisecond, 0, journal.RunFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journaltest.Open(t, nil)
			sess := &flakySession{}
			eng := newEngine(j, sess)
			eng.Trust = func(string) journal.Trust { return journal.Trust{Server: true, Workspace: true} }
			eng.Backoff = 20 * time.Millisecond
			eng.ReconnectTimeout = func(string) time.Duration { return tc.budget }
			var lostAt time.Time // set by the first reconnect
			eng.Reconnect = func(context.Context, string, engine.Session) (engine.Session, error) {
				lostAt = time.Now()
				return nil, errors.New("connection refused")
			}
			eng.Connect = func(context.Context, string) (engine.Session, error) {
				if !lostAt.IsZero() && time.Since(lostAt) < tc.down {
					return nil, errors.New("connection refused")
				}
				return sess, nil
			}
			var mu sync.Mutex
			var notes []string
			eng.Events = func(ev engine.Event) {
				if ev.Kind == engine.StepProgress && strings.HasPrefix(ev.Message, "reconnecting to s (attempt ") {
					mu.Lock()
					notes = append(notes, ev.Message)
					mu.Unlock()
				}
			}
			wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: put, server: s, tool: t}]\n")
			start := time.Now()
			run, err := eng.Run(context.Background(), wf, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			invs, _ := j.RunInvocations(run.ID)
			if run.Status != tc.status || invs[0].Tally().Replays != tc.replays {
				t.Fatalf("run %s with %d replays, want %s with %d (error %v)", run.Status, invs[0].Tally().Replays, tc.status, tc.replays, run.Error)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(notes) < 2 {
				t.Errorf("reconnect tries reported: %q, want several", notes)
			}
			if tc.status == journal.RunFailed {
				if !strings.Contains(run.Error.Message, "did not come back within 500ms") {
					t.Errorf("error %v", run.Error)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("gave up after %s, want about the budget", d)
				}
			}
		})
	}
}
