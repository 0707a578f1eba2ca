package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// API is what every front end works through, whoever owns the journal:
// [Local], the service in the front end's own process, or a client of the
// process that owns it (package client, over the HTTP API). Both return
// the records as committed, secret inputs redacted, and the same errors
// (see [CodeOf]): a command prints the same either way.
type API interface {
	Runs(RunQuery) ([]RunSummary, error)
	CountRuns(RunQuery) (Count, error)
	RunDetail(ref string) (*Report, error)
	Invocations(InvocationQuery) ([]journal.Invocation, error)
	CountInvocations(InvocationQuery) (Count, error)
	Invocation(ref string) (*journal.Invocation, error)
	Resolve(ResolveRequest) (*journal.Invocation, error)
	// Approve journals a decision on a step's approval gate and, unless
	// the request says NoContinue, continues the run it leaves nothing
	// to wait for, streaming its progress to the request's Events until
	// it ends or waits again: here (Local), or in the server, followed
	// from here (the client).
	Approve(ctx context.Context, req ApproveRequest) (*ApproveReport, error)
	// Answer journals an answer to a question a server asked during a
	// step's call and, unless NoContinue, continues the run it leaves
	// nothing to wait for, as Approve does.
	Answer(ctx context.Context, req AnswerRequest) (*AnswerReport, error)
	Export(w io.Writer, since time.Time, decrypt bool) error
	Archive(w io.Writer, decrypt bool) error
	Check() ([]journal.Problem, error)

	// Run, Resume and Call run and stream progress to the request's
	// Events until the run ends. Interrupted by ctx while the run goes
	// on elsewhere (a server, a worker), they return a *DetachedError.
	Run(ctx context.Context, req RunRequest) (*Report, error)
	Resume(ctx context.Context, req ResumeRequest) (*Report, error)
	Call(ctx context.Context, req CallRequest) (*Report, error)
	// Resumable lists the runs resume --all continues (see
	// Service.Resumable).
	Resumable() ([]journal.ID, error)
	// Submit starts a run and returns its id without waiting: only where
	// the run can go on without the caller (a server, workers); else
	// ErrNotShared.
	Submit(ctx context.Context, req RunRequest) (journal.ID, error)
	// Watch follows a run going elsewhere until it ends; a run that ended
	// is reported as it ended; a run left running that nothing runs is
	// an *AbandonedError.
	Watch(ctx context.Context, ref string, events func(engine.Event)) (*Report, error)
	// Cancel cancels a run going where the journal is served;
	// ErrNotRunning when it is not going there.
	Cancel(ref, reason string) error
}

var _ API = (*Local)(nil)

// Local is the API in the front end's own process, which holds the
// journal while it works — or shares it with workers (PostgreSQL), when
// the journal is shared: then a run goes to a live worker when one serves
// (the routing rule, [Local.ToWorkers]), and is followed from the journal.
type Local struct {
	*Service
	// Shared: the journal is one several processes share (PostgreSQL).
	Shared bool
	// observe sees every event of the runs that go here (see Observe).
	observe atomic.Pointer[func(engine.Event)]
}

// Observe has fn see every event of the runs that go here from now on,
// besides the requests' Events: the journal owner's API streams them to
// other terminals. It may be set while a run goes (once the journal is
// open).
func (l *Local) Observe(fn func(engine.Event)) { l.observe.Store(&fn) }

// observed is events, seen by the observer too.
func (l *Local) observed(events func(engine.Event)) func(engine.Event) {
	return func(ev engine.Event) {
		if events != nil {
			events(ev)
		}
		if fn := l.observe.Load(); fn != nil {
			(*fn)(ev)
		}
	}
}

// Run runs a workflow here, or submits it to the workers sharing the
// journal and follows it there (see ToWorkers).
func (l *Local) Run(ctx context.Context, req RunRequest) (*Report, error) {
	if !l.ToWorkers(req) {
		req.Events = l.observed(req.Events)
		return l.Service.Run(ctx, req)
	}
	id, err := l.Service.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return l.Watch(ctx, id.String(), req.Events)
}

// Submit journals a run for the workers sharing the journal (see
// Service.Submit). A journal no other process shares refuses it before
// anything opens it: opening it would take its lock, and the socket
// beside it, for nothing — a server starting meanwhile would find them
// taken. A workflow that does not load says so first.
func (l *Local) Submit(ctx context.Context, req RunRequest) (journal.ID, error) {
	if l.Shared {
		return l.Service.Submit(ctx, req)
	}
	if _, _, err := l.load(req); err != nil {
		return journal.ID{}, err
	}
	return journal.ID{}, ErrNotShared
}

// Resume continues a run here.
func (l *Local) Resume(ctx context.Context, req ResumeRequest) (*Report, error) {
	req.Events = l.observed(req.Events)
	return l.Service.Resume(ctx, req)
}

// Call makes one journaled call here.
func (l *Local) Call(ctx context.Context, req CallRequest) (*Report, error) {
	req.Events = l.observed(req.Events)
	return l.Service.Call(ctx, req)
}

// ToWorkers is the routing rule: a run goes to the workers sharing the
// journal when one is live and serves, and the run needs no trust that
// cannot travel (--trust-workspace is the user's, here). A workflow that
// does not load runs here, to fail as it always does, before anything
// opens the journal.
func (l *Local) ToWorkers(req RunRequest) bool {
	if req.TrustWorkspace || !l.Shared {
		return false
	}
	if _, err := l.ParseInputs(req); err != nil {
		return false
	}
	return l.WorkersServing()
}

// Watch follows a run from the journal when workers share it: the run goes
// in whichever worker holds it. Otherwise there is nothing to follow: a
// run goes only in the process that started it, which holds the journal;
// one left running was abandoned (*AbandonedError).
func (l *Local) Watch(ctx context.Context, ref string, events func(engine.Event)) (*Report, error) {
	if l.Shared {
		rep, err := l.Follow(ctx, ref, events)
		if errors.Is(err, context.Canceled) {
			if rep, derr := l.RunDetail(ref); derr == nil {
				return nil, &DetachedError{Run: rep.Run.ID}
			}
		}
		return rep, err
	}
	rep, err := l.RunDetail(ref)
	if err != nil {
		return nil, err
	}
	if ProxyAlive(rep.Run) {
		// Followed from the journal this service keeps open meanwhile (on
		// a file, a proxy needs it for its calls: the CLI reads it afresh
		// each time instead).
		id := rep.Run.ID.String()
		return FollowProxy(ctx, rep.Run.ID, func() (*Report, error) { return l.RunDetail(id) }, events)
	}
	if rep.Run.Status == journal.RunRunning {
		return nil, &AbandonedError{Run: rep.Run.ID}
	}
	return rep, nil
}

// DetachedError: the caller stopped following a run that goes on
// elsewhere (a server, a worker). It is a context.Canceled.
type DetachedError struct{ Run journal.ID }

func (e *DetachedError) Error() string {
	return fmt.Sprintf("stopped following run %s, which goes on", e.Run.Short())
}

func (e *DetachedError) Unwrap() error { return context.Canceled }

// AbandonedError: a run is journaled as running, but nothing runs it: the
// process that ran it stopped before it ended. Resume continues it.
type AbandonedError struct{ Run journal.ID }

func (e *AbandonedError) Error() string {
	return fmt.Sprintf("run %s is not going anywhere: the process that ran it stopped before it ended", e.Run.Short())
}

func (e *AbandonedError) Unwrap() error { return ErrAbandoned }

func (e *AbandonedError) Fields() map[string]string { return map[string]string{"run": e.Run.String()} }

// ErrAbandoned: a run is journaled as running, but nothing runs it.
var ErrAbandoned = errors.New("run is abandoned")

// Going reports whether run id goes in this service now.
func (s *Service) Going(id journal.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.active[id]
	return ok
}

// LostError: the process that serves the journal went away while the
// caller followed a run there; the run goes on when it starts again.
type LostError struct {
	Run journal.ID
	Err error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("lost the journal's owner while following run %s: %v", e.Run.Short(), e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// ErrNoTrustOverAPI: --trust-workspace was asked of a journal served by
// another process, which never grants trust over its API.
var ErrNoTrustOverAPI = &invalidError{msg: "workspace trust is never granted over the API"}

// Invalidf is an ErrInvalid with its own message.
func Invalidf(format string, args ...any) error { return invalid(format, args...) }
