package proxy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An MCP client starts one proxy per server, all in one workspace: the
// first holds the journal, the others write their runs through it. Both
// sessions' calls are journaled, and runs list shows both runs.
func TestTwoProxiesShareTheJournal(t *testing.T) {
	w := newWorkspace(t, "servers:\n  demo:\n    builtin: demo\n  other:\n    builtin: demo\n")
	first := w.startClient([]step{
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "first"}},
		{"op": "wait"},
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "first again"}},
	}, "proxy", "demo")
	if l := first.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	if got := first.next().result(t); got.text() != "Hello, first!" {
		t.Fatalf("%+v", got)
	}
	if l := first.next(); l.Op != "wait" {
		t.Fatalf("%+v", l)
	}
	// The first proxy holds the journal now.
	lines := w.run([]step{
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "second"}},
		{"op": "call", "tool": "ledger_append", "args": map[string]any{"entry": "x"}},
	}, "proxy", "other")
	if got := lines[0].result(t); got.text() != "Hello, second!" {
		t.Errorf("the second proxy's call: %+v", got)
	}
	if got := lines[1].result(t); got.IsError {
		t.Errorf("the second proxy's ledger_append: %+v", got)
	}
	byWorkflow := map[string]runJSON{}
	for _, r := range w.runs() { // through the first proxy, which holds the journal
		byWorkflow[r.Workflow] = r
	}
	if r := byWorkflow["proxy:other"]; r.Status != "succeeded" || len(r.Steps) != 2 || r.Steps[1].State != "completed" {
		t.Errorf("the second proxy's run: %+v", r)
	}
	if r := byWorkflow["proxy:demo"]; r.Status != "running" || len(r.Steps) != 1 {
		t.Errorf("the first proxy's run while it waits: %+v", r)
	}
	first.resume()
	if got := first.next().result(t); got.text() != "Hello, first again!" {
		t.Errorf("%+v", got)
	}
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
	for _, r := range w.runs() {
		if r.Status != "succeeded" {
			t.Errorf("run %s: %s, want succeeded", r.Workflow, r.Status)
		}
	}
}

// While mcpflow server holds the journal, a proxy writes its session's
// run through it; the server counts it as going, not abandoned, so its
// resume of abandoned runs leaves it alone; the proxy hands the server
// the session's events, which it streams; runs watch through the server
// follows the session from the journal to its end.
func TestProxyWritesThroughMcpflowServer(t *testing.T) {
	w := newWorkspace(t, trustedDemo)
	srv := exec.Command(mcpflowBin, "server", "--workspace", w.dir, "--grace", "2s")
	srv.Env = w.environ()
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvErr strings.Builder
	srv.Stderr = &lockedWriter{w: &srvErr}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "socket: ") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("mcpflow server did not start\n%s", srvErr.String())
	}
	c := w.startClient([]step{
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "Ada"}},
		{"op": "wait"},
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "Bob"}},
	}, "proxy", "demo")
	if l := c.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	if got := c.next().result(t); got.text() != "Hello, Ada!" {
		t.Fatalf("%+v", got)
	}
	if l := c.next(); l.Op != "wait" {
		t.Fatalf("%+v", l)
	}
	// The session goes on in the proxy: the server does not settle it.
	w.mcpflow("resume", "--all")
	runs := w.runs()
	if len(runs) != 1 || runs[0].Workflow != "proxy:demo" || runs[0].Status != "running" || runs[0].Steps[0].State != "completed" {
		t.Fatalf("runs through the server while the session goes on: %+v", runs)
	}
	watch := w.watch(runs[0].ID)
	// The server streams the session's events as the proxy hands them
	// over: its UI and its followers see the session live.
	streamed := w.events(runs[0].ID)
	c.resume()
	if got := c.next().result(t); got.text() != "Hello, Bob!" {
		t.Fatalf("%+v", got)
	}
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}
	if out, err := watch(); err != nil || !strings.Contains(out, "Hello, Bob!") || !strings.Contains(out, "succeeded") {
		t.Errorf("runs watch of the session: %v, want its second call and its end\n%s", err, out)
	}
	if got, want := streamed(), "step_started call-2, step_finished call-2, run_finished"; got != want {
		t.Errorf("the server's events of the session: %q, want %q", got, want)
	}
	if runs := w.runs(); len(runs) != 1 || runs[0].Status != "succeeded" {
		t.Errorf("after the session: %+v, want its run succeeded", runs)
	}
}

// A proxy holds the journal only while its calls go: while an agent's
// session is open and idle, mcpflow run in a terminal finds the journal
// free; and when the proxy another wrote through lets it go, the other's
// next call finds it again, in the same run.
func TestProxyLetsTheJournalGoBetweenCalls(t *testing.T) {
	w := newWorkspace(t, "servers:\n  demo:\n    builtin: demo\n  other:\n    builtin: demo\n")
	src, err := os.ReadFile(filepath.Join(repo, "examples", "workflows", "hello.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "hello.yaml"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	first := w.startClient([]step{{"op": "call", "tool": "greet", "args": map[string]any{"name": "first"}}, {"op": "wait"}}, "proxy", "demo")
	if l := first.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	first.next().result(t)
	if l := first.next(); l.Op != "wait" {
		t.Fatalf("%+v", l)
	}
	second := w.startClient([]step{
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "second"}},
		{"op": "wait"},
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "second again"}},
		{"op": "call", "tool": "ledger_append", "args": map[string]any{"entry": "x"}},
	}, "proxy", "other")
	if l := second.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	second.next().result(t)
	if l := second.next(); l.Op != "wait" {
		t.Fatalf("%+v", l)
	}
	// Both sessions are open and idle: a run in a terminal goes.
	out := w.mcpflow("run", filepath.Join(w.dir, "hello.yaml"), "--wait")
	if !strings.Contains(out, "succeeded") {
		t.Errorf("mcpflow run while proxies are idle:\n%s", out)
	}
	// A terminal watches the second session: reading the journal when it
	// is free, through a proxy while one holds it, holding it never.
	var secondID string
	for _, r := range w.runs() {
		if r.Workflow == "proxy:other" {
			secondID = r.ID
		}
	}
	watch := w.watch(secondID)
	first.resume() // the first proxy's client ends
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
	second.resume()
	if got := second.next().result(t); got.text() != "Hello, second again!" {
		t.Errorf("the call after the first proxy ended: %+v", got)
	}
	if got := second.next().result(t); got.IsError {
		t.Errorf("ledger_append: %+v", got)
	}
	if err := second.wait(); err != nil {
		t.Fatal(err)
	}
	if out, err := watch(); err != nil || !strings.Contains(out, "Hello, second again!") || !strings.Contains(out, "succeeded") {
		t.Errorf("runs watch of the second session: %v, want its calls and its end\n%s", err, out)
	}
	byWorkflow := map[string]runJSON{}
	for _, r := range w.runs() {
		byWorkflow[r.Workflow] = r
		if r.Status != "succeeded" {
			t.Errorf("run %s %s: %s, want succeeded", r.ID, r.Workflow, r.Status)
		}
	}
	var steps []string
	for _, s := range byWorkflow["proxy:other"].Steps {
		steps = append(steps, s.Tool+" "+s.State)
	}
	if strings.Join(steps, ", ") != "greet completed, greet completed, ledger_append completed" {
		t.Errorf("the second proxy's run: %v, want its three calls in one run", steps)
	}
	if _, ok := byWorkflow["hello"]; !ok {
		t.Errorf("runs: %v, want hello's", byWorkflow)
	}
}

// The proxy stands in front of a server over streamable HTTP as over
// stdio: a call whose response is dropped after the server committed it
// answers the stable outcome-unknown error, executed once; the next call
// goes on a new connection.
func TestProxyInFrontOfAnHTTPServer(t *testing.T) {
	w := newWorkspace(t, demoConfig) // rewritten below, once the server's address is known
	srv := exec.Command(mcpflowBin, "--workspace", w.dir, "demo-server", "--http", "127.0.0.1:0")
	srv.Env = append(w.environ(), "MCPFLOW_DEMO_FAULT=drop-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append",
		"MCPFLOW_DEMO_LEDGER="+filepath.Join(w.dir, ".mcpflow", "demo", "ledger.jsonl"))
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				url <- u
			}
		}
	}()
	select {
	case u := <-url:
		if err := os.WriteFile(filepath.Join(w.dir, "mcpflow.yaml"), []byte("servers:\n  demo:\n    url: "+u+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo server did not say where it listens")
	}
	lines := w.run([]step{
		{"op": "call", "tool": "ledger_append", "args": map[string]any{"entry": "pay 10"}},
		{"op": "call", "tool": "greet", "args": map[string]any{"name": "Ada"}},
	}, "proxy", "demo")
	if got := lines[0].result(t); !got.IsError || !strings.HasPrefix(got.text(), "MCPFLOW_OUTCOME_UNKNOWN: ") {
		t.Errorf("ledger_append whose answer was dropped: %+v", got)
	}
	if got := lines[1].result(t); got.text() != "Hello, Ada!" {
		t.Errorf("greet after: %+v", got)
	}
	if n := w.executions("ledger_append"); n != 1 {
		t.Errorf("ledger_append executed %d times, want 1", n)
	}
	if runs := w.runs(); len(runs) != 1 || runs[0].Status != "blocked" || runs[0].Steps[0].State != "outcome_unknown" {
		t.Errorf("runs: %+v, want the session's run blocked on ledger_append", runs)
	}
}

// A list change the server announces reaches the client through the
// proxy: server-everything registers a resource when its
// gzip-file-as-resource tool runs, and says so (resources/list_changed);
// the client then lists the new resource.
func TestProxyPassesListChangesOn(t *testing.T) {
	bin, npm := node(t)
	script := filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	w := newWorkspace(t, "servers:\n  everything:\n    command: "+bin+"\n    args: ["+script+", stdio]\n")
	c := w.startClient([]step{
		{"op": "call", "tool": "gzip-file-as-resource", "args": map[string]any{"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=", "outputType": "resourceLink"}},
		{"op": "resources"},
	}, "proxy", "everything")
	if l := c.next(); l.Op != "connected" {
		t.Fatalf("%+v", l)
	}
	if got := c.next().result(t); got.IsError {
		t.Fatalf("gzip-file-as-resource: %+v", got)
	}
	listed := c.next()
	if err := c.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, c.stderr)
	}
	if !slices.Contains(c.notified(), "notifications/resources/list_changed") {
		t.Errorf("notifications the client got: %v, want resources/list_changed", c.notified())
	}
	if !strings.Contains(string(listed.Ok), "hello.txt.gz") {
		t.Errorf("resources/list after: %s, want the new resource", listed.Ok)
	}
}
