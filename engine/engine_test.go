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
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// memSession adapts a go-sdk client session over in-memory transports to
// engine.Session.
type memSession struct{ cs *mcp.ClientSession }

func (s memSession) Tool(ctx context.Context, name string) (upstream.Tool, error) {
	res, err := s.cs.ListTools(ctx, nil)
	if err != nil {
		return upstream.Tool{}, err
	}
	for _, t := range res.Tools {
		if t.Name == name {
			var ann json.RawMessage
			if t.Annotations != nil {
				ann, _ = json.Marshal(t.Annotations)
			}
			return upstream.Tool{Name: name, Annotations: ann}, nil
		}
	}
	return upstream.Tool{}, fmt.Errorf("%w %q", upstream.ErrUnknownTool, name)
}

func (s memSession) Call(ctx context.Context, in journal.Intent, tool string, args json.RawMessage, _ func(float64, float64, string)) (*mcp.CallToolResult, error) {
	if !in.Valid() {
		return nil, engine.ErrNoIntent
	}
	meta := map[string]any{engine.MetaIdempotencyKey: in.IdempotencyKey}
	return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
}

func connectMem(t *testing.T, srv *mcp.Server) memSession { return connectMemTB(t, srv) }

func connectMemTB(t testing.TB, srv *mcp.Server) memSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return memSession{cs}
}

func newEngine(j *bolt.Store, sess engine.Session) *engine.Engine {
	return &engine.Engine{
		Journal:   j,
		Connect:   func(context.Context, string) (engine.Session, error) { return sess, nil },
		Reconnect: func(context.Context, string, engine.Session) (engine.Session, error) { return sess, nil },
		Trust:     func(string) journal.Trust { return journal.Trust{} },
	}
}

func load(t *testing.T, src string) *workflow.Workflow { return loadB(t, src) }

func loadB(t testing.TB, src string) *workflow.Workflow {
	t.Helper()
	wf, err := workflow.Load("test.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestIntentDurableBeforeSend proves the ordering the product rests on: when
// a tools/call reaches the server, its intent record is already committed.
// The tool reads the journal through its own read transaction.
func TestIntentDurableBeforeSend(t *testing.T) {
	j := journaltest.Open(t, nil)
	var mu sync.Mutex
	var seen []journal.Invocation
	srv := mcp.NewServer(&mcp.Implementation{Name: "probe"}, nil)
	srv.AddTool(&mcp.Tool{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta[engine.MetaIdempotencyKey].(string)
			id, err := journal.ParseID(key)
			if err != nil {
				return nil, fmt.Errorf("no idempotency key in _meta: %v", err)
			}
			inv, err := j.Invocation(id) // a separate read transaction
			if err != nil {
				return nil, fmt.Errorf("intent not in the journal when the call arrived: %v", err)
			}
			mu.Lock()
			seen = append(seen, *inv)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	wf := load(t, `
name: probe
servers: {s: {builtin: demo}}
steps:
  - {id: one, server: s, tool: probe}
  - {id: two, server: s, tool: probe}
`)
	run, err := newEngine(j, connectMem(t, srv)).Run(context.Background(), wf, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	if len(seen) != 2 {
		t.Fatalf("server saw %d calls, want 2", len(seen))
	}
	for i, inv := range seen {
		if inv.State != journal.StateIntent || len(inv.Attempts) != 1 || inv.Attempts[0].EndedAt != nil {
			t.Errorf("call %d: journal had state %s with %d attempts when the call arrived, want an open intent", i, inv.State, len(inv.Attempts))
		}
		if inv.IdempotencyKey != inv.ID.String() {
			t.Errorf("idempotency key %q, want the invocation id", inv.IdempotencyKey)
		}
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if inv.State != journal.StateCompleted {
			t.Errorf("step %s: %s, want completed", inv.Step, inv.State)
		}
	}
}

// fakeSession fails every call with err, counting calls.
type fakeSession struct {
	ann   json.RawMessage
	err   error
	mu    sync.Mutex
	calls int
}

func (f *fakeSession) Tool(context.Context, string) (upstream.Tool, error) {
	return upstream.Tool{Name: "t", Annotations: f.ann}, nil
}

func (f *fakeSession) Call(context.Context, journal.Intent, string, json.RawMessage, func(float64, float64, string)) (*mcp.CallToolResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return nil, f.err
}

func TestLostConnectionUnsafeBlocks(t *testing.T) {
	for _, ann := range []string{"", `{"idempotentHint":false}`, `{"readOnlyHint":true,"idempotentHint":false}`, `{"idempotentHint":true}`} {
		t.Run(ann, func(t *testing.T) {
			j := journaltest.Open(t, nil)
			sess := &fakeSession{ann: json.RawMessage(ann), err: fmt.Errorf("calling \"tools/call\": %w", io.EOF)}
			if ann == "" {
				sess.ann = nil
			}
			wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: pay, server: s, tool: t, with: {secret_marker: ARG-MARKER}}]\n")
			run, err := newEngine(j, sess).Run(context.Background(), wf, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			// Untrusted server and workspace: never safe, whatever the annotations.
			if run.Status != journal.RunBlocked || sess.calls != 1 {
				t.Fatalf("status %s after %d calls, want blocked after 1", run.Status, sess.calls)
			}
			if run.Error.Code != replay.Code || strings.Contains(run.Error.Message, "ARG-MARKER") || strings.Contains(run.Error.Message, "EOF") {
				t.Errorf("run error %v: want the stable error without arguments or upstream text", run.Error)
			}
			invs, _ := j.RunInvocations(run.ID)
			if len(invs) != 1 || invs[0].State != journal.StateOutcomeUnknown {
				t.Fatalf("invocations %+v, want one outcome_unknown", invs)
			}
			d := invs[0].LastDecision()
			if d == nil || d.Verdict != "outcome_unknown" || d.Reason == "" {
				t.Errorf("decision %+v, want a journaled outcome_unknown with a reason", d)
			}
		})
	}
}

func TestToolErrorFailsRunButCompletesInvocation(t *testing.T) {
	j := journaltest.Open(t, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "e"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil
		})
	wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: a, server: s, tool: t}, {id: b, server: s, tool: t}]\n")
	run, err := newEngine(j, connectMem(t, srv)).Run(context.Background(), wf, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunFailed || run.Error.Code != engine.CodeToolError || !strings.Contains(run.Error.Message, "disk full") {
		t.Fatalf("run %s %v, want failed with the tool's error", run.Status, run.Error)
	}
	invs, _ := j.RunInvocations(run.ID)
	if len(invs) != 1 || invs[0].State != journal.StateCompleted || !invs[0].Result.IsError {
		t.Fatalf("want one completed invocation with isError; got %+v", invs)
	}
}

func TestExpressionsFeedLaterSteps(t *testing.T) {
	j := journaltest.Open(t, nil)
	var got []json.RawMessage
	srv := mcp.NewServer(&mcp.Implementation{Name: "e"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			got = append(got, req.Params.Arguments)
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "txt"}},
				StructuredContent: map[string]any{"n": 41, "list": []any{"a", "b"}},
			}, nil
		})
	wf := load(t, `
name: w
inputs: {who: {type: string, required: true}, count: {type: number, default: 2}}
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t, with: {who: "${{ inputs.who }}", count: "${{ inputs.count }}"}}
  - id: b
    server: s
    tool: t
    with:
      n: ${{ steps.a.structuredContent.n }}
      list: ${{ steps.a.structuredContent.list }}
      second: ${{ steps.a.structuredContent.list[1] }}
      msg: "${{ inputs.who }} got ${{ steps.a.text }} #${{ steps.a.structuredContent.n }}"
`)
	inputs, err := wf.ParseInputs([]string{"who=Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newEngine(j, connectMem(t, srv)).Run(context.Background(), wf, inputs, ""); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"count":2,"who":"Ada"}`, `{"list":["a","b"],"msg":"Ada got txt #41","n":41,"second":"b"}`}
	if len(got) != 2 {
		t.Fatalf("got %d calls", len(got))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("call %d arguments %s, want %s", i, got[i], want[i])
		}
	}
}

func TestSecretInputsNeverJournaled(t *testing.T) {
	j := journaltest.Open(t, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "e"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + string(req.Params.Arguments)}}}, nil
		})
	wf := load(t, `
name: w
inputs: {token: {type: string, secret: true}}
servers: {s: {builtin: demo}}
steps: [{id: a, server: s, tool: t, with: {auth: "Bearer ${{ inputs.token }}"}}]
`)
	inputs, _ := wf.ParseInputs([]string{"token=SEKRIT-123"})
	run, err := newEngine(j, connectMem(t, srv)).Run(context.Background(), wf, inputs, "")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := j.Export(&sb, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	r, _ := j.Run(run.ID)
	rb, _ := json.Marshal(r)
	if strings.Contains(sb.String()+string(rb), "SEKRIT-123") {
		t.Fatalf("secret reached the journal:\n%s\n%s", sb.String(), rb)
	}
	if !strings.Contains(sb.String(), "Bearer [redacted]") {
		t.Fatalf("arguments not journaled with the secret redacted:\n%s", sb.String())
	}
}

// TestNoCallWithoutDurableIntent: a session adapter refuses to send a call
// whose Intent did not come from the journal.
func TestNoCallWithoutDurableIntent(t *testing.T) {
	if _, err := engine.MCP(nil).Call(context.Background(), journal.Intent{}, "t", nil, nil); !errors.Is(err, engine.ErrNoIntent) {
		t.Fatalf("Call without an intent: %v, want ErrNoIntent", err)
	}
	forged := journal.Intent{ID: journal.NewID(), IdempotencyKey: "k", Attempt: 1}
	if forged.Valid() {
		t.Fatal("an Intent made outside the journal is valid")
	}
}
