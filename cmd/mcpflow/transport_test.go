package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// These tests drive the real CLI against the real demo server over every
// transport (stdio, streamable HTTP, SSE) and check what the journal and the
// demo server's ledger say happened.

// demoHTTP is `mcpflow demo-server --http|--sse ADDR` running as a
// subprocess in the workspace, so that its ledger is the workspace's.
type demoHTTP struct {
	url, addr string
	pid       int
	stop      func() // kills the server and waits for it; idempotent
}

// startDemoHTTP starts the demo server with flag "--http" or "--sse" on
// addr ("127.0.0.1:0" for a free port) and extra environment, and returns
// once it listens. The server is killed at cleanup at the latest.
func startDemoHTTP(t *testing.T, c *cli, flag, addr string, env ...string) *demoHTTP {
	t.Helper()
	cmd := c.command("demo-server", flag, addr)
	cmd.Dir = c.workspace
	cmd.Env = append(cmd.Env, env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	urls := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(stderr, line)
			if u, ok := strings.CutPrefix(line, "listening on "); ok && !sent {
				urls <- strings.TrimSpace(u)
				sent = true
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	var once sync.Once
	d := &demoHTTP{pid: cmd.Process.Pid}
	d.stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-drained
			cmd.Wait()
		})
	}
	t.Cleanup(d.stop)
	select {
	case d.url = <-urls:
	case <-drained:
		t.Fatalf("demo server %s %s exited before listening:\n%s", flag, addr, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("demo server %s %s did not listen within 15s:\n%s", flag, addr, stderr.String())
	}
	rest, ok := strings.CutPrefix(d.url, "http://")
	if !ok {
		t.Fatalf("demo server printed %q, want http://HOST:PORT/PATH", d.url)
	}
	d.addr, _, _ = strings.Cut(rest, "/")
	return d
}

// children returns the live child processes of pid that carry this test's tag.
func (c *cli) children(pid int) []int {
	var kids []int
	for _, p := range tagged(c.tag) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			kids = append(kids, p)
		}
	}
	return kids
}

// environOf returns the environment of pid.
func environOf(pid int) []string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	return strings.Split(string(b), "\x00")
}

func (c *cli) ledgerKeys(tool string) []any {
	var keys []any
	for _, row := range c.ledger() {
		if row["tool"] == tool {
			keys = append(keys, row["idempotency_key"])
		}
	}
	return keys
}

func describe(invs []journal.Invocation) string {
	var b strings.Builder
	for _, inv := range invs {
		fmt.Fprintf(&b, "\n  %s %s/%s state=%s trust=%+v", inv.Step, inv.Server, inv.Tool, inv.State, inv.Trust)
		for _, a := range inv.Attempts {
			fmt.Fprintf(&b, "\n    attempt %d kind=%s replay=%v ended=%v failure=%q detail=%q", a.N, a.Kind, a.Replay, a.EndedAt != nil, a.Failure, a.Detail)
		}
		for _, d := range inv.Decisions {
			fmt.Fprintf(&b, "\n    decision attempt=%d %s/%s view=%s", d.Attempt, d.Verdict, d.Reason, d.View)
		}
	}
	return b.String()
}

func wantDecisions(t *testing.T, inv journal.Invocation, want ...journal.Decision) {
	t.Helper()
	if len(inv.Decisions) != len(want) {
		t.Errorf("decisions:%s\nwant %+v", describe([]journal.Invocation{inv}), want)
		return
	}
	for i, w := range want {
		d := inv.Decisions[i]
		if d.Verdict != w.Verdict || d.Reason != w.Reason || d.View != w.View || (w.Attempt != 0 && d.Attempt != w.Attempt) {
			t.Errorf("decision %d = %+v, want %+v", i, d, w)
		}
	}
}

// greetUpper is a two-step workflow whose server entry is given.
func greetUpper(server string) string {
	return `name: transports
servers:
  web: ` + server + `
steps:
  - {id: greet, server: web, tool: greet, with: {name: Ada}}
  - {id: shout, server: web, tool: upper, with: {text: "${{ steps.greet.structuredContent.greeting }}"}}
`
}

// TestTransportsRunWorkflow runs the same workflow over stdio, streamable
// HTTP and SSE.
func TestTransportsRunWorkflow(t *testing.T) {
	for _, transport := range []string{"stdio", "http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			c := newCLI(t)
			server := "{builtin: demo}"
			switch transport {
			case "http":
				d := startDemoHTTP(t, c, "--http", "127.0.0.1:0")
				if !strings.HasSuffix(d.url, "/mcp") {
					t.Fatalf("url %s", d.url)
				}
				server = fmt.Sprintf("{url: %q}", d.url)
			case "sse":
				d := startDemoHTTP(t, c, "--sse", "127.0.0.1:0")
				if !strings.HasSuffix(d.url, "/sse") {
					t.Fatalf("url %s", d.url)
				}
				server = fmt.Sprintf("{url: %q, type: sse}", d.url)
			}
			r := c.run("run", c.workflow("w.yaml", greetUpper(server)))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "→ HELLO, ADA!") {
				t.Errorf("stdout lacks the shouted greeting:\n%s", r.stdout)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunSucceeded || len(invs) != 2 {
				t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
			}
			want := []struct{ step, tool, structured string }{
				{"greet", "greet", `{"greeting":"Hello, Ada!"}`},
				{"shout", "upper", `{"text":"HELLO, ADA!"}`},
			}
			for i, w := range want {
				inv := invs[i]
				if inv.Step != w.step || inv.Tool != w.tool || inv.Server != "web" || inv.State != journal.StateCompleted ||
					len(inv.Attempts) != 1 || inv.Attempts[0].Failure != "" || inv.Attempts[0].EndedAt == nil || len(inv.Decisions) != 0 {
					t.Errorf("invocation %d:%s", i, describe(invs[i:i+1]))
				}
				if inv.Result == nil || string(inv.Result.StructuredContent) != w.structured {
					t.Errorf("%s result %+v, want %s", w.step, inv.Result, w.structured)
				}
				if keys := c.ledgerKeys(w.tool); len(keys) != 1 || keys[0] != inv.ID.String() {
					t.Errorf("ledger keys of %s %v, want [%s]", w.tool, keys, inv.ID)
				}
			}
			// Annotations are journaled as declared on the wire, on every transport.
			if got := string(invs[0].Annotations); got != `{"readOnlyHint":true}` {
				t.Errorf("greet annotations %s", got)
			}
			if got := string(invs[1].Annotations); got != `{"idempotentHint":true}` {
				t.Errorf("upper annotations %s", got)
			}
		})
	}
}

// httpOneCall is one call of tool on a trusted or untrusted url server.
func httpOneCall(url, server, tool string) string {
	args := map[string]string{"greet": "{name: x}", "upper": "{text: x}"}[tool]
	if args == "" {
		args = "{entry: ARG-MARKER-7f3a}"
	}
	return fmt.Sprintf(`name: http-one-call
servers:
  trusted: {url: %q, trust: true}
  untrusted: {url: %q}
steps:
  - {id: call, server: %s, tool: %s, with: %s}
`, url, url, server, tool, args)
}

// TestHTTPUnsafeLostCallIsOutcomeUnknown is the brief's end-to-end record
// over streamable HTTP: the server commits the side effect, then drops the
// connection of the POST that would carry the answer. The server process
// stays up, so a re-send would reach it: unless every gate passes, none is
// made.
func TestHTTPUnsafeLostCallIsOutcomeUnknown(t *testing.T) {
	cases := []struct {
		name, server, tool string
		trustWorkspace     bool
		reason             replay.Reason
	}{
		{"no annotations", "trusted", "ledger_append", true, replay.ReasonNoAnnotations},
		{"idempotentHint false", "trusted", "not_idempotent", true, replay.ReasonNotDeclared},
		{"contradictory read-only", "trusted", "contradictory_read", true, replay.ReasonContradictoryReadOnly},
		{"untrusted server", "untrusted", "ledger_append", true, replay.ReasonServerNotTrusted},
		{"untrusted workspace", "trusted", "not_idempotent", false, replay.ReasonWorkspaceNotTrusted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", "MCPFLOW_DEMO_FAULT=drop-after-commit", "MCPFLOW_DEMO_FAULT_TOOL="+tc.tool)
			args := []string{"run", c.workflow("w.yaml", httpOneCall(d.url, tc.server, tc.tool))}
			if tc.trustWorkspace {
				args = append(args, "--trust-workspace")
			}
			r := c.run(args...)
			if r.code != exitBlocked {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitBlocked, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "MCPFLOW_OUTCOME_UNKNOWN: "+replay.Message) {
				t.Errorf("stderr lacks the stable error:\n%s", r.stderr)
			}
			for _, leak := range []string{"ARG-MARKER-7f3a", "EOF", "rejected by transport", "Post "} {
				if strings.Contains(r.stdout+r.stderr, leak) {
					t.Errorf("output leaks %q:\n%s\n%s", leak, r.stdout, r.stderr)
				}
			}
			if n := c.ledgerCount(tc.tool); n != 1 {
				t.Errorf("ledger has %d rows for %s, want exactly 1", n, tc.tool)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunBlocked || run.Error == nil || run.Error.Code != replay.Code {
				t.Errorf("run %s error %+v, want blocked with %s", run.Status, run.Error, replay.Code)
			}
			if len(invs) != 1 {
				t.Fatalf("invocations:%s", describe(invs))
			}
			inv := invs[0]
			if inv.State != journal.StateOutcomeUnknown || len(inv.Attempts) != 1 || inv.Attempts[0].Failure != replay.ClassLost ||
				inv.Error == nil || inv.Error.Code != replay.Code || inv.Error.Message != replay.Message {
				t.Errorf("invocation:%s\nerror %+v", describe(invs), inv.Error)
			}
			wantDecisions(t, inv, journal.Decision{Verdict: "outcome_unknown", Reason: string(tc.reason), View: "send_time", Attempt: 1})
			if tc.server == "trusted" && !inv.Trust.Server || tc.server == "untrusted" && inv.Trust.Server || inv.Trust.Workspace != tc.trustWorkspace {
				t.Errorf("send-time trust %+v", inv.Trust)
			}
			// The detail of the lost POST stays in the journal for the operator.
			if !strings.Contains(inv.Attempts[0].Detail, "rejected by transport") {
				t.Errorf("attempt detail %q", inv.Attempts[0].Detail)
			}
			d.stop()
		})
	}
}

// TestHTTPSafeLostCallIsReplayed: the POST's connection drops once after the
// commit; a tool that declares itself safe, on a trusted server in a trusted
// workspace, is replayed over a fresh session with the same idempotency key.
func TestHTTPSafeLostCallIsReplayed(t *testing.T) {
	for _, tc := range []struct{ tool, reason string }{
		{"upper", string(replay.ReasonDeclaredIdempotent)}, // idempotentHint: true
		{"greet", string(replay.ReasonDeclaredReadOnly)},   // readOnlyHint: true alone
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c := newCLI(t)
			d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", "MCPFLOW_DEMO_FAULT=drop-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL="+tc.tool)
			r := c.run("run", c.workflow("w.yaml", httpOneCall(d.url, "trusted", tc.tool)), "--trust-workspace")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			n := c.ledgerCount(tc.tool)
			if n > 1+replay.MaxReplays {
				t.Fatalf("%s executed %d times: more than 1 + %d replays", tc.tool, n, replay.MaxReplays)
			}
			if n != 2 {
				t.Errorf("%s executed %d times, want 2 (the dropped call and its replay)", tc.tool, n)
			}
			if _, err := os.Stat(filepath.Join(c.workspace, ".mcpflow", "demo", "ledger.jsonl.fault-fired")); err != nil {
				t.Errorf("the fault never fired: %v", err)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunSucceeded || len(invs) != 1 {
				t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
			}
			inv := invs[0]
			if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[0].Kind != journal.KindFirst || inv.Attempts[1].Kind != journal.KindReplay ||
				inv.Attempts[0].Failure != replay.ClassLost || inv.Attempts[1].Failure != "" {
				t.Errorf("invocation:%s", describe(invs))
			}
			wantDecisions(t, inv,
				journal.Decision{Verdict: "replay", Reason: tc.reason, View: "send_time", Attempt: 1},
				journal.Decision{Verdict: "replay", Reason: tc.reason, View: "rediscovered"})
			keys := c.ledgerKeys(tc.tool)
			if len(keys) != 2 || keys[0] != inv.ID.String() || keys[1] != inv.ID.String() || inv.IdempotencyKey != inv.ID.String() {
				t.Errorf("ledger idempotency keys %v, want twice %s (journal key %s)", keys, inv.ID, inv.IdempotencyKey)
			}
			d.stop()
		})
	}
}

// stdioOneCall is one call of tool on a trusted builtin demo server, then a
// greet.
func stdioOneCall(tool string) string {
	return oneCall("trusted", tool)
}

// TestReplayBudgetIsSpent: a safe tool whose connection is lost after every
// commit is sent once and replayed three times; the fourth loss is outcome
// unknown. Over stdio the server dies each time; over streamable HTTP it
// stays up and drops the POST's connection each time.
func TestReplayBudgetIsSpent(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			c := newCLI(t)
			fault := []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=upper"}
			wf := stdioOneCall("upper")
			if transport == "http" {
				fault[0] = "MCPFLOW_DEMO_FAULT=drop-after-commit"
				d := startDemoHTTP(t, c, "--http", "127.0.0.1:0", fault...)
				wf = httpOneCall(d.url, "trusted", "upper")
			} else {
				c.env = fault
			}
			r := c.run("run", c.workflow("w.yaml", wf), "--trust-workspace")
			if r.code != exitBlocked {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitBlocked, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, replay.ErrOutcomeUnknown.Error()) {
				t.Errorf("stderr lacks the stable error:\n%s", r.stderr)
			}
			if n := c.ledgerCount("upper"); n != 1+replay.MaxReplays {
				t.Errorf("upper executed %d times, want %d (1 + %d replays)", n, 1+replay.MaxReplays, replay.MaxReplays)
			}
			if n := c.ledgerCount("greet"); n != 0 {
				t.Errorf("the step after the blocked one ran %d times", n)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunBlocked || len(invs) != 1 {
				t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
			}
			inv := invs[0]
			if n := inv.Tally(); inv.State != journal.StateOutcomeUnknown || len(inv.Attempts) != 1+replay.MaxReplays || n.Replays != replay.MaxReplays || n.AgainstBudget != replay.MaxReplays {
				t.Fatalf("invocation:%s", describe(invs))
			}
			for i, a := range inv.Attempts {
				if a.Kind != kindOf(i, journal.KindReplay) || a.Replay != (i > 0) || a.Failure != replay.ClassLost || a.EndedAt == nil {
					t.Errorf("attempt %d: %+v", i+1, a)
				}
			}
			if d := inv.LastDecision(); d == nil || d.Verdict != "outcome_unknown" || d.Reason != string(replay.ReasonBudgetSpent) || d.View != "send_time" || d.Attempt != 1+replay.MaxReplays {
				t.Errorf("last decision %+v, want outcome_unknown/budget_spent on attempt %d:%s", d, 1+replay.MaxReplays, describe(invs))
			}
			for _, k := range c.ledgerKeys("upper") {
				if k != inv.ID.String() {
					t.Errorf("ledger key %v, want %s", k, inv.ID)
				}
			}
		})
	}
}

// TestSSELostCallFollowsTheRule: over SSE the dropped connection is the
// session's event stream, which carries every reply. A safe tool is replayed
// on a new session; an unsafe one is outcome unknown.
func TestSSELostCallFollowsTheRule(t *testing.T) {
	for _, tc := range []struct {
		tool, fault string
		code, runs  int
	}{
		{"upper", "drop-after-commit-once", 0, 2},
		{"ledger_append", "drop-after-commit", exitBlocked, 1},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c := newCLI(t)
			d := startDemoHTTP(t, c, "--sse", "127.0.0.1:0", "MCPFLOW_DEMO_FAULT="+tc.fault, "MCPFLOW_DEMO_FAULT_TOOL="+tc.tool)
			wf := strings.Replace(httpOneCall(d.url, "trusted", tc.tool), "trust: true}", "trust: true, type: sse}", 1)
			r := c.run("run", c.workflow("w.yaml", wf), "--trust-workspace")
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if n := c.ledgerCount(tc.tool); n != tc.runs {
				t.Errorf("%s executed %d times, want %d", tc.tool, n, tc.runs)
			}
			j := c.openJournal()
			_, invs := c.onlyRun(j)
			if len(invs) != 1 || len(invs[0].Attempts) != tc.runs || invs[0].Attempts[0].Failure != replay.ClassLost {
				t.Fatalf("invocations:%s", describe(invs))
			}
			inv := invs[0]
			if tc.code == 0 {
				if inv.State != journal.StateCompleted || inv.Attempts[1].Kind != journal.KindReplay {
					t.Errorf("invocation:%s", describe(invs))
				}
				wantDecisions(t, inv,
					journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time", Attempt: 1},
					journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "rediscovered"})
			} else {
				if inv.State != journal.StateOutcomeUnknown {
					t.Errorf("invocation:%s", describe(invs))
				}
				wantDecisions(t, inv, journal.Decision{Verdict: "outcome_unknown", Reason: string(replay.ReasonNoAnnotations), View: "send_time", Attempt: 1})
			}
		})
	}
}

// TestServerUnavailableAfterLossThenResume: the server dies after the commit
// and refuses to start again. The decision to replay is journaled; the run
// fails as unavailable; resume carries the decision out.
func TestServerUnavailableAfterLossThenResume(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=upper", "MCPFLOW_DEMO_AFTER_FAULT=refuse"}
	r := c.run("run", c.workflow("w.yaml", stdioOneCall("upper")), "--trust-workspace")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitFailed, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout+r.stderr, `server "trusted" unavailable`) {
		t.Errorf("no unavailable message:\n%s\n%s", r.stdout, r.stderr)
	}
	if n := c.ledgerCount("upper"); n != 1 {
		t.Errorf("upper executed %d times before resume, want 1", n)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunFailed || len(invs) != 1 {
		t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
	}
	inv := invs[0]
	if inv.State != journal.StateIntent || len(inv.Attempts) != 1 || inv.Attempts[0].EndedAt == nil || inv.Attempts[0].Failure != replay.ClassLost {
		t.Errorf("invocation:%s", describe(invs))
	}
	wantDecisions(t, inv, journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time", Attempt: 1})
	j.Close()

	c.env = nil // the server starts again, without faults
	r = c.run("resume", run.ID.String(), "--trust-workspace")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("upper"); n != 2 {
		t.Errorf("upper executed %d times in all, want 2", n)
	}
	if n := c.ledgerCount("greet"); n != 1 {
		t.Errorf("greet executed %d times, want 1", n)
	}
	j = c.openJournal()
	run, invs = c.onlyRun(j)
	if run.Status != journal.RunSucceeded || len(invs) != 2 {
		t.Fatalf("after resume: run %s, invocations:%s", run.Status, describe(invs))
	}
	inv = invs[0]
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Attempts[1].Kind != journal.KindReplay {
		t.Errorf("after resume:%s", describe(invs))
	}
	wantDecisions(t, inv,
		journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time", Attempt: 1},
		journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "rediscovered"})
}

// TestServerUnavailableThenResumeWithoutTrust: the journaled decision to
// replay is carried out by resume only if the re-discovered view, with trust
// read afresh, is safe too: without --trust-workspace it is not.
func TestServerUnavailableThenResumeWithoutTrust(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=upper", "MCPFLOW_DEMO_AFTER_FAULT=refuse"}
	r := c.run("run", c.workflow("w.yaml", stdioOneCall("upper")), "--trust-workspace")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitFailed, r.stdout, r.stderr)
	}
	j := c.openJournal()
	run, _ := c.onlyRun(j)
	j.Close()
	c.env = nil
	r = c.run("resume", run.ID.String(), "--untrusted") // no --trust-workspace, empty trust store, confirmed
	if r.code != exitBlocked || !strings.Contains(r.stderr, replay.ErrOutcomeUnknown.Error()) {
		t.Fatalf("resume: exit %d, want %d\n%s\n%s", r.code, exitBlocked, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("upper"); n != 1 {
		t.Errorf("upper executed %d times, want 1", n)
	}
	j = c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunBlocked || len(invs) != 1 || invs[0].State != journal.StateOutcomeUnknown || len(invs[0].Attempts) != 1 {
		t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
	}
	wantDecisions(t, invs[0],
		journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time", Attempt: 1},
		journal.Decision{Verdict: "outcome_unknown", Reason: string(replay.ReasonWorkspaceNotTrusted), View: "rediscovered"})
}

// TestRediscoveryAfterServerRestart: the server dies after the commit and
// the new process declares the tool differently; the fresh view decides.
func TestRediscoveryAfterServerRestart(t *testing.T) {
	for _, tc := range []struct {
		after  string
		reason replay.Reason
	}{
		{"strip-annotations", replay.ReasonNoAnnotations},
		{"remove-tool", replay.ReasonToolMissing},
	} {
		t.Run(tc.after, func(t *testing.T) {
			c := newCLI(t)
			c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=upper", "MCPFLOW_DEMO_AFTER_FAULT=" + tc.after}
			r := c.run("run", c.workflow("w.yaml", stdioOneCall("upper")), "--trust-workspace")
			inv := blockedOnce(t, c, r, "upper")
			if inv.Error == nil || inv.Error.Code != replay.Code {
				t.Errorf("invocation error %v, want the stable error", inv.Error)
			}
			wantDecisions(t, inv,
				journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time", Attempt: 1},
				journal.Decision{Verdict: "outcome_unknown", Reason: string(tc.reason), View: "rediscovered"})
		})
	}
}

// killDemoChild kills the one demo server that the mcpflow process pid
// started (whose environment holds want, if not empty).
func (c *cli) killDemoChild(pid int, want string) {
	c.t.Helper()
	var found []int
	for _, k := range c.children(pid) {
		if want == "" || contains(environOf(k), want) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		c.t.Fatalf("demo server children of %d (with %q): %v, want exactly one", pid, want, found)
	}
	if err := syscall.Kill(found[0], syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestTrustRemovedBeforeReplay: trust is granted when the call is sent,
// withdrawn while it is in flight; the connection is then lost. The
// send-time snapshot clears a replay, the fresh read of trust does not.
func TestTrustRemovedBeforeReplay(t *testing.T) {
	steps := "steps:\n  - {id: call, server: demo, tool: upper, with: {text: x}}\n"
	t.Run("server", func(t *testing.T) {
		c := newCLI(t)
		config := filepath.Join(c.workspace, "mcpflow.yaml")
		if err := os.WriteFile(config, []byte("servers:\n  demo: {builtin: demo, trust: true}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.env = []string{"MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=upper"}
		cmd, wait := c.background("run", c.workflow("w.yaml", "name: trust-server\n"+steps), "--trust-workspace")
		c.waitLedger("upper", 1)
		if err := os.WriteFile(config, []byte("servers:\n  demo: {builtin: demo, trust: false}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.killDemoChild(cmd.Process.Pid, "")
		r := wait()
		checkTrustRemoved(t, c, r, replay.ReasonServerNotTrusted, func(tr journal.Trust) bool {
			return tr.Server && tr.Workspace && tr.WorkspaceSource == "flag"
		})
	})
	t.Run("workspace", func(t *testing.T) {
		c := newCLI(t)
		if r := c.run("trust", "add"); r.code != 0 {
			t.Fatalf("trust add: exit %d\n%s", r.code, r.stderr)
		}
		c.env = []string{"MCPFLOW_DEMO_FAULT=hang-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=upper"}
		wf := "name: trust-workspace\nservers:\n  demo: {builtin: demo, trust: true}\n" + steps
		cmd, wait := c.background("run", c.workflow("w.yaml", wf)) // trust from the store, no flag
		c.waitLedger("upper", 1)
		if r := c.run("trust", "remove"); r.code != 0 {
			t.Fatalf("trust remove: exit %d\n%s", r.code, r.stderr)
		}
		c.killDemoChild(cmd.Process.Pid, "")
		r := wait()
		checkTrustRemoved(t, c, r, replay.ReasonWorkspaceNotTrusted, func(tr journal.Trust) bool {
			return tr.Server && tr.Workspace && strings.HasPrefix(tr.WorkspaceSource, "store")
		})
	})
}

func checkTrustRemoved(t *testing.T, c *cli, r result, reason replay.Reason, sendTimeTrust func(journal.Trust) bool) {
	t.Helper()
	inv := blockedOnce(t, c, r, "upper")
	if inv.Attempts[0].Failure != replay.ClassLost {
		t.Errorf("attempt failure %q, want connection_lost", inv.Attempts[0].Failure)
	}
	if !sendTimeTrust(inv.Trust) {
		t.Errorf("send-time trust snapshot %+v", inv.Trust)
	}
	wantDecisions(t, inv,
		journal.Decision{Verdict: "replay", Reason: string(replay.ReasonDeclaredIdempotent), View: "send_time", Attempt: 1},
		journal.Decision{Verdict: "outcome_unknown", Reason: string(reason), View: "rediscovered"})
}

// TestNotDeliveredIsFirstDelivery: a call that provably never left mcpflow
// is sent after reconnecting as a first delivery, not a replay — even for a
// tool without annotations on an untrusted server in an untrusted workspace,
// where a replay would never be allowed. The ledger shows one execution.
func TestNotDeliveredIsFirstDelivery(t *testing.T) {
	// Over streamable HTTP: the session is made by the first step; the
	// server is stopped while a step on another server runs; the third
	// step's POST finds nothing listening (a dial failure, or a session the
	// SDK already closed: both are provably not delivered).
	t.Run("http", func(t *testing.T) {
		c := newCLI(t)
		d := startDemoHTTP(t, c, "--http", "127.0.0.1:0")
		wf := fmt.Sprintf(`name: not-delivered-http
servers:
  web: {url: %q, reconnect_timeout: 1s}
  local: {builtin: demo}
steps:
  - {id: hello, server: web, tool: greet, with: {name: a}}
  - {id: pause, server: local, tool: count_slowly, with: {n: 10, delay_ms: 100}}
  - {id: record, server: web, tool: ledger_append, with: {entry: x}}
`, d.url)
		_, wait := c.background("run", c.workflow("w.yaml", wf))
		c.waitLedger("count_slowly", 1)
		d.stop()
		r := wait()
		if r.code != exitFailed || !strings.Contains(r.stdout+r.stderr, `server "web" unavailable`) {
			t.Fatalf("exit %d, want %d with server unavailable\n%s\n%s", r.code, exitFailed, r.stdout, r.stderr)
		}
		if n := c.ledgerCount("ledger_append"); n != 0 {
			t.Fatalf("ledger_append executed %d times while the server was down", n)
		}
		j := c.openJournal()
		run, invs := c.onlyRun(j)
		if run.Status != journal.RunFailed || len(invs) != 3 {
			t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
		}
		inv := invs[2]
		if inv.State != journal.StateIntent || len(inv.Attempts) != 1 || inv.Attempts[0].EndedAt == nil ||
			inv.Attempts[0].Failure != replay.ClassNotDelivered || inv.Attempts[0].Kind != journal.KindFirst {
			t.Fatalf("the undelivered call:%s", describe(invs[2:]))
		}
		wantDecisions(t, inv, journal.Decision{Verdict: "first_delivery", Reason: string(replay.ReasonNotDelivered), View: "send_time", Attempt: 1})
		t.Logf("not delivered: %s", inv.Attempts[0].Detail)
		j.Close()

		// The server comes back at the same address; resume delivers the call.
		startDemoHTTP(t, c, "--http", d.addr)
		r = c.run("resume", run.ID.String())
		if r.code != 0 {
			t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		checkFirstDelivery(t, c)
	})

	// Over stdio: the server of an open session dies while a step on
	// another server runs; the next call on the broken session is refused by
	// the SDK before it is written.
	t.Run("stdio", func(t *testing.T) {
		c := newCLI(t)
		wf := `name: not-delivered-stdio
servers:
  web: {builtin: demo, env: {WHICH_DEMO: web}}
  local: {builtin: demo, env: {WHICH_DEMO: local}}
steps:
  - {id: hello, server: web, tool: greet, with: {name: a}}
  - {id: pause, server: local, tool: count_slowly, with: {n: 10, delay_ms: 100}}
  - {id: record, server: web, tool: ledger_append, with: {entry: x}}
`
		cmd, wait := c.background("run", c.workflow("w.yaml", wf))
		c.waitLedger("count_slowly", 1)
		c.killDemoChild(cmd.Process.Pid, "WHICH_DEMO=web")
		r := wait()
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		checkFirstDelivery(t, c)
	})
}

func checkFirstDelivery(t *testing.T, c *cli) {
	t.Helper()
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Errorf("ledger_append executed %d times, want exactly 1", n)
	}
	if n := c.ledgerCount("greet"); n != 1 {
		t.Errorf("greet executed %d times, want 1", n)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunSucceeded || len(invs) != 3 {
		t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
	}
	inv := invs[2]
	if inv.State != journal.StateCompleted || len(inv.Attempts) != 2 || inv.Tally().AgainstBudget != 0 || inv.Attempts[1].Kind != journal.KindFirstDelivery ||
		inv.Attempts[0].Failure != replay.ClassNotDelivered || inv.Attempts[1].Failure != "" {
		t.Errorf("the undelivered call:%s", describe(invs[2:]))
	}
	if inv.Trust.Server || inv.Trust.Workspace {
		t.Errorf("trust %+v: the test means an untrusted server and workspace", inv.Trust)
	}
	wantDecisions(t, inv, journal.Decision{Verdict: "first_delivery", Reason: string(replay.ReasonNotDelivered), View: "send_time", Attempt: 1})
	if keys := c.ledgerKeys("ledger_append"); len(keys) != 1 || keys[0] != inv.ID.String() {
		t.Errorf("ledger keys %v, want [%s]", keys, inv.ID)
	}
}

// blockedOnce checks that a run ended blocked with the stable error after
// tool ran exactly once, and returns its one outcome_unknown invocation.
func blockedOnce(t *testing.T, c *cli, r result, tool string) journal.Invocation {
	t.Helper()
	if r.code != exitBlocked {
		t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitBlocked, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, replay.ErrOutcomeUnknown.Error()) {
		t.Errorf("stderr lacks the stable error:\n%s", r.stderr)
	}
	if n := c.ledgerCount(tool); n != 1 {
		t.Errorf("%s executed %d times, want 1", tool, n)
	}
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	if run.Status != journal.RunBlocked || len(invs) != 1 {
		t.Fatalf("run %s, invocations:%s", run.Status, describe(invs))
	}
	if invs[0].State != journal.StateOutcomeUnknown || len(invs[0].Attempts) != 1 {
		t.Fatalf("invocation:%s", describe(invs))
	}
	return invs[0]
}
