package service

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/telemetry"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/upstream"
)

// Options configure a Service. Nil Options mean the defaults.
type Options struct {
	// Workspace is the directory runs belong to: its mcpflow.yaml configures
	// servers, its workspace trust gates replays, stdio servers run in it.
	// Default: the current directory.
	Workspace string
	// ServersFile is --servers: another file of servers (Claude Desktop,
	// Cursor, VS Code, Gemini CLI or mcpflow.yaml format), whose entries
	// win over the workspace's.
	ServersFile string
	// TrustStore is the user's workspace trust store (nil: the default,
	// ~/.config/mcpflow).
	TrustStore *trust.Store
	// Self is the executable that serves builtin servers (nil: this one).
	Self string
	// OpenJournal opens the journal when New was given none: the service
	// calls it once, when a request first needs the journal, so that a
	// request refused before (a workflow that does not load) creates no
	// journal. Close closes what it opened.
	OpenJournal func() (journal.Store, error)
}

// Service is mcpflow as every front end uses it: the CLI today, an HTTP API
// next. Each method takes a request and returns the durable record — the
// run and its invocations as committed — and, for the methods that run
// anything, streams progress as engine.Events to the request's sink.
//
// A Service works on one open journal, which the caller owns; methods that
// write need it opened for writing. It is safe for concurrent use: many
// runs may go at once, each with its own server sessions.
type Service struct {
	o Options

	jmu     sync.Mutex
	j       journal.Store // set by open
	opened  bool          // j came from Options.OpenJournal
	openErr error

	mu     sync.Mutex
	active map[journal.ID]*activeRun // runs going in this process (active.go)

	// shared holds the sessions the runs share, of the servers whose
	// entry sets sessions: (see upstream.Shared); Close stops them.
	shared *upstream.Shared

	loaded loaded // the workflows loaded lately, which runs share
}

// New returns a service on j, or on the journal Options.OpenJournal opens
// when j is nil.
func New(j journal.Store, o *Options) (*Service, error) {
	s := &Service{j: j, active: map[journal.ID]*activeRun{}, shared: upstream.NewShared()}
	s.share(j)
	if o != nil {
		s.o = *o
	}
	if s.o.Workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		s.o.Workspace = wd
	}
	if s.o.TrustStore == nil {
		s.o.TrustStore = trust.OpenStore("")
	}
	return s, nil
}

// open makes sure the journal is open: every method that reads or writes
// it calls open first.
func (s *Service) open() error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.j != nil || s.openErr != nil {
		return s.openErr
	}
	if s.o.OpenJournal == nil {
		s.openErr = errors.New("service: no journal")
		return s.openErr
	}
	s.j, s.openErr = s.o.OpenJournal()
	s.opened = s.openErr == nil
	s.share(s.j)
	return s.openErr
}

func (s *Service) share(j journal.Store) {
	if sh, ok := j.(journal.Shared); ok {
		sh.OnLost(s.lost)
		sh.OnCancel(func(id journal.ID, reason string) { s.cancelHere(id, errors.New(reason)) })
	}
}

// cancelHere cancels a run going in this process with cause; false when
// it is not going here.
func (s *Service) cancelHere(id journal.ID, cause error) bool {
	s.mu.Lock()
	a, ok := s.active[id]
	s.mu.Unlock()
	if ok {
		a.cancel(cause)
	}
	return ok
}

// lost stops a run another worker took over: its writes are refused
// already; this aborts its call in flight and sends nothing more.
func (s *Service) lost(id journal.ID) { s.cancelHere(id, journal.ErrLeaseLost) }

// acquire takes the lease of a run this process is about to resume, on a
// shared journal: a run going in another live worker is refused
// (ErrRunning).
func (s *Service) acquire(id journal.ID) error {
	sh, ok := s.j.(journal.Shared)
	if !ok {
		return nil
	}
	err := sh.Acquire(id)
	if errors.Is(err, journal.ErrHeld) {
		return &RunningError{Run: id, Held: err}
	}
	return err
}

// release lets another worker take a run this process stopped working on.
func (s *Service) release(id journal.ID) {
	if sh, ok := s.j.(journal.Shared); ok {
		sh.Release(id)
	}
}

// Journal returns the service's journal, opened as its options say (for
// the metrics, which read counts from it).
func (s *Service) Journal() (journal.Store, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.j, nil
}

// Close stops the server sessions the runs shared (upstream.Shared), and
// closes the journal the service opened itself (Options.OpenJournal); a
// journal given to New is the caller's to close.
func (s *Service) Close() error {
	var err error
	if s.shared != nil {
		err = s.shared.Close()
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if !s.opened {
		return err
	}
	s.opened = false
	return errors.Join(err, s.j.Close())
}

// External reads the servers configured outside workflows in workspace:
// its mcpflow.yaml (with imports), then the service's servers file.
func (s *Service) External(workspace string) (upstream.Set, error) {
	set, _, err := upstream.LoadExternal(workspace, s.o.ServersFile)
	return set, err
}

// Report is what Run, Resume and Call return: the run and its invocations
// as committed when the request ended, the values of secret inputs redacted
// (they are for showing).
type Report struct {
	Run         *journal.Run
	Invocations []journal.Invocation
	// Acted is false when Resume found nothing to do (the run succeeded, or
	// is blocked on an unresolved outcome) and wrote nothing.
	Acted bool
}

// Waiting lists the invocations an operator must resolve before the run can
// go on: outcome unknown, aborted or timed out.
func (r *Report) Waiting() []journal.Invocation {
	var out []journal.Invocation
	for _, inv := range r.Invocations {
		switch inv.State {
		case journal.StateOutcomeUnknown, journal.StateAborted, journal.StateTimedOut:
			out = append(out, inv)
		}
	}
	return out
}

// report reads a run and its invocations as committed.
func (s *Service) report(id journal.ID, acted bool) (*Report, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	run, err := s.j.Run(id)
	if err != nil {
		return nil, err
	}
	invs, err := s.j.RunInvocations(id)
	if err != nil {
		return nil, err
	}
	return (&Report{Run: run, Invocations: invs, Acted: acted}).shown(), nil
}

// execution is what one run needs: its servers' sessions and its trust,
// built once for the run.
type execution struct {
	pool  *upstream.Pool
	trust *trust.Resolver
	// sampler answers the run's sampling requests (nil: none configured).
	sampler *sampler
}

func (x *execution) close() { x.pool.Close() }

// prepare builds the pool and the trust resolver of a run in workspace
// using the servers in set; own are the entries whose trust the run's
// definition fixes (a workflow's own servers:).
func (s *Service) prepare(set, own upstream.Set, workspace string, trustWorkspace bool) *execution {
	return s.prepareFor(set, own, workspace, trustWorkspace, nil)
}

// prepareFor is prepare for sessions that stand in for peer, the client of
// mcpflow proxy (nil: none).
func (s *Service) prepareFor(set, own upstream.Set, workspace string, trustWorkspace bool, peer upstream.Peer) *execution {
	sm := newSampler(s.samplingConfig(workspace))
	o := s.runOptions(workspace, sm)
	o.Peer = peer
	o.ListTools = peer == nil // a run's first step lists them; a proxy's client asks itself
	pool := upstream.NewPool(set, o)
	pool.Share(s.shared)
	return &execution{
		sampler: sm,
		pool:    pool,
		trust: trust.NewResolver(&trust.Options{
			Workspace: workspace,
			Flag:      trustWorkspace,
			Store:     s.o.TrustStore,
			Own:       own,
			External:  func() (upstream.Set, []string, error) { return upstream.LoadExternal(workspace, s.o.ServersFile) },
		}),
	}
}

// engine is the engine for one run.
func (s *Service) engine(x *execution, events func(engine.Event)) *engine.Engine {
	e := &engine.Engine{Journal: s.j, Trust: x.trust.Trust, Events: events,
		Called:  telemetry.ObserveCall,
		Decided: func(d journal.Decision) { telemetry.ObserveDecision(d.Verdict.String(), d.Reason) }}
	e.UsePool(x.pool)
	if x.sampler != nil {
		e.Sample, e.SampleApprove = x.sampler.send, x.sampler.cfg.Approve
	}
	return e
}

// Cancel cancels a run going in this service: no new call is sent, a call
// in flight is aborted and journaled under the replay rule, and the run
// ends cancelled. On a journal shared by workers, a running run going
// elsewhere is cancelled by the worker that holds it (within a third of
// its lease), or by the one that claims it. It returns ErrNotRunning when
// the run is not going here (nor running anywhere, when shared).
func (s *Service) Cancel(ref string, reason string) error {
	id, err := s.findRun(ref)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "cancelled"
	}
	if s.cancelHere(id, errors.New(reason)) {
		return nil
	}
	if run, err := s.j.Run(id); err == nil && ProxyAlive(run) {
		return fmt.Errorf("%w: run %s is a session of mcpflow proxy, going in its own process: its MCP client cancels its calls", ErrNotRunning, id.Short())
	}
	if sh, ok := s.j.(journal.Shared); ok {
		asked, err := sh.RequestCancel(id, reason)
		if err != nil || asked {
			return err
		}
	}
	return fmt.Errorf("%w: run %s", ErrNotRunning, id.Short())
}

// WorkersServing reports whether a live worker (mcpflow server) shares
// the journal and claims runs: a run submitted for any worker will go.
func (s *Service) WorkersServing() bool {
	if err := s.open(); err != nil {
		return false
	}
	sh, ok := s.j.(journal.Shared)
	if !ok {
		return false
	}
	ws, err := sh.Workers()
	if err != nil {
		return false
	}
	for _, w := range ws {
		if w.Live && w.Serves {
			return true
		}
	}
	return false
}

func (s *Service) findRun(ref string) (journal.ID, error) {
	if err := s.open(); err != nil {
		return journal.ID{}, err
	}
	id, err := s.j.FindRun(ref)
	if err != nil {
		return journal.ID{}, &invalidError{msg: err.Error(), cause: err, fields: map[string]string{"kind": "run", "ref": ref}}
	}
	return id, nil
}

func (s *Service) findInvocation(ref string) (journal.ID, error) {
	if err := s.open(); err != nil {
		return journal.ID{}, err
	}
	id, err := s.j.FindInvocation(ref)
	if err != nil {
		return journal.ID{}, &invalidError{msg: err.Error(), cause: err}
	}
	return id, nil
}
