package httpapi_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/service"
)

const slow = `name: slow
steps:
  - {id: count, server: demo, tool: count_slowly, with: {n: 40, delay_ms: 50}}
  - {id: hi, server: demo, tool: greet, with: {name: "${{ string(steps.count.structuredContent.count) }}"}}
`

// TestSubmitAndFollow: a workflow submitted through the socket runs in the
// server; its events stream from run_started to run_finished, and the
// journal shows it succeeded, in the shapes -o json prints.
func TestSubmitAndFollow(t *testing.T) {
	r := newRig(t, nil)
	r.workflow("slow.yaml", slow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kinds := make(chan []string, 1)
	subscribed := make(chan struct{})
	go func() {
		var got []string
		r.sse(ctx, "/api/events", subscribed, func(e api.Event) bool {
			got = append(got, e.Kind)
			return e.Kind != "run_finished"
		})
		kinds <- got
	}()
	<-subscribed
	var started api.Started
	if code := r.do("POST", "/api/runs", map[string]any{"file": "slow.yaml"}, &started); code != http.StatusAccepted || started.Run == "" {
		t.Fatalf("submit: %d %+v", code, started)
	}
	// The id comes back once the run is journaled: it can be looked up at
	// once.
	if code := r.do("GET", "/api/runs/"+started.Run, nil, nil); code != http.StatusOK {
		t.Errorf("the run just submitted: %d, want 200", code)
	}
	got := <-kinds
	if len(got) < 4 || got[0] != "run_started" || got[len(got)-1] != "run_finished" || !contains(got, "step_progress") {
		t.Errorf("events %v, want run_started, steps with progress, run_finished", got)
	}
	var run api.RunDetail
	if code := r.do("GET", "/api/runs/"+started.Run[:13], nil, &run); code != http.StatusOK || run.Status != "succeeded" || len(run.Invocations) != 2 {
		t.Fatalf("run: %d %+v", code, run)
	}
	var list api.InvocationList
	if r.do("GET", "/api/invocations?limit=1&state=completed", nil, &list); len(list.Invocations) != 1 || list.NextCursor == nil || list.Invocations[0].Step != "hi" {
		t.Errorf("invocations: %+v", list)
	}
	var inv api.InvocationDetail
	if r.do("GET", "/api/invocations/"+run.Invocations[1].ID+"?payload=true", nil, &inv); inv.Result == nil || !strings.Contains(string(inv.Result.Content), "Hello, 40!") {
		t.Errorf("invocation with payload: %+v", inv)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestBadRequests: every refusal says why, with its status, and writes
// nothing.
func TestBadRequests(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		says         string
	}{
		{"POST", "/api/runs", map[string]any{}, 400, "file or source is required"},
		{"POST", "/api/runs", map[string]any{"file": "nope.yaml"}, 400, "nope.yaml"},
		{"POST", "/api/runs", map[string]any{"file": "x.yaml", "trust_workspace": true}, 400, "unknown field"},
		{"GET", "/api/runs/0123", nil, 404, "not found"},
		{"GET", "/api/runs?limit=x", nil, 400, "limit"},
		{"POST", "/api/invocations/0123/resolve", map[string]any{"as": "failed"}, 400, "reason is required"},
		{"POST", "/api/runs/0123/cancel", map[string]any{}, 404, "not found"},
	} {
		var e api.Error
		if code := r.do(tc.method, tc.path, tc.body, &e); code != tc.status || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%s %s: %d %q, want %d saying %q", tc.method, tc.path, code, e.Error.Message, tc.status, tc.says)
		}
	}
	// A form posted cross-site, or a body that is not JSON, is refused.
	for _, tc := range []struct {
		header, value, ctype string
		status               int
	}{
		{"Sec-Fetch-Site", "cross-site", "application/json", http.StatusForbidden},
		{"Origin", "http://evil.example", "application/json", http.StatusForbidden},
		{"", "", "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
	} {
		req, _ := http.NewRequest("POST", "http://mcpflow/api/runs", strings.NewReader(`{"file":"slow.yaml"}`))
		req.Header.Set("Content-Type", tc.ctype)
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s, %s: %d, want %d", tc.header, tc.value, tc.ctype, resp.StatusCode, tc.status)
		}
	}
	if runs, _ := r.svc.Runs(service.RunQuery{}); len(runs) != 0 {
		t.Errorf("refused requests started %d runs", len(runs))
	}
}

// TestSocketAndToken: the socket is private; a second server on the same
// socket is refused while the first answers, a stale socket is replaced;
// off loopback a token is required, and TCP requests are checked against
// it.
func TestSocketAndToken(t *testing.T) {
	r := newRig(t, nil)
	st, err := os.Stat(r.socket)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	svc, _ := service.New(nil, &service.Options{Workspace: r.workspace})
	defer svc.Close()
	second, _ := httpapi.New(&httpapi.Options{Service: svc, Socket: r.socket})
	if err := second.Start(); err == nil || !strings.Contains(err.Error(), "another mcpflow server") {
		t.Errorf("second server on the socket: %v", err)
	}
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // as a server that died leaves it
	third, _ := httpapi.New(&httpapi.Options{Service: r.svc, Socket: stale})
	if err := third.Start(); err != nil {
		t.Errorf("a stale socket was not replaced: %v", err)
	}
	third.Stop(context.Background())
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("keep"), 0o600)
	fourth, _ := httpapi.New(&httpapi.Options{Service: r.svc, Socket: file})
	if err := fourth.Start(); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a file at --socket: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("the file at --socket was changed: %q", b)
	}

	if _, err := httpapi.New(&httpapi.Options{Service: svc, Listen: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "token is required") {
		t.Errorf("non-loopback without a token: %v", err)
	}
	const token = "0123456789abcdef0123"
	tcp, err := httpapi.New(&httpapi.Options{Service: r.svc, Listen: "127.0.0.1:0", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := tcp.Start(); err != nil {
		t.Fatal(err)
	}
	defer tcp.Stop(context.Background())
	for _, tc := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer " + token, 200}} {
		req, _ := http.NewRequest("GET", "http://"+tcp.Addr().String()+"/api/runs", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, resp.StatusCode, tc.status)
		}
	}
}

// TestStopLeavesRunsForTheNextStart: stopping with a short grace aborts the
// call in flight, journaled so, and leaves the run running; the next start
// resumes it under the replay rule (count_slowly is read-only: replayed)
// to success.
func TestStopLeavesRunsForTheNextStart(t *testing.T) {
	r := newRig(t, &httpapi.Options{Grace: 100 * time.Millisecond})
	started := submitSlow(t, r)
	time.Sleep(300 * time.Millisecond) // count_slowly is in flight
	r.stop()
	j, err := bolt.Open(r.journal, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := j.Runs(journal.RunFilter{})
	invs, _ := j.RunInvocations(runs[0].ID)
	j.Close()
	if len(runs) != 1 || runs[0].Status != journal.RunRunning || len(invs) != 1 || invs[0].State != journal.StateAborted {
		t.Fatalf("after stop: run %s, invocations %d (%v); want running with count aborted", runs[0].Status, len(invs), invs)
	}
	r.start(&httpapi.Options{})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var run api.RunDetail
		r.do("GET", "/api/runs/"+started.Run, nil, &run)
		if run.Status == "succeeded" {
			if len(run.Invocations) != 2 || len(run.Invocations[0].Attempts) != 2 || run.Invocations[0].Attempts[1].Kind != journal.KindReplay ||
				run.Invocations[0].Replays != 1 {
				t.Errorf("resumed run: %+v", run.Invocations)
			}
			return
		}
		if time.Now().After(deadline) || (run.Status != "running" && run.Status != "") {
			t.Fatalf("the next start did not resume the run: %s %+v", run.Status, run.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAttemptKindsThroughTheAPI: a step whose tool returns an error twice
// (its retry: sends it once more), then a resume with retry_failed (the
// operator's retry). The API says why each attempt was sent and what it
// proved, counts them by kind, and the run's step shows the tool error;
// the web UI words the same.
func TestAttemptKindsThroughTheAPI(t *testing.T) {
	r := newRig(t, &httpapi.Options{By: "alice"})
	r.workflow("fail.yaml", `name: fail
steps:
  - {id: boom, server: demo, tool: fail, with: {message: quota exceeded}, retry: {attempts: 2, backoff: 10ms}}
`)
	var started api.Started
	if code := r.do("POST", "/api/runs", map[string]any{"file": "fail.yaml"}, &started); code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	rep := r.waitStatus(started.Run, journal.RunFailed)
	inv := rep.Invocations[0].ID.String()
	// The run's end is journaled a moment before its goroutine lets it
	// go: a resume in between waits for it.
	if code := r.do("POST", "/api/runs/"+started.Run+"/resume", map[string]any{"retry_failed": true}, nil); code != http.StatusAccepted {
		t.Fatalf("resume: %d", code)
	}
	var run api.RunDetail
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r.do("GET", "/api/runs/"+started.Run, nil, &run)
		if run.Status == "failed" && len(run.Invocations) == 1 && len(run.Invocations[0].Attempts) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed run: %s %+v", run.Status, run.Invocations)
		}
	}

	var got api.InvocationDetail
	if code := r.do("GET", "/api/invocations/"+inv, nil, &got); code != http.StatusOK {
		t.Fatalf("invocation: %d", code)
	}
	want := []journal.AttemptKind{journal.KindFirst, journal.KindRetry, journal.KindOperatorRetry}
	for _, shape := range []api.InvocationDetail{got, run.Invocations[0]} {
		if len(shape.Attempts) != 3 || shape.Replays != 0 || shape.Retries != 1 || shape.OperatorRetries != 1 || !shape.ToolError {
			t.Fatalf("invocation %+v", shape)
		}
		for i, a := range shape.Attempts {
			if a.Kind != want[i] || a.Failure != "tool_error" || a.Replay {
				t.Errorf("attempt %d: kind %q, failure %q, replay %v; want %s, tool_error", a.N, a.Kind, a.Failure, a.Replay, want[i])
			}
		}
	}
	if len(run.Steps) != 1 || !run.Steps[0].ToolError || run.Steps[0].State != "completed" || len(run.Steps[0].Attempts) != 3 ||
		run.Steps[0].Attempts[2].Kind != journal.KindOperatorRetry {
		t.Errorf("the run's step: %+v", run.Steps)
	}

	h := r.srv.Handler(false)
	_, body := get(t, h, "/runs/"+started.Run)
	mustContain(t, "the run page", body, "3 (1 retry, 1 operator retry)")
	if strings.Contains(body, "replayed") {
		t.Error("the run page calls a send a replay")
	}
	_, body = get(t, h, "/invocations/"+inv)
	mustContain(t, "the invocation page", body, `<span class="tag kind-retry"`, `<span class="tag kind-operator_retry"`, ">operator retry</span>", `class="attempt att-tool_error"`)
	if strings.Contains(body, "kind-replay") {
		t.Error("the invocation page shows a replay")
	}
}

// TestStopRemovesTheSocketFirst: a stopping server's socket is gone while
// its runs still have their grace period, not once they have ended: a
// server started meanwhile on the same path keeps its own socket (see
// Stop).
func TestStopRemovesTheSocketFirst(t *testing.T) {
	r := newRig(t, &httpapi.Options{Grace: 3 * time.Second})
	submitSlow(t, r)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.stop()
	}()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(r.socket); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket is still there 2 s into the stop")
		}
	}
	select {
	case <-stopped:
		t.Fatal("the stop ended before the run's grace period: nothing was in flight")
	default:
	}
	<-stopped
}

// submitSlow submits a run of slow (count_slowly, 2 s) and returns it.
func submitSlow(t *testing.T, r *rig) api.Started {
	t.Helper()
	r.workflow("slow.yaml", slow)
	var started api.Started
	if code := r.do("POST", "/api/runs", map[string]any{"file": "slow.yaml"}, &started); code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	return started
}
