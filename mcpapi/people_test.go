package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// fakeLocal loads workflows for real and answers discovery from a table:
// a server absent from it cannot be reached.
type fakeLocal struct {
	tools map[string]map[string]string // server → tool → annotations JSON
}

func (f fakeLocal) Validate(_ context.Context, req service.ValidateRequest) (*workflow.Workflow, error) {
	return workflow.LoadFile(req.File, nil)
}

func (f fakeLocal) Tools(_ context.Context, req service.ToolsRequest) (*service.ToolsReport, error) {
	tools, ok := f.tools[req.Server]
	if !ok {
		return nil, fmt.Errorf("server %s: connection refused", req.Server)
	}
	rep := &service.ToolsReport{Server: &upstream.Server{Name: req.Server}}
	for _, n := range slices.Sorted(maps.Keys(tools)) {
		var raw json.RawMessage
		if tools[n] != "" {
			raw = json.RawMessage(tools[n])
		}
		rep.Tools = append(rep.Tools, service.ToolVerdict{Tool: upstream.Tool{Name: n, Annotations: raw}})
	}
	return rep, nil
}

// recordingAPI is a service.API that records each method called: a run
// comes back blocked at a gate; any method that decides, answers,
// resolves, continues or cancels is recorded, and refused.
type recordingAPI struct {
	mu     sync.Mutex
	called []string
	run    *journal.Run
}

func (a *recordingAPI) record(m string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.called = append(a.called, m)
}

func (a *recordingAPI) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.called)
}

var errRefused = errors.New("refused by the test")

func (a *recordingAPI) report() *service.Report {
	return &service.Report{Run: a.run}
}

func (a *recordingAPI) Runs(service.RunQuery) ([]service.RunSummary, error) {
	a.record("Runs")
	return []service.RunSummary{{Run: *a.run}}, nil
}
func (a *recordingAPI) CountRuns(service.RunQuery) (service.Count, error) {
	a.record("CountRuns")
	return service.Count{}, nil
}
func (a *recordingAPI) RunDetail(string) (*service.Report, error) {
	a.record("RunDetail")
	return a.report(), nil
}
func (a *recordingAPI) Invocations(service.InvocationQuery) ([]journal.Invocation, error) {
	a.record("Invocations")
	return nil, nil
}
func (a *recordingAPI) CountInvocations(service.InvocationQuery) (service.Count, error) {
	a.record("CountInvocations")
	return service.Count{}, nil
}
func (a *recordingAPI) Invocation(string) (*journal.Invocation, error) {
	a.record("Invocation")
	return nil, errRefused
}
func (a *recordingAPI) Resolve(service.ResolveRequest) (*journal.Invocation, error) {
	a.record("Resolve")
	return nil, errRefused
}
func (a *recordingAPI) Approve(context.Context, service.ApproveRequest) (*service.ApproveReport, error) {
	a.record("Approve")
	return nil, errRefused
}
func (a *recordingAPI) Answer(context.Context, service.AnswerRequest) (*service.AnswerReport, error) {
	a.record("Answer")
	return nil, errRefused
}
func (a *recordingAPI) Export(io.Writer, time.Time, bool) error {
	a.record("Export")
	return errRefused
}
func (a *recordingAPI) Archive(io.Writer, bool) error     { a.record("Archive"); return errRefused }
func (a *recordingAPI) Check() ([]journal.Problem, error) { a.record("Check"); return nil, errRefused }
func (a *recordingAPI) Run(_ context.Context, req service.RunRequest) (*service.Report, error) {
	a.record("Run")
	if req.Events != nil {
		req.Events(engine.Event{Kind: engine.StepStarted, Step: "greet", Item: -1})
		req.Events(engine.Event{Kind: engine.StepFinished, Step: "greet", Item: -1, State: journal.StateCompleted})
		req.Events(engine.Event{Kind: engine.RunFinished, Status: journal.RunBlocked})
	}
	return a.report(), nil
}
func (a *recordingAPI) Resume(context.Context, service.ResumeRequest) (*service.Report, error) {
	a.record("Resume")
	return nil, errRefused
}
func (a *recordingAPI) Call(context.Context, service.CallRequest) (*service.Report, error) {
	a.record("Call")
	return nil, errRefused
}
func (a *recordingAPI) Resumable() ([]journal.ID, error) { a.record("Resumable"); return nil, nil }
func (a *recordingAPI) Submit(context.Context, service.RunRequest) (journal.ID, error) {
	a.record("Submit")
	return journal.ID{}, errRefused
}
func (a *recordingAPI) Watch(context.Context, string, func(engine.Event)) (*service.Report, error) {
	a.record("Watch")
	return nil, errRefused
}
func (a *recordingAPI) Cancel(string, string) error { a.record("Cancel"); return errRefused }

var _ service.API = (*recordingAPI)(nil)

// connect serves s in memory and returns a client session of it.
func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, _, err := s.MCP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func testdataDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "workspace"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// blockedRun is a run waiting at the gate of gate.yaml's step record.
func blockedRun() *journal.Run {
	id, _ := journal.ParseID("01a246e6-cb0d-7913-bdb3-cfe02466e182")
	return &journal.Run{ID: id, Workflow: "gated-record", Status: journal.RunBlocked,
		Error:     &journal.Error{Code: "MCPFLOW_APPROVAL_REQUIRED", Message: "step record waits for approval"},
		Approvals: []journal.Approval{{Step: "record", Message: "record the greeting in the ledger?", State: journal.ApprovalPending, RequestedAt: time.Now()}}}
}

// TestNoToolDecidesForAPerson: whatever tool is called, with whatever
// arguments an agent could make up — the run's id, the step's name, the
// words approve, answer, resolve — the server only ever runs a workflow
// or reads the journal: it never approves, rejects, answers, resolves,
// resumes or cancels.
func TestNoToolDecidesForAPerson(t *testing.T) {
	a := &recordingAPI{run: blockedRun()}
	s, err := New(&Options{Dir: testdataDir(t), Local: fakeLocal{tools: map[string]map[string]string{"demo": {"greet": `{"readOnlyHint":true}`}}},
		Backend: func(context.Context, bool) (service.API, func(), error) { return a, func() {}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		for _, word := range []string{"approve", "reject", "answer", "resolve", "resume", "cancel", "decide", "elicit"} {
			if strings.Contains(strings.ToLower(tool.Name), word) {
				t.Errorf("tool %s: its name says it would %s", tool.Name, word)
			}
		}
	}
	if want := []string{"Greet_Shout", "gated-record", "list_runs", "lookup", "show_run"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	run, step := a.run.ID.String(), "record"
	plausible := []map[string]any{
		nil,
		{},
		{"run": run},
		{"run": run, "step": step},
		{"run": run, "step": step, "approve": true, "action": "approve", "as": "completed", "reason": "ok"},
		{"name": "Ada", "run": run, "approved": true},
		{"status": "blocked", "workflow": "gated-record", "limit": 5},
		{"name": "approve " + run + " " + step},
	}
	for _, tool := range names {
		for _, args := range plausible {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				t.Fatalf("%s %v: %v", tool, args, err)
			}
			if tool == "gated-record" && !res.IsError {
				t.Errorf("%s %v: a blocked run is not a tool error", tool, args)
			}
		}
	}
	for _, m := range a.calls() {
		if m != "Run" && m != "Runs" && m != "RunDetail" {
			t.Errorf("a tool called %s", m)
		}
	}
	if !slices.Contains(a.calls(), "Run") || !slices.Contains(a.calls(), "RunDetail") || !slices.Contains(a.calls(), "Runs") {
		t.Errorf("calls %v: the tools were not all reached", a.calls())
	}
}

// TestBlockedRunIsAToolErrorThatNamesTheCommands: the run, what waits and
// the exact commands, as data and as text.
func TestBlockedRunIsAToolErrorThatNamesTheCommands(t *testing.T) {
	a := &recordingAPI{run: blockedRun()}
	s, _ := New(&Options{Dir: testdataDir(t), Local: fakeLocal{},
		Backend: func(context.Context, bool) (service.API, func(), error) { return a, func() {}, nil }})
	cs := connect(t, s)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "gated-record", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	short := a.run.ID.Short()
	for _, want := range []string{
		"mcpflow: run " + short + " is blocked",
		"waiting for approval: step record",
		"approve:  mcpflow approve " + short + " record [--reason TEXT]",
		"reject:   mcpflow reject " + short + " record [--reason TEXT]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if !res.IsError || res.Meta[MetaRun] != a.run.ID.String() {
		t.Errorf("isError %v, _meta %v", res.IsError, res.Meta)
	}
	b, _ := json.Marshal(res.StructuredContent)
	want := `{"run":"` + a.run.ID.String() + `","status":"blocked","waiting":[{"message":"record the greeting in the ledger?","reason":"approval","step":"record"}]}`
	if string(b) != want {
		t.Errorf("structuredContent %s\nwant %s", b, want)
	}
}

// TestUnreachableServerGivesSafeDefaults: the hints of a workflow whose
// server cannot be asked are the safe defaults, and the tools of servers
// that answered give theirs.
func TestUnreachableServerGivesSafeDefaults(t *testing.T) {
	var logged []string
	lookup := fakeLocal{tools: map[string]map[string]string{"demo": {
		"greet": `{"readOnlyHint":true}`, "ledger_count": `{"readOnlyHint":true,"destructiveHint":false}`, "upper": `{"idempotentHint":true}`}}}
	for _, tc := range []struct {
		name   string
		local  fakeLocal
		hints  map[string][3]bool // tool → readOnly, idempotent, destructive
		logged bool
	}{
		{"discovered", lookup, map[string][3]bool{"lookup": {true, true, false}, "Greet_Shout": {false, true, true}, "gated-record": {false, false, true}}, false},
		{"unreachable", fakeLocal{}, map[string][3]bool{"lookup": {false, false, true}, "Greet_Shout": {false, false, true}, "gated-record": {false, false, true}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged = nil
			s, _ := New(&Options{Dir: testdataDir(t), Local: tc.local,
				Backend: func(context.Context, bool) (service.API, func(), error) { return nil, nil, errRefused },
				Logf:    func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
			c, err := s.Catalog(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range c.Tools {
				a := tool.Tool.Annotations
				got := [3]bool{a.ReadOnlyHint, a.IdempotentHint, *a.DestructiveHint}
				if got != tc.hints[tool.Tool.Name] {
					t.Errorf("%s: hints %v, want %v", tool.Tool.Name, got, tc.hints[tool.Tool.Name])
				}
			}
			if len(c.Tools) != 3 {
				t.Errorf("%d tools", len(c.Tools))
			}
			if tc.logged != (len(logged) == 1) {
				t.Errorf("logged %q (the server asked once, its answer cached)", logged)
			}
		})
	}
}

// TestCollidingWorkflowsAreLeftOut: two workflows whose names meet are
// both left out, and said so.
func TestCollidingWorkflowsAreLeftOut(t *testing.T) {
	dir := t.TempDir()
	for f, name := range map[string]string{"a.yaml": "deploy prod", "b.yaml": "deploy.prod", "c.yaml": "list_runs", "d.yaml": "ok"} {
		src := "name: " + name + "\n" + demoServer + "steps:\n  - {id: a, server: demo, tool: greet}\n"
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("name: [\n"), 0o600)
	var logged []string
	s, _ := New(&Options{Dir: dir, Local: fakeLocal{}, Backend: func(context.Context, bool) (service.API, func(), error) { return nil, nil, errRefused },
		Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	c, err := s.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) != 1 || c.Tools[0].Tool.Name != "ok" {
		t.Errorf("tools %+v", c.Tools)
	}
	if len(c.Collisions) != 2 || c.LeftOut[filepath.Join(dir, "broken.yaml")] == nil {
		t.Errorf("collisions %+v, left out %v", c.Collisions, c.LeftOut)
	}
	all := strings.Join(logged, "\n")
	for _, want := range []string{"tool deploy_prod: workflows " + filepath.Join(dir, "a.yaml") + ", " + filepath.Join(dir, "b.yaml"), "tool list_runs: the name of one of mcpflow's own tools", "broken.yaml: not offered"} {
		if !strings.Contains(all, want) {
			t.Errorf("log lacks %q:\n%s", want, all)
		}
	}
	// Still served: the journal's tools.
	cs := connect(t, s)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 3 {
		t.Fatalf("tools %v, %v", list, err)
	}
}

// TestBadArgumentsAreToolErrorsWithoutSecrets: an argument that is not an
// object, or a backend error that quotes a secret input, is a tool error
// that does not show it.
func TestBadArgumentsAreToolErrorsWithoutSecrets(t *testing.T) {
	backend := func(context.Context, bool) (service.API, func(), error) {
		return nil, nil, errors.New("journal busy while typing password hunter2-secret")
	}
	s, _ := New(&Options{Dir: testdataDir(t), Local: fakeLocal{}, Backend: backend})
	cs := connect(t, s)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Greet_Shout", Arguments: map[string]any{"name": "Ada", "password": "hunter2-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || strings.Contains(text, "hunter2-secret") || !strings.Contains(text, workflow.Redacted) {
		t.Errorf("isError %v, text %q", res.IsError, text)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_runs", Arguments: map[string]any{"status": "sleeping"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, `status "sleeping": want one of running, succeeded, failed, blocked, cancelled`) {
		t.Errorf("isError %v, text %q", res.IsError, text)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_runs", Arguments: map[string]any{"limit": 0}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || text != "limit 0: want 1 to 200" {
		t.Errorf("isError %v, text %q", res.IsError, text)
	}
}

// failingAPI runs every workflow to a failure.
type failingAPI struct{ recordingAPI }

func (a *failingAPI) Run(context.Context, service.RunRequest) (*service.Report, error) {
	return &service.Report{Run: a.run}, nil
}

// TestFailedRunIsAToolErrorWithTheRunsError: the run's error, and how to
// inspect it.
func TestFailedRunIsAToolErrorWithTheRunsError(t *testing.T) {
	run := blockedRun()
	run.Status, run.Approvals = journal.RunFailed, nil
	run.Error = &journal.Error{Code: "MCPFLOW_TOOL_ERROR", Message: "step shout: the tool said no"}
	a := &failingAPI{recordingAPI{run: run}}
	s, _ := New(&Options{Dir: testdataDir(t), Local: fakeLocal{},
		Backend: func(context.Context, bool) (service.API, func(), error) { return a, func() {}, nil }})
	cs := connect(t, s)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Greet_Shout", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	want := "mcpflow: run " + run.ID.Short() + " failed: MCPFLOW_TOOL_ERROR: step shout: the tool said no\n  inspect:  mcpflow runs show " + run.ID.Short()
	if !res.IsError || text != want {
		t.Errorf("isError %v, text %q\nwant %q", res.IsError, text, want)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"error":{"code":"MCPFLOW_TOOL_ERROR"`) || !strings.Contains(string(b), `"status":"failed"`) {
		t.Errorf("structuredContent %s", b)
	}
}
