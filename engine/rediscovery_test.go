package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/upstream/demo"
	"github.com/mcpflow/mcpflow/workflow"
)

// These tests run the engine against REAL demo servers (a stdio subprocess
// of a freshly built mcpflow binary, or the demo served in-process over
// streamable HTTP), wired the way the CLI wires it, with a trust function
// the test controls.

// buildMcpflow builds cmd/mcpflow into dir, which builtin servers are started
// from ("mcpflow demo-server").
func buildMcpflow(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available to build mcpflow for the stdio demo server: " + err.Error())
	}
	bin := filepath.Join(t.TempDir(), "mcpflow")
	cmd := exec.Command(goTool, "build", "-o", bin, "../cmd/mcpflow")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/mcpflow: %v\n%s", err, out)
	}
	return bin
}

// realRig is an engine over a real journal and a real server pool.
type realRig struct {
	t         *testing.T
	workspace string
	j         *bolt.Store
	eng       *engine.Engine
	wf        *workflow.Workflow

	mu       sync.Mutex
	sessions []*upstream.Session // every session the engine was handed, once each
}

// fullTrust is a trusted server in a trusted workspace.
var fullTrust = journal.Trust{Server: true, Workspace: true, WorkspaceSource: "flag"}

func newRealRig(t *testing.T, self, src string, trust func(string) journal.Trust) *realRig {
	t.Helper()
	ws := t.TempDir()
	wf, err := workflow.Load(filepath.Join(ws, "w.yaml"), []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &realRig{t: t, workspace: ws, wf: wf}
	r.j = journaltest.OpenPath(t, filepath.Join(ws, ".mcpflow", "journal.db"), nil)
	pool := upstream.NewPool(wf.Servers, &upstream.Options{Self: self, Workspace: ws})
	t.Cleanup(func() { pool.Close() })
	// As cmd/mcpflow's newEngine, recording every session handed out.
	r.eng = &engine.Engine{
		Journal: r.j,
		Connect: func(ctx context.Context, name string) (engine.Session, error) {
			s, err := pool.Session(ctx, name)
			if err != nil {
				return nil, err
			}
			r.record(s)
			return engine.MCP(s), nil
		},
		Reconnect: func(ctx context.Context, name string, old engine.Session) (engine.Session, error) {
			s, err := pool.Reconnect(ctx, name, engine.SessionOf(old))
			if err != nil {
				return nil, err
			}
			r.record(s)
			return engine.MCP(s), nil
		},
		Trust:   trust,
		Backoff: 10 * time.Millisecond,
	}
	return r
}

func (r *realRig) record(s *upstream.Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.sessions {
		if have == s {
			return
		}
	}
	r.sessions = append(r.sessions, s)
}

// run runs the workflow and returns the run and its invocations.
func (r *realRig) run() (*journal.Run, []journal.Invocation) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := r.eng.Run(ctx, r.wf, map[string]any{}, r.workspace)
	if err != nil {
		r.t.Fatalf("run: %v", err)
	}
	invs, err := r.j.RunInvocations(run.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return run, invs
}

// checkWire asserts that exactly one tools/call went on the wire per
// journaled attempt, summed over every session of the run.
func (r *realRig) checkWire(invs []journal.Invocation, wantSessions int) {
	r.t.Helper()
	attempts := 0
	for _, inv := range invs {
		attempts += len(inv.Attempts)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var sent int64
	per := make([]int64, len(r.sessions))
	for i, s := range r.sessions {
		per[i] = s.CallsSent()
		sent += per[i]
	}
	if sent != int64(attempts) {
		r.t.Errorf("%d tools/call on the wire (per session %v), %d journaled attempts:%s", sent, per, attempts, describeInvs(invs))
	}
	if len(r.sessions) != wantSessions {
		r.t.Errorf("%d sessions (calls per session %v), want %d", len(r.sessions), per, wantSessions)
	}
}

// ledgerRows reads a demo ledger: tool name → idempotency keys, in order.
func ledgerRows(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var row struct {
			Tool string `json:"tool"`
			Key  string `json:"idempotency_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		rows[row.Tool] = append(rows[row.Tool], row.Key)
	}
	return rows
}

func (r *realRig) ledger() map[string][]string {
	return ledgerRows(r.t, filepath.Join(r.workspace, ".mcpflow", "demo", "ledger.jsonl"))
}

// checkLedger asserts that every journaled attempt executed exactly once on
// the server, under the invocation's idempotency key.
func checkLedger(t *testing.T, rows map[string][]string, invs []journal.Invocation) {
	t.Helper()
	want := map[string][]string{}
	for _, inv := range invs {
		for range inv.Attempts {
			want[inv.Tool] = append(want[inv.Tool], inv.IdempotencyKey)
		}
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("ledger %v, want one row per attempt %v", rows, want)
	}
}

func describeInvs(invs []journal.Invocation) string {
	var b strings.Builder
	for _, inv := range invs {
		fmt.Fprintf(&b, "\n  %s %s/%s state=%s", inv.Step, inv.Server, inv.Tool, inv.State)
		for _, a := range inv.Attempts {
			fmt.Fprintf(&b, "\n    attempt %d kind=%s replay=%v failure=%q detail=%q", a.N, a.Kind, a.Replay, a.Failure, a.Detail)
		}
		for _, d := range inv.Decisions {
			fmt.Fprintf(&b, "\n    decision attempt=%d %s/%s view=%s", d.Attempt, d.Verdict, d.Reason, d.View)
		}
	}
	return b.String()
}

// stdioWorkflow is greet → upper → ledger_append on a trusted builtin demo
// server with the given fault on upper.
func stdioWorkflow(fault string) string {
	env := ""
	if fault != "" {
		env = fmt.Sprintf(", env: {MCPFLOW_DEMO_FAULT: %s, MCPFLOW_DEMO_FAULT_TOOL: upper}", fault)
	}
	return `name: real
servers:
  demo: {builtin: demo, trust: true` + env + `}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: shout, server: demo, tool: upper, with: {text: "${{ steps.greet.text }}"}}
  - {id: record, server: demo, tool: ledger_append, with: {entry: "${{ steps.shout.text }}"}}
`
}

// TestWireCallsMatchJournaledAttempts: with a real stdio demo server, the
// number of tools/call requests written to the wire, summed over every
// session (a replay uses a new one), equals the number of journaled
// attempts, and the server executed each exactly once: no hidden re-send.
func TestWireCallsMatchJournaledAttempts(t *testing.T) {
	self := buildMcpflow(t) // once for every subtest
	always := func(string) journal.Trust { return fullTrust }

	t.Run("plain", func(t *testing.T) {
		r := newRealRig(t, self, stdioWorkflow(""), always)
		run, invs := r.run()
		if run.Status != journal.RunSucceeded || len(invs) != 3 {
			t.Fatalf("run %s:%s", run.Status, describeInvs(invs))
		}
		for _, inv := range invs {
			if inv.State != journal.StateCompleted || len(inv.Attempts) != 1 {
				t.Errorf("invocation:%s", describeInvs([]journal.Invocation{inv}))
			}
		}
		r.checkWire(invs, 1)
		checkLedger(t, r.ledger(), invs)
	})

	t.Run("replayed", func(t *testing.T) {
		r := newRealRig(t, self, stdioWorkflow("exit-after-commit-once"), always)
		run, invs := r.run()
		if run.Status != journal.RunSucceeded || len(invs) != 3 {
			t.Fatalf("run %s:%s", run.Status, describeInvs(invs))
		}
		up := invs[1]
		if up.Tool != "upper" || up.State != journal.StateCompleted || len(up.Attempts) != 2 || up.Attempts[1].Kind != journal.KindReplay || up.Attempts[0].Failure != replay.ClassLost {
			t.Errorf("upper:%s", describeInvs(invs[1:2]))
		}
		if invs[2].State != journal.StateCompleted || len(invs[2].Attempts) != 1 {
			t.Errorf("the step after the replay:%s", describeInvs(invs[2:]))
		}
		r.checkWire(invs, 2) // the first server process died; the replay and the last step use the second
		checkLedger(t, r.ledger(), invs)
	})

	t.Run("budget", func(t *testing.T) {
		r := newRealRig(t, self, stdioWorkflow("exit-after-commit"), always)
		run, invs := r.run()
		if run.Status != journal.RunBlocked || len(invs) != 2 {
			t.Fatalf("run %s:%s", run.Status, describeInvs(invs))
		}
		up := invs[1]
		if up.State != journal.StateOutcomeUnknown || len(up.Attempts) != 1+replay.MaxReplays || up.Tally().Replays != replay.MaxReplays || up.Tally().AgainstBudget != replay.MaxReplays {
			t.Errorf("upper:%s", describeInvs(invs[1:]))
		}
		if d := up.LastDecision(); d == nil || d.Reason != string(replay.ReasonBudgetSpent) {
			t.Errorf("last decision %+v", d)
		}
		r.checkWire(invs, 1+replay.MaxReplays) // a new server process per replay
		checkLedger(t, r.ledger(), invs)
	})
}

// TestWireCallsMatchJournaledAttemptsHTTP: the same count over streamable
// HTTP, with the demo served in-process and the POST's connection dropped
// once after the commit.
// serveDemoHTTP serves the demo over streamable HTTP in this process until
// the test ends, with its ledger in a temporary directory. It returns the
// server's URL and the ledger's path.
func serveDemoHTTP(t *testing.T, cfg demo.Config) (string, string) {
	t.Helper()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Ledger = filepath.Join(t.TempDir(), "ledger.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- demo.Serve(ctx, cfg, nil, nil, pw)
		pw.Close()
	}()
	var stderr strings.Builder
	drained := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("demo.Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("demo.Serve did not return 10s after cancel")
			return
		}
		<-drained
		pr.Close()
		if stderr.Len() > 0 {
			t.Logf("demo server stderr:\n%s", stderr.String())
		}
	})
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("the demo server wrote nothing")
	}
	url, ok := strings.CutPrefix(lines.Text(), "listening on ")
	if !ok {
		t.Fatalf("demo server said %q", lines.Text())
	}
	go func() {
		defer close(drained)
		for lines.Scan() {
			stderr.WriteString(lines.Text() + "\n")
		}
	}()
	return url, cfg.Ledger
}

func TestWireCallsMatchJournaledAttemptsHTTP(t *testing.T) {
	url, ledger := serveDemoHTTP(t, demo.Config{Fault: "drop-after-commit-once", FaultTool: "upper"})
	src := fmt.Sprintf(`name: real-http
servers:
  web: {url: %q, trust: true}
steps:
  - {id: greet, server: web, tool: greet, with: {name: Ada}}
  - {id: shout, server: web, tool: upper, with: {text: "${{ steps.greet.text }}"}}
  - {id: again, server: web, tool: greet, with: {name: "${{ steps.shout.text }}"}}
`, url)
	r := newRealRig(t, "", src, func(string) journal.Trust { return fullTrust })
	run, invs := r.run()
	if run.Status != journal.RunSucceeded || len(invs) != 3 {
		t.Fatalf("run %s:%s", run.Status, describeInvs(invs))
	}
	up := invs[1]
	if up.State != journal.StateCompleted || len(up.Attempts) != 2 || up.Attempts[1].Kind != journal.KindReplay || up.Attempts[0].Failure != replay.ClassLost {
		t.Errorf("upper:%s", describeInvs(invs[1:2]))
	}
	if got := string(invs[2].Arguments); got != `{"name":"HELLO, ADA!"}` {
		t.Errorf("the step after the replay got %s", got)
	}
	r.checkWire(invs, 2)
	checkLedger(t, ledgerRows(t, ledger), invs)
}

// TestRediscoveryReadsTrustAfresh: the trust function grants everything
// until the ledger holds the lost call's row, then withdraws server or
// workspace trust. The send-time view says replay, the re-discovered view
// (trust read afresh after reconnecting) does not: outcome unknown, and the
// call is not sent again.
func TestRediscoveryReadsTrustAfresh(t *testing.T) {
	self := buildMcpflow(t) // once for every subtest
	for _, tc := range []struct {
		name   string
		flip   func(*journal.Trust)
		reason replay.Reason
	}{
		{"server", func(tr *journal.Trust) { tr.Server = false }, replay.ReasonServerNotTrusted},
		{"workspace", func(tr *journal.Trust) { tr.Workspace, tr.WorkspaceSource = false, "" }, replay.ReasonWorkspaceNotTrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *realRig
			var mu sync.Mutex
			var views []journal.Trust // the views of trust handed out, in order
			trust := func(string) journal.Trust {
				tr := fullTrust
				if len(r.ledger()["upper"]) > 0 {
					tc.flip(&tr)
				}
				mu.Lock()
				views = append(views, tr)
				mu.Unlock()
				return tr
			}
			r = newRealRig(t, self, stdioWorkflow("exit-after-commit-once"), trust)
			run, invs := r.run()
			if run.Status != journal.RunBlocked || len(invs) != 2 {
				t.Fatalf("run %s:%s", run.Status, describeInvs(invs))
			}
			up := invs[1]
			if up.State != journal.StateOutcomeUnknown || len(up.Attempts) != 1 || up.Trust != fullTrust {
				t.Errorf("upper (send-time trust %+v):%s", up.Trust, describeInvs(invs[1:]))
			}
			want := []journal.Decision{
				{Attempt: 1, Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time"},
				{Attempt: 1, Verdict: "outcome_unknown", Reason: string(tc.reason), View: "rediscovered"},
			}
			if len(up.Decisions) != len(want) {
				t.Fatalf("decisions:%s", describeInvs(invs[1:]))
			}
			for i, w := range want {
				d := up.Decisions[i]
				if d.Verdict != w.Verdict || d.Reason != w.Reason || d.View != w.View {
					t.Errorf("decision %d %+v, want %+v", i, d, w)
				}
			}
			if keys := r.ledger()["upper"]; len(keys) != 1 || keys[0] != up.IdempotencyKey {
				t.Errorf("upper ledger keys %v, want once %s", keys, up.IdempotencyKey)
			}
			// greet and upper at send time, then one fresh read after reconnecting.
			mu.Lock()
			if len(views) != 3 || views[0] != fullTrust || views[1] != fullTrust || views[2] == fullTrust {
				t.Errorf("trust views %+v, want full, full, then withdrawn (greet and upper sent, one rediscovery)", views)
			}
			mu.Unlock()
			r.checkWire(invs, 2) // the reconnect made a session, which sent nothing
			checkLedger(t, r.ledger(), invs)
		})
	}
}

// TestConcurrentLostCallsReconnect: three fan-out items are in flight on
// one stdio session when the server dies after committing them; every
// process the pool starts dies the same way. Every item is safe (upper), so
// each is replayed until its budget is spent, all reconnecting through the
// pool at about the same time.
//
// Under -race this caught Pool.Reconnect reading a poolEntry's session
// while another reconnect was still writing it.
func TestConcurrentLostCallsReconnect(t *testing.T) {
	self := buildMcpflow(t)
	src := `name: fan-out-lost
servers:
  demo: {builtin: demo, trust: true, env: {MCPFLOW_DEMO_FAULT: exit-after-commit, MCPFLOW_DEMO_FAULT_TOOL: upper, MCPFLOW_DEMO_DELAY: 100ms}}
steps:
  - id: shout
    server: demo
    tool: upper
    for_each: ${{ ["a", "b", "c"] }}
    concurrency: 3
    with: {text: "${{ item }}"}
`
	r := newRealRig(t, self, src, func(string) journal.Trust { return fullTrust })
	run, invs := r.run()
	if run.Status != journal.RunBlocked || len(invs) != 3 {
		t.Fatalf("run %s:%s", run.Status, describeInvs(invs))
	}
	for _, inv := range invs {
		d := inv.LastDecision()
		if inv.State != journal.StateOutcomeUnknown || len(inv.Attempts) != 1+replay.MaxReplays || d == nil || d.Reason != string(replay.ReasonBudgetSpent) {
			t.Errorf("item %d:%s", inv.Item, describeInvs([]journal.Invocation{inv}))
		}
	}
	attempts := 0
	for _, inv := range invs {
		attempts += len(inv.Attempts)
	}
	r.mu.Lock()
	var sent int64
	for _, s := range r.sessions {
		sent += s.CallsSent()
	}
	n := len(r.sessions)
	r.mu.Unlock()
	if sent != int64(attempts) {
		t.Errorf("%d tools/call on the wire, %d journaled attempts", sent, attempts)
	}
	if rows := len(r.ledger()["upper"]); rows > attempts {
		t.Errorf("%d executions for %d attempts", rows, attempts)
	}
	t.Logf("%d sessions, %d attempts, %d executions", n, attempts, len(r.ledger()["upper"]))
}
