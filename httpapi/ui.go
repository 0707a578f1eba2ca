package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// The web UI is server-rendered HTML (html/template, which escapes every
// value) with one small script for live updates; its files are embedded
// in the binary. Its forms post to the UI's own endpoints, which call the
// same methods as the API and answer with a redirect (303) and a flash
// message. A form is accepted only from the same origin and with the
// server's form token (see formAllowed).

//go:embed ui
var uiFiles embed.FS

// ui is the parsed pages.
type ui struct {
	pages map[string]*template.Template
	// csrf is the token every form carries: an HMAC of a per-process
	// random secret, so a page of another site can neither read nor guess
	// it.
	csrf string
}

func newUI() (*ui, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("mcpflow web UI form"))
	u := &ui{pages: map[string]*template.Template{}, csrf: base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
	funcs := template.FuncMap{
		"when":      when,
		"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"duration":  shortDuration,
		"json":      prettyJSON,
		"style":     style,
		"at":        at,
		"pct":       pct,
		"step":      func(inv journal.Invocation) string { return stepLabel(&inv) },
		"state":     func(inv journal.Invocation) string { return stateName(&inv) },
		"attempts":  func(inv journal.Invocation) string { return api.AttemptsText(&inv) },
		"kind":      kindText,
		"kindTitle": kindTitle,
		"deref":     func(t *time.Time) time.Time { return *t },
		"sub":       func(a, b time.Time) time.Duration { return a.Sub(b) },
	}
	for _, name := range []string{"runs", "run", "invocation", "message"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(uiFiles, "ui/layout.html", "ui/"+name+".html")
		if err != nil {
			return nil, err
		}
		u.pages[name] = t
	}
	return u, nil
}

// routeUI adds the web UI's pages and forms to mux.
func (s *Server) routeUI(mux *http.ServeMux) {
	static, _ := fs.Sub(uiFiles, "ui/static")
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.runsPage)
	mux.HandleFunc("GET /runs/{id}", s.runPage)
	mux.HandleFunc("GET /invocations/{id}", s.invocationPage)
	mux.HandleFunc("POST /runs/{id}/resume", s.uiResume)
	mux.HandleFunc("POST /runs/{id}/cancel", s.uiCancel)
	mux.HandleFunc("POST /runs/{id}/decide", s.uiDecide)
	mux.HandleFunc("POST /invocations/{id}/resolve", s.uiResolve)
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("POST /login", s.login)
}

// page is what every page has.
type page struct {
	Title string
	Flash *flash
	// Live is the event stream that refreshes the page ("": none).
	Live string
	CSRF string
	By   string
	Now  time.Time
}

func (s *Server) page(w http.ResponseWriter, r *http.Request, title string) page {
	return page{Title: title, Flash: takeFlash(w, r), CSRF: s.ui.csrf, By: s.o.By, Now: time.Now()}
}

// render writes a page; the security headers keep it from being framed
// and from loading anything from elsewhere.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := s.ui.pages[name].ExecuteTemplate(&b, "layout", data); err != nil {
		s.logf("ui: page %s: %v", name, err)
		http.Error(w, "the page could not be drawn: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// messagePage is an error or a notice.
type messagePage struct {
	page
	Status  int
	Message string
	Login   bool // show the token form
}

// uiError answers err as a page with its status (404 for an unknown id).
func (s *Server) uiError(w http.ResponseWriter, r *http.Request, err error) {
	status := service.CodeOf(err).Status
	s.message(w, r, status, err.Error())
}

func (s *Server) message(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, status, "message", messagePage{page: s.page(w, r, http.StatusText(status)), Status: status, Message: msg})
}

// runsPage is the list of runs, newest first, filtered by status.
type runsPage struct {
	page
	Status  string
	Filters []filter
	Runs    []runRow
	Older   string // the next page's URL
	// Shared: the journal is shared by workers, listed in Workers with
	// the runs each holds; Self is this server's worker id.
	Shared  bool
	Self    string
	Workers []journal.Worker
}

type filter struct {
	Label, URL string
	On         bool
	Count      string
}

type runRow struct {
	ID               journal.ID
	Workflow, Status string
	Started          time.Time
	Duration         string
	Steps, Waiting   int
	Error            *journal.Error
	Worker           string // the worker holding the run (a shared journal)
}

// runStatuses are the filters of the runs list, in this order.
var runStatuses = []journal.RunStatus{journal.RunRunning, journal.RunBlocked, journal.RunFailed, journal.RunSucceeded, journal.RunCancelled}

const runsPerPage = 50

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	runs, err := s.svc.Runs(service.RunQuery{Status: status, Cursor: q.Get("cursor"), Limit: runsPerPage})
	if err != nil {
		s.uiError(w, r, err)
		return
	}
	p := runsPage{page: s.page(w, r, "Runs"), Status: status}
	holder := map[journal.ID]string{}
	if pl, ok := s.pool(); ok {
		p.Shared, p.Self = true, pl.Worker()
		if p.Workers, err = pl.Workers(); err != nil {
			s.uiError(w, r, err)
			return
		}
		for _, wk := range p.Workers {
			for _, id := range wk.Runs {
				holder[id] = wk.ID
			}
		}
	}
	p.Live = "/api/events"
	p.Filters = append(p.Filters, filter{Label: "all", URL: "/", On: status == ""})
	for _, st := range runStatuses {
		f := filter{Label: st.String(), URL: "/?status=" + st.String(), On: status == st.String()}
		if c, err := s.svc.CountRuns(service.RunQuery{Status: st.String()}); err == nil && c.N > 0 {
			f.Count = countText(c)
		}
		p.Filters = append(p.Filters, f)
	}
	for _, rs := range runs {
		row := runRow{ID: rs.Run.ID, Workflow: rs.Run.Workflow, Status: rs.Run.Status.String(), Started: rs.Run.StartedAt,
			Duration: shortDuration(runEnd(&rs.Run, p.Now).Sub(rs.Run.StartedAt)), Steps: len(rs.Invocations), Error: rs.Run.Error}
		row.Waiting = len((&service.Report{Invocations: rs.Invocations}).Waiting())
		row.Worker = holder[rs.Run.ID]
		p.Runs = append(p.Runs, row)
	}
	if len(runs) == runsPerPage {
		v := url.Values{"cursor": {runs[len(runs)-1].Run.ID.String()}}
		if status != "" {
			v.Set("status", status)
		}
		p.Older = "/?" + v.Encode()
	}
	s.render(w, http.StatusOK, "runs", p)
}

func countText(c service.Count) string {
	t := strconv.Itoa(c.N)
	if c.More {
		t += "+"
	}
	return t
}

// runEnd is when a run ended: its finish, now while it goes, else its last
// update.
func runEnd(run *journal.Run, now time.Time) time.Time {
	switch {
	case run.FinishedAt != nil:
		return *run.FinishedAt
	case run.Status == journal.RunRunning:
		return now
	}
	return run.UpdatedAt
}

// runPage is one run: its header, timeline, steps and approvals.
type runPage struct {
	page
	Run         *journal.Run
	Invocations []journal.Invocation
	Timeline    timeline
	Waiting     []journal.Invocation
	Pending     []journal.Approval
	Duration    string
	// CanResume: the run is not going and did not succeed; CanCancel: it
	// is going (in this server, the journal's only writer).
	CanResume, CanCancel bool
	// Decided: the run is blocked at an approval gate that is decided
	// now (service.Continues): its error, which says it waits, is shown
	// as what it was, and the page says a resume takes it on.
	Decided bool
	RetryFailed          bool // offer to send failed calls again
	Inputs, Outputs      string
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	rep, err := s.svc.RunDetail(r.PathValue("id"))
	if err != nil {
		s.uiError(w, r, err)
		return
	}
	run := rep.Run
	p := runPage{page: s.page(w, r, "Run "+run.ID.Short()+" · "+run.Workflow), Run: run, Invocations: rep.Invocations}
	p.Live = "/api/runs/" + run.ID.String() + "/events"
	p.Timeline = timelineOf(run, rep.Invocations, p.Now)
	p.Waiting = rep.Waiting()
	p.Pending = run.PendingApprovals()
	p.Duration = shortDuration(runEnd(run, p.Now).Sub(run.StartedAt))
	p.CanCancel = run.Status == journal.RunRunning
	p.CanResume = run.Status != journal.RunRunning && run.Status != journal.RunSucceeded
	p.RetryFailed = run.Status == journal.RunFailed
	p.Decided = service.Continues(run)
	if run.Sealed != "" {
		p.Inputs = "(sealed: the server has not the journal's key)"
	} else {
		p.Inputs, p.Outputs = jsonOf(run.Inputs), jsonOf(run.Outputs)
	}
	s.render(w, http.StatusOK, "run", p)
}

// invocationPage is one invocation in full.
type invocationPage struct {
	page
	Inv *journal.Invocation
	// Attempts are Inv's, each with its kind (api.AttemptsOf).
	Attempts                []journal.Attempt
	Run                     *journal.Run
	Label, State            string
	Arguments, Content      string
	Structured, Annotations string
	Resolvable              bool
	Form                    resolveForm
	FormError               string
}

// resolveForm is what the resolve form posts.
type resolveForm struct {
	As, Result, Reason string
}

func (s *Server) invocationPage(w http.ResponseWriter, r *http.Request) {
	s.showInvocation(w, r, http.StatusOK, resolveForm{}, "")
}

func (s *Server) showInvocation(w http.ResponseWriter, r *http.Request, status int, form resolveForm, formErr string) {
	inv, err := s.svc.Invocation(r.PathValue("id"))
	if err != nil {
		s.uiError(w, r, err)
		return
	}
	rep, err := s.svc.RunDetail(inv.RunID.String())
	if err != nil {
		s.uiError(w, r, err)
		return
	}
	p := invocationPage{page: s.page(w, r, "Invocation "+inv.ID.Short()+" · "+stepLabel(inv)), Inv: inv, Attempts: api.AttemptsOf(inv), Run: rep.Run, Label: stepLabel(inv), State: stateName(inv), Form: form, FormError: formErr}
	p.Live = "/api/runs/" + inv.RunID.String() + "/events"
	switch {
	case inv.Sealed != "":
		p.Arguments = "(sealed: the server has not the journal's key)"
	default:
		p.Arguments = prettyJSON(inv.Arguments)
		if inv.Result != nil {
			p.Content, p.Structured = prettyJSON(inv.Result.Content), prettyJSON(inv.Result.StructuredContent)
		}
	}
	p.Annotations = prettyJSON(inv.Annotations)
	switch inv.State {
	case journal.StateOutcomeUnknown, journal.StateAborted, journal.StateTimedOut:
		p.Resolvable = true
	}
	s.render(w, status, "invocation", p)
}

// formAllowed checks a form post: same origin, and the server's form
// token (compared in constant time). It answers 403 otherwise.
func (s *Server) formAllowed(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if !sameOrigin(r) {
		s.message(w, r, http.StatusForbidden, "cross-site requests are refused")
		return false
	}
	if err := r.ParseForm(); err != nil {
		s.message(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return false
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.ui.csrf)) != 1 {
		s.message(w, r, http.StatusForbidden, "the form's token is missing or stale: reload the page and try again")
		return false
	}
	return true
}

// done redirects to the page at path with a flash message.
func done(w http.ResponseWriter, r *http.Request, path string, kind, text string) {
	setFlash(w, flash{Kind: kind, Text: text})
	http.Redirect(w, r, path, http.StatusSeeOther)
}

func (s *Server) uiResume(w http.ResponseWriter, r *http.Request) {
	if !s.formAllowed(w, r) {
		return
	}
	ref := r.PathValue("id")
	id, err := s.resume(s.traceOf(r), service.ResumeRequest{Run: ref, RetryFailed: r.PostForm.Get("retry_failed") != "", By: s.o.By})
	if err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			s.uiError(w, r, err)
			return
		}
		done(w, r, "/runs/"+ref, "error", "Not resumed: "+err.Error())
		return
	}
	done(w, r, "/runs/"+id.String(), "ok", "Resumed by "+s.o.By+".")
}

func (s *Server) uiCancel(w http.ResponseWriter, r *http.Request) {
	if !s.formAllowed(w, r) {
		return
	}
	ref := r.PathValue("id")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		reason = "cancelled by " + s.o.By + " in the web UI"
	}
	if err := s.svc.Cancel(ref, reason); err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			s.uiError(w, r, err)
			return
		}
		done(w, r, "/runs/"+ref, "error", "Not cancelled: "+err.Error())
		return
	}
	done(w, r, "/runs/"+ref, "ok", "Cancelling: "+reason+".")
}

// uiDecide approves or rejects a step that waits for approval.
func (s *Server) uiDecide(w http.ResponseWriter, r *http.Request) {
	if !s.formAllowed(w, r) {
		return
	}
	ref := r.PathValue("id")
	var as journal.ApprovalState
	switch r.PostForm.Get("as") {
	case "approved":
		as = journal.ApprovalApproved
	case "rejected":
		as = journal.ApprovalRejected
	default:
		s.message(w, r, http.StatusBadRequest, "as: want approved or rejected")
		return
	}
	step := r.PostForm.Get("step")
	rep, continued, err := s.approve(s.traceOf(r), service.ApproveRequest{Run: ref, Step: step, As: as, Reason: strings.TrimSpace(r.PostForm.Get("reason")), By: s.o.By})
	if err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			s.uiError(w, r, err)
			return
		}
		done(w, r, "/runs/"+ref, "error", "Not recorded: "+err.Error())
		return
	}
	kind, text := decidedText(rep, continued)
	done(w, r, "/runs/"+rep.Run.ID.String(), kind, text)
}

// decidedText is the flash of a decision: what was decided, by whom, and
// what became of the run.
func decidedText(rep *service.ApproveReport, continued bool) (kind, text string) {
	a := rep.Approval
	in := ""
	if a.InAdvance {
		in = " in advance"
	}
	text = "Step " + a.Step + " " + a.State.String() + in + " by " + a.By + "."
	switch {
	case rep.NotContinued != nil:
		return "error", text + " The run did not go on: " + rep.NotContinued.Error() + ". Resume it once that is fixed."
	case continued, rep.Continues:
		return "ok", text + " The run goes on."
	case a.InAdvance && rep.Run.Status != journal.RunSucceeded:
		text += " The run goes through the step without stopping when it gets there."
	}
	if p := rep.Run.PendingApprovals(); len(p) > 0 {
		text += " It still waits for the approval of step " + p[0].Step + "."
	}
	return "ok", text
}

func (s *Server) uiResolve(w http.ResponseWriter, r *http.Request) {
	if !s.formAllowed(w, r) {
		return
	}
	f := resolveForm{As: r.PostForm.Get("as"), Result: strings.TrimSpace(r.PostForm.Get("result")), Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	req := api.ResolveRequest{As: f.As, Reason: f.Reason}
	if f.As == "completed" {
		req.Result = json.RawMessage(f.Result)
	}
	inv, err := s.resolve(r.PathValue("id"), req)
	if err != nil {
		status := service.CodeOf(err).Status
		if status == http.StatusNotFound {
			s.uiError(w, r, err)
			return
		}
		s.showInvocation(w, r, status, f, err.Error())
		return
	}
	done(w, r, "/runs/"+inv.RunID.String(), "ok",
		"Invocation "+inv.ID.Short()+" ("+stepLabel(inv)+") resolved as "+f.As+" by "+s.o.By+". Resume the run to go on.")
}

// login gives a browser the token as a cookie (HttpOnly, SameSite=Strict):
// GET /login?token=TOKEN, or the form it shows.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.o.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	token := r.URL.Query().Get("token")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if !sameOrigin(r) || r.ParseForm() != nil {
			s.message(w, r, http.StatusForbidden, "cross-site requests are refused")
			return
		}
		token = r.PostForm.Get("token")
	}
	p := messagePage{page: s.page(w, r, "Sign in"), Login: true, Status: http.StatusUnauthorized}
	if token == "" {
		p.Message = "This server needs its token (the one in its --token-file)."
		s.render(w, http.StatusUnauthorized, "message", p)
		return
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.o.Token)) != 1 {
		p.Message = "That is not the server's token."
		s.render(w, http.StatusUnauthorized, "message", p)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(token)), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// cookieToken reads the token the login cookie carries.
func cookieToken(r *http.Request) (string, bool) {
	c, err := r.Cookie(tokenCookie)
	if err != nil {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// flash is a message shown once, on the page a form redirects to.
type flash struct {
	Kind string // ok, error
	Text string
}

const flashCookie = "mcpflow_flash"

func setFlash(w http.ResponseWriter, f flash) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(f.Kind + "|" + f.Text), Path: "/", MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// takeFlash reads the flash message, if any, and clears it.
func takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	v, err := url.QueryUnescape(c.Value)
	if err != nil {
		return nil
	}
	kind, text, ok := strings.Cut(v, "|")
	if !ok || (kind != "ok" && kind != "error") {
		return nil
	}
	return &flash{Kind: kind, Text: text}
}

// when is a time as the pages show it, in UTC.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// prettyJSON indents a JSON value for showing ("" for none).
func prettyJSON(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, t, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// jsonOf is a value as indented JSON ("" for none).
func jsonOf(v map[string]any) string {
	if len(v) == 0 {
		return ""
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "(not shown: " + err.Error() + ")"
	}
	return string(b)
}
