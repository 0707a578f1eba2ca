package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream/demo"
)

// TestListReads lists the demo's resources, templates and prompts one per
// page: every page is followed, and each lists what the demo declares.
func TestListReads(t *testing.T) {
	wire := newWireCounter(t)
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", PageSize: 1})
	s := connect(t, &Server{Name: "demo", URL: url}, &Options{HTTPClient: &http.Client{Transport: wire}})
	ctx := context.Background()
	resources, templates, err := s.Resources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resources) != 2 || resources[0].URI != "file:///demo/logo.bin" || resources[0].Size != 8 ||
		resources[1].URI != "file:///demo/notes.txt" || resources[1].MIMEType != "text/plain" || resources[1].Title != "Demo notes" {
		t.Errorf("resources %+v", resources)
	}
	if len(templates) != 1 || templates[0].URITemplate != "demo://greeting/{name}" || templates[0].Name != "greeting" {
		t.Errorf("templates %+v", templates)
	}
	if got := wire.count("resources/list"); got != 2 {
		t.Errorf("%d resources/list requests, want 2 pages of one", got)
	}
	prompts, err := s.Prompts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Prompt{Name: "review", Title: "Review a text", Description: "Ask for a review of a text.", Arguments: []PromptArgument{
		{Name: "text", Description: "the text to review", Required: true},
		{Name: "focus", Description: "what to look at, e.g. tone"},
	}}
	if len(prompts) != 1 || prompts[0].Name != want.Name || len(prompts[0].Arguments) != 2 || prompts[0].Arguments[0] != want.Arguments[0] || prompts[0].Arguments[1] != want.Arguments[1] {
		t.Errorf("prompts %+v, want [%+v]", prompts, want)
	}
	if s.CallsSent() != 0 || s.ReadsSent() != 0 {
		t.Errorf("listing sent %d calls and %d reads", s.CallsSent(), s.ReadsSent())
	}
}

// TestCheckReads: a resource is known when listed or matched by a
// template; an unknown resource or prompt names the ones that exist and
// the closest; a prompt's arguments are checked by name.
func TestCheckReads(t *testing.T) {
	s := connect(t, &Server{Name: "demo", URL: serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})}, nil)
	ctx := context.Background()
	for _, uri := range []string{"file:///demo/notes.txt", "file:///demo/logo.bin", "demo://greeting/Ada"} {
		if err := s.CheckResource(ctx, uri); err != nil {
			t.Errorf("CheckResource(%s): %v", uri, err)
		}
	}
	for _, tc := range []struct{ uri, want string }{
		{"file:///demo/note.txt", `unknown resource "file:///demo/note.txt" on server "demo" (did you mean "file:///demo/notes.txt"? it has: file:///demo/logo.bin, file:///demo/notes.txt, demo://greeting/{name})`},
		{"https://example.com/x", `unknown resource "https://example.com/x" on server "demo" (it has: file:///demo/logo.bin, file:///demo/notes.txt, demo://greeting/{name})`},
	} {
		err := s.CheckResource(ctx, tc.uri)
		if !errors.Is(err, ErrUnknownResource) || err.Error() != tc.want {
			t.Errorf("CheckResource(%s) = %v, want %s", tc.uri, err, tc.want)
		}
	}
	if _, err := s.Prompt(ctx, "reviw"); !errors.Is(err, ErrUnknownPrompt) ||
		err.Error() != `unknown prompt "reviw" on server "demo" (did you mean "review"? it has: review)` {
		t.Errorf("Prompt(reviw) = %v", err)
	}
	p, err := s.Prompt(ctx, "review")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		given []string
		want  string
	}{
		{[]string{"text"}, ""},
		{[]string{"text", "focus"}, ""},
		{[]string{"focus"}, "prompt review: argument text: missing (required)"},
		{[]string{"text", "fokus"}, `prompt review: argument fokus: not an argument of the prompt (did you mean "focus"?)`},
		{[]string{"text", "zzz"}, "prompt review: argument zzz: not an argument of the prompt (it takes: text, focus)"},
	} {
		err := p.CheckArguments(tc.given)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalidArgs)) {
			t.Errorf("CheckArguments(%v) = %v, want %q", tc.given, err, tc.want)
		}
	}
}

// TestReadAndGet reads each demo resource and gets the prompt over stdio,
// and counts one request on the wire for each.
func TestReadAndGet(t *testing.T) {
	s := connectDemo(t, &Server{Name: "demo", Builtin: "demo"}, t.TempDir())
	ctx := context.Background()
	res, err := s.ReadResource(ctx, "file:///demo/notes.txt", map[string]any{"io.mcpflow/idempotency-key": "k"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 || !strings.HasPrefix(res.Contents[0].Text, "note 1\nnote 2\n") || res.Contents[0].MIMEType != "text/plain" {
		t.Errorf("notes: %+v", res.Contents)
	}
	res, err = s.ReadResource(ctx, "file:///demo/logo.bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.Contents); string(b) != `[{"uri":"file:///demo/logo.bin","mimeType":"application/octet-stream","blob":"AAECAwQFBgc="}]` {
		t.Errorf("logo: %s", b)
	}
	res, err = s.ReadResource(ctx, "demo://greeting/Ada%20Lovelace", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Text != "Hello, Ada Lovelace!" {
		t.Errorf("greeting: %+v", res.Contents)
	}
	// An unknown resource is refused before anything is read: it did not run.
	if _, err := s.ReadResource(ctx, "file:///demo/none", nil); Classify(err) != replay.ClassRejected {
		t.Errorf("unknown resource: %v (%s), want a rejection", err, Classify(err))
	}
	pr, err := s.GetPrompt(ctx, "review", map[string]string{"text": "Hi.", "focus": "tone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Description != "A review of a text" || len(pr.Messages) != 2 || pr.Messages[0].Role != "user" ||
		pr.Messages[0].Content.(*mcp.TextContent).Text != "Please review the following text, focusing on tone:\n\nHi." {
		t.Errorf("review: %+v", pr)
	}
	if _, err := s.GetPrompt(ctx, "nope", nil, nil); Classify(err) != replay.ClassRejected {
		t.Errorf("unknown prompt: %v (%s), want a rejection", err, Classify(err))
	}
	if s.ReadsSent() != 6 || s.CallsSent() != 0 {
		t.Errorf("ReadsSent %d, CallsSent %d; want 6 and 0", s.ReadsSent(), s.CallsSent())
	}
}

// TestCancelledReadTellsTheServer: a read cancelled while the server
// works on it is owed its notifications/cancelled, as a call is: the
// session's Close waits until it is on the wire.
func TestCancelledReadTellsTheServer(t *testing.T) {
	for _, m := range []string{"resources/read", "prompts/get"} {
		tap := newWireTap()
		tap.mu.Lock()
		tap.pending[int64(4)] = m
		tap.mu.Unlock()
		tap.owe()
		tap.cancelWritten(json.RawMessage(`{"requestId":4}`))
		if !tap.awaitCancels(20 * time.Millisecond) {
			t.Errorf("%s: the notification of a cancelled %s did not pay what it owed", m, m)
		}
	}

	wire := newWireCounter(t)
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", Fault: "hang-after-commit", FaultTool: "file:///demo/notes.txt", Ledger: filepath.Join(t.TempDir(), "l.jsonl")})
	s, err := Connect(context.Background(), &Server{Name: "demo", URL: url}, &Options{HTTPClient: &http.Client{Transport: wire}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.ReadResource(ctx, "file:///demo/notes.txt", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read: %v, want the deadline", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := wire.count("notifications/cancelled"); got != 1 {
		t.Errorf("%d notifications/cancelled on the wire before Close returned, want 1", got)
	}
}
