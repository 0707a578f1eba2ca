package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// Where a server that wants a login refuses: the initialize of a connect,
// the tools/list, or the POST of the request itself.
const (
	atConnect = "connect"
	atTools   = "tools"
	atSend    = "send"
)

// loginSession is a server behind a login: until loggedIn, it refuses at
// refuse (and, once it refused a request, at every connect after, as a
// server does whose token is gone), the way upstream reports it: the
// oauth error wrapped with go-sdk's "rejected by transport" (-32005).
// It counts what reached it; ran counts the requests it acted on (its
// ledger).
type loginSession struct {
	refuse string
	why    string
	// sendOnly: a refused request does not make connects refused too (a
	// step-up: the login works, but not for this request's scopes).
	sendOnly bool
	// lose says the n-th request sent (from 1) loses its connection after
	// the server acted on it.
	lose func(n int) bool

	mu                         sync.Mutex
	loggedIn, refused          bool
	connects, lists, sent, ran int
}

var _ engine.Reader = (*loginSession)(nil)

func (s *loginSession) logIn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loggedIn = true
}

// refusal is the error of a refused method, or nil when the server takes
// it; the caller holds mu.
func (s *loginSession) refusal(at, method string) error {
	if s.loggedIn || (at != s.refuse && !(at == atConnect && s.refused && !s.sendOnly)) {
		return nil
	}
	s.refused = true
	le := &oauth.LoginRequiredError{Server: "s", Why: s.why, Scopes: []string{"files:write"}}
	rejected := &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}
	return fmt.Errorf("calling %q: %w: %w (UPSTREAM-TEXT 401)", method, rejected, le)
}

func (s *loginSession) connect(context.Context, string) (engine.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connects++
	if err := s.refusal(atConnect, "initialize"); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *loginSession) Tool(context.Context, string) (upstream.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	if err := s.refusal(atTools, "tools/list"); err != nil {
		return upstream.Tool{}, err
	}
	return upstream.Tool{Name: "t", Annotations: json.RawMessage(`{"idempotentHint":true}`)}, nil
}

// send is one request: refused, lost after it ran, or run.
func (s *loginSession) send(in journal.Intent, method string) error {
	if !in.Valid() {
		return engine.ErrNoIntent
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent++
	if err := s.refusal(atSend, method); err != nil {
		return err
	}
	s.ran++
	if s.lose != nil && s.lose(s.sent) {
		return fmt.Errorf("calling %q: %w", method, io.EOF)
	}
	return nil
}

func (s *loginSession) Call(_ context.Context, in journal.Intent, _ string, _ json.RawMessage, _ func(float64, float64, string)) (*mcp.CallToolResult, error) {
	if err := s.send(in, "tools/call"); err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
}

func (s *loginSession) Read(_ context.Context, in journal.Intent, uri string) (*mcp.ReadResourceResult, error) {
	if err := s.send(in, "resources/read"); err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "notes"}}}, nil
}

func (s *loginSession) GetPrompt(_ context.Context, in journal.Intent, _ string, _ map[string]string) (*mcp.GetPromptResult, error) {
	if err := s.send(in, "prompts/get"); err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
}

func (s *loginSession) counts() (connects, lists, sent, ran int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects, s.lists, s.sent, s.ran
}

func loginEngine(j *bolt.Store, s *loginSession, trust journal.Trust) *engine.Engine {
	return &engine.Engine{
		Journal: j,
		Connect: s.connect,
		Reconnect: func(ctx context.Context, name string, _ engine.Session) (engine.Session, error) {
			return s.connect(ctx, name)
		},
		Trust:            func(string) journal.Trust { return trust },
		ReconnectTimeout: func(string) time.Duration { return 3 * time.Second }, // a login loop would show as many connects
	}
}

// wantLoginBlocked checks that run is blocked for a login of server s,
// with a message built from the error's fields alone.
func wantLoginBlocked(t *testing.T, run *journal.Run, step string) {
	t.Helper()
	if run.Status != journal.RunBlocked || run.Error == nil || run.Error.Code != engine.CodeLoginRequired {
		t.Fatalf("run %s %v, want blocked with %s", run.Status, run.Error, engine.CodeLoginRequired)
	}
	msg := run.Error.Message
	if !strings.HasPrefix(msg, "step "+step+": server \"s\" needs a login") || !strings.HasSuffix(msg, ": run mcpflow servers login s, then mcpflow resume") {
		t.Errorf("run error %q, want the step, the server and the commands to run", msg)
	}
	if strings.Contains(msg, "UPSTREAM-TEXT") || strings.Contains(msg, "ARG-MARKER") {
		t.Errorf("run error %q carries upstream text or arguments", msg)
	}
}

// TestLoginRequiredBlocksThenResumes: a server that wants a login blocks
// the run after one try, wherever it refuses; resuming before anyone
// logged in leaves it blocked and journals nothing of the step; resuming
// after sends the request once more, and the run succeeds. The server
// acts on exactly one request.
func TestLoginRequiredBlocksThenResumes(t *testing.T) {
	const call = "steps: [{id: a, server: s, tool: t, with: {note: ARG-MARKER}}]\n"
	cases := []struct {
		name, refuse, why, steps string
		method                   journal.Method
	}{
		{"connect", atConnect, oauth.WhyNone, call, journal.MethodCall},
		{"tools/list", atTools, oauth.WhyExpired, call, journal.MethodCall},
		{"tools/call", atSend, oauth.WhyScopes, call, journal.MethodCall},
		{"resources/read", atSend, oauth.WhyExpired, "steps: [{id: a, server: s, resource: \"file:///notes.txt\"}]\n", journal.MethodRead},
		{"prompts/get", atSend, oauth.WhyNone, "steps: [{id: a, server: s, prompt: review}]\n", journal.MethodPrompt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := journaltest.Open(t, nil)
			s := &loginSession{refuse: c.refuse, why: c.why}
			// Trusted, and the tool declares itself idempotent: were the
			// refusal taken for a lost connection, it would be replayed.
			e := loginEngine(j, s, fullTrust)
			wf := load(t, "name: w\nservers: {s: {builtin: demo}}\n"+c.steps)
			run, err := e.Run(context.Background(), wf, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			wantLoginBlocked(t, run, "a")
			if connects, _, sent, ran := s.counts(); connects != 1 || ran != 0 || sent != btoi(c.refuse == atSend) {
				t.Fatalf("connects %d, sent %d, ran %d: want one connect, nothing run, a request sent only when it was the one refused", connects, sent, ran)
			}
			invs, err := j.RunInvocations(run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.refuse != atSend {
				if len(invs) != 0 {
					t.Fatalf("%d invocations journaled, want none: the login was refused before the intent", len(invs))
				}
			} else {
				wantRefusedAttempt(t, invs, 1, journal.KindFirst)
			}

			// Resumed before anyone logged in: blocked again, and
			// nothing new of the step in the journal.
			run, acted, err := e.Resume(context.Background(), run, wf, nil)
			if err != nil || !acted {
				t.Fatalf("resume: acted %v, %v", acted, err)
			}
			wantLoginBlocked(t, run, "a")
			again, err := j.RunInvocations(run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != len(invs) || len(invs) == 1 && len(again[0].Attempts) != 1 {
				t.Fatalf("resume before the login journaled %+v, want what was journaled before", again)
			}
			if _, _, _, ran := s.counts(); ran != 0 {
				t.Fatalf("the server ran %d requests before the login", ran)
			}

			s.logIn()
			run, acted, err = e.Resume(context.Background(), run, wf, nil)
			if err != nil || !acted {
				t.Fatalf("resume: acted %v, %v", acted, err)
			}
			if run.Status != journal.RunSucceeded {
				t.Fatalf("run %s %v after the login, want succeeded", run.Status, run.Error)
			}
			_, _, sent, ran := s.counts()
			if ran != 1 || sent != 1+btoi(c.refuse == atSend) {
				t.Fatalf("sent %d, ran %d: want the request run once, sent once more after a refused send", sent, ran)
			}
			invs, err = j.RunInvocations(run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(invs) != 1 || invs[0].State != journal.StateCompleted || invs[0].Method != c.method {
				t.Fatalf("invocations %+v, want one completed %s", invs, c.method)
			}
			if c.refuse == atSend {
				if n := len(invs[0].Attempts); n != 2 || invs[0].Attempts[1].Kind != journal.KindFirstDelivery {
					t.Fatalf("%d attempts %+v, want the refused one and a first delivery", n, invs[0].Attempts)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wantRefusedAttempt checks that the newest invocation is in flight with n
// attempts, its newest of kind k refused: not delivered, with the
// decision to send it again once someone logged in.
func wantRefusedAttempt(t *testing.T, invs []journal.Invocation, n int, k journal.AttemptKind) {
	t.Helper()
	if len(invs) != 1 || invs[0].State != journal.StateIntent || len(invs[0].Attempts) != n {
		t.Fatalf("invocations %+v, want one in flight with %d attempts", invs, n)
	}
	inv := invs[0]
	a := inv.LastAttempt()
	if a.Kind != k || a.EndedAt == nil || a.Failure != replay.ClassNotDelivered || !strings.Contains(a.Detail, "UPSTREAM-TEXT") {
		t.Errorf("attempt %+v, want a %s ended not delivered, the upstream text kept for the operator", a, k)
	}
	if p, err := engine.PlanResume(&inv); err != nil || p.Kind != engine.PlanFollow {
		t.Errorf("resume plan %+v, %v, want to follow the journaled decision", p, err)
	}
}

// TestLoginRequiredAfterALostCall: a call lost after it ran, cleared for
// a replay by the rule, whose reconnect or replay the server refuses for a
// login: one reconnect, no loop; the decision to replay stands (journaled
// with the refused replay, not delivered), so resume judges the fresh view
// again before sending. The server runs the lost call and the replay.
func TestLoginRequiredAfterALostCall(t *testing.T) {
	for _, c := range []struct {
		refuse   string
		attempts int // journaled when the run blocks
		sent     int // in all
	}{
		{atConnect, 1, 2},
		{atSend, 2, 3},
	} {
		t.Run(c.refuse, func(t *testing.T) {
			t.Parallel()
			j := journaltest.Open(t, nil)
			// The first call is lost after it ran, and the token expires
			// meanwhile. (lose runs with mu held.)
			s := &loginSession{why: oauth.WhyExpired}
			s.lose = func(n int) bool {
				if n == 1 {
					s.refuse = c.refuse
					return true
				}
				return false
			}
			e := loginEngine(j, s, fullTrust)
			wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: a, server: s, tool: t}]\n")
			run, err := e.Run(context.Background(), wf, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			wantLoginBlocked(t, run, "a")
			if connects, _, _, _ := s.counts(); connects != 2 {
				t.Errorf("%d connects, want the first and one reconnect", connects)
			}
			invs, err := j.RunInvocations(run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.refuse == atSend {
				wantRefusedAttempt(t, invs, 2, journal.KindReplay)
			} else if len(invs) != 1 || invs[0].State != journal.StateIntent || len(invs[0].Attempts) != 1 || invs[0].Attempts[0].Failure != replay.ClassLost {
				t.Fatalf("invocations %+v, want one in flight, its call lost", invs)
			}
			if d := invs[0].LastDecision(); d == nil || d.Verdict != verdict.Replay {
				t.Fatalf("decision %+v, want a replay: an earlier attempt may have run", d)
			}
			s.logIn()
			run, _, err = e.Resume(context.Background(), run, wf, nil)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != journal.RunSucceeded {
				t.Fatalf("run %s %v after the login, want succeeded", run.Status, run.Error)
			}
			invs, _ = j.RunInvocations(run.ID)
			if got := invs[0].Attempts; len(got) != c.attempts+1 || got[c.attempts].Kind != journal.KindReplay {
				t.Fatalf("attempts %+v, want %d and a replay", got, c.attempts)
			}
			if _, _, sent, ran := s.counts(); sent != c.sent || ran != 2 {
				t.Fatalf("sent %d, ran %d, want %d sent, 2 run", sent, ran, c.sent)
			}
		})
	}
}

// TestLoginRequiredAgainOnResume: a resume that reaches the server before
// the login was given more scopes sends the call once more, which is
// refused again: one more attempt, not delivered, the run still blocked,
// and nothing run.
func TestLoginRequiredAgainOnResume(t *testing.T) {
	t.Parallel()
	j := journaltest.Open(t, nil)
	s := &loginSession{refuse: atSend, why: oauth.WhyScopes, sendOnly: true}
	e := loginEngine(j, s, journal.Trust{})
	wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: a, server: s, tool: t}]\n")
	run, err := e.Run(context.Background(), wf, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	wantLoginBlocked(t, run, "a")
	run, _, err = e.Resume(context.Background(), run, wf, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLoginBlocked(t, run, "a")
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantRefusedAttempt(t, invs, 2, journal.KindFirstDelivery)
	if connects, _, sent, ran := s.counts(); connects != 2 || sent != 2 || ran != 0 {
		t.Fatalf("connects %d, sent %d, ran %d: want one of each per try, nothing run", connects, sent, ran)
	}
	s.logIn()
	if run, _, err = e.Resume(context.Background(), run, wf, nil); err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s %v after the login, want succeeded", run.Status, run.Error)
	}
	if _, _, sent, ran := s.counts(); sent != 3 || ran != 1 {
		t.Fatalf("sent %d, ran %d, want 3 sent, 1 run", sent, ran)
	}
}

// TestLoginRequiredThroughAProxy: a proxy session blocks nothing. Its
// client hears that the server wants a login (and may send the call again
// itself), so the refused call ends failed, not run, and nothing is left
// for a resume to send; the session goes on and ends succeeded.
func TestLoginRequiredThroughAProxy(t *testing.T) {
	t.Parallel()
	j := journaltest.Open(t, nil)
	s := &loginSession{refuse: atSend, why: oauth.WhyExpired, sendOnly: true}
	e := loginEngine(j, s, fullTrust)
	wf, err := workflow.Proxy("s", upstream.Set{"s": {Name: "s", Builtin: "demo"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Open(context.Background(), wf, map[string]any{"client": "test"}, "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Call(context.Background(), "t", json.RawMessage(`{"note":"ARG-MARKER"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Err == nil || a.Err.Code != engine.CodeLoginRequired || a.State != journal.StateFailed ||
		a.Err.Message != `step call-1: server "s" needs a login (the stored one expired and could not be refreshed): run mcpflow servers login s` {
		t.Fatalf("answer %+v (%v), want failed for a login, its message naming the command", a, a.Err)
	}
	s.logIn()
	if a, err = l.Call(context.Background(), "t", json.RawMessage(`{}`), nil); err != nil || a.Err != nil {
		t.Fatalf("second call: %+v, %v", a, err)
	}
	run, err := l.End()
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != journal.RunSucceeded {
		t.Fatalf("run %s %v, want succeeded: the client was answered", run.Status, run.Error)
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 2 || invs[0].State != journal.StateFailed || invs[0].LastAttempt().Failure != replay.ClassNotDelivered || len(invs[0].Decisions) != 0 {
		t.Fatalf("invocations %+v, want the refused one failed, not delivered, with no decision to send it again", invs)
	}
	if _, _, sent, ran := s.counts(); sent != 2 || ran != 1 {
		t.Fatalf("sent %d, ran %d, want 2 sent, 1 run", sent, ran)
	}
}
