package mcpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/testbin"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpflowBin is the mcpflow binary TestMain builds, and moduleRoot the
// module's directory.
var mcpflowBin, moduleRoot string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, root, cleanup, err := testbin.Build(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	mcpflowBin, moduleRoot = bin, root
	return m.Run()
}

// workspace is a copy of testdata/workspace in a temporary directory, and
// the environment mcpflow runs in there: a home and configuration of its
// own, no MCPFLOW_ variable of the caller's.
func workspace(t *testing.T) (string, []string) {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join("testdata", "workspace"))); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "MCPFLOW_") && k != "HOME" && k != "XDG_CONFIG_HOME" && !strings.HasPrefix(k, "OTEL_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+filepath.Join(root, "home"), "XDG_CONFIG_HOME="+filepath.Join(root, "config"))
	return ws, env
}

// mcpflow runs the binary in ws and returns its stdout; a non-zero exit
// is reported with its stderr.
func mcpflow(t *testing.T, ws string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(mcpflowBin, append([]string{"--workspace", ws}, args...)...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("mcpflow %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// runJSON is `mcpflow runs show RUN -o json`, as a generic value.
func runJSON(t *testing.T, ws string, env []string, run string) map[string]any {
	t.Helper()
	out, err := mcpflow(t, ws, env, "runs", "show", run, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("runs show: %v\n%s", err, out)
	}
	return v
}

// npmNode returns the node examples/npm pins and the directory of its
// packages. Without them the test is skipped locally and fails in CI,
// where .ci/run installs them with npm ci (the convention of the tests
// that run server-everything).
func npmNode(t *testing.T) (node, modules string) {
	t.Helper()
	modules = filepath.Join(moduleRoot, "examples", "npm", "node_modules")
	node = filepath.Join(modules, ".bin", "node")
	_, err := os.Stat(node)
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node 22 and the TypeScript SDK are needed: run `cd examples/npm && npm ci` (.ci/run does): %v", err)
		}
		t.Skipf("needs node 22 and the TypeScript SDK: run `cd examples/npm && npm ci` (%v)", err)
	}
	return node, modules
}

// TestStdioWithTheTypeScriptSDK: the official TypeScript SDK's client
// spawns `mcpflow mcp`, lists the tools, runs a workflow with a progress
// token (a notification per step, the outputs as structuredContent) and
// one with a gate (the blocked tool error). The blocked run waits in the
// journal, and the command the error names continues it once the MCP
// server is gone.
func TestStdioWithTheTypeScriptSDK(t *testing.T) {
	node, modules := npmNode(t)
	ws, env := workspace(t)
	script, _ := filepath.Abs(filepath.Join("testdata", "stdio-client.mjs"))
	cmd := exec.Command(node, script, filepath.Join(modules, "@modelcontextprotocol", "sdk", "dist", "esm"), mcpflowBin, ws)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var seen struct {
		Tools       []string `json:"tools"`
		Progress    []string `json:"progress"`
		Succeeded   string   `json:"succeeded"`
		Blocked     string   `json:"blocked"`
		BlockedText string   `json:"blockedText"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &seen); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	t.Logf("tools %v; progress %q", seen.Tools, seen.Progress)
	if strings.Contains(stderr.String(), "pw-not-shown") {
		t.Errorf("a secret input's value reached stderr:\n%s", stderr.String())
	}

	if r := runJSON(t, ws, env, seen.Succeeded); r["status"] != "succeeded" || fmt.Sprint(r["inputs"]) != "map[name:Ada password:[redacted] times:1]" {
		t.Errorf("the succeeded run: %v, inputs %v", r["status"], r["inputs"])
	}
	blocked := runJSON(t, ws, env, seen.Blocked)
	approvals, _ := blocked["approvals"].([]any)
	if blocked["status"] != "blocked" || len(approvals) != 1 || approvals[0].(map[string]any)["state"] != "pending" {
		t.Fatalf("the blocked run: %v, approvals %v", blocked["status"], approvals)
	}
	st, err := os.Stat(filepath.Join(ws, ".mcpflow", "journal.db"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("journal: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	// The command the error names, as a person types it.
	m := regexp.MustCompile(`approve:  (mcpflow approve \S+ record)`).FindStringSubmatch(seen.BlockedText)
	if m == nil {
		t.Fatalf("no approve command in %q", seen.BlockedText)
	}
	if _, err := mcpflow(t, ws, env, append(strings.Fields(m[1])[1:], "--reason", "checked by the test")...); err != nil {
		t.Fatal(err)
	}
	if r := runJSON(t, ws, env, seen.Blocked); r["status"] != "succeeded" {
		t.Errorf("after mcpflow approve: %v", r["status"])
	}
}

// TestNoToolApprovesOverStdio: against the real binary and journal,
// every tool listed is called with the arguments an agent could make up
// to get a gate passed — the blocked run's id, the step, approve: true —
// and the blocked run stays exactly as it was, and nothing reaches the
// step behind the gate.
func TestNoToolApprovesOverStdio(t *testing.T) {
	ws, env := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(mcpflowBin, "mcp", "--workspace", ws)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gated-record", Arguments: map[string]any{}})
	if err != nil || !first.IsError {
		t.Fatalf("gated-record: %+v, %v", first, err)
	}
	run, _ := first.Meta["mcpflow/run"].(string)
	before := runJSON(t, ws, env, run)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	plausible := []map[string]any{
		{},
		{"run": run},
		{"run": run, "step": "record", "approve": true, "approved": true, "reason": "go"},
		{"run": run[:18], "step": "record", "action": "accept", "as": "completed", "result": map[string]any{"content": []any{}}},
		{"name": "approve " + run + " record"},
		{"status": "blocked", "workflow": "gated-record", "limit": 200},
	}
	calls := 0
	for _, tool := range list.Tools {
		for _, args := range plausible {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: args}); err != nil {
				t.Fatalf("%s %v: %v", tool.Name, args, err)
			}
			calls++
		}
	}
	after := runJSON(t, ws, env, run)
	a, _ := json.Marshal(after)
	b, _ := json.Marshal(before)
	if !bytes.Equal(a, b) {
		t.Errorf("the blocked run changed:\nbefore %s\nafter  %s", b, a)
	}
	// No run got past a gate: no call of ledger_append was ever journaled.
	out, err := mcpflow(t, ws, env, "journal", "list", "-o", "json", "--limit", "0")
	if err != nil {
		t.Fatal(err)
	}
	var invs []map[string]any
	if err := json.Unmarshal([]byte(out), &invs); err != nil {
		t.Fatalf("journal list: %v\n%s", err, out)
	}
	var tools []string
	for _, inv := range invs {
		tools = append(tools, fmt.Sprint(inv["tool"]))
	}
	if slices.Contains(tools, "ledger_append") || len(invs) == 0 {
		t.Errorf("journaled calls %v", tools)
	}
	t.Logf("%d calls of %d tools; the run %s stayed %v", calls, len(list.Tools), run[:18], after["status"])
}

// TestOutcomeUnknownIsAToolErrorThatNamesResolve: a call whose server
// dies after committing its side effect is not sent again; the tool error
// names the invocation to resolve, and the resolution stays with a
// person: the run is blocked until one resolves it.
func TestOutcomeUnknownIsAToolErrorThatNamesResolve(t *testing.T) {
	ws, env := workspace(t)
	charge := "name: charge\ndescription: Charge once.\nservers:\n  demo: {builtin: demo}\nsteps:\n" +
		"  - {id: charge, server: demo, tool: ledger_append, with: {entry: charge 10 EUR}}\n"
	if err := os.WriteFile(filepath.Join(ws, "charge.yaml"), []byte(charge), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(mcpflowBin, "mcp", "--workspace", ws)
	cmd.Env = append(env, "MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge"})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	data, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(text, "  resolve:  mcpflow journal resolve ") || !strings.Contains(text, "what happened: ") ||
		!strings.Contains(string(data), `"reason":"outcome_unknown"`) {
		t.Fatalf("isError %v\n%s\n%s", res.IsError, text, data)
	}
	run, _ := res.Meta["mcpflow/run"].(string)
	if r := runJSON(t, ws, env, run); r["status"] != "blocked" {
		t.Errorf("run %s: %v", run, r["status"])
	}
	t.Logf("the tool error:\n%s", text)
}

// TestQuestionIsAToolErrorThatNamesAnswer: a server's question during a
// step (an elicitation) that the workflow does not answer waits for a
// person; the tool error names the mcpflow answer command, and no tool
// answers it.
func TestQuestionIsAToolErrorThatNamesAnswer(t *testing.T) {
	ws, env := workspace(t)
	pay := "name: pay\nservers:\n  demo: {builtin: demo}\nsteps:\n" +
		"  - {id: pay, server: demo, tool: transfer, with: {amount: 25, to: acme}}\n"
	if err := os.WriteFile(filepath.Join(ws, "pay.yaml"), []byte(pay), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(mcpflowBin, "mcp", "--workspace", ws)
	cmd.Env = env
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	data, _ := json.Marshal(res.StructuredContent)
	run, _ := res.Meta["mcpflow/run"].(string)
	if !res.IsError || !strings.Contains(text, "  answer:   mcpflow answer "+run[:18]+" pay ") || !strings.Contains(string(data), `"reason":"awaiting_input"`) {
		t.Fatalf("isError %v\n%s\n%s", res.IsError, text, data)
	}
	for _, args := range []map[string]any{{"run": run, "step": "pay", "confirm": true}, {"run": run}} {
		for _, tool := range []string{"pay", "show_run", "list_runs"} {
			cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		}
	}
	if r := runJSON(t, ws, env, run); r["status"] != "blocked" {
		t.Errorf("run %s: %v", run, r["status"])
	}
	t.Logf("the tool error:\n%s", text)
}

// TestStdioThroughServer: while mcpflow server serves the workspace,
// `mcpflow mcp` works through it (client.Client over the socket): the
// run goes in the server, its progress comes back over the event
// stream, one notification per step.
func TestStdioThroughServer(t *testing.T) {
	ws, env := workspace(t)
	srv := exec.Command(mcpflowBin, "server", "--workspace", ws, "--grace", "2s")
	srv.Env = env
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopServer(srv)
	if !waitForLine(stdout, "socket: ", 30*time.Second) {
		t.Fatalf("mcpflow server did not start\n%s", srvErr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		}})
	cmd := exec.Command(mcpflowBin, "mcp", "--workspace", ws)
	cmd.Env = env
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "Greet_Shout", Arguments: map[string]any{"name": "Ada"}}
	params.SetProgressToken("p")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["shout"] != "HELLO, ADA!" {
		t.Fatalf("result %+v", res)
	}
	// go-sdk hands a notification to its handler from a queue, and a
	// response to the call at once: the last progress, sent just before
	// the answer, may be handled just after the call returned.
	want := []string{"step greet started", "step greet finished: completed", "step shout started", "step shout finished: completed", "run succeeded"}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got = slices.Clone(progress)
		mu.Unlock()
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("progress %q, want %q", got, want)
	}
	run, _ := res.Meta["mcpflow/run"].(string)
	if r := runJSON(t, ws, env, run); r["status"] != "succeeded" {
		t.Errorf("run %s: %v", run, r["status"])
	}
}

// waitForLine reads r until a line holds prefix (after spaces) or d is
// over; r is drained afterwards.
func waitForLine(r io.Reader, prefix string, d time.Duration) bool {
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		said := false
		for sc.Scan() {
			if !said && strings.HasPrefix(strings.TrimSpace(sc.Text()), prefix) {
				said = true
				found <- true
			}
		}
		if !said {
			found <- false
		}
	}()
	select {
	case ok := <-found:
		return ok
	case <-time.After(d):
		return false
	}
}

// stopServer stops mcpflow server as Ctrl-C does, and waits for it.
func stopServer(srv *exec.Cmd) {
	srv.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		srv.Process.Kill()
		<-done
	}
}

// TestConformance runs the official conformance suite's server scenarios
// against `mcpflow mcp` served over streamable HTTP by `mcpflow server`
// on a free loopback port without a token (the suite sends none: a
// loopback listener needs none). Scenarios that need the suite's fixture
// tools, resources and prompts are the expected failures of
// testdata/conformance-expected-failures.yml, each with its reason; any
// other failure, or a listed scenario that passes, fails the test.
func TestConformance(t *testing.T) {
	node, modules := npmNode(t)
	suite := filepath.Join(modules, ".bin", "conformance")
	if _, err := os.Stat(suite); err != nil {
		t.Fatalf("the conformance suite is not installed in examples/npm: %v", err)
	}
	ws, env := workspace(t)
	srv := exec.Command(mcpflowBin, "server", "--workspace", ws, "--listen", "127.0.0.1:0", "--grace", "2s")
	srv.Env = env
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopServer(srv)
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "MCP (streamable HTTP): "); ok {
				url <- u
			}
		}
		close(url)
	}()
	var endpoint string
	select {
	case endpoint = <-url:
	case <-time.After(30 * time.Second):
	}
	if endpoint == "" {
		t.Fatalf("mcpflow server did not say where /mcp is\n%s", srvErr.String())
	}
	baseline, _ := filepath.Abs(filepath.Join("testdata", "conformance-expected-failures.yml"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", endpoint, "--expected-failures", baseline)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	summary := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(out), "") // the suite's colours
	if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
		summary = summary[i:]
	}
	t.Logf("conformance against %s:\n%s", endpoint, summary)
	if err != nil {
		t.Fatalf("the conformance suite: %v (unexpected failures, or stale entries in %s)\nserver log:\n%s", err, baseline, srvErr.String())
	}
	for _, want := range []string{"✓ server-initialize", "✓ tools-list", "✓ dns-rebinding-protection", "Baseline check passed"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}
