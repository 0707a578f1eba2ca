package service

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/procid"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// ProxyRequest opens a proxy session (mcpflow proxy): a run in front of
// one configured server, whose steps are the tools/call requests a client
// makes.
type ProxyRequest struct {
	Server string
	// ClientName and ClientVersion are what the client said of itself at
	// initialize: the run's inputs.
	ClientName, ClientVersion string
	// Peer is the client: what the server asks of its client goes to it.
	Peer upstream.Peer
	// Journal, when set, is the journal the session writes (the engine's
	// journal over the socket of the process that holds it); nil: the
	// service's.
	Journal engine.Journal
	// TrustWorkspace is --trust-workspace.
	TrustWorkspace bool
	// Events receives the run's events (nil: none).
	Events func(engine.Event)
}

// Proxied is an open proxy session: the run (Live) and the server's
// session, through which everything but tools/call passes as it came.
type Proxied struct {
	*engine.Live
	server string
	x      *execution
}

// OpenProxy connects to the server and prepares the session's run, which
// is journaled with the first call. The server sees the client's
// capabilities (req.Peer). Close ends both.
func (s *Service) OpenProxy(ctx context.Context, req ProxyRequest) (*Proxied, error) {
	j := req.Journal
	if j == nil {
		if err := s.open(); err != nil {
			return nil, err
		}
		j = s.j
	}
	set, err := s.External(s.o.Workspace)
	if err != nil {
		return nil, err
	}
	if _, err := set.Lookup(req.Server); err != nil {
		_, err = s.leftOut(req.Server, err)
		return nil, err
	}
	wf, err := workflow.Proxy(req.Server, set, nil)
	if err != nil {
		return nil, err
	}
	x := s.prepareFor(set, nil, s.o.Workspace, req.TrustWorkspace, req.Peer)
	// The server starts before the run is journaled: a server that does
	// not start leaves no run behind.
	if _, err := x.pool.Session(ctx, req.Server); err != nil {
		x.close()
		return nil, err
	}
	e := s.engine(x, req.Events)
	e.Journal = j
	inputs := map[string]any{"client": req.ClientName, "client_version": req.ClientVersion, workflow.ProxyProcess: procid.Self()}
	live, err := e.Open(ctx, wf, inputs, s.o.Workspace)
	if err != nil {
		x.close()
		return nil, err
	}
	return &Proxied{Live: live, server: req.Server, x: x}, nil
}

// Upstream is the server's session now: after a lost connection, the one
// a call reconnected, or a new one.
func (p *Proxied) Upstream(ctx context.Context) (*upstream.Session, error) {
	return p.x.pool.Session(ctx, p.server)
}

// Reconnect replaces old, a session whose connection was lost, with a new
// one (bounded by the server's reconnect timeout).
func (p *Proxied) Reconnect(ctx context.Context, old *upstream.Session) (*upstream.Session, error) {
	t := p.x.pool.Set()[p.server].ReconnectTimeout
	if t == 0 {
		t = upstream.DefaultReconnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	return p.x.pool.Reconnect(ctx, p.server, old)
}

// Close ends the run (blocked if a call's outcome is unknown) and stops
// the server.
func (p *Proxied) Close() (*journal.Run, error) {
	run, err := p.End()
	p.x.close()
	return run, err
}

// proxyWorkflow is the workflow of a proxy session's run, as resume needs
// it: a step per call the journal holds, with its arguments as journaled.
// A call whose arguments the journal does not hold whole (cut, or a
// secret redacted) cannot be sent again: resume judges it, and at worst
// leaves its outcome unknown for an operator.
func (s *Service) proxyWorkflow(run *journal.Run, server string, set upstream.Set) (*workflow.Workflow, error) {
	invs, err := s.j.RunInvocations(run.ID)
	if err != nil {
		return nil, err
	}
	calls := make([]workflow.ProxyCall, 0, len(invs))
	seen := map[string]bool{}
	for _, inv := range invs {
		if seen[inv.Step] {
			continue
		}
		seen[inv.Step] = true
		calls = append(calls, workflow.ProxyCall{Step: inv.Step, Tool: inv.Tool, Args: inv.Arguments})
	}
	wf, err := workflow.Proxy(server, set, calls)
	if errors.Is(err, upstream.ErrUnknownServer) {
		return nil, fmt.Errorf("run %s: server %q is no longer configured: %w", run.ID.Short(), server, err)
	}
	return wf, err
}

// SettleProxies resumes the sessions of a proxy of server that were left
// running (the proxy was killed, maybe mid-call): each call in flight is
// judged by the replay rule as after any crash — a safe one is sent again,
// an unsafe one's outcome is unknown, for an operator — and the run ends.
// Only a process that holds the journal alone may call it: a session left
// running is then no one's.
//
// It goes on past a run it cannot settle: each error is the run's, and the
// run stays as it was, for resume.
func (s *Service) SettleProxies(ctx context.Context, server string, trustWorkspace bool, events func(engine.Event)) ([]*Report, []error) {
	ids, err := s.Resumable()
	if err != nil {
		return nil, []error{err}
	}
	var reps []*Report
	var errs []error
	for _, id := range ids {
		run, err := s.j.Run(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if srv, ok := workflow.ProxyServer(run.Workflow, run.Source); !ok || srv != server || run.Status != journal.RunRunning {
			continue
		}
		rep, err := s.Resume(ctx, ResumeRequest{Run: id.String(), TrustWorkspace: trustWorkspace, Events: events})
		if err != nil {
			errs = append(errs, fmt.Errorf("settle run %s: %w", id.Short(), err))
			continue
		}
		reps = append(reps, rep)
	}
	return reps, errs
}

// ProxyAlive reports whether run is a proxy session's whose process still
// runs: it is that process's, whatever this one knows of it, and no
// resume here may settle it.
func ProxyAlive(run *journal.Run) bool {
	if _, ok := workflow.ProxyServer(run.Workflow, run.Source); !ok || run.Status != journal.RunRunning {
		return false
	}
	id, _ := run.Inputs[workflow.ProxyProcess].(string)
	return id != "" && procid.Alive(id)
}

// JournalSwitch is the journal of a proxy session's run, which the proxy
// holds only while calls go (mcpflow proxy lets the journal go between
// them, so that other commands find it free): Set points it at the journal
// as held for the next calls — the file, or the journal through the
// process that holds it. It is set whenever the run writes: the proxy
// sets it before a call and lets the journal go only once no call goes.
type JournalSwitch struct {
	mu  sync.Mutex
	cur engine.Journal
}

// Set points the switch at j.
func (s *JournalSwitch) Set(j engine.Journal) {
	s.mu.Lock()
	s.cur = j
	s.mu.Unlock()
}

func (s *JournalSwitch) j() engine.Journal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return closedJournal{}
	}
	return s.cur
}

func (s *JournalSwitch) CreateRun(r *journal.Run) error { return s.j().CreateRun(r) }
func (s *JournalSwitch) CreateRunLater(r *journal.Run) (*journal.Pending, error) {
	return s.j().CreateRunLater(r)
}
func (s *JournalSwitch) FinishLater(in journal.Intent, o journal.Outcome) (*journal.Pending, error) {
	return s.j().FinishLater(in, o)
}
func (s *JournalSwitch) SkipLater(inv *journal.Invocation) (*journal.Pending, error) {
	return s.j().SkipLater(inv)
}
func (s *JournalSwitch) SetRunStatus(id journal.ID, st journal.RunStatus, e *journal.Error) error {
	return s.j().SetRunStatus(id, st, e)
}
func (s *JournalSwitch) EndRun(id journal.ID, st journal.RunStatus, e *journal.Error, out map[string]any) (*journal.Run, error) {
	return s.j().EndRun(id, st, e, out)
}
func (s *JournalSwitch) Begin(inv *journal.Invocation) (journal.Intent, error) {
	return s.j().Begin(inv)
}
func (s *JournalSwitch) Again(id journal.ID, n journal.NextAttempt) (journal.Intent, error) {
	return s.j().Again(id, n)
}
func (s *JournalSwitch) Finish(in journal.Intent, o journal.Outcome) error {
	return s.j().Finish(in, o)
}
func (s *JournalSwitch) Decide(id journal.ID, d journal.Decision, st journal.State, e *journal.Error) error {
	return s.j().Decide(id, d, st, e)
}
func (s *JournalSwitch) Skip(inv *journal.Invocation) error { return s.j().Skip(inv) }
func (s *JournalSwitch) RequestApproval(run journal.ID, step, message string) (*journal.Approval, error) {
	return s.j().RequestApproval(run, step, message)
}
func (s *JournalSwitch) Interrupted(id journal.ID, o journal.Outcome) error {
	return s.j().Interrupted(id, o)
}
func (s *JournalSwitch) Ask(id journal.ID, attempt int, in journal.Input) error {
	return s.j().Ask(id, attempt, in)
}
func (s *JournalSwitch) Answer(id journal.ID, attempt int, answers []journal.Answer) (*journal.Input, error) {
	return s.j().Answer(id, attempt, answers)
}
func (s *JournalSwitch) Run(id journal.ID) (*journal.Run, error) { return s.j().Run(id) }
func (s *JournalSwitch) Invocation(id journal.ID) (*journal.Invocation, error) {
	return s.j().Invocation(id)
}
func (s *JournalSwitch) RunInvocations(id journal.ID) ([]journal.Invocation, error) {
	return s.j().RunInvocations(id)
}
func (s *JournalSwitch) Sealed() bool           { return s.j().Sealed() }
func (s *JournalSwitch) Digest(b []byte) string { return s.j().Digest(b) }

// closedJournal is the switch pointed nowhere: every write and read fails.
type closedJournal struct{}

var errNotHeld = fmt.Errorf("the proxy does not hold the journal now: %w", journal.ErrClosed)

func (closedJournal) CreateRun(*journal.Run) error { return errNotHeld }
func (closedJournal) CreateRunLater(*journal.Run) (*journal.Pending, error) {
	return nil, errNotHeld
}
func (closedJournal) FinishLater(journal.Intent, journal.Outcome) (*journal.Pending, error) {
	return nil, errNotHeld
}
func (closedJournal) SkipLater(*journal.Invocation) (*journal.Pending, error) { return nil, errNotHeld }
func (closedJournal) SetRunStatus(journal.ID, journal.RunStatus, *journal.Error) error {
	return errNotHeld
}
func (closedJournal) EndRun(journal.ID, journal.RunStatus, *journal.Error, map[string]any) (*journal.Run, error) {
	return nil, errNotHeld
}
func (closedJournal) Begin(*journal.Invocation) (journal.Intent, error) {
	return journal.Intent{}, errNotHeld
}
func (closedJournal) Again(journal.ID, journal.NextAttempt) (journal.Intent, error) {
	return journal.Intent{}, errNotHeld
}
func (closedJournal) Finish(journal.Intent, journal.Outcome) error { return errNotHeld }
func (closedJournal) Decide(journal.ID, journal.Decision, journal.State, *journal.Error) error {
	return errNotHeld
}
func (closedJournal) Skip(*journal.Invocation) error { return errNotHeld }
func (closedJournal) RequestApproval(journal.ID, string, string) (*journal.Approval, error) {
	return nil, errNotHeld
}
func (closedJournal) Interrupted(journal.ID, journal.Outcome) error { return errNotHeld }
func (closedJournal) Ask(journal.ID, int, journal.Input) error      { return errNotHeld }
func (closedJournal) Answer(journal.ID, int, []journal.Answer) (*journal.Input, error) {
	return nil, errNotHeld
}
func (closedJournal) Run(journal.ID) (*journal.Run, error)               { return nil, errNotHeld }
func (closedJournal) Invocation(journal.ID) (*journal.Invocation, error) { return nil, errNotHeld }
func (closedJournal) RunInvocations(journal.ID) ([]journal.Invocation, error) {
	return nil, errNotHeld
}
func (closedJournal) Sealed() bool           { return false }
func (closedJournal) Digest(b []byte) string { return journal.Digest(b) }
