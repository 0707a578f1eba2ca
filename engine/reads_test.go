package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/replay"
)

// readSession is memSession that reads: each resources/read and
// prompts/get goes to the in-memory server, unless lose says its
// connection breaks after it was sent (io.EOF, as a stdio server that
// dies mid-read).
type readSession struct {
	memSession
	mu    sync.Mutex
	reads int
	lose  func(n int) bool // n from 1
}

var _ engine.Reader = (*readSession)(nil)

func (s *readSession) lost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.lose != nil && s.lose(s.reads)
}

func (s *readSession) Read(ctx context.Context, in journal.Intent, uri string) (*mcp.ReadResourceResult, error) {
	if !in.Valid() {
		return nil, engine.ErrNoIntent
	}
	if s.lost() {
		return nil, fmt.Errorf("calling \"resources/read\": %w", io.EOF)
	}
	return s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri, Meta: mcp.Meta{engine.MetaIdempotencyKey: in.IdempotencyKey}})
}

func (s *readSession) GetPrompt(ctx context.Context, in journal.Intent, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	if !in.Valid() {
		return nil, engine.ErrNoIntent
	}
	if s.lost() {
		return nil, fmt.Errorf("calling \"prompts/get\": %w", io.EOF)
	}
	return s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
}

// readServer is a go-sdk server with a text resource, a blob, a template,
// a prompt and an echo tool. Every read first checks that its intent is in
// the journal j (a read transaction of its own).
func readServer(t *testing.T, j *bolt.Store) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "reads"}, nil)
	durable := func(meta mcp.Meta) error {
		key, _ := meta[engine.MetaIdempotencyKey].(string)
		id, err := journal.ParseID(key)
		if err != nil {
			return fmt.Errorf("no idempotency key in _meta: %v", err)
		}
		inv, err := j.Invocation(id)
		if err != nil || inv.State != journal.StateIntent || inv.LastAttempt().EndedAt != nil {
			return fmt.Errorf("intent not in flight in the journal when the read arrived: %v", err)
		}
		return nil
	}
	srv.AddResource(&mcp.Resource{URI: "file:///notes.txt", Name: "notes", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if err := durable(req.Params.Meta); err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "alpha\nbeta"}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: "file:///logo.bin", Name: "logo"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2}}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "greet://{name}", Name: "greeting"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "Hello, " + strings.TrimPrefix(req.Params.URI, "greet://") + "!"}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "review", Arguments: []*mcp.PromptArgument{{Name: "text", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if _, ok := req.Params.Arguments["text"]; !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing argument text"}
			}
			return &mcp.GetPromptResult{Description: "a review", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Review: " + req.Params.Arguments["text"]}},
			}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}, StructuredContent: req.Params.Arguments}, nil
		})
	return srv
}

const readsWorkflow = `
name: reads
inputs:
  who: {default: Ada}
servers: {s: {builtin: demo}}
steps:
  - {id: notes, server: s, resource: "file:///notes.txt"}
  - {id: logo, server: s, resource: "file:///logo.bin"}
  - {id: hello, resource: {server: s, uri: "greet://${{ inputs.who }}"}}
  - {id: ask, server: s, prompt: review, with: {text: "${{ steps.hello.text }}"}}
  - id: use
    server: s
    tool: echo
    with:
      text: "${{ steps.notes.text }}"
      mime: "${{ steps.notes.contents[0].mimeType }}"
      blob: "${{ steps.logo.contents[0].blob }}"
      asked: "${{ steps.ask.messages[0].content.text }}"
      said: "${{ steps.ask.text }}"
      description: "${{ steps.ask.description }}"
outputs:
  greeting: "${{ steps.hello.text }}"
`

// TestReadStepsFeedLaterSteps: resources are read and a prompt is got,
// each journaled as an invocation of its method (the intent durable before
// the request went out), and a later step uses what they returned.
func TestReadStepsFeedLaterSteps(t *testing.T) {
	j := journaltest.Open(t, nil)
	sess := &readSession{memSession: connectMem(t, readServer(t, j))}
	wf := load(t, readsWorkflow)
	inputs, err := wf.ParseInputs(nil)
	if err != nil {
		t.Fatal(err)
	}
	var events []engine.Event
	eng := newEngine(j, sess)
	eng.Events = func(ev engine.Event) {
		if ev.Kind == engine.StepFinished {
			events = append(events, ev)
		}
	}
	run, err := eng.Run(context.Background(), wf, inputs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded || run.Outputs["greeting"] != "Hello, Ada!" {
		t.Fatalf("run %s %v, outputs %v", run.Status, run.Error, run.Outputs)
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		method           journal.Method
		tool, args, text string
	}{
		{journal.MethodRead, "file:///notes.txt", `{"uri":"file:///notes.txt"}`, "alpha\nbeta"},
		{journal.MethodRead, "file:///logo.bin", `{"uri":"file:///logo.bin"}`, ""},
		{journal.MethodRead, "greet://Ada", `{"uri":"greet://Ada"}`, "Hello, Ada!"},
		{journal.MethodPrompt, "review", `{"text":"Hello, Ada!"}`, "Review: Hello, Ada!"},
		{journal.MethodCall, "echo", "", ""},
	}
	if len(invs) != len(want) || len(events) != len(want) {
		t.Fatalf("%d invocations, %d events; want %d", len(invs), len(events), len(want))
	}
	for i, w := range want {
		inv := invs[i]
		if inv.Method != w.method || inv.Tool != w.tool || inv.State != journal.StateCompleted || len(inv.Attempts) != 1 || inv.Annotations != nil {
			t.Errorf("invocation %d: %s %q %s, %d attempts, annotations %s", i, inv.Method, inv.Tool, inv.State, len(inv.Attempts), inv.Annotations)
		}
		if w.args != "" && string(inv.Arguments) != w.args {
			t.Errorf("invocation %d: arguments %s, want %s", i, inv.Arguments, w.args)
		}
		if ev := events[i]; ev.Method != w.method || ev.Tool != w.tool || (w.text != "" && ev.Text != w.text) {
			t.Errorf("event %d: %s %q text %q", i, ev.Method, ev.Tool, ev.Text)
		}
	}
	if got := string(invs[0].Result.StructuredContent); got != `{"contents":[{"uri":"file:///notes.txt","mimeType":"text/plain","text":"alpha\nbeta"}]}` || invs[0].Result.Content != nil {
		t.Errorf("notes result %s, content %s", got, invs[0].Result.Content)
	}
	if got := string(invs[3].Result.StructuredContent); got != `{"description":"a review","messages":[{"content":{"type":"text","text":"Review: Hello, Ada!"},"role":"user"}]}` {
		t.Errorf("prompt result %s", got)
	}
	var used map[string]string
	json.Unmarshal(invs[4].Arguments, &used)
	for k, v := range map[string]string{"text": "alpha\nbeta", "mime": "text/plain", "blob": "AAEC", "asked": "Review: Hello, Ada!", "said": "Review: Hello, Ada!", "description": "a review"} {
		if used[k] != v {
			t.Errorf("the echo step got %s = %q, want %q", k, used[k], v)
		}
	}
	if sess.reads != 4 {
		t.Errorf("%d reads sent, want 4", sess.reads)
	}
}

// TestLostReadIsReplayed: a read whose connection broke after it was sent
// is sent again — with an untrusted server, an untrusted workspace and no
// annotations, where a tools/call would have an unknown outcome.
func TestLostReadIsReplayed(t *testing.T) {
	j := journaltest.Open(t, nil)
	sess := &readSession{memSession: connectMem(t, readServer(t, j)), lose: func(n int) bool { return n == 1 }}
	wf := load(t, "name: r\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: notes, server: s, resource: \"file:///notes.txt\"}\n")
	run, err := newEngine(j, sess).Run(context.Background(), wf, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	invs, _ := j.RunInvocations(run.ID)
	inv := invs[0]
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[0].Failure != "connection_lost" || inv.Attempts[1].Kind != journal.KindReplay {
		t.Fatalf("invocation %s, attempts %+v", inv.State, inv.Attempts)
	}
	wantDecisions := []journal.Decision{
		{Verdict: verdict.Replay, Reason: string(replay.ReasonReadRequest), View: verdict.SendTime},
		{Verdict: verdict.Replay, Reason: string(replay.ReasonReadRequest), View: verdict.Rediscovered},
	}
	if len(inv.Decisions) != 2 {
		t.Fatalf("decisions %+v", inv.Decisions)
	}
	for i, d := range inv.Decisions {
		if d.Verdict != wantDecisions[i].Verdict || d.Reason != wantDecisions[i].Reason || d.View != wantDecisions[i].View {
			t.Errorf("decision %d: %+v, want %+v", i, d, wantDecisions[i])
		}
	}
	if inv.Trust.Server || inv.Trust.Workspace {
		t.Errorf("trust %+v: the test means an untrusted server and workspace", inv.Trust)
	}
}

// TestReadBudgetSpentFails: a read that loses its connection every time
// is sent at most 1 + 3 times, and then fails — it changed nothing, so its
// outcome is not unknown and the run is not blocked.
func TestReadBudgetSpentFails(t *testing.T) {
	j := journaltest.Open(t, nil)
	sess := &readSession{memSession: connectMem(t, readServer(t, j)), lose: func(int) bool { return true }}
	wf := load(t, "name: r\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: ask, server: s, prompt: review, with: {text: x}}\n")
	run, err := newEngine(j, sess).Run(context.Background(), wf, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunFailed || run.Error == nil || run.Error.Code != engine.CodeServerUnavailable {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	invs, _ := j.RunInvocations(run.ID)
	inv := invs[0]
	if inv.State != journal.StateFailed || len(inv.Attempts) != 1+replay.MaxReplays || sess.reads != 1+replay.MaxReplays {
		t.Errorf("invocation %s with %d attempts, %d sent", inv.State, len(inv.Attempts), sess.reads)
	}
	if d := inv.LastDecision(); d == nil || d.Reason != string(replay.ReasonBudgetSpent) {
		t.Errorf("last decision %+v", d)
	}
	if !strings.Contains(inv.Error.Message, "prompt review") || !strings.Contains(inv.Error.Message, "changes nothing") {
		t.Errorf("error %v", inv.Error)
	}
	if run.Error.Code == replay.Code {
		t.Errorf("a read's run ends with the stable error of an unknown outcome")
	}
}

// TestResumeReadsAgain: a read in flight when mcpflow stopped (its intent
// journaled, its attempt open) is sent again on resume, untrusted: it is
// a replay, and its result feeds the steps after it.
func TestResumeReadsAgain(t *testing.T) {
	j := journaltest.Open(t, nil)
	sess := &readSession{memSession: connectMem(t, readServer(t, j))}
	wf := load(t, `
name: r
servers: {s: {builtin: demo}}
steps:
  - {id: notes, server: s, resource: "file:///notes.txt"}
  - {id: use, server: s, tool: echo, with: {text: "${{ steps.notes.text }}"}}
`)
	run := &journal.Run{Workflow: wf.Name, Definition: wf.Source}
	if err := j.CreateRun(run); err != nil {
		t.Fatal(err)
	}
	// What a crash while the read was in flight leaves.
	if _, err := j.Begin(&journal.Invocation{RunID: run.ID, Step: "notes", Item: -1, Server: "s", Tool: "file:///notes.txt",
		Method: journal.MethodRead, Arguments: json.RawMessage(`{"uri":"file:///notes.txt"}`), ArgumentsDigest: j.Digest([]byte(`{"uri":"file:///notes.txt"}`))}); err != nil {
		t.Fatal(err)
	}
	out, acted, err := newEngine(j, sess).Resume(context.Background(), run, wf, map[string]any{})
	if err != nil || !acted {
		t.Fatalf("resume: %v, acted %v", err, acted)
	}
	if out.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", out.Status, out.Error)
	}
	invs, _ := j.RunInvocations(run.ID)
	if len(invs) != 2 {
		t.Fatalf("%d invocations", len(invs))
	}
	inv := invs[0]
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || !inv.Attempts[0].Interrupted || inv.Attempts[1].Kind != journal.KindReplay {
		t.Errorf("read: %s, attempts %+v", inv.State, inv.Attempts)
	}
	if string(invs[1].Arguments) != `{"text":"alpha\nbeta"}` {
		t.Errorf("the step after it got %s", invs[1].Arguments)
	}
}

// TestReadErrors: a URI that does not evaluate to text fails before an
// intent; an unknown resource and a missing prompt argument are refused by
// the server (they did not run) and fail the step.
func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, step, code, text string
		intent                 bool
	}{
		{"uri not text", `{id: a, server: s, resource: "${{ 42 }}"}`, engine.CodeExpression, "the URI evaluates to 42, not a string", false},
		{"unknown resource", `{id: a, server: s, resource: "file:///none"}`, engine.CodeRejected, "server refused the read of resource file:///none", true},
		{"missing argument", `{id: a, server: s, prompt: review}`, engine.CodeRejected, "server refused the prompt request of prompt review", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journaltest.Open(t, nil)
			sess := &readSession{memSession: connectMem(t, readServer(t, j))}
			run, err := newEngine(j, sess).Run(context.Background(), load(t, "name: r\nservers: {s: {builtin: demo}}\nsteps:\n  - "+tc.step+"\n"), nil, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != journal.RunFailed || run.Error.Code != tc.code || !strings.Contains(run.Error.Message, tc.text) {
				t.Errorf("run %s: %v", run.Status, run.Error)
			}
			invs, _ := j.RunInvocations(run.ID)
			if (len(invs) == 1) != tc.intent || tc.intent && (invs[0].State != journal.StateFailed || invs[0].Attempts[0].Failure != "rejected") {
				t.Errorf("invocations %+v", invs)
			}
		})
	}
}

// TestSkippedStepsSayWhatTheyAddress: a skipped step is journaled and
// reported with its method and what it addresses, as written.
func TestSkippedStepsSayWhatTheyAddress(t *testing.T) {
	j := journaltest.Open(t, nil)
	sess := &readSession{memSession: connectMem(t, readServer(t, j))}
	var finished []engine.Event
	eng := newEngine(j, sess)
	eng.Events = func(ev engine.Event) {
		if ev.Kind == engine.StepFinished {
			finished = append(finished, ev)
		}
	}
	run, err := eng.Run(context.Background(), load(t, `
name: skips
servers: {s: {builtin: demo}}
steps:
  - {id: r, server: s, resource: "greet://${{ 1 + 1 }}", if: "false"}
  - {id: p, server: s, prompt: review, if: "false"}
  - {id: c, server: s, tool: echo, if: "false"}
`), nil, t.TempDir())
	if err != nil || run.Status != journal.RunSucceeded {
		t.Fatalf("run %v: %v", run, err)
	}
	invs, _ := j.RunInvocations(run.ID)
	want := []struct {
		m    journal.Method
		tool string
	}{{journal.MethodRead, "greet://${{ 1 + 1 }}"}, {journal.MethodPrompt, "review"}, {journal.MethodCall, "echo"}}
	if len(invs) != 3 || len(finished) != 3 {
		t.Fatalf("%d invocations, %d events", len(invs), len(finished))
	}
	for i, w := range want {
		if invs[i].State != journal.StateSkipped || invs[i].Method != w.m || invs[i].Tool != w.tool || finished[i].Method != w.m || finished[i].Tool != w.tool {
			t.Errorf("step %s: %s %s %q, event %s %q", invs[i].Step, invs[i].State, invs[i].Method, invs[i].Tool, finished[i].Method, finished[i].Tool)
		}
	}
	if sess.reads != 0 {
		t.Errorf("%d reads sent for skipped steps", sess.reads)
	}
}
