package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// journalEndpoints are the engine's journal, as client.Journal asks it.
var journalEndpoints = []struct{ method, path string }{
	{"GET", "/api/journal"},
	{"POST", "/api/journal/digest"},
	{"POST", "/api/journal/create-run"},
	{"POST", "/api/journal/set-run-status"},
	{"POST", "/api/journal/end-run"},
	{"POST", "/api/journal/request-approval"},
	{"POST", "/api/journal/begin"},
	{"POST", "/api/journal/skip"},
	{"POST", "/api/journal/again"},
	{"POST", "/api/journal/finish"},
	{"POST", "/api/journal/interrupted"},
	{"POST", "/api/journal/decide"},
	{"POST", "/api/journal/ask"},
	{"POST", "/api/journal/answer"},
	{"POST", "/api/journal/event"},
	{"GET", "/api/journal/runs/0193a8a0-0000-7000-8000-000000000000"},
	{"GET", "/api/journal/runs/0193a8a0-0000-7000-8000-000000000000/invocations"},
	{"GET", "/api/journal/invocations/0193a8a0-0000-7000-8000-000000000000"},
}

// TestJournalOnlyOnTheSocket: the engine's journal — raw writes of
// records — is served on the owner's unix socket and nowhere else: the
// TCP listener of the same server, asked with its token (which opens the
// rest of the API), answers 404 to every journal request and writes
// nothing; through the socket they are answered.
func TestJournalOnlyOnTheSocket(t *testing.T) {
	const token = "0123456789abcdef0123"
	r := newRig(t, &httpapi.Options{Listen: "127.0.0.1:0", Token: token})
	tcp := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+r.srv.Addr().String()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := tcp("GET", "/api/runs", ""); code != http.StatusOK {
		t.Fatalf("GET /api/runs over TCP with the token: %d %s", code, body)
	}
	run, _ := json.Marshal(api.CreateRunRequest{Run: &journal.Run{Workflow: "forged", Status: journal.RunRunning}})
	for _, e := range journalEndpoints {
		body := ""
		if e.method == "POST" {
			body = "{}"
			if strings.HasSuffix(e.path, "/create-run") {
				body = string(run)
			}
		}
		if code, got := tcp(e.method, e.path, body); code != http.StatusNotFound {
			t.Errorf("%s %s over TCP: %d %s, want 404", e.method, e.path, code, got)
		}
		// On the socket, the handler answers (JSON: do fails the test on
		// the mux's plain 404), if only that the record is not there.
		var answer map[string]any
		var req any
		if e.method == "POST" {
			req = map[string]any{}
		}
		if code := r.do(e.method, e.path, req, &answer); code == http.StatusNotFound && answer["error"].(map[string]any)["code"] != "not_found" {
			t.Errorf("%s %s on the socket: 404 %v", e.method, e.path, answer)
		}
	}
	if runs, err := r.svc.Runs(service.RunQuery{}); err != nil || len(runs) != 0 {
		t.Errorf("runs after the TCP requests: %d (%v), want none", len(runs), err)
	}
	var info api.JournalInfo
	if code := r.do("GET", "/api/journal", nil, &info); code != http.StatusOK || info.Sealed {
		t.Errorf("GET /api/journal on the socket: %d %+v", code, info)
	}
	var wrote api.RunWritten
	if code := r.do("POST", "/api/journal/create-run", api.CreateRunRequest{Run: &journal.Run{Workflow: "w", Status: journal.RunRunning}}, &wrote); code != http.StatusOK || wrote.Run == nil || wrote.Run.ID.IsZero() {
		t.Fatalf("create-run on the socket: %d %+v", code, wrote)
	}
	var got journal.Run
	if code := r.do("GET", "/api/journal/runs/"+wrote.Run.ID.String(), nil, &got); code != http.StatusOK || got.Workflow != "w" || got.Status != journal.RunRunning {
		t.Errorf("the run read back on the socket: %d %+v", code, got)
	}
	var e api.Error
	if code := r.do("POST", "/api/journal/set-run-status", api.EndRunRequest{ID: wrote.Run.ID, Status: journal.RunRunning}, nil); code != http.StatusOK {
		t.Errorf("running → running: %d", code)
	}
	if code := r.do("POST", "/api/journal/end-run", api.EndRunRequest{ID: journal.ID{1}, Status: journal.RunFailed}, &e); code != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Errorf("end-run of an unknown run: %d %+v", code, e)
	}
	// A run's event is taken (a proxy's); anything else is refused.
	if code := r.do("POST", "/api/journal/event", api.Event{Kind: "step_started", Run: wrote.Run.ID.String(), Step: "call-1"}, nil); code != http.StatusOK {
		t.Errorf("a step's event: %d", code)
	}
	for _, bad := range []api.Event{{Kind: "step_started", Run: "nope"}, {Kind: "lunch", Run: wrote.Run.ID.String()}, {Kind: api.EventApproval, Run: wrote.Run.ID.String()}} {
		if code := r.do("POST", "/api/journal/event", bad, &e); code != http.StatusBadRequest || e.Error.Code != "invalid" {
			t.Errorf("event %+v: %d %+v, want 400", bad, code, e)
		}
	}
}
