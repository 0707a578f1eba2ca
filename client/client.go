// Package client speaks mcpflow's HTTP API, over the unix socket beside a
// journal or over TCP, and returns what the service in the owner's process
// returned: the same records, the same errors (errors.Is finds the same
// sentinels: service's table of codes maps them both ways). It is
// service.API for a front end whose journal another process owns
// ([Client]), and engine.Journal for a process that runs the engine on
// server sessions of its own while another process holds the journal
// ([Journal], from [Client.Journal]: mcpflow proxy).
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/workflow"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Client is service.API through the HTTP API of the process that owns the
// journal (`mcpflow server`): every request goes to its unix socket, and
// the answers (api shapes) are read back into the journal's records whole.
type Client struct {
	socket string
	http   *http.Client
	// local loads workflows and types inputs where the user's files and
	// environment are; it never opens the journal.
	local *service.Service
}

var _ service.API = (*Client)(nil)

// New returns a client of the server on socket. local loads workflows and
// types inputs where the user's files and environment are.
func New(socket string, local *service.Service) *Client {
	tr := &http.Transport{
		// Shorter than the server's idle timeout (httpapi's Limits.Idle,
		// 120s): the client, not the server, closes a connection left
		// idle, so that a write (a POST, which is never sent twice) does
		// not go out on a connection the server is closing.
		IdleConnTimeout: 30 * time.Second,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if err := checkSocket(socket); err != nil {
				return nil, &net.OpError{Op: "dial", Net: "unix", Err: err}
			}
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}, local: local}
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// probeTimeout bounds the health check of a socket: a server answers at
// once, a stale socket refuses at once, and a hung server is not one.
const probeTimeout = 2 * time.Second

// On reports whether an mcpflow server answers on socket. A socket
// nothing answers on is stale (its server died) and is ignored.
func On(socket string) bool {
	h, ok := Probe(socket)
	return ok && h.OK
}

// Probe asks the process serving on socket how it is: false when nothing
// answers (no socket, or a stale one).
func Probe(socket string) (api.Health, bool) {
	c := New(socket, nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	var h api.Health
	err := c.do(ctx, http.MethodGet, "/api/health", nil, &h)
	return h, err == nil
}

// do sends a request with body as JSON (nil: none) and decodes the answer
// into out (nil: discarded).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("mcpflow server: %s %s: %w", method, path, err)
	}
	// The server indents its answers for people; the records' raw JSON
	// (arguments, results, annotations) is compact as journaled.
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return fmt.Errorf("mcpflow server: %s %s: %w", method, path, err)
	}
	if err := json.Unmarshal(compact.Bytes(), out); err != nil {
		return fmt.Errorf("mcpflow server: %s %s: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns a successful response, whose body the
// caller closes.
func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://mcpflow"+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// The caller's trace (TRACEPARENT, …) goes with the request: a run
	// the server starts for it joins that trace.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Gone since it was found (it ended, or was killed).
			return nil, fmt.Errorf("%w: %s: %v", service.ErrUnreachable, c.socket, op.Err)
		}
		if strings.Contains(err.Error(), "server closed idle connection") {
			// net/http's errServerClosedIdle: the server closed the
			// connection before a byte of the request was written (it
			// stopped) — the request was not sent.
			return nil, fmt.Errorf("%w: %s: %v", service.ErrUnreachable, c.socket, err)
		}
		return nil, fmt.Errorf("mcpflow server on %s: %w", c.socket, err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e api.Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
		return nil, fmt.Errorf("mcpflow server: %s %s: %s", method, path, resp.Status)
	}
	return nil, &service.Error{Code: e.Error.Code, Message: e.Error.Message, Values: e.Error.Fields}
}

func runPath(ref string, rest ...string) string {
	return "/api/runs/" + url.PathEscape(ref) + strings.Join(rest, "")
}

// Runs lists runs. A blocked run is read in full: its line shows what it
// waits for, from its invocations' errors in detail.
func (c *Client) Runs(q service.RunQuery) ([]service.RunSummary, error) {
	var list api.RunList
	if err := c.do(context.Background(), http.MethodGet, "/api/runs?"+runValues(q).Encode(), nil, &list); err != nil {
		return nil, err
	}
	out := make([]service.RunSummary, len(list.Runs))
	for i, r := range list.Runs {
		if r.Status == journal.RunBlocked.String() {
			rep, err := c.RunDetail(r.ID)
			if err != nil {
				return nil, err
			}
			out[i] = service.RunSummary{Run: *rep.Run, Invocations: rep.Invocations}
			continue
		}
		run, err := runOf(r, "")
		if err != nil {
			return nil, err
		}
		invs := make([]journal.Invocation, len(r.Steps))
		for j, st := range r.Steps {
			if invs[j], err = stepOf(run.ID, st); err != nil {
				return nil, err
			}
		}
		out[i] = service.RunSummary{Run: *run, Invocations: invs}
	}
	return out, nil
}

func runValues(q service.RunQuery) url.Values {
	v := url.Values{"limit": {strconv.Itoa(q.Limit)}}
	set(v, "status", q.Status)
	set(v, "workflow", q.Workflow)
	set(v, "server", q.Server)
	set(v, "tool", q.Tool)
	set(v, "cursor", q.Cursor)
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	return v
}

func set(v url.Values, k, val string) {
	if val != "" {
		v.Set(k, val)
	}
}

// CountRuns counts the runs q matches.
func (c *Client) CountRuns(q service.RunQuery) (service.Count, error) {
	v := runValues(q)
	v.Set("limit", "1")
	v.Set("count", "true")
	var list api.RunList
	if err := c.do(context.Background(), http.MethodGet, "/api/runs?"+v.Encode(), nil, &list); err != nil {
		return service.Count{}, err
	}
	if list.Total == nil {
		return service.Count{}, errors.New("mcpflow server: runs: no count in the answer")
	}
	return service.Count{N: list.Total.N, More: list.Total.More}, nil
}

// RunDetail returns a run with its invocations in full.
func (c *Client) RunDetail(ref string) (*service.Report, error) {
	var d api.RunDetail
	if err := c.do(context.Background(), http.MethodGet, runPath(ref, "?payload=true"), nil, &d); err != nil {
		return nil, err
	}
	return reportOf(d)
}

// Invocations lists invocations, with their arguments and results.
func (c *Client) Invocations(q service.InvocationQuery) ([]journal.Invocation, error) {
	v := invocationValues(q)
	v.Set("payload", "true")
	var list api.InvocationList
	if err := c.do(context.Background(), http.MethodGet, "/api/invocations?"+v.Encode(), nil, &list); err != nil {
		return nil, err
	}
	out := make([]journal.Invocation, len(list.Invocations))
	for i, inv := range list.Invocations {
		got, err := invocationOf(api.InvocationDetail{Invocation: inv})
		if err != nil {
			return nil, err
		}
		out[i] = *got
	}
	return out, nil
}

func invocationValues(q service.InvocationQuery) url.Values {
	v := url.Values{"limit": {strconv.Itoa(q.Limit)}}
	set(v, "run", q.Run)
	set(v, "state", q.State)
	set(v, "server", q.Server)
	set(v, "tool", q.Tool)
	set(v, "cursor", q.Cursor)
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	return v
}

// CountInvocations counts the invocations q matches.
func (c *Client) CountInvocations(q service.InvocationQuery) (service.Count, error) {
	v := invocationValues(q)
	v.Set("limit", "1")
	v.Set("count", "true")
	var list api.InvocationList
	if err := c.do(context.Background(), http.MethodGet, "/api/invocations?"+v.Encode(), nil, &list); err != nil {
		return service.Count{}, err
	}
	if list.Total == nil {
		return service.Count{}, errors.New("mcpflow server: invocations: no count in the answer")
	}
	return service.Count{N: list.Total.N, More: list.Total.More}, nil
}

// Invocation returns one invocation in full, with its arguments and
// result.
func (c *Client) Invocation(ref string) (*journal.Invocation, error) {
	var d api.InvocationDetail
	if err := c.do(context.Background(), http.MethodGet, "/api/invocations/"+url.PathEscape(ref)+"?payload=true", nil, &d); err != nil {
		return nil, err
	}
	return invocationOf(d)
}

// Resolve journals an operator's resolution through the server.
func (c *Client) Resolve(req service.ResolveRequest) (*journal.Invocation, error) {
	body := api.ResolveRequest{Reason: req.Reason}
	switch req.As {
	case journal.StateCompleted:
		body.As = "completed"
		b, err := json.Marshal(req.Result)
		if err != nil {
			return nil, err
		}
		body.Result = b
	case journal.StateFailed:
		body.As = "failed"
	case journal.StateRetryApproved:
		body.As = "retry"
	default:
		return nil, service.Invalidf("resolve as %s: want completed, failed or retry", req.As)
	}
	var d api.InvocationDetail
	if err := c.do(context.Background(), http.MethodPost, "/api/invocations/"+url.PathEscape(req.Invocation)+"/resolve", body, &d); err != nil {
		return nil, err
	}
	return invocationOf(d)
}

// Approve journals an approval or a rejection through the server, which
// continues the run the decision leaves nothing to wait for (unless
// req.NoContinue); the run is then followed here to its end, as Resume
// follows it.
func (c *Client) Approve(ctx context.Context, req service.ApproveRequest) (*service.ApproveReport, error) {
	verb := "/approve"
	if req.As == journal.ApprovalRejected {
		verb = "/reject"
	}
	st, closeStream, err := c.subscribeFirst(req.NoContinue)
	if err != nil {
		return nil, err
	}
	var d api.Decided
	body := api.DecisionRequest{Step: req.Step, Reason: req.Reason, NoContinue: req.NoContinue}
	if err := c.do(ctx, http.MethodPost, runPath(req.Run, verb), body, &d); err != nil {
		closeStream()
		return nil, err
	}
	a, err := approvalOf(d.Approval)
	if err != nil {
		closeStream()
		return nil, err
	}
	id, err := journal.ParseID(d.RunID)
	if err != nil {
		closeStream()
		return nil, fmt.Errorf("mcpflow server: approval of run %q: %w", d.RunID, err)
	}
	rep := &service.ApproveReport{Run: &journal.Run{ID: id}, Approval: a, Continues: d.Continued || d.NotContinued != nil}
	rep.Continued, err = c.settle(ctx, st, closeStream, id, d.Continued, d.NotContinued, req.Events,
		func(detail *service.Report, notContinued error) {
			rep.Run, rep.NotContinued = detail.Run, notContinued
			rep.Continues = rep.Continues || service.Continues(detail.Run)
		},
		func() {
			if req.Decided != nil {
				req.Decided(rep)
			}
		})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// settle ends a decision the server journaled on run id (an approval, an
// answer). When the server did not continue the run, the stream closes and
// the run is read as the decision left it, for what it waits for now:
// left is handed it, with why the run did not go on. Then tell tells the
// front end, and a run the server continues is followed here to its end
// (the report returned; nil when it was not continued).
func (c *Client) settle(ctx context.Context, st *eventStream, closeStream func(), id journal.ID, continued bool, notContinued *api.ErrorBody,
	events func(engine.Event), left func(detail *service.Report, notContinued error), tell func()) (*service.Report, error) {
	if !continued {
		closeStream()
		detail, err := c.RunDetail(id.String())
		if err != nil {
			return nil, err
		}
		var why error
		if e := notContinued; e != nil {
			why = &service.Error{Code: e.Code, Message: e.Message, Values: e.Fields}
		}
		left(detail, why)
	}
	tell()
	if !continued {
		return nil, nil
	}
	return c.follow(ctx, st, id, events)
}

// subscribeFirst subscribes to the server's events before a decision that
// may continue a run (unless noContinue), so that no event of the run it
// continues is missed; closeStream ends the subscription, if any.
func (c *Client) subscribeFirst(noContinue bool) (st *eventStream, closeStream func(), err error) {
	if !noContinue {
		if st, err = c.subscribe("/api/events"); err != nil {
			return nil, nil, err
		}
	}
	return st, func() {
		if st != nil {
			st.close()
		}
	}, nil
}

// Answer journals an answer through the server, which continues the run
// the answer leaves nothing to wait for (unless req.NoContinue); the run is
// then followed here to its end, as Approve follows it.
func (c *Client) Answer(ctx context.Context, req service.AnswerRequest) (*service.AnswerReport, error) {
	st, closeStream, err := c.subscribeFirst(req.NoContinue)
	if err != nil {
		return nil, err
	}
	body := api.AnswerRequest{Step: req.Step, Key: req.Key, Action: req.Action, Content: req.Content, Fields: req.Fields, NoContinue: req.NoContinue}
	if req.Item >= 0 {
		body.Item = &req.Item
	}
	var d api.Answered
	if err := c.do(ctx, http.MethodPost, runPath(req.Run, "/answer"), body, &d); err != nil {
		closeStream()
		return nil, err
	}
	id, err := journal.ParseID(d.RunID)
	if err != nil {
		closeStream()
		return nil, fmt.Errorf("mcpflow server: answer to run %q: %w", d.RunID, err)
	}
	inv, _ := journal.ParseID(d.Invocation)
	rep := &service.AnswerReport{Run: &journal.Run{ID: id}, Invocation: inv, Continues: d.Continued || d.NotContinued != nil,
		Answer: journal.Answer{Key: d.Key, Response: d.Response, By: d.By, At: d.At}}
	rep.Continued, err = c.settle(ctx, st, closeStream, id, d.Continued, d.NotContinued, req.Events,
		func(detail *service.Report, notContinued error) {
			rep.Run, rep.NotContinued = detail.Run, notContinued
			rep.Continues = rep.Continues || detail.InputAnswered()
		},
		func() {
			if req.Answered != nil {
				req.Answered(rep)
			}
		})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// Export copies the server's export of the journal to w.
func (c *Client) Export(w io.Writer, since time.Time, decrypt bool) error {
	return c.export(w, since, decrypt, false)
}

// Archive writes the server's whole journal as an archive.
func (c *Client) Archive(w io.Writer, decrypt bool) error {
	return c.export(w, time.Time{}, decrypt, true)
}

func (c *Client) export(w io.Writer, since time.Time, decrypt, archive bool) error {
	v := url.Values{}
	if archive {
		v.Set("archive", "true")
	}
	if !since.IsZero() {
		v.Set("since", since.Format(time.RFC3339Nano))
	}
	if decrypt {
		v.Set("decrypt", "true")
	}
	resp, err := c.send(context.Background(), http.MethodGet, "/api/journal/export?"+v.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return err
	}
	if msg := resp.Trailer.Get(api.ExportErrorTrailer); msg != "" {
		return &service.Error{Code: resp.Trailer.Get(api.ExportCodeTrailer), Message: msg}
	}
	return nil
}

// Check asks the server to verify the journal.
func (c *Client) Check() ([]journal.Problem, error) {
	var out api.JournalCheck
	if err := c.do(context.Background(), http.MethodGet, "/api/journal/check", nil, &out); err != nil {
		return nil, err
	}
	probs := make([]journal.Problem, len(out.Problems))
	for i, p := range out.Problems {
		rec, msg, _ := strings.Cut(p, ": ")
		probs[i] = journal.Problem{Record: rec, Message: msg}
	}
	return probs, nil
}

// submitRequest types a run's inputs here, where --input @FILE and
// MCPFLOW_INPUT_* are the user's, and sends the workflow's text, read here
// as the user, named by its path as typed, as a run here names it (the
// server reads nothing by that name).
func (c *Client) submitRequest(req service.RunRequest) (api.SubmitRequest, error) {
	if req.TrustWorkspace {
		return api.SubmitRequest{}, service.ErrNoTrustOverAPI
	}
	if req.Source == nil {
		var err error
		if req.Source, err = workflow.ReadFile(req.File); err != nil {
			return api.SubmitRequest{}, err
		}
	}
	inputs, err := c.local.ParseInputs(req)
	if err != nil {
		return api.SubmitRequest{}, err
	}
	return api.SubmitRequest{File: req.File, Source: string(req.Source), Inputs: inputs}, nil
}

// Submit starts a workflow in the server and returns its run id.
func (c *Client) Submit(ctx context.Context, req service.RunRequest) (journal.ID, error) {
	body, err := c.submitRequest(req)
	if err != nil {
		return journal.ID{}, err
	}
	body.Queue = true // for any worker, when the journal is shared
	var st api.Started
	if err := c.do(ctx, http.MethodPost, "/api/runs", body, &st); err != nil {
		return journal.ID{}, err
	}
	return journal.ParseID(st.Run)
}

// Run starts a workflow in the server and follows it to its end.
func (c *Client) Run(ctx context.Context, req service.RunRequest) (*service.Report, error) {
	body, err := c.submitRequest(req)
	if err != nil {
		return nil, err
	}
	rep, _, err := c.start(ctx, "/api/runs", body, req.Events)
	return rep, err
}

// Resume continues a run in the server and follows it to its end. A run
// with nothing to do is reported as it is (Acted false).
func (c *Client) Resume(ctx context.Context, req service.ResumeRequest) (*service.Report, error) {
	if req.TrustWorkspace {
		return nil, service.ErrNoTrustOverAPI
	}
	body := api.ResumeRequest{RetryFailed: req.RetryFailed, Untrusted: req.Untrusted, Secrets: req.Secrets}
	rep, nothing, err := c.start(ctx, runPath(req.Run, "/resume"), body, req.Events)
	if nothing {
		if rep, err = c.RunDetail(req.Run); err == nil {
			rep.Acted = false
		}
	}
	return rep, err
}

// Call makes one journaled call in the server and follows it to its end.
func (c *Client) Call(ctx context.Context, req service.CallRequest) (*service.Report, error) {
	if req.TrustWorkspace {
		return nil, service.ErrNoTrustOverAPI
	}
	body := api.CallRequest{Server: req.Server, Tool: req.Tool, Args: req.Args}
	if req.ArgsJSON != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(req.ArgsJSON), &obj); err != nil {
			return nil, service.Invalidf("--args: not a JSON object: %v", err)
		}
		body.Arguments = json.RawMessage(req.ArgsJSON)
	}
	if req.Workflow != "" {
		src, err := workflow.ReadFile(req.Workflow)
		if err != nil {
			return nil, err
		}
		body.Workflow, body.WorkflowSource = req.Workflow, string(src)
	}
	rep, _, err := c.start(ctx, "/api/calls", body, req.Events)
	return rep, err
}

// Resumable lists the runs resume --all continues, by the service's rule
// as the server applies it (runs going there are not listed).
func (c *Client) Resumable() ([]journal.ID, error) {
	var out api.Resumable
	if err := c.do(context.Background(), http.MethodGet, "/api/resumable", nil, &out); err != nil {
		return nil, err
	}
	ids := make([]journal.ID, len(out.Runs))
	for i, r := range out.Runs {
		id, err := journal.ParseID(r)
		if err != nil {
			return nil, fmt.Errorf("mcpflow server: resumable run %q: %w", r, err)
		}
		ids[i] = id
	}
	return ids, nil
}

// Cancel asks the server to cancel a run going there.
func (c *Client) Cancel(ref, reason string) error {
	return c.do(context.Background(), http.MethodPost, runPath(ref, "/cancel"), api.CancelRequest{Reason: reason}, nil)
}

// Watch follows a run until it ends, from its start: what it did before is
// reported first; a run that ended is reported at once.
func (c *Client) Watch(ctx context.Context, ref string, events func(engine.Event)) (*service.Report, error) {
	// Subscribed first, then read: an end between the two is not missed.
	st, err := c.subscribe(runPath(ref, "/events"))
	if err != nil {
		return nil, err
	}
	rep, err := c.RunDetail(ref)
	if err != nil {
		st.close()
		return nil, err
	}
	if rep.Run.Status != journal.RunRunning {
		st.close()
		return rep, nil
	}
	if service.ProxyAlive(rep.Run) {
		// A proxy session writes through this server, but goes in the
		// proxy's process: its events come here only as it hands them
		// over (client.Journal.Publish), dropped when late, so it is
		// followed from the journal.
		st.close()
		id := rep.Run.ID
		return service.FollowProxy(ctx, id, func() (*service.Report, error) {
			rep, err := c.RunDetail(id.String())
			if err != nil {
				return nil, &service.LostError{Run: id, Err: err}
			}
			return rep, nil
		}, events)
	}
	if events == nil {
		return c.follow(ctx, st, rep.Run.ID, nil)
	}
	// What the run did before: its start and its calls so far, then what
	// the stream says that is news (its events since the subscription may
	// repeat some).
	var seen service.Seen
	seen.Report(rep, events)
	return c.follow(ctx, st, rep.Run.ID, func(ev engine.Event) {
		if seen.Fresh(ev) {
			events(ev)
		}
	})
}

// start posts a request that starts (or resumes) a run, then follows the
// run. nothing is set when the server found nothing to resume.
func (c *Client) start(ctx context.Context, path string, body any, events func(engine.Event)) (rep *service.Report, nothing bool, err error) {
	// Subscribed before the run starts, so that no event of it is missed.
	st, err := c.subscribe("/api/events")
	if err != nil {
		return nil, false, err
	}
	var started api.Started
	if err := c.do(ctx, http.MethodPost, path, body, &started); err != nil {
		st.close()
		if errors.Is(err, service.ErrNothingToResume) {
			return nil, true, nil
		}
		return nil, false, err
	}
	id, err := journal.ParseID(started.Run)
	if err != nil {
		st.close()
		return nil, false, fmt.Errorf("mcpflow server: started run %q: %w", started.Run, err)
	}
	rep, err = c.follow(ctx, st, id, events)
	return rep, false, err
}

// follow hands the events of run id to events until the run ends, and
// returns the run as committed; it closes st. A stream that ends early
// (the server dropped a slow reader) is taken up again; a server gone is
// an error, the run left for the server's next start.
func (c *Client) follow(ctx context.Context, st *eventStream, id journal.ID, events func(engine.Event)) (*service.Report, error) {
	defer func() { st.close() }()
	for {
		select {
		case <-ctx.Done():
			return nil, &service.DetachedError{Run: id}
		case e, ok := <-st.events:
			if !ok {
				rep, err := c.takeUp(&st, id)
				if err != nil || rep != nil {
					return rep, err
				}
				continue
			}
			if e.Run != id.String() || e.OfPerson() {
				continue // another run's, or a decision: not progress
			}
			ev, err := service.EngineEvent(e)
			if err != nil {
				return nil, fmt.Errorf("mcpflow server: %w", err)
			}
			if events != nil {
				events(ev)
			}
			if ev.Kind == engine.RunFinished {
				rep, err := c.RunDetail(id.String())
				if err != nil {
					return nil, &service.LostError{Run: id, Err: err}
				}
				return rep, nil
			}
		}
	}
}

// takeUp follows run id again after its stream ended: the run as it
// ended, or nil with *st a new stream.
func (c *Client) takeUp(st **eventStream, id journal.ID) (*service.Report, error) {
	lost := func(err error) error { return &service.LostError{Run: id, Err: err} }
	(*st).close()
	next, err := c.subscribe(runPath(id.String(), "/events"))
	if err != nil {
		return nil, lost(err)
	}
	*st = next
	rep, err := c.RunDetail(id.String())
	if err != nil {
		return nil, lost(err)
	}
	if rep.Run.Status != journal.RunRunning {
		return rep, nil
	}
	return nil, nil
}

// eventStream is a subscription to the server's events. Its reader
// goroutine hands them to events, which it closes when the stream ends;
// close stops it and waits for it.
type eventStream struct {
	events chan api.Event
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// subscribe opens the event stream at path; the server has subscribed
// when it returns.
func (c *Client) subscribe(path string) (*eventStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &eventStream{events: make(chan api.Event, 1024), cancel: cancel}
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		defer close(st.events)
		defer resp.Body.Close()
		readEvents(ctx, resp.Body, st.events)
	}()
	return st, nil
}

func (st *eventStream) close() {
	st.once.Do(func() {
		st.cancel()
		st.wg.Wait()
	})
}

// readEvents reads server-sent events from r into out until r ends or ctx
// is done: "data:" lines hold an event's JSON, a blank line ends it;
// comments (":") and other fields are skipped.
func readEvents(ctx context.Context, r io.Reader, out chan<- api.Event) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 {
				var e api.Event
				if json.Unmarshal(data, &e) == nil {
					select {
					case out <- e:
					case <-ctx.Done():
						return
					}
				}
				data = data[:0]
			}
			continue
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
}

// reportOf reads a run in detail back into a report.
func reportOf(d api.RunDetail) (*service.Report, error) {
	run, err := runOf(d.Run, d.Source)
	if err != nil {
		return nil, err
	}
	run.UpdatedAt, run.TraceParent = d.UpdatedAt, d.TraceParent
	if d.Definition != "" {
		run.Definition = []byte(d.Definition)
	}
	if len(d.Secrets) > 0 {
		run.Secrets = d.Secrets
	}
	rep := &service.Report{Run: run, Invocations: make([]journal.Invocation, len(d.Invocations)), Acted: true}
	for i, inv := range d.Invocations {
		got, err := invocationOf(inv)
		if err != nil {
			return nil, err
		}
		rep.Invocations[i] = *got
	}
	return rep, nil
}

// runOf reads a run's shape back into the journal's record, as far as the
// shape carries it (not the definition).
func runOf(r api.Run, source string) (*journal.Run, error) {
	id, err := journal.ParseID(r.ID)
	if err != nil {
		return nil, fmt.Errorf("mcpflow server: run id %q: %w", r.ID, err)
	}
	st, err := journal.ParseRunStatus(r.Status)
	if err != nil {
		return nil, fmt.Errorf("mcpflow server: run %s: %w", r.ID, err)
	}
	run := &journal.Run{
		ID: id, Workflow: r.Workflow, Digest: r.Digest, Source: source, Inputs: r.Inputs, Workspace: r.Workspace,
		Status: st, Error: r.Error, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Outputs: r.Outputs,
	}
	for _, a := range r.Approvals {
		got, err := approvalOf(a)
		if err != nil {
			return nil, err
		}
		run.Approvals = append(run.Approvals, got)
	}
	return run, nil
}

func approvalOf(a api.Approval) (journal.Approval, error) {
	st, err := journal.ParseApprovalState(a.State)
	if err != nil {
		return journal.Approval{}, fmt.Errorf("mcpflow server: approval of step %s: %w", a.Step, err)
	}
	got := journal.Approval{Step: a.Step, Message: a.Message, State: st, By: a.By, At: a.At, Reason: a.Reason, InAdvance: a.InAdvance}
	if a.RequestedAt != nil {
		got.RequestedAt = *a.RequestedAt
	}
	return got, nil
}

// stepOf reads a run's line for one invocation back into a partial record:
// what runs list shows of it.
func stepOf(run journal.ID, s api.Step) (journal.Invocation, error) {
	id, err := journal.ParseID(s.Invocation)
	if err != nil {
		return journal.Invocation{}, fmt.Errorf("mcpflow server: invocation id %q: %w", s.Invocation, err)
	}
	st, err := journal.ParseState(s.State)
	if err != nil {
		return journal.Invocation{}, fmt.Errorf("mcpflow server: invocation %s: %w", s.Invocation, err)
	}
	inv := journal.Invocation{ID: id, RunID: run, Step: s.Step, Item: -1, Server: s.Server, Tool: s.Tool, Method: journal.Method(s.Method), State: st, Attempts: s.Attempts, Error: s.Error, ToolError: s.ToolError}
	if s.Item != nil {
		inv.Item = *s.Item
	}
	return inv, nil
}

// invocationOf reads an invocation's shape back into the journal's record.
func invocationOf(d api.InvocationDetail) (*journal.Invocation, error) {
	id, err := journal.ParseID(d.ID)
	if err != nil {
		return nil, fmt.Errorf("mcpflow server: invocation id %q: %w", d.ID, err)
	}
	run, err := journal.ParseID(d.RunID)
	if err != nil {
		return nil, fmt.Errorf("mcpflow server: invocation %s: run id %q: %w", d.ID, d.RunID, err)
	}
	st, err := journal.ParseState(d.State)
	if err != nil {
		return nil, fmt.Errorf("mcpflow server: invocation %s: %w", d.ID, err)
	}
	inv := &journal.Invocation{
		ID: id, RunID: run, Step: d.Step, Item: -1, Server: d.Server, Tool: d.Tool, Method: journal.Method(d.Method),
		Arguments: d.Arguments, ArgumentsDigest: d.ArgumentsDigest, Trust: d.Trust,
		IdempotencyKey: d.IdempotencyKey, State: st, Attempts: d.Attempts, Result: d.Result,
		ToolError: d.ToolError, Error: d.Error, Decisions: d.Decisions, Resolutions: d.Resolutions,
		Inputs: d.Inputs, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}
	if d.Item != nil {
		inv.Item = *d.Item
	}
	if !api.IsNull(d.Annotations) {
		inv.Annotations = d.Annotations
	}
	if len(inv.Attempts) == 0 {
		inv.Attempts = nil
	}
	if len(inv.Decisions) == 0 {
		inv.Decisions = nil
	}
	if len(inv.Resolutions) == 0 {
		inv.Resolutions = nil
	}
	return inv, nil
}
