package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/replay"
)

const demoConfig = "servers:\n  demo:\n    builtin: demo\n"

// trustedDemo is the demo server, trusted: its declared annotations may
// clear a replay.
const trustedDemo = "servers:\n  demo:\n    builtin: demo\n    trust: true\n"

// run is the JSON of one run, as runs list -o json prints it.
type runJSON struct {
	ID       string            `json:"id"`
	Workflow string            `json:"workflow"`
	Status   string            `json:"status"`
	Inputs   map[string]string `json:"inputs"`
	Steps    []struct {
		Step     string            `json:"step"`
		Tool     string            `json:"tool"`
		State    string            `json:"state"`
		Attempts []json.RawMessage `json:"attempts"`
	} `json:"steps"`
}

func (w *workspace) runs() []runJSON {
	w.t.Helper()
	var runs []runJSON
	w.mcpflowJSON(&runs, "runs", "list")
	return runs
}

// The official TypeScript SDK, as a real client, uses the demo server
// through mcpflow proxy: tools, progress, tool errors, resources and
// prompts pass through; each call is a step of a run named proxy:demo
// whose inputs are the client's name and version.
func TestProxyFromTheTypeScriptSDK(t *testing.T) {
	w := newWorkspace(t, demoConfig)
	lines := w.run([]step{
		{"op": "list"},
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "Ada"}},
		{"op": "call", "tool": "count_slowly", "args": map[string]any{"n": 3, "delay_ms": 5}, "progress": true},
		{"op": "call", "tool": "fail", "args": map[string]any{"message": "boom"}},
		{"op": "call", "tool": "no_such_tool"},
		{"op": "read", "uri": "file:///demo/notes.txt"},
		{"op": "prompts"},
	}, "proxy", "demo")

	var tools struct {
		Tools []struct {
			Name        string         `json:"name"`
			Annotations map[string]any `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(lines[0].Ok, &tools); err != nil {
		t.Fatal(err)
	}
	names := map[string]map[string]any{}
	for _, tl := range tools.Tools {
		names[tl.Name] = tl.Annotations
	}
	if _, ok := names["greet"]; !ok || len(names) < 10 {
		t.Errorf("tools/list through the proxy: %v, want the demo server's tools", names)
	}
	if ann := names["ledger_count"]; ann["readOnlyHint"] != true {
		t.Errorf("ledger_count's annotations through the proxy: %v, want readOnlyHint as the server declares it", ann)
	}
	if got := lines[1].result(t); got.text() != "Hello, Ada!" || got.StructuredContent["greeting"] != "Hello, Ada!" {
		t.Errorf("greet: %+v", got)
	}
	slow := lines[2].result(t)
	if slow.StructuredContent["count"] != 3.0 || len(slow.Progress) != 3 || slow.Progress[2].Progress != 3 || slow.Progress[2].Total != 3 {
		t.Errorf("count_slowly: %+v, want count 3 and three progress notifications", slow)
	}
	if got := lines[3].result(t); !got.IsError || got.text() != "boom" {
		t.Errorf("fail: %+v, want the tool error as the server sent it", got)
	}
	if e := lines[4].Error; e == nil || e.Code == nil || *e.Code != -32602 || !strings.Contains(e.Message, `unknown tool "no_such_tool"`) || !strings.Contains(e.Message, "greet") {
		t.Errorf("unknown tool: %+v, want invalid params naming the tools that exist", lines[4])
	}
	if !strings.Contains(string(lines[5].Ok), "notes") {
		t.Errorf("resources/read through the proxy: %s %+v", lines[5].Ok, lines[5].Error)
	}
	if !strings.Contains(string(lines[6].Ok), `"review"`) {
		t.Errorf("prompts/list through the proxy: %s %+v", lines[6].Ok, lines[6].Error)
	}

	runs := w.runs()
	if len(runs) != 1 {
		t.Fatalf("runs: %+v, want the session's one run", runs)
	}
	r := runs[0]
	if r.Workflow != "proxy:demo" || r.Status != "succeeded" || r.Inputs["client"] != "proxy-test-client" || r.Inputs["client_version"] != "4.5.6" {
		t.Errorf("run: %+v, want proxy:demo, succeeded, with the client's name and version", r)
	}
	var got []string
	for _, s := range r.Steps {
		got = append(got, s.Step+" "+s.Tool+" "+s.State)
	}
	want := []string{"call-1 greet completed", "call-2 count_slowly completed", "call-3 fail completed"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("steps: %v, want %v (the unknown tool was refused before anything was journaled or sent)", got, want)
	}
	// Each call reached the server with its idempotency key: the demo
	// server's ledger records it.
	rows := w.ledger()
	if len(rows) != 3 || rows[0]["tool"] != "greet" || rows[0]["idempotency_key"] == "" {
		t.Errorf("ledger: %v, want greet, count_slowly and fail, each with its idempotency key", rows)
	}
}

// A call that may have run when the server died, and that is not safe to
// send again, answers the stable MCPFLOW_OUTCOME_UNKNOWN tool error: one
// intent journaled, one execution in the ledger, nothing of the arguments
// nor of the server in the text. The session goes on: the next call
// reconnects. The run ends blocked, for an operator.
func TestProxyOutcomeUnknownWhenTheServerDies(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	w.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	const secret = "pay-4242-to-mallory"
	lines := w.run([]step{
		{"op": "call", "tool": "ledger_append", "args": map[string]any{"entry": secret}},
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "Ada"}},
	}, "proxy", "demo", "--trust-workspace")

	got := lines[0].result(t)
	if !got.IsError || !strings.HasPrefix(got.text(), replay.Code+": "+replay.Message) {
		t.Errorf("ledger_append after the server died: %+v, want the stable outcome-unknown tool error", got)
	}
	if strings.Contains(string(lines[0].Ok), secret) || strings.Contains(string(lines[0].Ok), "EOF") {
		t.Errorf("the stable error carries the arguments or the server's words: %s", lines[0].Ok)
	}
	if got.Meta["mcpflow/code"] != replay.Code {
		t.Errorf("_meta: %v, want mcpflow/code %s", got.Meta, replay.Code)
	}
	if g := lines[1].result(t); g.text() != "Hello, Ada!" {
		t.Errorf("the call after: %+v, want it sent on a new session", g)
	}

	if n := w.executions("ledger_append"); n != 1 {
		t.Errorf("ledger_append executed %d times, want 1", n)
	}
	runs := w.runs()
	if len(runs) != 1 || runs[0].Status != "blocked" {
		t.Fatalf("runs: %+v, want one blocked run", runs)
	}
	s := runs[0].Steps[0]
	if s.Tool != "ledger_append" || s.State != "outcome_unknown" || len(s.Attempts) != 1 {
		t.Errorf("ledger_append's invocation: %+v, want outcome_unknown after one attempt", s)
	}
	var invs []struct {
		Tool  string `json:"tool"`
		State string `json:"state"`
	}
	w.mcpflowJSON(&invs, "journal", "list", "--state", "outcome_unknown")
	if len(invs) != 1 || invs[0].Tool != "ledger_append" {
		t.Errorf("journal list --state outcome_unknown: %+v, want ledger_append, waiting for an operator", invs)
	}
}

// A read-only call on a trusted server whose connection is lost after the
// call may have arrived is sent again on a new connection: the client
// only sees the result.
func TestProxyReplaysAReadTransparently(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	w.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=ledger_count"}
	lines := w.run([]step{{"op": "call", "tool": "ledger_count"}}, "proxy", "demo", "--trust-workspace")
	if got := lines[0].result(t); got.IsError || got.StructuredContent["rows"] == nil {
		t.Errorf("ledger_count: %+v, want its result", got)
	}
	runs := w.runs()
	if len(runs) != 1 || runs[0].Status != "succeeded" || len(runs[0].Steps) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	if s := runs[0].Steps[0]; s.State != "completed" || len(s.Attempts) != 2 {
		t.Errorf("ledger_count: %+v, want completed on its second attempt (a replay)", s)
	}
	if _, err := os.Stat(filepath.Join(w.dir, ".mcpflow", "demo", "ledger.jsonl.fault-fired")); err != nil {
		t.Errorf("the fault did not fire: %v", err)
	}
}

// server-memory, from npm, through the proxy: the graph it writes survives
// its process being killed between calls; the next call reconnects (sent
// on the new connection, or, if the kill was noticed only once it was on
// the wire, sent again there: read_graph is read-only and trusted).
func TestProxyInFrontOfServerMemory(t *testing.T) {
	bin, npm := node(t)
	script := filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	// Trusted: read_graph, which it declares read-only, may be sent again
	// should the kill be noticed only once the call is on the wire.
	dir := t.TempDir() // server-memory reads a relative path from its own directory
	w := newWorkspace(t, "servers:\n  memory:\n    command: "+bin+"\n    args: ["+script+"]\n    trust: true\n    env:\n      MEMORY_FILE_PATH: "+filepath.Join(dir, "memory.jsonl")+"\n")
	c := w.startClient([]step{
		{"op": "call", "tool": "create_entities", "args": map[string]any{"entities": []any{map[string]any{"name": "Ada", "entityType": "person", "observations": []any{"wrote the first program"}}}}},
		{"op": "wait"},
		{"op": "call", "tool": "read_graph"},
	}, "proxy", "memory", "--trust-workspace")
	if l := c.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	if got := c.next().result(t); got.IsError || !strings.Contains(got.text(), "Ada") {
		t.Fatalf("create_entities: %+v", got)
	}
	if l := c.next(); l.Op != "wait" {
		t.Fatalf("%+v, want wait", l)
	}
	killMemoryServer(t, w.dir, script)
	c.resume()
	if got := c.next().result(t); got.IsError || !strings.Contains(got.text(), "wrote the first program") {
		t.Errorf("read_graph after the server was killed: %+v, want the graph, from a new server process", got)
	}
	if err := c.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, c.stderr)
	}
	runs := w.runs()
	if len(runs) != 1 || runs[0].Workflow != "proxy:memory" || runs[0].Status != "succeeded" || len(runs[0].Steps) != 2 {
		t.Fatalf("runs: %+v", runs)
	}
	if s := runs[0].Steps[1]; s.Tool != "read_graph" || s.State != "completed" {
		t.Errorf("read_graph: %+v", s)
	}
}

// killMemoryServer SIGKILLs the server-memory process running script
// whose working directory is dir.
func killMemoryServer(t *testing.T, dir, script string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(cmdline), script) {
				continue
			}
			if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err != nil || cwd != dir {
				continue
			}
			var pid int
			if _, err := fmtSscan(e.Name(), &pid); err != nil {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("server-memory's process not found")
}

func fmtSscan(s string, pid *int) (int, error) { return fmt.Sscan(s, pid) }

// A proxy killed while a call is in flight leaves the call's intent; the
// next proxy of the same server settles it under the replay rule before
// serving: ledger_append, which may have run, is left outcome unknown for
// an operator, never sent again.
func TestProxyKilledMidCallIsSettledByTheNextOne(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	w.env = []string{"MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	c := w.startClient([]step{{"op": "call", "tool": "ledger_append", "args": map[string]any{"entry": "pay 10"}}}, "proxy", "demo")
	if l := c.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	waitFor(t, "the ledger row", func() bool { return len(w.ledger()) == 1 })
	killProcess(t, func(cmdline string) bool {
		return strings.Contains(cmdline, mcpflowBin+"\x00--workspace\x00"+w.dir+"\x00proxy\x00")
	})
	if l := c.next(); l.Error == nil {
		t.Errorf("the call whose proxy was killed: %+v, want an error", l)
	}
	c.wait()
	runs := w.runs()
	if len(runs) != 1 || runs[0].Status != "running" || runs[0].Steps[0].State != "intent" {
		t.Fatalf("after the kill: %+v, want the run running with ledger_append's intent", runs)
	}

	w.env = nil
	next := w.startClient([]step{{"op": "call", "tool": "greet", "args": map[string]any{"name": "Ada"}}}, "proxy", "demo")
	if l := next.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	if got := next.next().result(t); got.text() != "Hello, Ada!" {
		t.Errorf("greet: %+v", got)
	}
	if err := next.wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(next.stderr.String(), "settled run "+runs[0].ID[:18]) {
		t.Errorf("the next proxy's stderr:\n%s\nwant it to say it settled run %s", next.stderr, runs[0].ID[:18])
	}
	byID := map[string]runJSON{}
	for _, r := range w.runs() {
		byID[r.ID] = r
	}
	settled := byID[runs[0].ID]
	if settled.Status != "blocked" || settled.Steps[0].State != "outcome_unknown" {
		t.Errorf("the killed session's run: %+v, want blocked with ledger_append outcome_unknown", settled)
	}
	if n := w.executions("ledger_append"); n != 1 {
		t.Errorf("ledger_append executed %d times, want 1", n)
	}
}

// mcpflow resume --all settles a killed proxy's session too: a read-only
// call on a trusted server is sent again and completes.
func TestResumeAllSettlesAProxySession(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	w.env = []string{"MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_count"}
	c := w.startClient([]step{{"op": "call", "tool": "ledger_count"}}, "proxy", "demo", "--trust-workspace")
	if l := c.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	waitFor(t, "the ledger row", func() bool { return len(w.ledger()) == 1 })
	killProcess(t, func(cmdline string) bool {
		return strings.Contains(cmdline, mcpflowBin+"\x00--workspace\x00"+w.dir+"\x00proxy\x00")
	})
	c.next()
	c.wait()
	w.env = nil
	w.mcpflow("resume", "--all", "--trust-workspace")
	runs := w.runs()
	if len(runs) != 1 || runs[0].Status != "succeeded" {
		t.Fatalf("after resume --all: %+v, want the session's run succeeded", runs)
	}
	if s := runs[0].Steps[0]; s.State != "completed" || len(s.Attempts) != 2 {
		t.Errorf("ledger_count: %+v, want completed on a second attempt", s)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killProcess SIGKILLs the one process whose NUL-separated command line
// matches.
func killProcess(t *testing.T, match func(cmdline string) bool) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !match(string(cmdline)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no process to kill")
}

// A call killed in flight whose arguments the journal keeps only as a
// digest (over 64 KiB) cannot be sent again, even when the rule would
// clear it: resume leaves its outcome unknown, for an operator, and the
// run blocked — never stuck, never sent with other arguments.
func TestResumeOfAProxiedCallWithCappedArguments(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	w.env = []string{"MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=put_record"}
	big := strings.Repeat("x", 70<<10)
	c := w.startClient([]step{{"op": "call", "tool": "put_record", "args": map[string]any{"key": "k&<>", "value": big}}}, "proxy", "demo", "--trust-workspace")
	if l := c.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	waitFor(t, "the ledger row", func() bool { return len(w.ledger()) == 1 })
	killProcess(t, func(cmdline string) bool {
		return strings.Contains(cmdline, mcpflowBin+"\x00--workspace\x00"+w.dir+"\x00proxy\x00")
	})
	c.next()
	c.wait()
	w.env = nil
	cmd := exec.Command(mcpflowBin, "--workspace", w.dir, "resume", "--all", "--trust-workspace")
	cmd.Env = w.environ()
	out, _ := cmd.CombinedOutput()
	runs := w.runs()
	if len(runs) != 1 || runs[0].Status != "blocked" || runs[0].Steps[0].State != "outcome_unknown" {
		t.Fatalf("after resume --all: %+v\n%s", runs, out)
	}
	if n := len(w.ledger()); n != 1 {
		t.Errorf("put_record executed %d times, want 1", n)
	}
}

// A call the client cancels in flight may have run: the session's run
// ends cancelled, not succeeded, and resume judges the call by the
// replay rule (count_slowly is read-only, on a trusted server: sent
// again).
func TestProxyCallCancelledByTheClient(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	lines := w.run([]step{
		{"op": "call", "tool": "count_slowly", "args": map[string]any{"n": 40, "delay_ms": 25}, "timeout": 300},
	}, "proxy", "demo", "--trust-workspace")
	if lines[0].Error == nil {
		t.Fatalf("the cancelled call: %+v, want the client's timeout", lines[0])
	}
	runs := w.runs()
	if len(runs) != 1 || runs[0].Status != "cancelled" || runs[0].Steps[0].State != "aborted" {
		t.Fatalf("after the session: %+v, want the run cancelled with count_slowly aborted", runs)
	}
	w.mcpflow("resume", "--all", "--trust-workspace")
	if runs := w.runs(); runs[0].Status != "succeeded" || runs[0].Steps[0].State != "completed" {
		t.Errorf("after resume --all: %+v, want count_slowly sent again and completed", runs)
	}
}

// A client that says initialize twice, or sends what does not parse,
// gets errors, and the session goes on.
func TestProxySurvivesAClientsMistakes(t *testing.T) {
	w := newWorkspace(t, demoConfig)
	cmd := exec.Command(mcpflowBin, "--workspace", w.dir, "proxy", "demo")
	cmd.Env = w.environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answers := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				answers <- m
			}
		}
		close(answers)
	}()
	send := func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer := func() map[string]any {
		select {
		case m, ok := <-answers:
			if !ok {
				t.Fatalf("mcpflow proxy ended early\n%s", stderr.String())
			}
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("no answer in 60s\n%s", stderr.String())
		}
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := answer(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, c := range []struct {
		line, want string
	}{
		{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "error"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`, "Hello, Ada!"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, "error"},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"greet","arguments":{"name":"again"}}}`, "Hello, again!"},
	} {
		send(c.line)
		m := answer()
		got := fmt.Sprint(m["result"])
		if c.want == "error" {
			got = fmt.Sprint(m)
			if m["error"] == nil {
				t.Errorf("%s: %v, want an error", c.line, m)
			}
			continue
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %v, want %q", c.line, m, c.want)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("mcpflow proxy: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
