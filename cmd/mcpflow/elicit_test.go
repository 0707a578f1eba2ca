package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// payWorkflow pays through the demo's transfer tool, which asks for a
// confirmation (an elicitation, over MCP's multi-round-trip requests)
// before its side effect; the second transfer answers its own question
// with elicit:, from the first one's result.
const payWorkflow = `name: pay
servers:
  demo: {builtin: demo}
steps:
  - id: pay
    server: demo
    tool: transfer
    with: {amount: 25, to: acme}
  - id: tip
    server: demo
    tool: transfer
    with: {amount: 1, to: acme}
    elicit:
      confirm: true
      reference: "tip for row ${{ steps.pay.structuredContent.row }}"
`

// TestElicitationAnsweredByOperatorAndWorkflow: a call whose server asks
// for input blocks its run (exit 3) with the question shown and the
// command that answers it; a wrong answer is refused and journals nothing;
// mcpflow answer journals the answer with who gave it and continues the
// run: the call is sent again with the answer (a continuation, under the
// same idempotency key), and the step with elicit: answers itself. Each
// transfer ran exactly once.
func TestElicitationAnsweredByOperatorAndWorkflow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	wf := c.workflow("pay.yaml", payWorkflow)
	r := c.run("run", wf)
	if r.code != 3 || !strings.Contains(r.stderr, `waiting for your answer: step pay asks "Transfer 25 to acme?"`) ||
		!strings.Contains(r.stderr, "mcpflow answer ") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := c.ledgerCount("transfer"); n != 0 {
		t.Fatalf("%d transfers before the answer", n)
	}
	id := runID(t, r.stdout)
	if list := c.run("runs", "list"); !strings.Contains(list.stdout, "answer to step pay") {
		t.Errorf("runs list does not say what the run waits for:\n%s", list.stdout)
	}
	show := c.run("runs", "show", id)
	for _, want := range []string{"awaiting_input", `elicitation/create "Transfer 25 to acme?"`, "confirm        boolean, required  make the transfer", "answer: mcpflow answer "} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("runs show lacks %q:\n%s", want, show.stdout)
		}
	}
	for _, bad := range [][]string{
		{"--field", "confirm=maybe"},
		{"--field", "amount=3"},
		{"--decline", "--field", "confirm=true"},
	} {
		got := c.run(append([]string{"answer", id, "pay"}, bad...)...)
		if got.code != 2 {
			t.Errorf("answer %v: exit %d, want 2\n%s", bad, got.code, got.stderr)
		}
	}
	if got := c.run("answer", id, "tip", "--field", "confirm=true"); got.code != 2 || !strings.Contains(got.stderr, "step tip of run") {
		t.Errorf("answer to a step that asks nothing: exit %d\n%s", got.code, got.stderr)
	}
	r = c.run("answer", id, "pay", "--field", "confirm=true", "--field", "reference=INV-42")
	if r.code != 0 || !strings.Contains(r.stdout, "answered (accept)") || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("answer: exit %d\nstdout: %q\nstderr: %q", r.code, r.stdout, r.stderr)
	}
	if got := c.run("answer", id, "pay", "--field", "confirm=false"); got.code != 2 {
		t.Errorf("a second answer: exit %d, want 2 (an answer is final)\n%s", got.code, got.stderr)
	}
	rows := c.ledger()
	if len(rows) != 2 {
		t.Fatalf("ledger: %v, want two transfers", rows)
	}
	j := c.openJournal()
	_, invs := c.onlyRun(j)
	for i, want := range []struct{ step, by string }{{"pay", osUser()}, {"tip", "workflow"}} {
		inv := invs[i]
		if inv.Step != want.step || inv.State != journal.StateCompleted || len(inv.Attempts) != 2 ||
			inv.Attempts[1].Kind != journal.KindContinuation || len(inv.Inputs) != 1 || len(inv.Inputs[0].Answers) != 1 {
			t.Fatalf("invocation %d: %+v", i, inv)
		}
		a := inv.Inputs[0].Answers[0]
		if a.By != want.by || a.At.IsZero() {
			t.Errorf("step %s answered by %q at %v, want %q", inv.Step, a.By, a.At, want.by)
		}
		// One execution, under the invocation's idempotency key.
		if rows[i]["idempotency_key"] != inv.IdempotencyKey {
			t.Errorf("ledger row %d: %v, want key %s", i, rows[i], inv.IdempotencyKey)
		}
	}
	var resp map[string]any
	if err := json.Unmarshal(invs[1].Inputs[0].Answers[0].Response, &resp); err != nil ||
		fmt.Sprint(resp["content"]) != fmt.Sprintf("map[confirm:true reference:tip for row %v]", rows[0]["seq"]) {
		t.Errorf("elicit: answered %s (%v)", invs[1].Inputs[0].Answers[0].Response, err)
	}
}

// runID is the run id a run's first line names.
func runID(t *testing.T, stdout string) string {
	t.Helper()
	f := strings.Fields(stdout)
	if len(f) < 2 || f[0] != "run" {
		t.Fatalf("no run id in %q", stdout)
	}
	return f[1]
}

// TestElicitationSurvivesKills: mcpflow is killed after each of its
// journal commits — of the run that asks (before and after the question is
// journaled, while the run waits), then of the answer that continues it —
// and the run is driven to its end with resume and answer. A run killed
// while it waited for the answer completes with exactly one execution of
// each transfer; one killed while a continuation was in flight is never
// sent again blindly: the non-idempotent transfer's outcome is then
// unknown, executed at most once.
func TestElicitationSurvivesKills(t *testing.T) {
	t.Parallel()
	waited, unknowns := 0, 0
	for _, phase := range []string{"run", "answer"} {
		for n := 1; ; n++ {
			c := newCLI(t)
			wf := c.workflow("pay.yaml", payWorkflow)
			if phase == "answer" {
				if r := c.run("run", wf); r.code != 3 {
					t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
				}
			}
			c.env = []string{fmt.Sprintf("%s=%d", killAfterCommitEnv, n)}
			var r result
			if phase == "run" {
				r = c.run("run", wf)
			} else {
				r = c.run("answer", onlyRunID(t, c), "pay", "--field", "confirm=true")
			}
			c.env = nil
			killed := r.code == -1
			end, unknown := drivePay(t, c)
			transfers := c.ledgerCount("transfer")
			switch {
			case unknown && transfers <= 2:
				// A continuation killed in flight: not sent again.
				unknowns++
			case !unknown && end == journal.RunSucceeded && transfers == 2:
				if killed && phase == "run" {
					waited++
				}
			default:
				t.Fatalf("%s killed after commit %d: run %s (unknown %v), %d transfers", phase, n, end, unknown, transfers)
			}
			t.Logf("%s killed after commit %d: %v; run %s, outcome unknown %v, %d transfers", phase, n, killed, end, unknown, transfers)
			if !killed {
				break
			}
		}
	}
	if waited == 0 || unknowns == 0 {
		t.Errorf("%d runs killed while they waited for their answer, %d with a continuation in flight; want some of both", waited, unknowns)
	}
}

// onlyRunID is the id of the workspace's one run.
func onlyRunID(t *testing.T, c *cli) string {
	t.Helper()
	r := c.run("runs", "list", "-o", "json")
	var runs []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil || len(runs) != 1 {
		t.Fatalf("runs list: %v %s", err, r.stdout)
	}
	return runs[0].ID
}

// drivePay resumes and answers the pay run until it ends or waits for an
// operator's resolution, and returns how it ended.
func drivePay(t *testing.T, c *cli) (journal.RunStatus, bool) {
	t.Helper()
	id := onlyRunID(t, c)
	for range 6 {
		r := c.run("resume", id)
		switch {
		case r.code == 0:
			return journal.RunSucceeded, false
		case strings.Contains(r.stderr, "waiting for your answer: step pay"):
			if a := c.run("answer", id, "pay", "--field", "confirm=true"); a.code == 0 {
				return journal.RunSucceeded, false
			}
		case strings.Contains(r.stderr, "MCPFLOW_OUTCOME_UNKNOWN"):
			return journal.RunBlocked, true
		case r.code != 3:
			t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	t.Fatalf("run %s did not end", id)
	return 0, false
}

// TestElicitationDuringTheCall: the reference server-everything (npm; the
// TypeScript SDK, protocol 2025-11-25) asks during the call. It lists its
// elicitation tool only to a client that declares elicitation; one step
// answers it with elicit:, the other waits with its call open until an
// operator's mcpflow answer, from another terminal, reaches the process
// that runs it.
func TestElicitationDuringTheCall(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	usePinnedNpmServers(t, c)
	wf := c.workflow("ask.yaml", `name: ask
servers:
  everything: {command: npx, args: ["@modelcontextprotocol/server-everything", stdio]}
steps:
  - id: own
    server: everything
    tool: trigger-elicitation-request
    elicit: {name: Ada, check: true, integer: 7}
  - id: operator
    server: everything
    tool: trigger-elicitation-request
    timeout: 60s
  - id: login
    server: everything
    tool: trigger-url-elicitation
    timeout: 60s
    with: {url: "https://example.com/authorize", message: "Log in to the example"}
`)
	_, wait := c.background("run", wf)
	var id string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the run never waited for an answer:\n%s", wait().stderr)
		}
		time.Sleep(200 * time.Millisecond)
		r := c.run("runs", "list", "-o", "json")
		var runs []struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(r.stdout), &runs) != nil || len(runs) == 0 {
			continue
		}
		id = runs[0].ID
		if show := c.run("runs", "show", id); strings.Contains(show.stdout, "awaiting_input") {
			if !strings.Contains(show.stdout, "name           string, required") {
				t.Errorf("runs show lacks the question's fields:\n%s", show.stdout)
			}
			break
		}
	}
	if a := c.run("answer", id, "operator", "--field", "name=Grace", "--field", "integer=8"); a.code != 0 || !strings.Contains(a.stdout, "the call goes on with the answer") {
		t.Fatalf("answer: exit %d\n%s%s", a.code, a.stdout, a.stderr)
	}
	// A URL question: the person is shown where to go, and says when done.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the URL question never showed:\n%s", wait().stderr)
		}
		show := c.run("runs", "show", id)
		if strings.Contains(show.stdout, "open: https://example.com/authorize") {
			if !strings.Contains(show.stdout, "login --done") {
				t.Errorf("runs show does not say how to answer a URL question:\n%s", show.stdout)
			}
			break
		}
	}
	if a := c.run("answer", id, "login", "--field", "x=1"); a.code != 2 {
		t.Errorf("fields for a URL question: exit %d, want 2\n%s", a.code, a.stderr)
	}
	if a := c.run("answer", id, "login", "--done"); a.code != 0 {
		t.Fatalf("answer --done: exit %d\n%s%s", a.code, a.stdout, a.stderr)
	}
	r := wait()
	if r.code != 0 || strings.Count(r.stdout, "User provided the requested information") != 2 ||
		!strings.Contains(r.stdout, "User completed the URL elicitation flow") || !strings.Contains(r.stdout, "waits for a person to open https://example.com/authorize") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	j := c.openJournal()
	_, invs := c.onlyRun(j)
	for i, by := range []string{"workflow", osUser()} {
		if in := invs[i].Inputs; len(in) != 1 || len(in[0].Answers) != 1 || in[0].Answers[0].By != by || in[0].Attempt != 1 {
			t.Errorf("step %s: inputs %+v, want one answered by %s", invs[i].Step, in, by)
		}
		if len(invs[i].Attempts) != 1 {
			t.Errorf("step %s: %d attempts, want one: the call waited open", invs[i].Step, len(invs[i].Attempts))
		}
	}
	// The fields elicit: left out took the schema's defaults; those it
	// gave kept its values.
	var own struct {
		Content map[string]any `json:"content"`
	}
	if in := invs[0].Inputs; len(in) == 1 && len(in[0].Answers) == 1 {
		if err := json.Unmarshal(in[0].Answers[0].Response, &own); err != nil {
			t.Fatal(err)
		}
		if c := own.Content; c["name"] != "Ada" || c["integer"] != 7.0 || c["firstLine"] != "It was a dark and stormy night." || c["number"] != 3.14 {
			t.Errorf("step own answered %v, want its fields and the schema's defaults", c)
		}
	}
}

// TestRootsAskedThroughInputRequests: under protocol 2026-07-28 the demo
// asks for the client's roots in its result (an input request roots/list);
// mcpflow answers with the roots the session declares — the workspace, or
// the workflow's roots: — and continues the call.
func TestRootsAskedThroughInputRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ roots, want string }{
		{"", "1 roots: file://"},
		{"roots: []\n", "0 roots"},
	} {
		c := newCLI(t)
		wf := c.workflow("roots.yaml", "name: roots\n"+tc.roots+"servers: {demo: {builtin: demo}}\nsteps:\n  - {id: roots, server: demo, tool: roots}\n")
		r := c.run("run", wf)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("%q: exit %d\n%s%s", tc.roots, r.code, r.stdout, r.stderr)
		}
		j := c.openJournal()
		_, invs := c.onlyRun(j)
		if res := invs[0].Result; tc.roots == "" && (res == nil || !strings.Contains(string(res.StructuredContent), "file://"+c.workspace)) {
			t.Errorf("the roots do not name the workspace %s: %+v", c.workspace, res)
		}
		if in := invs[0].Inputs; len(in) != 1 || len(in[0].Answers) != 1 || in[0].Answers[0].By != "mcpflow" || invs[0].Attempts[1].Kind != journal.KindContinuation {
			t.Errorf("%q: inputs %+v, attempts %+v", tc.roots, in, invs[0].Attempts)
		}
	}
}

// TestAnswerThroughServer: with mcpflow server serving the journal,
// mcpflow answer is its client: the server journals the answer and
// continues the run, which the command follows to its end and exits as
// the run does.
func TestAnswerThroughServer(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.workflow("pay.yaml", payWorkflow)
	base := startServer(t, c)
	run := submitFile(t, base, "pay.yaml", nil)
	waitBlocked(t, base, run)
	r := c.run("answer", run, "pay", "--field", "confirm=true")
	if r.code != 0 || !strings.Contains(r.stdout, "answered (accept)") {
		t.Fatalf("answer: exit %d\nstdout: %q\nstderr: %q", r.code, r.stdout, r.stderr)
	}
	if status, _ := apiRun(t, base, run); status != "succeeded" || c.ledgerCount("transfer") != 2 {
		t.Errorf("run %s with %d transfers, want succeeded with 2", status, c.ledgerCount("transfer"))
	}
}
