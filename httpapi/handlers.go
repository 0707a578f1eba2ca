package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/workflow"
)

// Handler is the server's HTTP handler: the API under /api/, the MCP
// endpoint at /mcp (package mcpapi), the UI at /.
// tcp adds what a TCP listener checks before any handler runs: the Host
// (see hosts.allow), then the token. Without tcp it serves the engine's
// journal too (routeJournal), raw writes for the journal's owner alone:
// serve Handler(false) only on the owner's private unix socket.
func (s *Server) Handler(tcp bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/health", func(w http.ResponseWriter, r *http.Request) {
		health := api.Health{OK: true, Stopping: s.stopping.Load()}
		if err := s.busy(); err != nil {
			health.Owner = service.FieldsOf(err)
		}
		writeJSON(w, http.StatusOK, health)
	})
	mux.HandleFunc("GET /api/runs", s.listRuns)
	mux.HandleFunc("POST /api/runs", s.submitRun)
	mux.HandleFunc("GET /api/runs/{id}", s.getRun)
	mux.HandleFunc("GET /api/resumable", s.listResumable)
	mux.HandleFunc("POST /api/runs/{id}/resume", s.resumeRun)
	mux.HandleFunc("POST /api/runs/{id}/cancel", s.cancelRun)
	mux.HandleFunc("POST /api/runs/{id}/approve", s.decideStep(journal.ApprovalApproved))
	mux.HandleFunc("POST /api/runs/{id}/answer", s.answerStep)
	mux.HandleFunc("POST /api/runs/{id}/reject", s.decideStep(journal.ApprovalRejected))
	mux.HandleFunc("GET /api/runs/{id}/events", s.events)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/invocations", s.listInvocations)
	mux.HandleFunc("GET /api/invocations/{id}", s.getInvocation)
	mux.HandleFunc("POST /api/invocations/{id}/resolve", s.resolveInvocation)
	mux.HandleFunc("POST /api/calls", s.submitCall)
	mux.HandleFunc("GET /api/journal/export", s.exportJournal)
	mux.HandleFunc("GET /api/journal/check", s.checkJournal)
	mux.HandleFunc("GET /api/servers", s.listServers)
	mux.HandleFunc("GET /api/workers", s.listWorkers)
	mux.HandleFunc("GET /api/servers/{name}/tools", s.listTools)
	mux.Handle("GET /metrics", s.metrics.Handler())
	s.routeUI(mux)
	if !tcp {
		s.routeJournal(mux)
	}
	if s.mcp != nil {
		mux.Handle("/mcp", s.mcp)
	}
	var h http.Handler = mux
	if tcp {
		h = s.checkHost(s.authorized(h))
	}
	return h
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := limitOf(q.Get("limit"))
	if err != nil {
		writeErr(w, err)
		return
	}
	rq := service.RunQuery{Status: q.Get("status"), Workflow: q.Get("workflow"), Server: q.Get("server"), Tool: q.Get("tool"), Cursor: q.Get("cursor"), Limit: limit}
	if rq.Since, err = sinceOf(q.Get("since")); err != nil {
		writeErr(w, err)
		return
	}
	if rq.Until, err = timeOf("until", q.Get("until")); err != nil {
		writeErr(w, err)
		return
	}
	runs, err := s.svc.Runs(rq)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.RunList{Runs: make([]api.Run, len(runs))}
	for i := range runs {
		out.Runs[i] = api.RunOf(&runs[i].Run, runs[i].Invocations)
	}
	if limit > 0 && len(runs) == limit {
		next := runs[len(runs)-1].Run.ID.String()
		out.NextCursor = &next
	}
	if isTrue(q.Get("count")) {
		c, err := s.svc.CountRuns(rq)
		if err != nil {
			writeErr(w, err)
			return
		}
		out.Total = &api.Count{N: c.N, More: c.More}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listResumable(w http.ResponseWriter, r *http.Request) {
	ids, err := s.svc.Resumable()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Resumable{Runs: []string{}}
	for _, id := range ids {
		out.Runs = append(out.Runs, id.String())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	rep, err := s.svc.RunDetail(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, runDetail(rep, isTrue(r.URL.Query().Get("payload"))))
}

// runDetail is a run in detail, its invocations' arguments and results
// with payload.
func runDetail(rep *service.Report, payload bool) api.RunDetail {
	d := api.RunDetail{
		Run: api.RunOf(rep.Run, rep.Invocations), Source: rep.Run.Source, Definition: string(rep.Run.Definition),
		Secrets: rep.Run.Secrets, UpdatedAt: rep.Run.UpdatedAt, TraceParent: rep.Run.TraceParent,
		Invocations: []api.InvocationDetail{},
	}
	if d.Secrets == nil {
		d.Secrets = []string{}
	}
	for i := range rep.Invocations {
		d.Invocations = append(d.Invocations, api.InvocationDetailOf(&rep.Invocations[i], payload))
	}
	return d
}

func (s *Server) submitRun(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.File == "" && req.Source == "" {
		writeError(w, http.StatusBadRequest, "invalid", "file or source is required: the workflow to run")
		return
	}
	for _, p := range req.Pairs {
		if k, v, _ := strings.Cut(p, "="); workflow.IsInputFile(v) {
			writeErr(w, &forbiddenError{fmt.Sprintf("input_pairs: %s=@…: the server reads no file a request names (a pair's @FILE is the CLI's, read where you type it); send the value itself, in inputs", k)})
			return
		}
	}
	file, src, err := s.workflowOf(r, req.File, req.Source)
	if err != nil {
		writeErr(w, err)
		return
	}
	run := service.RunRequest{File: file, Source: src, InputValues: req.Inputs, Inputs: req.Pairs}
	var id journal.ID
	if _, shared := s.pool(); shared && req.Queue {
		id, err = s.enqueue(s.traceOf(r), run)
	} else {
		id, err = s.submit(s.traceOf(r), run)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, api.Started{Run: id.String()})
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) {
	var req api.ResumeRequest
	if !readJSON(w, r, &req) {
		return
	}
	id, err := s.resume(s.traceOf(r), service.ResumeRequest{Run: r.PathValue("id"), RetryFailed: req.RetryFailed, Untrusted: req.Untrusted, Secrets: req.Secrets, By: s.o.By})
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, api.Started{Run: id.String()})
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	var req api.CancelRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Reason == "" {
		req.Reason = "cancelled by " + s.o.By
	}
	if err := s.svc.Cancel(r.PathValue("id"), req.Reason); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"run": r.PathValue("id"), "cancelling": true})
}

func (s *Server) decideStep(as journal.ApprovalState) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.DecisionRequest
		if !readJSON(w, r, &req) {
			return
		}
		rep, continued, err := s.approve(s.traceOf(r), service.ApproveRequest{Run: r.PathValue("id"), Step: req.Step, As: as, Reason: req.Reason, By: s.o.By, NoContinue: req.NoContinue})
		if err != nil {
			writeErr(w, err)
			return
		}
		d := api.Decided{RunID: rep.Run.ID.String(), Approval: api.ApprovalOf(rep.Approval), Continued: continued}
		if err := rep.NotContinued; err != nil {
			d.NotContinued = &api.ErrorBody{Code: service.CodeOf(err).Name, Message: err.Error(), Fields: service.FieldsOf(err)}
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// answerStep answers a question a server asked during a step's call.
func (s *Server) answerStep(w http.ResponseWriter, r *http.Request) {
	var req api.AnswerRequest
	if !readJSON(w, r, &req) {
		return
	}
	item := -1
	if req.Item != nil {
		item = *req.Item
	}
	rep, continued, err := s.answer(s.traceOf(r), service.AnswerRequest{Run: r.PathValue("id"), Step: req.Step, Item: item, Key: req.Key,
		Action: req.Action, Content: req.Content, Fields: req.Fields, By: s.o.By, NoContinue: req.NoContinue})
	if err != nil {
		writeErr(w, err)
		return
	}
	a := rep.Answer
	d := api.Answered{RunID: rep.Run.ID.String(), Invocation: rep.Invocation.String(), Key: a.Key, Response: rep.Question.Redact(a.Response), By: a.By, At: a.At, Continued: continued}
	if err := rep.NotContinued; err != nil {
		d.NotContinued = &api.ErrorBody{Code: service.CodeOf(err).Name, Message: err.Error(), Fields: service.FieldsOf(err)}
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) submitCall(w http.ResponseWriter, r *http.Request) {
	var req api.CallRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Server == "" || req.Tool == "" {
		writeError(w, http.StatusBadRequest, "invalid", "server and tool are required")
		return
	}
	cr := service.CallRequest{Server: req.Server, Tool: req.Tool, Args: req.Args}
	if !api.IsNull(req.Arguments) {
		cr.ArgsJSON = string(req.Arguments)
	}
	if req.Workflow != "" || req.WorkflowSource != "" {
		var err error
		if cr.Workflow, cr.WorkflowSource, err = s.workflowOf(r, req.Workflow, req.WorkflowSource); err != nil {
			writeErr(w, err)
			return
		}
	}
	id, err := s.call(s.traceOf(r), cr)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, api.Started{Run: id.String()})
}

// exportJournal streams every invocation created since ?since as JSON
// Lines, oldest first; with ?decrypt=true, payloads decrypted.
func (s *Server) exportJournal(w http.ResponseWriter, r *http.Request) {
	since, err := sinceOf(r.URL.Query().Get("since"))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	// The status is sent before the records: an export that fails on the
	// way says so in the trailer, which a client reads after the body.
	w.Header().Set("Trailer", api.ExportErrorTrailer+", "+api.ExportCodeTrailer)
	export := func(w io.Writer, decrypt bool) error { return s.svc.Export(w, since, decrypt) }
	if isTrue(r.URL.Query().Get("archive")) {
		export = s.svc.Archive // every run, then every invocation
	}
	if err := export(w, isTrue(r.URL.Query().Get("decrypt"))); err != nil {
		w.Header().Set(api.ExportErrorTrailer, err.Error())
		w.Header().Set(api.ExportCodeTrailer, service.CodeOf(err).Name)
	}
}

func (s *Server) checkJournal(w http.ResponseWriter, r *http.Request) {
	probs, err := s.svc.Check()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.JournalCheck{OK: len(probs) == 0, Problems: []string{}}
	for _, p := range probs {
		out.Problems = append(out.Problems, p.String())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listInvocations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := limitOf(q.Get("limit"))
	if err != nil {
		writeErr(w, err)
		return
	}
	iq := service.InvocationQuery{Run: q.Get("run"), State: q.Get("state"), Server: q.Get("server"), Tool: q.Get("tool"), Cursor: q.Get("cursor"), Limit: limit}
	if iq.Since, err = sinceOf(q.Get("since")); err != nil {
		writeErr(w, err)
		return
	}
	invs, err := s.svc.Invocations(iq)
	if err != nil {
		writeErr(w, err)
		return
	}
	payload := isTrue(q.Get("payload"))
	out := api.InvocationList{Invocations: make([]api.Invocation, len(invs))}
	for i := range invs {
		out.Invocations[i] = api.InvocationOf(&invs[i], payload)
	}
	if limit > 0 && len(invs) == limit {
		next := invs[len(invs)-1].ID.String()
		out.NextCursor = &next
	}
	if isTrue(q.Get("count")) {
		c, err := s.svc.CountInvocations(iq)
		if err != nil {
			writeErr(w, err)
			return
		}
		out.Total = &api.Count{N: c.N, More: c.More}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getInvocation(w http.ResponseWriter, r *http.Request) {
	inv, err := s.svc.Invocation(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.InvocationDetailOf(inv, isTrue(r.URL.Query().Get("payload"))))
}

func (s *Server) resolveInvocation(w http.ResponseWriter, r *http.Request) {
	var req api.ResolveRequest
	if !readJSON(w, r, &req) {
		return
	}
	inv, err := s.resolve(r.PathValue("id"), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.InvocationDetailOf(inv, false))
}

// resolve carries out a resolution for the API and the UI.
func (s *Server) resolve(id string, req api.ResolveRequest) (*journal.Invocation, error) {
	if req.Reason == "" {
		return nil, badRequest("reason is required: say why, for the audit trail")
	}
	rr := service.ResolveRequest{Invocation: id, Reason: req.Reason, By: s.o.By}
	switch req.As {
	case "completed":
		if api.IsNull(req.Result) {
			return nil, badRequest(`as completed needs the call's result: {"content": [...], "structuredContent": {...}}`)
		}
		res, err := api.ParseResult(req.Result)
		if err != nil {
			return nil, badRequest("result: %v", err)
		}
		rr.As, rr.Result = journal.StateCompleted, res
	case "failed":
		rr.As = journal.StateFailed
	case "retry":
		rr.As = journal.StateRetryApproved
	default:
		return nil, badRequest("as %q: want completed, failed or retry", req.As)
	}
	return s.svc.Resolve(rr)
}

func (s *Server) listServers(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.Servers(r.Context(), "", r.URL.Query().Get("connect") != "false", false)
	if err != nil {
		writeErr(w, err)
		return
	}
	type server struct {
		Name      string `json:"name"`
		Transport string `json:"transport"`
		Trusted   bool   `json:"trusted"`
		Checked   bool   `json:"checked"`
		Tools     int    `json:"tools"`
		Error     string `json:"error,omitempty"`
	}
	out := []server{}
	for _, st := range list {
		v := server{Name: st.Server.Name, Transport: st.Server.Transport(), Trusted: st.Server.Trust, Checked: st.Checked, Tools: st.Tools}
		if st.Err != nil {
			v.Error = st.Err.Error()
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": out})
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	rep, err := s.svc.Tools(r.Context(), service.ToolsRequest{Server: r.PathValue("name")})
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []api.ToolDetail{}
	for _, t := range rep.Tools {
		out = append(out, api.ToolDetailOf(api.ToolOf(t.Tool.Name, t.Tool.Description, t.Tool.Annotations, t.Verdict, t.Declared), t.Tool.InputSchema, t.Tool.OutputSchema))
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": rep.Server.Name, "tools": out})
}

// events streams run events as server-sent events: every run's, or one
// run's (/api/runs/{id}/events). The stream ends when the server stops.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	run := ""
	if ref := r.PathValue("id"); ref != "" {
		rep, err := s.svc.RunDetail(ref)
		if err != nil {
			writeErr(w, err)
			return
		}
		run = rep.Run.ID.String()
		if s.abandoned(rep.Run) {
			writeErr(w, &service.AbandonedError{Run: rep.Run.ID})
			return
		}
	}
	sub, ok := s.hub.subscribe(run)
	if !ok {
		writeErr(w, ErrStopping)
		return
	}
	defer s.hub.unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// send writes and flushes; it fails when the client is gone or stopped
	// reading (a write past its deadline), which ends the stream.
	rc := http.NewResponseController(w)
	send := func(format string, args ...any) bool {
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": mcpflow events\n\n") {
		return
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			if !send(": keep-alive\n\n") {
				return
			}
		case e, ok := <-sub.ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(e)
			if !send("event: %s\ndata: %s\n\n", e.Kind, b) {
				return
			}
		}
	}
}

// isTrue reads a boolean query parameter.
func isTrue(v string) bool { return v == "true" || v == "1" }

// limitOf reads a limit parameter: default 50, 0 for all.
func limitOf(v string) (int, error) {
	if v == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("limit %q: want a number, 0 for all", v)
	}
	return n, nil
}

// sinceOf reads a since parameter: RFC 3339, or a duration back from now.
func sinceOf(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, badRequest("since %q: want RFC 3339 or a duration (90m, 24h)", v)
}

// timeOf reads a time parameter: RFC 3339 ("" is none).
func timeOf(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest("%s %q: want RFC 3339", name, v)
	}
	return t, nil
}

// maxBody bounds a request body.
const maxBody = 16 << 20

// readJSON decodes a JSON request body into v (an empty body is {}). A
// state-changing request must be JSON (a cross-site form cannot send it)
// and, from a browser, same-origin.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "cross_site", "cross-site requests are refused")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error())
		return false
	}
	if len(body) == 0 {
		return true
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "invalid", "send the request as Content-Type: application/json")
		return false
	}
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "request body: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: code, Message: msg}})
}

// badRequestError is a request the server cannot carry out as given.
type badRequestError struct{ msg string }

func (e *badRequestError) Error() string { return e.msg }
func (e *badRequestError) Unwrap() error { return service.ErrInvalid }

func badRequest(format string, args ...any) error {
	return &badRequestError{fmt.Sprintf(format, args...)}
}

// writeErr answers err as data: its code, HTTP status and fields are the
// service's (service.CodeOf), the same a client reads back.
func writeErr(w http.ResponseWriter, err error) {
	c := service.CodeOf(err)
	writeJSON(w, c.Status, api.Error{Error: api.ErrorBody{Code: c.Name, Message: err.Error(), Fields: service.FieldsOf(err)}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
