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
	"fmt"
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
		"target":    func(inv journal.Invocation) string { return api.TargetOf(&inv) },
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
	mux.HandleFunc("POST /runs/{id}/answer", s.uiAnswer)
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

// runsPage is the list of runs, newest first, filtered by status,
// workflow, the calls they made (server, tool) and when they started.
type runsPage struct {
	page
	Status  string
	Filters []filter
	// Query is the filters as the form shows them; Filtered: one is set
	// besides the status; FilterError says what of them was refused.
	Query       runFilter
	Filtered    bool
	FilterError string
	Statuses    []string
	Runs        []runRow
	Older       string // the next page's URL
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
	// Duration is the run's wall time; Work, when it waited, the time a
	// call was in flight.
	Duration, Work string
	Steps, Waiting int
	Error          *journal.Error
	Worker         string // the worker holding the run (a shared journal)
}

// runFilter is the runs list's filters, as its form sends them: names,
// and times in UTC as a datetime-local field writes them.
type runFilter struct {
	Workflow, Server, Tool string
	Since, Until           string
}

// uiTime is how the filter form writes a time: UTC, to the minute.
const uiTime = "2006-01-02T15:04"

// query reads the filters into q; a time that does not read is an error.
func (f runFilter) query(q *service.RunQuery) error {
	q.Workflow, q.Server, q.Tool = f.Workflow, f.Server, f.Tool
	for _, t := range []struct {
		name, v string
		to      *time.Time
		end     bool
	}{{"from", f.Since, &q.Since, false}, {"to", f.Until, &q.Until, true}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(uiTime, t.v)
		if err != nil {
			if v, err = time.Parse(time.RFC3339, t.v); err != nil {
				return fmt.Errorf("%s %q: want a date and time (YYYY-MM-DDTHH:MM, UTC)", t.name, t.v)
			}
		}
		if t.end && len(t.v) == len(uiTime) {
			v = v.Add(time.Minute - time.Nanosecond) // to the end of that minute
		}
		*t.to = v.UTC()
	}
	return nil
}

// values is the filters as a URL query, status included when set.
func (f runFilter) values(status string) url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"status", status}, {"workflow", f.Workflow}, {"server", f.Server}, {"tool", f.Tool}, {"since", f.Since}, {"until", f.Until}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v
}

// listURL is the runs list with these filters and status.
func (f runFilter) listURL(status string) string {
	if v := f.values(status); len(v) > 0 {
		return "/?" + v.Encode()
	}
	return "/"
}

// runStatuses are the filters of the runs list, in this order.
var runStatuses = []journal.RunStatus{journal.RunRunning, journal.RunBlocked, journal.RunFailed, journal.RunSucceeded, journal.RunCancelled}

const runsPerPage = 50

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if ref := strings.TrimSpace(q.Get("id")); ref != "" {
		s.find(w, r, ref)
		return
	}
	status := q.Get("status")
	p := runsPage{page: s.page(w, r, "Runs"), Status: status}
	p.Query = runFilter{Workflow: strings.TrimSpace(q.Get("workflow")), Server: strings.TrimSpace(q.Get("server")),
		Tool: strings.TrimSpace(q.Get("tool")), Since: q.Get("since"), Until: q.Get("until")}
	p.Filtered = p.Query != runFilter{}
	for _, st := range runStatuses {
		p.Statuses = append(p.Statuses, st.String())
	}
	base := service.RunQuery{}
	if err := p.Query.query(&base); err != nil {
		p.FilterError = err.Error()
		p.Query.Since, p.Query.Until = "", ""
		p.Query.query(&base)
	}
	rq := base
	rq.Status, rq.Cursor, rq.Limit = status, q.Get("cursor"), runsPerPage
	runs, err := s.svc.Runs(rq)
	if err != nil {
		if !errors.Is(err, service.ErrInvalid) {
			s.uiError(w, r, err)
			return
		}
		p.FilterError = err.Error()
	}
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
	p.Filters = append(p.Filters, filter{Label: "all", URL: p.Query.listURL(""), On: status == ""})
	for _, st := range runStatuses {
		f := filter{Label: st.String(), URL: p.Query.listURL(st.String()), On: status == st.String()}
		// Counting runs by call reads them: the chips count only what
		// the journal indexes.
		cq := base
		cq.Status = st.String()
		if cq.Server == "" && cq.Tool == "" {
			if c, err := s.svc.CountRuns(cq); err == nil && c.N > 0 {
				f.Count = countText(c)
			}
		}
		p.Filters = append(p.Filters, f)
	}
	for _, rs := range runs {
		t := api.TimingOf(&rs.Run, rs.Invocations, p.Now)
		row := runRow{ID: rs.Run.ID, Workflow: rs.Run.Workflow, Status: rs.Run.Status.String(), Started: rs.Run.StartedAt,
			Duration: shortDuration(t.Wall), Steps: len(rs.Invocations), Error: rs.Run.Error}
		if t.Waited() >= api.MinIdle {
			row.Work = shortDuration(t.Work)
		}
		if rs.Run.Status == journal.RunBlocked {
			// Only a blocked run waits for an operator: a cancelled
			// run's aborted call is judged when it is resumed.
			row.Waiting = len((&service.Report{Invocations: rs.Invocations}).Waiting())
		}
		row.Worker = holder[rs.Run.ID]
		p.Runs = append(p.Runs, row)
	}
	if len(runs) == runsPerPage {
		v := p.Query.values(status)
		v.Set("cursor", runs[len(runs)-1].Run.ID.String())
		p.Older = "/?" + v.Encode()
	}
	s.render(w, http.StatusOK, "runs", p)
}

// find goes to the run, or the invocation, whose id (or unique prefix) is
// ref; else back to the list, saying so.
func (s *Server) find(w http.ResponseWriter, r *http.Request, ref string) {
	if rep, err := s.svc.RunDetail(ref); err == nil {
		http.Redirect(w, r, "/runs/"+rep.Run.ID.String(), http.StatusSeeOther)
		return
	}
	if inv, err := s.svc.Invocation(ref); err == nil {
		http.Redirect(w, r, "/invocations/"+inv.ID.String(), http.StatusSeeOther)
		return
	}
	done(w, r, "/", "error", "No run or invocation has the id "+strconv.Quote(ref)+".")
}

func countText(c service.Count) string {
	t := strconv.Itoa(c.N)
	if c.More {
		t += "+"
	}
	return t
}

// runPage is one run: its header, timeline, steps and approvals.
type runPage struct {
	page
	Run      *journal.Run
	Steps    []stepRow
	Timeline timeline
	// Waiting are the calls a blocked run waits for an operator to
	// resolve; Aborted the calls a cancelled or failed run aborted or
	// timed out, which may have run and which a resume judges under the
	// replay rule; Cancel says who cancelled and why.
	Waiting, Aborted []journal.Invocation
	Cancelled        bool
	Cancel           string
	Pending          []journal.Approval
	// Questions are the questions the run's calls wait to have answered
	// (elicitations), each a form generated from its schema.
	Questions []questionForm
	// Wall is the run's time from start to end, Work the time a call was
	// in flight, Waited the time it waited (api.Timing).
	Wall, Work, Waited string
	// CanResume: the run is not going and did not succeed; CanCancel: it
	// is going (in this server, the journal's only writer).
	CanResume, CanCancel bool
	// Decided: the run is blocked at an approval gate that is decided
	// now (service.Continues): its error, which says it waits, is shown
	// as what it was, and the page says a resume takes it on.
	Decided         bool
	RetryFailed     bool // offer to send failed calls again
	Inputs, Outputs string
}

// stepRow is one invocation in the run's steps, with its arguments and
// result for showing (the service redacted secrets from them).
type stepRow struct {
	Inv          journal.Invocation
	Label, State string
	Took         string
	// Sealed: the payloads are encrypted and this server has not the key.
	Sealed                         bool
	Arguments, Content, Structured string
	IsError, HasResult             bool
	// ToolError is the text of a tool error's result (its state is
	// completed, and it has no error of its own).
	ToolError string
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	rep, err := s.svc.RunDetail(r.PathValue("id"))
	if err != nil {
		s.uiError(w, r, err)
		return
	}
	run := rep.Run
	live := run.Status == journal.RunRunning
	p := runPage{page: s.page(w, r, "Run "+run.ID.Short()+" · "+run.Workflow), Run: run}
	p.Live = "/api/runs/" + run.ID.String() + "/events"
	p.Timeline = timelineOf(run, rep.Invocations, p.Now)
	for i := range rep.Invocations {
		inv := &rep.Invocations[i]
		row := stepRow{Inv: *inv, Label: stepLabel(inv), State: stateName(inv), Took: callTook(inv, live, p.Now), Sealed: inv.Sealed != ""}
		if !row.Sealed {
			row.Arguments = prettyJSON(inv.Arguments)
			if res := inv.Result; res != nil {
				row.HasResult, row.IsError = true, res.IsError
				row.Content, row.Structured = prettyJSON(res.Content), prettyJSON(res.StructuredContent)
				if inv.ToolError {
					row.ToolError = api.OneLine(api.ContentText(res.Content), 300)
				}
			}
		}
		p.Steps = append(p.Steps, row)
	}
	switch run.Status {
	case journal.RunBlocked:
		p.Waiting = rep.Waiting()
	case journal.RunCancelled:
		p.Cancelled, p.Aborted = true, rep.Waiting()
		if run.Error != nil {
			p.Cancel = cancelReason(run.Error.Message)
		}
	case journal.RunFailed:
		p.Aborted = rep.Waiting()
	}
	p.Pending = run.PendingApprovals()
	p.Questions = questionsOf(rep)
	t := api.TimingOf(run, rep.Invocations, p.Now)
	p.Wall, p.Work = shortDuration(t.Wall), shortDuration(t.Work)
	if d := t.Waited(); d > 0 {
		p.Waited = shortDuration(d)
	}
	p.CanCancel = live
	p.CanResume = !live && run.Status != journal.RunSucceeded
	p.RetryFailed = run.Status == journal.RunFailed
	p.Decided = service.Continues(run)
	if run.Sealed != "" {
		p.Inputs = "(sealed: the server has not the journal's key)"
	} else {
		p.Inputs, p.Outputs = jsonOf(run.Inputs), jsonOf(run.Outputs)
	}
	s.render(w, http.StatusOK, "run", p)
}

// cancelReason is who cancelled a run and why, from its error: what the
// engine adds to it, "(cancelled: REASON)", or the whole message.
func cancelReason(msg string) string {
	const mark = " (cancelled: "
	if i := strings.LastIndex(msg, mark); i >= 0 && strings.HasSuffix(msg, ")") {
		return msg[i+len(mark) : len(msg)-1]
	}
	return msg
}

// invocationPage is one invocation in full.
type invocationPage struct {
	page
	Inv                     *journal.Invocation
	Run                     *journal.Run
	Label, State            string
	Arguments, Content      string
	Structured, Annotations string
	Attempts                []attemptRow // Inv's, each with its kind (api.AttemptsOf)
	Took                    string
	Resolvable              bool
	Form                    resolveForm
	FormError               string
	// Questions are what the server asked during the call, with the
	// answers (secret fields redacted).
	Questions []questionRow
}

// attemptRow is one attempt of an invocation: how it ended
// (api.AttemptOutcome) and how long it took ("" when not known: an
// interrupted attempt's end is when a resume found it).
type attemptRow struct {
	journal.Attempt
	Outcome, Took string
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
	p := invocationPage{page: s.page(w, r, "Invocation "+inv.ID.Short()+" · "+stepLabel(inv)), Inv: inv, Run: rep.Run, Label: stepLabel(inv), State: stateName(inv), Form: form, FormError: formErr}
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
	live := rep.Run.Status == journal.RunRunning
	p.Took = callTook(inv, live, p.Now)
	for j, a := range api.AttemptsOf(inv) {
		row := attemptRow{Attempt: a, Outcome: api.AttemptOutcome(inv, j, live)}
		if end, ok := api.AttemptEnd(inv, j, live, p.Now); ok {
			row.Took = shortDuration(end.Sub(a.SentAt))
		}
		p.Attempts = append(p.Attempts, row)
	}
	switch inv.State {
	case journal.StateOutcomeUnknown, journal.StateAborted, journal.StateTimedOut:
		p.Resolvable = true
	}
	p.Questions = questionRows(inv)
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
	// Who cancels goes with why: the run's error says both.
	reason := "cancelled by " + s.o.By + " in the web UI"
	if why := strings.TrimSpace(r.PostForm.Get("reason")); why != "" {
		reason += ": " + why
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
