package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// chatStub is an OpenAI-compatible chat-completions server: it answers
// every POST /v1/chat/completions with reply as the assistant's message
// (or with status, when set), and records what it was sent.
type chatStub struct {
	*httptest.Server
	reply  string
	status int

	mu  sync.Mutex
	got []chatRequest
}

type chatRequest struct {
	path, auth string
	body       map[string]any
}

func newChatStub(t *testing.T, reply string) *chatStub {
	t.Helper()
	s := &chatStub{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(b, &body)
		s.mu.Lock()
		s.got = append(s.got, chatRequest{r.URL.Path, r.Header.Get("Authorization"), body})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if s.status != 0 {
			w.WriteHeader(s.status)
			io.WriteString(w, `{"error":{"message":"the key `+sampleKey+` is wrong","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		out, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-stub", "object": "chat.completion", "model": "stub-llm-1",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": s.reply}}},
		})
		w.Write(out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *chatStub) requests() []chatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chatRequest(nil), s.got...)
}

// sampleKey is the API key the tests give the provider through the
// environment; it must show nowhere.
const sampleKey = "sk-mcpflow-test-5f1e2d3c4b5a"

// useSampling writes c's mcpflow.yaml with a sampling: section that points
// at s, its api_key read from MCPFLOW_TEST_SAMPLING_KEY (which c's
// environment sets), and extra lines added to the section.
func (c *cli) useSampling(s *chatStub, extra string) {
	c.t.Helper()
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), "sampling:\n"+
		"  provider: openai-compatible\n"+
		"  base_url: "+s.URL+"/v1\n"+
		"  model: stub-llm\n"+
		"  api_key: ${MCPFLOW_TEST_SAMPLING_KEY}\n"+extra)
	c.env = append(c.env, "MCPFLOW_TEST_SAMPLING_KEY="+sampleKey)
}

const askWorkflow = `name: ask
servers:
  demo:
    builtin: demo
    args: [--protocol, "2025-11-25"]
steps:
  - id: ask
    server: demo
    tool: sample
    with:
      prompt: Name one planet with rings, in one word.
      max_tokens: 20
`

// TestSamplingRun: mcpflow run of a workflow whose server asks for
// sampling; mcpflow.yaml's provider (a chat-completions stub) answers, and
// the tool's result, journaled, holds the answer. The key reaches the stub
// and nothing else: not the output, the journal file, or the server's log.
func TestSamplingRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	stub := newChatStub(t, "Saturn.")
	c.useSampling(stub, "")
	r := c.run("run", c.workflow("ask.yaml", askWorkflow))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got := stub.requests()
	if len(got) != 1 {
		t.Fatalf("the provider got %d requests, want 1", len(got))
	}
	req := got[0]
	b, _ := json.Marshal(req.body)
	if req.path != "/v1/chat/completions" || req.auth != "Bearer "+sampleKey || req.body["model"] != "stub-llm" || req.body["max_tokens"] != 20.0 ||
		!strings.Contains(string(b), `"content":"Name one planet with rings, in one word.","role":"user"`) ||
		!strings.Contains(string(b), `"role":"system"`) {
		t.Errorf("the provider got %s %s, Authorization %q", req.path, b, req.auth)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunSucceeded || len(invs) != 1 || invs[0].Result == nil {
		t.Fatalf("run %s, invocations %+v", run.Status, invs)
	}
	if res := string(invs[0].Result.Content) + string(invs[0].Result.StructuredContent); !strings.Contains(res, "Saturn.") || !strings.Contains(res, `"model":"stub-llm-1"`) {
		t.Errorf("the journaled result %s lacks the model's answer", res)
	}
	if c.ledgerCount("sample") != 1 {
		t.Errorf("the ledger has %d sample rows, want 1", c.ledgerCount("sample"))
	}
	for what, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "journal": readAll(t, c.journalPath()),
		"server log": readAll(t, filepath.Join(c.workspace, ".mcpflow", "logs", "demo.log"))} {
		if strings.Contains(text, sampleKey) {
			t.Errorf("the %s holds the API key", what)
		}
	}
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestSamplingFailures: what a run says when sampling cannot be answered.
// The server fails the call with mcpflow's reason, which names what to
// change; the key shows nowhere.
func TestSamplingFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		setup  func(c *cli, s *chatStub)
		want   string
		asked  int // requests the provider should get
		status int
	}{
		{name: "refused key", status: 401, asked: 1,
			setup: func(c *cli, s *chatStub) { c.useSampling(s, "") },
			want:  "sampling: the provider answered 401 Unauthorized (invalid_request_error, invalid_api_key): it refused the API key"},
		{name: "unset variable",
			setup: func(c *cli, s *chatStub) { c.useSampling(s, ""); c.env = nil },
			want:  "mcpflow.yaml:5:12: sampling.api_key: ${MCPFLOW_TEST_SAMPLING_KEY}: environment variable not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			stub := newChatStub(t, "Saturn.")
			stub.status = tc.status
			tc.setup(c, stub)
			r := c.run("run", c.workflow("ask.yaml", askWorkflow))
			if r.code == 0 {
				t.Fatalf("exit 0\n%s", r.stdout)
			}
			// The server's tool error holds mcpflow's reason; the output
			// shows its start, the journal all of it.
			if !strings.Contains(r.stdout, "MCPFLOW_TOOL_ERROR: step ask: tool sample returned an error: the client did not answer the sampling request") {
				t.Errorf("output:\n%s\n%s", r.stdout, r.stderr)
			}
			_, invs := c.onlyRun(c.openJournal())
			if len(invs) != 1 || invs[0].Result == nil || !invs[0].Result.IsError || !strings.Contains(string(invs[0].Result.Content), tc.want) {
				t.Errorf("the journaled result does not say %q: %+v", tc.want, invs)
			}
			if strings.Contains(r.stdout+r.stderr+readAll(t, c.journalPath()), sampleKey) {
				t.Errorf("the key shows:\n%s\n%s", r.stdout, r.stderr)
			}
			if n := len(stub.requests()); n != tc.asked {
				t.Errorf("the provider got %d requests, want %d", n, tc.asked)
			}
			if c.ledgerCount("sample") != 0 {
				t.Errorf("the tool ran without an answer")
			}
		})
	}
}

// TestSamplingCapabilityDeclared: the demo server lists its sample tool
// only to a client that declares sampling, so servers tools shows it only
// when mcpflow.yaml names a provider; a bad sampling: section is an error
// with its position.
func TestSamplingCapabilityDeclared(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	servers := "servers:\n  demo: {builtin: demo}\n"
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), servers)
	if r := c.run("servers", "tools", "demo"); r.code != 0 || strings.Contains(r.stdout, "sample") {
		t.Errorf("without sampling: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	stub := newChatStub(t, "unused")
	c.useSampling(stub, "")
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), servers+readAll(t, filepath.Join(c.workspace, "mcpflow.yaml")))
	if r := c.run("servers", "tools", "demo"); r.code != 0 || !strings.Contains(r.stdout, "sample") {
		t.Errorf("with sampling: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := len(stub.requests()); n != 0 {
		t.Errorf("listing tools asked the provider %d times", n)
	}
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), servers+"sampling:\n  provider: anthropic\n  base_url: http://localhost/v1\n  model: m\n")
	r := c.run("run", c.workflow("ask.yaml", askWorkflow))
	want := filepath.Join(c.workspace, "mcpflow.yaml") + `:4:13: sampling.provider: unknown provider "anthropic" (supported: openai-compatible)`
	if r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("bad provider: exit %d\n%s\nwant %s", r.code, r.stderr, want)
	}
}

// TestSamplingServerEverything: against the reference server of the MCP
// project (pinned in examples/npm): its trigger-sampling-request tool is
// listed once mcpflow declares sampling, and calling it reaches the
// provider, whose answer comes back in the tool's result.
func TestSamplingServerEverything(t *testing.T) {
	t.Parallel()
	everything := abs(t, repoFile("examples", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if _, err := os.Stat(everything); err != nil {
		pinned, _ := os.ReadFile(repoFile("examples", "npm", "package.json"))
		if os.Getenv("CI") != "" && strings.Contains(string(pinned), "server-everything") {
			t.Fatalf("%v: .ci/run installs examples/npm with npm ci", err)
		}
		t.Skip("server-everything is not installed in examples/npm/node_modules")
	}
	c := newCLI(t)
	servers := "servers:\n  everything:\n    command: node\n    args: [" + everything + ", stdio]\n"
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), servers)
	if r := c.run("servers", "tools", "everything", "--trust-workspace"); r.code != 0 || strings.Contains(r.stdout, "trigger-sampling-request") {
		t.Fatalf("without sampling: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	stub := newChatStub(t, "Saturn.")
	c.useSampling(stub, "")
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), servers+readAll(t, filepath.Join(c.workspace, "mcpflow.yaml")))
	if r := c.run("servers", "tools", "everything", "--trust-workspace"); r.code != 0 || !strings.Contains(r.stdout, "trigger-sampling-request") {
		t.Fatalf("with sampling: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := c.run("call", "everything", "trigger-sampling-request", "--arg", "prompt=Name a planet with rings", "--arg", "maxTokens=30", "--trust-workspace")
	if r.code != 0 || !strings.Contains(r.stdout, `"text": "Saturn."`) || !strings.Contains(r.stdout, `"model": "stub-llm-1"`) {
		t.Fatalf("call: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := stub.requests()
	if len(got) != 1 {
		t.Fatalf("the provider got %d requests", len(got))
	}
	b, _ := json.Marshal(got[0].body)
	if got[0].auth != "Bearer "+sampleKey || got[0].body["max_tokens"] != 30.0 || got[0].body["temperature"] != 0.7 ||
		!strings.Contains(string(b), `{"content":"You are a helpful test server.","role":"system"}`) ||
		!strings.Contains(string(b), "Name a planet with rings") {
		t.Errorf("the provider got %s (Authorization %q)", b, got[0].auth)
	}
	if strings.Contains(r.stdout+r.stderr+readAll(t, c.journalPath()), sampleKey) {
		t.Error("the key shows")
	}
}

// TestSamplingJournaledAndApproved: every sampling request is journaled
// with the call that asked and the provider's answer, and with
// sampling: {approve: true} it waits for an operator first — the call
// open, for a server that asks during it (protocol 2025-11-25); the run
// stopped, durably, for one that asks in its result (2026-07-28). An
// approval sends it to the provider once; a decline sends nothing.
func TestSamplingJournaledAndApproved(t *testing.T) {
	t.Parallel()
	mrtr := strings.Replace(askWorkflow, `    args: [--protocol, "2025-11-25"]
`, "", 1)
	for _, tc := range []struct {
		name, workflow, extra, answer string
		asked                         int
	}{
		{"during the call", askWorkflow, "", "", 1},
		{"in the result", mrtr, "", "", 1},
		{"during the call, approved", askWorkflow, "  approve: true\n", "--approve", 1},
		{"during the call, declined", askWorkflow, "  approve: true\n", "--decline", 0},
		{"in the result, approved", mrtr, "  approve: true\n", "--approve", 1},
		{"in the result, declined", mrtr, "  approve: true\n", "--decline", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			stub := newChatStub(t, "Saturn.")
			c.useSampling(stub, tc.extra)
			wf := c.workflow("ask.yaml", tc.workflow)
			var r result
			if tc.answer == "" {
				r = c.run("run", wf)
			} else {
				_, wait := c.background("run", wf)
				id := awaitQuestion(t, c, "waits for approval")
				if n := len(stub.requests()); n != 0 {
					t.Fatalf("the provider got %d requests before the approval", n)
				}
				a := c.run("answer", id, "ask", tc.answer)
				if a.code > 1 {
					t.Fatalf("answer %s: exit %d\n%s%s", tc.answer, a.code, a.stdout, a.stderr)
				}
				r = wait()
				if r.code == 3 { // stopped for the answer: the answer continued it
					r = a
				}
			}
			if n := len(stub.requests()); n != tc.asked {
				t.Errorf("the provider got %d requests, want %d", n, tc.asked)
			}
			_, invs := c.onlyRun(c.openJournal())
			inv := invs[0]
			if tc.asked == 0 {
				if inv.State == journal.StateCompleted && !inv.ToolError || c.ledgerCount("sample") != 0 {
					t.Errorf("declined, yet: %s (tool error %v), %d ledger rows", inv.State, inv.ToolError, c.ledgerCount("sample"))
				}
				return
			}
			if r.code != 0 || inv.State != journal.StateCompleted || inv.ToolError || c.ledgerCount("sample") != 1 {
				t.Fatalf("exit %d, invocation %s\n%s%s", r.code, inv.State, r.stdout, r.stderr)
			}
			var answered *journal.Answer
			for _, in := range inv.Inputs {
				for i, a := range in.Answers {
					if a.By == "sampling provider" {
						answered = &in.Answers[i]
					}
				}
			}
			if answered == nil || !strings.Contains(string(answered.Response), "Saturn.") {
				t.Errorf("the provider's answer is not journaled with the call: %+v", inv.Inputs)
			}
		})
	}
}

// awaitQuestion waits for c's one run to show, in runs show, what it
// waits for (want), and returns its id.
func awaitQuestion(t *testing.T, c *cli, want string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r := c.run("runs", "list", "-o", "json")
		var runs []struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(r.stdout), &runs) != nil || len(runs) != 1 {
			continue
		}
		if show := c.run("runs", "show", runs[0].ID); strings.Contains(show.stdout, want) {
			return runs[0].ID
		}
	}
	t.Fatalf("the run never showed %q", want)
	return ""
}
