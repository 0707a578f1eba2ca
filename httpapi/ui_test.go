package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
)

// outcomeUnknown charges through a demo server that dies after committing
// the charge: the charge's outcome is unknown and the run blocks.
const outcomeUnknown = `name: outcome-unknown
inputs:
  amount: {type: number, default: 10}
servers:
  demo:
    builtin: demo
    args: [--fault, exit-after-commit, --fault-tool, ledger_append]
steps:
  - id: charge
    server: demo
    tool: ledger_append
    with: {entry: "charge ${{ inputs.amount }} EUR"}
  - id: receipt
    server: demo
    tool: greet
    with: {name: "row ${{ steps.charge.structuredContent.row }}"}
`

// do sends a request to h and returns the response with its body read.
func do(t *testing.T, h http.Handler, req *http.Request) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	res := w.Result()
	return res, w.Body.String()
}

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	return do(t, h, httptest.NewRequest(http.MethodGet, path, nil))
}

func postForm(t *testing.T, h http.Handler, path string, form url.Values, header map[string]string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(t, h, req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf reads the form token a page carries.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form token in the page:\n%s", page)
	}
	return m[1]
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// submitBlocked submits the outcome-unknown workflow through the API and
// waits for its run to block.
func submitBlocked(t *testing.T, r *rig, h http.Handler) (run, inv string) {
	t.Helper()
	file := r.workflow("outcome-unknown.yaml", outcomeUnknown)
	req := httptest.NewRequest(http.MethodPost, "/api/runs", strings.NewReader(`{"file": "`+file+`"}`))
	req.Header.Set("Content-Type", "application/json")
	res, body := do(t, h, req)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", res.StatusCode, body)
	}
	var started api.Started
	if err := json.Unmarshal([]byte(body), &started); err != nil {
		t.Fatal(err)
	}
	rep := r.waitStatus(started.Run, journal.RunBlocked)
	waiting := rep.Waiting()
	if len(waiting) != 1 || waiting[0].Step != "charge" || waiting[0].State != journal.StateOutcomeUnknown {
		t.Fatalf("waiting: %+v", waiting)
	}
	return started.Run, waiting[0].ID.String()
}

func TestUIResolveAndResume(t *testing.T) {
	r := newRig(t, &httpapi.Options{By: "alice"})
	h := r.srv.Handler(false)
	run, inv := submitBlocked(t, r, h)

	res, body := get(t, h, "/?status=blocked")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("runs list: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	mustContain(t, "the runs list", body, `href="/runs/`+run+`"`, `<span class="badge run-blocked">blocked</span>`, "1 to resolve", `data-live="/api/events"`)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}

	res, body = get(t, h, "/runs/"+run)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("run page: %d", res.StatusCode)
	}
	mustContain(t, "the run page", body,
		`class="tl-bar st-outcome_unknown"`, `href="/invocations/`+inv+`"`, `class="tl-mark mark-decision"`,
		`action="/runs/`+run+`/resume"`, "Waiting for an operator", `data-live="/api/runs/`+run+`/events"`)

	res, body = get(t, h, "/invocations/"+inv)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("invocation page: %d", res.StatusCode)
	}
	mustContain(t, "the invocation page", body, `action="/invocations/`+inv+`/resolve"`, "charge 10 EUR", "connection_lost", "Replay decisions")
	token := csrfOf(t, body)

	// A bad result is refused, on the page, keeping what was typed.
	form := url.Values{"csrf": {token}, "as": {"completed"}, "result": {`{"structuredContent": `}, "reason": {"found in the ledger"}}
	res, body = postForm(t, h, "/invocations/"+inv+"/resolve", form, nil)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad result: %d", res.StatusCode)
	}
	mustContain(t, "the refused form", body, `role="alert"`, "found in the ledger", `value="completed" required checked`)

	form.Set("result", `{"structuredContent": {"row": 1}}`)
	res, _ = postForm(t, h, "/invocations/"+inv+"/resolve", form, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/runs/"+run {
		t.Fatalf("resolve: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	got, err := r.svc.Invocation(inv)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != journal.StateCompleted || len(got.Resolutions) != 1 || got.Resolutions[0].By != "alice" || got.Resolutions[0].Why != "found in the ledger" {
		t.Fatalf("after the form: %s, %+v", got.State, got.Resolutions)
	}
	if got.Result == nil || string(got.Result.StructuredContent) != `{"row": 1}` && string(got.Result.StructuredContent) != `{"row":1}` {
		t.Errorf("result %+v", got.Result)
	}

	// The redirect's page shows the flash once.
	req := httptest.NewRequest(http.MethodGet, "/runs/"+run, nil)
	for _, c := range res.Cookies() {
		req.AddCookie(c)
	}
	_, body = do(t, h, req)
	mustContain(t, "the run page after resolving", body, `class="flash flash-ok"`, "resolved as completed by alice", "✎")

	res, _ = postForm(t, h, "/runs/"+run+"/resume", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d", res.StatusCode)
	}
	rep := r.waitStatus(run, journal.RunSucceeded)
	if rep.Invocations[1].Step != "receipt" || rep.Invocations[1].State != journal.StateCompleted {
		t.Errorf("receipt: %+v", rep.Invocations[1])
	}
	_, body = get(t, h, "/runs/"+run)
	mustContain(t, "the succeeded run", body, `id="run-status">succeeded<`, `class="tl-bar st-completed"`)
	if strings.Contains(body, `/resume"`) {
		t.Error("a succeeded run offers to resume")
	}
}

func TestUIRefusesCrossSiteForms(t *testing.T) {
	r := newRig(t, nil)
	h := r.srv.Handler(false)
	_, inv := submitBlocked(t, r, h)
	_, body := get(t, h, "/invocations/"+inv)
	token := csrfOf(t, body)
	form := url.Values{"csrf": {token}, "as": {"failed"}, "reason": {"forged"}}
	for _, tc := range []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"cross-site", form, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"another origin", form, map[string]string{"Origin": "https://evil.example"}},
		{"no token", url.Values{"as": {"failed"}, "reason": {"forged"}}, nil},
		{"a wrong token", url.Values{"csrf": {token[:len(token)-2] + "xx"}, "as": {"failed"}, "reason": {"forged"}}, nil},
	} {
		res, body := postForm(t, h, "/invocations/"+inv+"/resolve", tc.form, tc.header)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "<html") {
			t.Errorf("%s: %d, want 403 as a page", tc.name, res.StatusCode)
		}
	}
	got, err := r.svc.Invocation(inv)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != journal.StateOutcomeUnknown || len(got.Resolutions) != 0 {
		t.Errorf("a refused form wrote: %s, %+v", got.State, got.Resolutions)
	}
}

func TestUIUnknownIDs(t *testing.T) {
	r := newRig(t, nil)
	h := r.srv.Handler(false)
	id := journal.NewID().String()
	for _, path := range []string{"/runs/" + id, "/invocations/" + id} {
		res, body := get(t, h, path)
		if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "not found") {
			t.Errorf("%s: %d %s", path, res.StatusCode, body)
		}
	}
	res, body := get(t, h, "/")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "No runs.") {
		t.Errorf("an empty list: %d", res.StatusCode)
	}
	res, body = get(t, h, "/ui/ui.js")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "EventSource") {
		t.Errorf("ui.js: %d", res.StatusCode)
	}
}

func TestUILogin(t *testing.T) {
	const token = "0123456789abcdef-token"
	r := newRig(t, &httpapi.Options{Token: token})
	if res, body := get(t, r.srv.Handler(true), "/login?token="+token); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "DNS rebinding") {
		t.Fatalf("TCP, Host example.com: %d %s", res.StatusCode, body)
	}
	tcp := r.srv.Handler(true)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Host = "localhost:7070" // httptest's requests are for example.com, which a TCP listener refuses
		tcp.ServeHTTP(w, req)
	})

	res, _ := get(t, h, "/")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("a page without the token: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := get(t, h, "/api/runs"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API without the token: %d", res.StatusCode)
	}
	res, body := get(t, h, "/login?token=not-the-token")
	if res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 || !strings.Contains(body, "That is not the server") {
		t.Errorf("a wrong token: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	res, _ = get(t, h, "/login?token="+token)
	cookies := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d, cookies %+v", res.StatusCode, cookies)
	}
	if strings.Contains(cookies[0].Value, token) {
		t.Error("the cookie holds the token as it is")
	}
	for _, path := range []string{"/", "/api/runs"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.AddCookie(cookies[0])
		if res, _ := do(t, h, req); res.StatusCode != http.StatusOK {
			t.Errorf("%s with the cookie: %d", path, res.StatusCode)
		}
	}
}

func TestUIApproveAndCancel(t *testing.T) {
	r := newRig(t, &httpapi.Options{By: "alice"})
	h := r.srv.Handler(false)
	submit := func(name, src string) string {
		t.Helper()
		file := r.workflow(name, src)
		req := httptest.NewRequest(http.MethodPost, "/api/runs", strings.NewReader(`{"file": "`+file+`"}`))
		req.Header.Set("Content-Type", "application/json")
		res, body := do(t, h, req)
		var started api.Started
		if res.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(body), &started) != nil {
			t.Fatalf("submit %s: %d %s", name, res.StatusCode, body)
		}
		return started.Run
	}

	run := submit("gate.yaml", `name: gate
servers:
  demo: {builtin: demo}
steps:
  - {id: deploy, server: demo, tool: greet, approve: "Roll out?", with: {name: prod}}
`)
	r.waitStatus(run, journal.RunBlocked)
	_, body := get(t, h, "/runs/"+run)
	mustContain(t, "the run waiting for approval", body, `action="/runs/`+run+`/decide"`, "Roll out?", `value="approved"`, `value="rejected"`)
	token := csrfOf(t, body)
	res, _ := postForm(t, h, "/runs/"+run+"/decide", url.Values{"csrf": {token}, "step": {"deploy"}, "as": {"approved"}, "reason": {"ticket 42"}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", res.StatusCode)
	}
	// The approval continues the run: no resume.
	rep := r.waitStatus(run, journal.RunSucceeded)
	if a := rep.Run.Approval("deploy"); a == nil || a.State != journal.ApprovalApproved || a.By != "alice" || a.Reason != "ticket 42" {
		t.Fatalf("approval %+v", a)
	}
	page := func(res *http.Response) string {
		req := httptest.NewRequest(http.MethodGet, "/runs/"+run, nil)
		for _, c := range res.Cookies() {
			req.AddCookie(c)
		}
		_, body := do(t, h, req)
		return body
	}
	body = page(res)
	mustContain(t, "the approved run", body, `class="flash flash-ok"`, "Step deploy approved by alice. The run goes on.")
	if strings.Contains(body, "waits for approval") || strings.Contains(body, `class="error"`) {
		t.Errorf("the run page after the approval still says the run waits:\n%s", body)
	}
	// Deciding twice is refused, said on the page it redirects to.
	res, _ = postForm(t, h, "/runs/"+run+"/decide", url.Values{"csrf": {token}, "step": {"deploy"}, "as": {"rejected"}}, nil)
	mustContain(t, "a second decision", page(res), `class="flash flash-error"`, "a decision is final")

	// Recorded only (through the API): the page says the run waits no
	// more, and offers to resume it.
	again := submit("gate.yaml", `name: gate
servers:
  demo: {builtin: demo}
steps:
  - {id: deploy, server: demo, tool: greet, approve: "Roll out?", with: {name: prod}}
`)
	r.waitStatus(again, journal.RunBlocked)
	req := httptest.NewRequest(http.MethodPost, "/api/runs/"+again+"/approve", strings.NewReader(`{"step": "deploy", "no_continue": true}`))
	req.Header.Set("Content-Type", "application/json")
	if res, body := do(t, h, req); res.StatusCode != http.StatusOK {
		t.Fatalf("approve, no_continue: %d %s", res.StatusCode, body)
	}
	_, body = get(t, h, "/runs/"+again)
	mustContain(t, "a decided run not continued", body, `id="decided"`, `action="/runs/`+again+`/resume"`)
	if strings.Contains(body, `class="error"`) || strings.Contains(body, `action="/runs/`+again+`/decide"`) {
		t.Errorf("the page of a decided run still says it waits:\n%s", body)
	}

	// Cancel only once the call is at the server (its first progress
	// report): cancelled between the intent and the send, the call is
	// never sent and stays an intent, which is right but not this test.
	inCall := r.firstProgress()
	slow := submit("slow.yaml", `name: slow
servers:
  demo: {builtin: demo}
steps:
  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 50}}
`)
	<-inCall
	r.waitStatus(slow, journal.RunRunning)
	_, body = get(t, h, "/runs/"+slow)
	mustContain(t, "a running run", body, `action="/runs/`+slow+`/cancel"`)
	if strings.Contains(body, `/resume"`) {
		t.Error("a running run offers to resume")
	}
	res, _ = postForm(t, h, "/runs/"+slow+"/cancel", url.Values{"csrf": {token}, "reason": {"wrong day"}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d", res.StatusCode)
	}
	if rep := r.waitStatus(slow, journal.RunCancelled); rep.Invocations[0].State != journal.StateAborted {
		t.Errorf("the call in flight: %s, want aborted", rep.Invocations[0].State)
	}
	// The cancelled run says who cancelled it and why; it does not wait
	// for an operator, and is not listed as blocked.
	_, body = get(t, h, "/runs/"+slow)
	mustContain(t, "the cancelled run", body, `id="cancelled"`, "cancelled by alice in the web UI: wrong day")
	if strings.Contains(body, "Waiting for an operator") {
		t.Error("a cancelled run says it waits for an operator")
	}
	_, body = get(t, h, "/?status=blocked")
	if strings.Contains(body, slow) {
		t.Error("the cancelled run is listed as blocked")
	}
	_, body = get(t, h, "/?status=cancelled")
	mustContain(t, "the cancelled runs", body, `data-run="`+slow+`"`)
	if strings.Contains(body, "to resolve") {
		t.Error("the cancelled run is listed with calls to resolve")
	}

	// The list filters by tool, server, workflow and time; the form keeps
	// what it was given.
	for _, tc := range []struct {
		query     string
		want, not []string
	}{
		{"tool=count_slowly", []string{slow}, []string{run}},
		{"server=demo&tool=greet", []string{run}, []string{slow}},
		{"workflow=gate", []string{run}, []string{slow}},
		{"until=2000-01-01T00:00", nil, []string{run, slow}},
		{"since=2000-01-01T00:00&status=cancelled", []string{slow}, []string{run}},
	} {
		res, body := get(t, h, "/?"+tc.query)
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", tc.query, res.StatusCode)
		}
		for _, id := range tc.want {
			mustContain(t, tc.query, body, `data-run="`+id+`"`)
		}
		for _, id := range tc.not {
			if strings.Contains(body, `data-run="`+id+`"`) {
				t.Errorf("%s lists run %s", tc.query, id)
			}
		}
	}
	_, body = get(t, h, "/?tool=greet&since=nonsense")
	mustContain(t, "a bad time", body, `role="alert"`, `from &#34;nonsense&#34;`, `name="tool" value="greet"`)
	// An id goes to its run.
	if res, _ := get(t, h, "/?id="+run[:13]); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/runs/"+run {
		t.Errorf("find %s: %d to %q", run[:13], res.StatusCode, res.Header.Get("Location"))
	}
}

// TestUIRunPageShowsStepsInline: a run's page has each step's arguments
// and result inline, secrets redacted, and its work and wall time.
func TestUIRunPageShowsStepsInline(t *testing.T) {
	r := newRig(t, nil)
	h := r.srv.Handler(false)
	file := r.workflow("secret.yaml", `name: secret
inputs:
  token: {type: string, secret: true}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: "Ada ${{ inputs.token }}"}}
`)
	req := httptest.NewRequest(http.MethodPost, "/api/runs", strings.NewReader(`{"file": "`+file+`", "inputs": {"token": "tok-9f8e7d"}}`))
	req.Header.Set("Content-Type", "application/json")
	res, body := do(t, h, req)
	var started api.Started
	if res.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(body), &started) != nil {
		t.Fatalf("submit: %d %s", res.StatusCode, body)
	}
	rep := r.waitStatus(started.Run, journal.RunSucceeded)
	_, body = get(t, h, "/runs/"+started.Run)
	mustContain(t, "the run page", body, `<details id="io-`+rep.Invocations[0].ID.String()+`"`, `&#34;name&#34;: &#34;Ada [redacted]&#34;`,
		"Hello, Ada [redacted]!", `id="run-wall"`, `id="run-work"`, `<span class="tool">greet</span>`, `class="tl-seg att-answered"`)
	if strings.Contains(body, "tok-9f8e7d") {
		t.Error("the run page shows the secret")
	}
}

// TestUIShowsReads: a run that reads a resource and gets a prompt shows
// each as what it is — on the run page, the invocation page and through
// the API, with its method.
func TestUIShowsReads(t *testing.T) {
	r := newRig(t, nil)
	h := r.srv.Handler(false)
	file := r.workflow("reads.yaml", `name: reads
steps:
  - {id: notes, server: demo, resource: "file:///demo/notes.txt"}
  - {id: ask, server: demo, prompt: review, with: {text: "${{ steps.notes.text }}"}}
`)
	req := httptest.NewRequest(http.MethodPost, "/api/runs", strings.NewReader(`{"file": "`+file+`"}`))
	req.Header.Set("Content-Type", "application/json")
	res, body := do(t, h, req)
	var started api.Started
	if res.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(body), &started) != nil {
		t.Fatalf("submit: %d %s", res.StatusCode, body)
	}
	rep := r.waitStatus(started.Run, journal.RunSucceeded)
	_, body = get(t, h, "/runs/"+started.Run)
	mustContain(t, "the run page", body, "resource demo file:///demo/notes.txt", "prompt demo review", "note 8")
	read := rep.Invocations[0].ID.String()
	_, body = get(t, h, "/invocations/"+read)
	mustContain(t, "the invocation page", body, "<code>resource demo file:///demo/notes.txt</code>")
	_, body = get(t, h, "/api/invocations/"+read)
	var inv api.InvocationDetail
	if err := json.Unmarshal([]byte(body), &inv); err != nil || inv.Method != "resources/read" || inv.Tool != "file:///demo/notes.txt" {
		t.Errorf("GET /api/invocations/%s: %v %s", read, err, body)
	}
}
