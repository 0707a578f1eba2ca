package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/replay"
)

// scripted is an in-memory MCP server whose tools are Go functions.
type scripted struct {
	srv   *mcp.Server
	mu    sync.Mutex
	calls map[string][]json.RawMessage
}

func newScripted() *scripted {
	return &scripted{srv: mcp.NewServer(&mcp.Implementation{Name: "scripted"}, nil), calls: map[string][]json.RawMessage{}}
}

func (s *scripted) tool(name string, ann *mcp.ToolAnnotations, fn func(ctx context.Context, n int, args map[string]any) (*mcp.CallToolResult, error)) {
	s.srv.AddTool(&mcp.Tool{Name: name, Annotations: ann, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.mu.Lock()
			s.calls[name] = append(s.calls[name], req.Params.Arguments)
			n := len(s.calls[name])
			s.mu.Unlock()
			var args map[string]any
			json.Unmarshal(req.Params.Arguments, &args)
			return fn(ctx, n, args)
		})
}

func (s *scripted) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls[name])
}

func ok(structured map[string]any) (*mcp.CallToolResult, error) {
	b, _ := json.Marshal(structured)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: structured}, nil
}

func toolError(msg string) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
}

func runWith(t *testing.T, s *scripted, src string, inputs []string, trust journal.Trust) (*bolt.Store, *journal.Run, []journal.Invocation) {
	t.Helper()
	j := journaltest.Open(t, nil)
	wf := load(t, src)
	in, err := wf.ParseInputs(inputs)
	if err != nil {
		t.Fatal(err)
	}
	eng := newEngine(j, connectMem(t, s.srv))
	eng.Trust = func(string) journal.Trust { return trust }
	run, err := eng.Run(context.Background(), wf, in, "")
	if err != nil {
		t.Fatal(err)
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j, run, invs
}

func TestIfSkipsAndJournals(t *testing.T) {
	s := newScripted()
	s.tool("t", nil, func(context.Context, int, map[string]any) (*mcp.CallToolResult, error) {
		return ok(map[string]any{"n": 3})
	})
	_, run, invs := runWith(t, s, `
name: w
inputs: {go: {type: boolean, default: false}}
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t}
  - {id: b, server: s, tool: t, if: "inputs.go"}
  - {id: c, server: s, tool: t, if: "${{ steps.a.structuredContent.n > 2 && !steps.b.skipped == false }}"}
`, nil, journal.Trust{})
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	var states []string
	for _, inv := range invs {
		states = append(states, inv.Step+"="+inv.State.String())
	}
	if got := strings.Join(states, " "); got != "a=completed b=skipped c=completed" {
		t.Errorf("states %s", got)
	}
	if s.count("t") != 2 {
		t.Errorf("%d calls, want 2", s.count("t"))
	}
}

func TestForEachFansOutWithBoundedConcurrency(t *testing.T) {
	s := newScripted()
	var inFlight, peak atomic.Int32
	s.tool("square", nil, func(_ context.Context, _ int, args map[string]any) (*mcp.CallToolResult, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		x := args["x"].(float64)
		return ok(map[string]any{"sq": x * x, "i": args["i"]})
	})
	s.tool("sum", nil, func(_ context.Context, _ int, args map[string]any) (*mcp.CallToolResult, error) {
		return ok(map[string]any{"got": args["values"]})
	})
	_, run, invs := runWith(t, s, `
name: w
inputs: {xs: {type: array, default: [1, 2, 3, 4, 5, 6]}}
servers: {s: {builtin: demo}}
steps:
  - id: fan
    server: s
    tool: square
    for_each: ${{ inputs.xs }}
    concurrency: 3
    with: {x: "${{ item }}", i: "${{ index }}"}
  - id: total
    server: s
    tool: sum
    with: {values: "${{ steps.fan.items.map(r, r.structuredContent.sq) }}"}
`, nil, journal.Trust{})
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	if p := peak.Load(); p != 3 {
		t.Errorf("peak concurrency %d, want 3", p)
	}
	items := map[int]bool{}
	for _, inv := range invs[:6] {
		if inv.Step != "fan" || inv.State != journal.StateCompleted {
			t.Errorf("%s[%d] %s", inv.Step, inv.Item, inv.State)
		}
		items[inv.Item] = true
	}
	if len(items) != 6 {
		t.Errorf("items journaled: %v", items)
	}
	if got := string(s.calls["sum"][0]); got != `{"values":[1,4,9,16,25,36]}` {
		t.Errorf("sum got %s", got)
	}
}

func TestRetryToolErrorIsJournaledAsAttempts(t *testing.T) {
	s := newScripted()
	s.tool("flaky", nil, func(_ context.Context, n int, _ map[string]any) (*mcp.CallToolResult, error) {
		if n < 3 {
			return toolError(fmt.Sprintf("busy %d", n))
		}
		return ok(map[string]any{"done": true})
	})
	_, run, invs := runWith(t, s, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: flaky, retry: {attempts: 3, backoff: 1ms}}
`, nil, journal.Trust{})
	if run.Status != journal.RunSucceeded || s.count("flaky") != 3 {
		t.Fatalf("run %s after %d calls", run.Status, s.count("flaky"))
	}
	inv := invs[0]
	if len(inv.Attempts) != 3 || inv.Attempts[0].Failure != "tool_error" || inv.Attempts[0].Detail != "busy 1" || inv.State != journal.StateCompleted {
		t.Errorf("attempts %+v", inv.Attempts)
	}
}

func TestRetryExhaustedFailsStep(t *testing.T) {
	s := newScripted()
	s.tool("broken", nil, func(context.Context, int, map[string]any) (*mcp.CallToolResult, error) { return toolError("nope") })
	_, run, invs := runWith(t, s, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: broken, retry: {attempts: 2, backoff: 1ms}}
`, nil, journal.Trust{})
	if run.Status != journal.RunFailed || s.count("broken") != 2 || len(invs[0].Attempts) != 2 {
		t.Fatalf("run %s after %d calls, %d attempts", run.Status, s.count("broken"), len(invs[0].Attempts))
	}
}

func TestTimeoutNeverRetriedWhenUnsafe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ann   *mcp.ToolAnnotations
		trust journal.Trust
		calls int
		state journal.RunStatus
	}{
		{"no annotations", nil, journal.Trust{Server: true, Workspace: true}, 1, journal.RunBlocked},
		{"idempotent but untrusted", &mcp.ToolAnnotations{IdempotentHint: true}, journal.Trust{}, 1, journal.RunBlocked},
		{"idempotent and trusted", &mcp.ToolAnnotations{IdempotentHint: true}, journal.Trust{Server: true, Workspace: true}, 2, journal.RunSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted()
			s.tool("slow", tc.ann, func(ctx context.Context, n int, _ map[string]any) (*mcp.CallToolResult, error) {
				if n == 1 {
					<-ctx.Done() // cancelled by notifications/cancelled
					return nil, ctx.Err()
				}
				return ok(map[string]any{"n": n})
			})
			_, run, invs := runWith(t, s, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: slow, timeout: 50ms, retry: {attempts: 3, backoff: 1ms}}
`, nil, tc.trust)
			if run.Status != tc.state || s.count("slow") != tc.calls {
				t.Fatalf("run %s after %d calls, want %s after %d", run.Status, s.count("slow"), tc.state, tc.calls)
			}
			if tc.calls == 1 && invs[0].State != journal.StateOutcomeUnknown {
				t.Errorf("state %s, want outcome_unknown: the call may have run and is not sent again", invs[0].State)
			}
		})
	}
}

func TestContinueOnErrorLetsLaterStepsBranch(t *testing.T) {
	s := newScripted()
	s.tool("fail", nil, func(context.Context, int, map[string]any) (*mcp.CallToolResult, error) { return toolError("quota") })
	s.tool("fallback", nil, func(_ context.Context, _ int, args map[string]any) (*mcp.CallToolResult, error) { return ok(args) })
	_, run, invs := runWith(t, s, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: fail, continue_on_error: true}
  - {id: b, server: s, tool: fallback, if: "steps.a.isError", with: {why: "${{ steps.a.text }}"}}
  - {id: c, server: s, tool: fallback, if: "!steps.a.isError"}
`, nil, journal.Trust{})
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
	if got := string(s.calls["fallback"][0]); !strings.Contains(got, "quota") || s.count("fallback") != 1 {
		t.Errorf("fallback calls %v", s.calls["fallback"])
	}
	if invs[2].State != journal.StateSkipped {
		t.Errorf("c is %s, want skipped", invs[2].State)
	}
}

func TestRuntimeExpressionErrorNamesExpression(t *testing.T) {
	s := newScripted()
	s.tool("t", nil, func(context.Context, int, map[string]any) (*mcp.CallToolResult, error) {
		return ok(map[string]any{"a": 1})
	})
	_, run, _ := runWith(t, s, `
name: w
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t}
  - {id: b, server: s, tool: t, with: {x: "${{ steps.a.structuredContent.missing }}"}}
`, nil, journal.Trust{})
	if run.Status != journal.RunFailed || run.Error.Code != engine.CodeExpression ||
		!strings.Contains(run.Error.Message, `"steps.a.structuredContent.missing"`) || !strings.Contains(run.Error.Message, "test.yaml:6:") {
		t.Fatalf("run %s: %v", run.Status, run.Error)
	}
}

func TestOutputsJournaledOnSuccess(t *testing.T) {
	s := newScripted()
	s.tool("t", nil, func(_ context.Context, n int, args map[string]any) (*mcp.CallToolResult, error) {
		return ok(map[string]any{"n": n, "echo": args["v"]})
	})
	j, run, _ := runWith(t, s, `
name: w
inputs: {token: {type: string, secret: true}}
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: t, with: {v: "key ${{ inputs.token }}"}}
  - {id: b, server: s, tool: t}
outputs:
  total: ${{ steps.a.structuredContent.n + steps.b.structuredContent.n }}
  label: "a said ${{ steps.a.structuredContent.echo }}"
`, []string{"token=SEKRIT"}, journal.Trust{})
	stored, err := j.Run(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(stored.Outputs)
	if string(got) != `{"label":"a said key [redacted]","total":3}` {
		t.Errorf("outputs %s", got)
	}
}

// TestRetryRereadsTrust: a call that timed out may have run; a retry is a
// replay, so trust is read again and the snapshot journaled for the next
// attempt is the current one. Trust revoked after the first send: no retry,
// and the outcome is unknown.
func TestRetryRereadsTrust(t *testing.T) {
	s := newScripted()
	s.tool("slow", &mcp.ToolAnnotations{IdempotentHint: true}, func(ctx context.Context, n int, _ map[string]any) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	j := journaltest.Open(t, nil)
	wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: slow, timeout: 50ms, retry: {attempts: 3, backoff: 1ms}}\n")
	eng := newEngine(j, connectMem(t, s.srv))
	var reads atomic.Int32
	eng.Trust = func(string) journal.Trust {
		if reads.Add(1) == 1 {
			return journal.Trust{Server: true, Workspace: true, WorkspaceSource: "flag"}
		}
		return journal.Trust{Workspace: true, WorkspaceSource: "flag"} // trust: true removed from the configuration
	}
	run, err := eng.Run(context.Background(), wf, map[string]any{}, "")
	if err != nil {
		t.Fatal(err)
	}
	invs, _ := j.RunInvocations(run.ID)
	if run.Status != journal.RunBlocked || s.count("slow") != 1 || invs[0].State != journal.StateOutcomeUnknown {
		t.Fatalf("run %s after %d calls, state %s", run.Status, s.count("slow"), invs[0].State)
	}
	d := invs[0].LastDecision()
	if d == nil || d.Verdict != "outcome_unknown" || d.Reason != "server_not_trusted" || d.View != "current" {
		t.Errorf("decision %+v", d)
	}
}

// TestSecretsNeverReachTextOrEvents: a tool that echoes a secret in its
// result or in its error text does not get it into the journal or events.
func TestSecretsNeverReachTextOrEvents(t *testing.T) {
	s := newScripted()
	s.tool("echo", nil, func(_ context.Context, _ int, args map[string]any) (*mcp.CallToolResult, error) {
		return ok(map[string]any{"said": args["v"]})
	})
	s.tool("bad", nil, func(_ context.Context, _ int, args map[string]any) (*mcp.CallToolResult, error) {
		return toolError(fmt.Sprintf("bad token %v", args["v"]))
	})
	j := journaltest.Open(t, nil)
	wf := load(t, `
name: w
inputs: {token: {type: string, secret: true}}
servers: {s: {builtin: demo}}
steps:
  - {id: a, server: s, tool: echo, with: {v: "${{ inputs.token }}"}}
  - {id: b, server: s, tool: bad, with: {v: "${{ inputs.token }}"}}
`)
	in, _ := wf.ParseInputs([]string{"token=SEKRIT-42"})
	eng := newEngine(j, connectMem(t, s.srv))
	var events strings.Builder
	eng.Events = func(ev engine.Event) { fmt.Fprintf(&events, "%+v\n", ev) }
	run, err := eng.Run(context.Background(), wf, in, "")
	if err != nil {
		t.Fatal(err)
	}
	var exported strings.Builder
	j.Export(&exported, time.Time{}, false)
	stored, _ := j.Run(run.ID)
	rec, _ := json.Marshal(stored)
	for where, text := range map[string]string{"events": events.String(), "invocations": exported.String(), "run": string(rec)} {
		if strings.Contains(text, "SEKRIT-42") {
			t.Errorf("the secret reached the %s:\n%s", where, text)
		}
	}
	if !strings.Contains(string(rec), "bad token [redacted]") {
		t.Errorf("run error not kept (redacted): %s", rec)
	}
}

// TestResumeKeepsJournaledConditions: a step skipped when the run started
// stays skipped on resume even if its condition would now be true (the
// journal, not the environment of the second process, decides).
func TestResumeKeepsJournaledConditions(t *testing.T) {
	s := newScripted()
	s.tool("t", nil, func(context.Context, int, map[string]any) (*mcp.CallToolResult, error) {
		return ok(map[string]any{"ok": true})
	})
	j := journaltest.Open(t, nil)
	wf := load(t, `
name: w
env: [MCPFLOW_TEST_FLAG]
servers: {s1: {builtin: demo}, s2: {builtin: demo}}
steps:
  - {id: a, server: s1, tool: t, if: "env.MCPFLOW_TEST_FLAG == '1'"}
  - {id: b, server: s2, tool: t}
`)
	t.Setenv("MCPFLOW_TEST_FLAG", "0")
	sess := connectMem(t, s.srv)
	var s2Tries atomic.Int32
	eng := newEngine(j, sess)
	eng.Connect = func(_ context.Context, name string) (engine.Session, error) {
		if name == "s2" && s2Tries.Add(1) == 1 {
			return nil, fmt.Errorf("server s2 is down")
		}
		return sess, nil
	}
	run, err := eng.Run(context.Background(), wf, map[string]any{}, "")
	if err != nil || run.Status != journal.RunFailed {
		t.Fatalf("first run: %v %v", run, err)
	}
	t.Setenv("MCPFLOW_TEST_FLAG", "1")
	inputs, _ := engine.ResumeInputs(run, wf, nil)
	run, _, err = eng.Resume(context.Background(), run, wf, inputs)
	if err != nil || run.Status != journal.RunSucceeded {
		t.Fatalf("resume: status %v, error %v, run error %v", run.Status, err, run.Error)
	}
	invs, _ := j.RunInvocations(run.ID)
	if len(invs) != 2 || invs[0].Step != "a" || invs[0].State != journal.StateSkipped || s.count("t") != 1 {
		t.Errorf("invocations %+v, %d calls", invs, s.count("t"))
	}
}

// TestShortSecretLeavesTheStableErrorIntact: a one-letter secret is
// scrubbed from upstream error text, but the stable error — which holds no
// secret — reads the same, always.
func TestShortSecretLeavesTheStableErrorIntact(t *testing.T) {
	j := journaltest.Open(t, nil)
	sess := &fakeSession{err: fmt.Errorf("calling \"tools/call\": %w", io.EOF)}
	wf := load(t, "name: w\ninputs: {pin: {type: string, secret: true}}\nservers: {s: {builtin: demo}}\nsteps: [{id: pay, server: s, tool: t, with: {p: \"${{ inputs.pin }}\"}}]\n")
	in, _ := wf.ParseInputs([]string{"pin=e"})
	run, err := newEngine(j, sess).Run(context.Background(), wf, in, "")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunBlocked || run.Error.Message != replay.Message {
		t.Errorf("run %s, error %q; want blocked with the stable error intact", run.Status, run.Error.Message)
	}
}
