package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// backend is what the commands that use the journal call: the service in
// this process (embedded), or `mcpflow server` when one owns the journal
// (a client over its unix socket). Both return the records as committed,
// the values of secret inputs redacted, so every command prints the same
// either way.
type backend interface {
	Runs(service.RunQuery) ([]service.RunSummary, error)
	CountRuns(service.RunQuery) (service.Count, error)
	RunDetail(ref string) (*service.Report, error)
	Invocations(service.InvocationQuery) ([]journal.Invocation, error)
	CountInvocations(service.InvocationQuery) (service.Count, error)
	Invocation(ref string) (*journal.Invocation, error)
	Resolve(service.ResolveRequest) (*journal.Invocation, error)
	Approve(service.ApproveRequest) (*service.ApproveReport, error)
	Export(w io.Writer, since time.Time, decrypt bool) error
	Archive(w io.Writer, decrypt bool) error
	Check() ([]journal.Problem, error)

	// Run, Resume and Call run and stream progress to the request's
	// Events until the run ends. A client interrupted by ctx leaves the
	// run going in the server and returns an *interruptedError.
	Run(ctx context.Context, req service.RunRequest) (*service.Report, error)
	Resume(ctx context.Context, req service.ResumeRequest) (*service.Report, error)
	Call(ctx context.Context, req service.CallRequest) (*service.Report, error)
	// Resumable lists the runs resume --all continues.
	Resumable() ([]journal.ID, error)
	// Submit starts a run and returns its id without waiting (run
	// --detach); only a server can.
	Submit(ctx context.Context, req service.RunRequest) (journal.ID, error)
	// Watch follows a run going elsewhere until it ends (runs watch).
	Watch(ctx context.Context, ref string, events func(engine.Event)) (*service.Report, error)
	// Cancel cancels a run going in the backend; service.ErrNotRunning
	// when it is not going there.
	Cancel(ref, reason string) error
}

var (
	_ backend = embedded{}
	_ backend = (*client)(nil)
)

// embedded is the service in this process, which owns the journal while
// the command runs — or shares it with workers, when shared (PostgreSQL).
type embedded struct {
	*service.Service
	shared bool
}

// Submit journals the run for a worker to claim when the journal is
// shared by workers (PostgreSQL); otherwise it refuses: a run started here
// ends with the command.
func (e embedded) Submit(ctx context.Context, req service.RunRequest) (journal.ID, error) {
	id, err := e.Service.Submit(ctx, req)
	if errors.Is(err, service.ErrNotShared) {
		return journal.ID{}, usageError("--detach needs mcpflow server: a run started here ends with this command (start 'mcpflow server' in the workspace, or share a PostgreSQL journal with workers, then run again)")
	}
	return id, err
}

// Run runs a workflow here — or, on a journal shared by live workers
// (PostgreSQL), submits it to them and follows it from the journal, as
// with a local server.
func (e embedded) Run(ctx context.Context, req service.RunRequest) (*service.Report, error) {
	if !e.toWorkers(req) {
		return e.Service.Run(ctx, req)
	}
	id, err := e.Service.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.Watch(ctx, id.String(), req.Events)
}

// toWorkers says whether a run goes to the workers sharing the journal:
// when one is live, and the run needs no trust that cannot travel
// (--trust-workspace is the user's, here).
// A workflow that does not load runs here, to fail as it always does,
// before anything opens the journal.
func (e embedded) toWorkers(req service.RunRequest) bool {
	if !e.shared || req.TrustWorkspace {
		return false
	}
	if _, err := e.ParseInputs(req); err != nil {
		return false
	}
	return e.WorkersServing()
}

// Watch follows a run from the journal when the journal is shared by
// workers: the run goes in whichever worker holds it. Otherwise there is
// nothing to follow: with no server, a run goes only in the process that
// started it, which holds the journal. A run that ended is reported as it
// ended; one left running was interrupted.
func (e embedded) Watch(ctx context.Context, ref string, events func(engine.Event)) (*service.Report, error) {
	if e.shared {
		rep, err := e.Follow(ctx, ref, events)
		if errors.Is(err, context.Canceled) {
			if rep, derr := e.RunDetail(ref); derr == nil {
				return nil, &interruptedError{run: rep.Run.ID}
			}
		}
		return rep, err
	}
	rep, err := e.RunDetail(ref)
	if err != nil {
		return nil, err
	}
	if rep.Run.Status == journal.RunRunning {
		id := rep.Run.ID.Short()
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("run %s is not going anywhere: no mcpflow server runs in this workspace, and the process that ran it stopped before it ended; continue it with: mcpflow resume %s", id, id)}
	}
	return rep, nil
}

// Cancel explains what ErrNotRunning means here.
func (e embedded) Cancel(ref, reason string) error {
	err := e.Service.Cancel(ref, reason)
	if errors.Is(err, service.ErrNotRunning) {
		return fmt.Errorf("%w: no mcpflow server runs in this workspace; a run that 'mcpflow run' started is cancelled with Ctrl-C where it runs", err)
	}
	return err
}

// interruptedError: the user interrupted a client following a run that
// goes on in the server.
type interruptedError struct{ run journal.ID }

func (e *interruptedError) Error() string {
	return fmt.Sprintf("stopped following run %s, which goes on in mcpflow server; follow it with: mcpflow runs watch %s", e.run.Short(), e.run.Short())
}

func (e *interruptedError) Unwrap() error { return context.Canceled }
