package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/workflow"
)

// RunRequest starts a workflow.
type RunRequest struct {
	// File is the workflow file.
	File string
	// Source, when set, is the workflow's text: File then only names it
	// (in errors and in the run's record), and no file is read.
	Source []byte
	// Inputs are KEY=VALUE pairs, typed by the workflow's declared inputs
	// (a VALUE @FILE is read from FILE).
	Inputs []string
	// InputValues are typed values (an inputs file, or an API request);
	// Inputs win over them, and they over MCPFLOW_INPUT_<NAME>.
	InputValues map[string]any
	// TrustWorkspace trusts the workspace for this run only
	// (--trust-workspace).
	TrustWorkspace bool
	// Events receives the run's progress; it must not block for long.
	Events func(engine.Event)
}

// Run loads, validates and runs a workflow in the service's workspace. A
// run that failed, was blocked or was cancelled is not an error: see the
// report's run status. Errors are invalid requests (a bad workflow, bad
// inputs) or a journal that could not be written.
func (s *Service) Run(ctx context.Context, req RunRequest) (*Report, error) {
	wf, inputs, err := s.load(req)
	if err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.runWorkflow(ctx, wf, inputs, s.o.Workspace, req.TrustWorkspace, req.Events)
}

// ErrNotShared: Submit needs a journal several processes share
// (PostgreSQL), where a worker can claim the run.
var ErrNotShared = errors.New("the journal is not shared by workers")

// Submit journals a run of the workflow for any worker sharing the
// journal to claim and start (mcpflow server on PostgreSQL), and returns
// its id without running anything here. The run is journaled as running,
// with its definition and inputs — secret ones encrypted, so the journal
// must be sealed to carry them — and is resumed by the worker that claims
// it exactly as after a crash. A worker trusts workspaces by its own user's
// trust store, so --trust-workspace cannot travel with the run.
func (s *Service) Submit(ctx context.Context, req RunRequest) (journal.ID, error) {
	wf, inputs, err := s.load(req)
	if err != nil {
		return journal.ID{}, err
	}
	if err := s.open(); err != nil {
		return journal.ID{}, err
	}
	if _, ok := s.j.(journal.Shared); !ok {
		return journal.ID{}, ErrNotShared
	}
	if req.TrustWorkspace {
		return journal.ID{}, invalid("--trust-workspace does not travel with a submitted run: the worker that claims it trusts workspaces by its own trust store (mcpflow trust add %s where it runs)", s.o.Workspace)
	}
	if len(workflow.SecretValues(wf.SecretInputs(), inputs)) > 0 && !s.j.Sealed() {
		return journal.ID{}, invalid("the run has secret inputs, which reach a worker only through an encrypted journal: open it with its key (%s)", journal.KeyEnv)
	}
	e := &engine.Engine{Journal: s.j}
	run, err := e.Submit(ctx, wf, inputs, s.o.Workspace)
	if err != nil {
		return journal.ID{}, journalFailed(err)
	}
	s.release(run.ID)
	return run.ID, nil
}

// ParseInputs loads and validates the workflow a run request names and
// returns its inputs typed by the workflow's declarations — the values a
// run would start with — without running anything or touching the
// journal. A front end that hands the run to another process types the
// inputs here, where the user's files and environment are.
func (s *Service) ParseInputs(req RunRequest) (map[string]any, error) {
	_, inputs, err := s.load(req)
	return inputs, err
}

// load reads, validates and types what a run request names: the workflow
// against the servers configured in the service's workspace, and its inputs.
func (s *Service) load(req RunRequest) (*workflow.Workflow, map[string]any, error) {
	external, err := s.External(s.o.Workspace)
	if err != nil {
		return nil, nil, err
	}
	wf, err := s.loadWorkflow(req.File, req.Source, external)
	if err != nil {
		return nil, nil, err
	}
	inputs, err := wf.ParseInputsFrom(req.InputValues, req.Inputs)
	if err != nil {
		return nil, nil, err
	}
	return wf, inputs, nil
}

// runWorkflow runs a loaded workflow and reports it as committed.
func (s *Service) runWorkflow(ctx context.Context, wf *workflow.Workflow, inputs map[string]any, ws string, trustWorkspace bool, events func(engine.Event)) (*Report, error) {
	x := s.prepare(wf.Servers, wf.Own, ws, trustWorkspace)
	defer x.close()
	run, err := s.track(ctx, nil, events, func(ctx context.Context, events func(engine.Event), creating func(journal.ID)) (*journal.Run, error) {
		e := s.engine(x, events)
		e.Creating = creating
		return e.Run(ctx, wf, inputs, ws)
	})
	if err != nil {
		return nil, journalFailed(err)
	}
	rep, err := s.report(run.ID, true)
	// The secret inputs go on with the run, typed, should it go on here.
	secrets := map[string]any{}
	for _, name := range wf.SecretInputs() {
		if v, ok := inputs[name]; ok {
			secrets[name] = v
		}
	}
	return s.goOn(ctx, rep, err, ResumeRequest{Run: run.ID.String(), TrustWorkspace: trustWorkspace, Events: events, secretValues: secrets})
}

// ResumeRequest continues a run.
type ResumeRequest struct {
	// Run is a run id or a unique prefix of one.
	Run string
	// Secrets are the secret inputs as KEY=VALUE (the journal keeps every
	// other input, never a secret one).
	Secrets []string
	// TrustWorkspace trusts the run's workspace for this resume only.
	TrustWorkspace bool
	// Untrusted resumes without workspace trust a run that was started
	// with --trust-workspace (see ErrTrustFlagNeeded): the user confirmed.
	Untrusted bool
	// RetryFailed approves, on By's behalf, sending again every call of the
	// run that failed or returned a tool error (journaled as a resolution
	// with who, when and why), so the steps that completed are not run
	// again.
	RetryFailed bool
	By          string
	// Events receives the run's progress.
	Events func(engine.Event)
	// secretValues are secret inputs already typed (a run that goes on
	// in the request that started it: see goOn).
	secretValues map[string]any
}

// Resume continues a run from the journal (see engine.Engine.Resume). The
// definition and inputs come from the journal, not from the file on disk;
// the run belongs to the workspace it started in, whose configuration and
// trust apply, whichever workspace the service has. The report says
// whether anything was done. A run that ends blocked at an approval gate
// that was decided while it ended goes on (see goOn).
//
// A run going in this service, or in another live worker on a shared
// journal, is refused (ErrRunning), unless the journal has it ended: Resume
// then waits for the run to be let go, up to 10 s here and 10 s for
// another worker's lease, and is refused when the run goes on instead. So
// a run's own Events sink must not resume it from its RunFinished event:
// the resume would wait for the sink, and be refused.
func (s *Service) Resume(ctx context.Context, req ResumeRequest) (*Report, error) {
	rep, err := s.resumeOnce(ctx, req)
	return s.goOn(ctx, rep, err, req)
}

// goOn continues, as req says, a run that a request here ended blocked at
// an approval gate, when the gate was decided while the run ended (after
// it asked, before it was let go): the operator's own resume then waits
// for the run to be let go, and whichever of the two reserves it first
// continues it, the other finding it going (ErrRunning). Checked from the
// run as read once the run was let go (report), so that one of the two
// always sees the other: the run here, the decision; or the operator, the
// run let go. A resume that finds the run going (the operator's has it)
// ends the loop; so does a run that waits again.
func (s *Service) goOn(ctx context.Context, rep *Report, err error, req ResumeRequest) (*Report, error) {
	for err == nil && rep.Acted && (Continues(rep.Run) || rep.InputAnswered()) {
		req.RetryFailed = false // approved once, with the first resume
		next, nerr := s.resumeOnce(ctx, req)
		if errors.Is(nerr, ErrRunning) {
			break
		}
		rep, err = next, nerr
	}
	return rep, err
}

// resumeOnce is Resume without going on after a decision.
func (s *Service) resumeOnce(ctx context.Context, req ResumeRequest) (*Report, error) {
	id, err := s.findRun(req.Run)
	if err != nil {
		return nil, err
	}
	// Reserved from here: a second resume of the run in this process —
	// a worker's takeover and an operator's, say — is refused, though the
	// run is not journaled as going yet; one that comes as the run ends
	// here waits for it to be let go.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a, err := s.reserveForResume(ctx, id, cancel)
	if err != nil {
		return nil, err
	}
	// Let go as soon as the run returns (before its sessions close), or on
	// the way out.
	defer s.letGo(id, a)
	if run, err := s.j.Run(id); err == nil && ProxyAlive(run) {
		// A proxy session going in another process: its own.
		return nil, &RunningError{Run: id}
	}
	if err := s.acquireForResume(ctx, id); err != nil {
		return nil, err
	}
	a.held = true
	if sh, ok := s.j.(journal.Shared); ok {
		// Cancelled while nobody held it: resumed only to settle what
		// was in flight, then it ends cancelled, sending nothing.
		why, asked, err := sh.CancelRequested(id)
		if err != nil {
			return nil, err
		}
		if asked {
			c, cancel := context.WithCancelCause(ctx)
			cancel(errors.New(why))
			ctx = c
		}
	}
	run, err := s.j.Run(id)
	if err != nil {
		return nil, err
	}
	wf, ws, err := s.journaledWorkflow(run)
	if err != nil {
		return nil, cannotResume{err}
	}
	if !req.TrustWorkspace && !req.Untrusted && run.Status != journal.RunSucceeded {
		if err := s.trustStillGiven(run, ws); err != nil {
			return nil, err
		}
	}
	secrets, err := wf.ParseSecretInputs(req.Secrets)
	if err != nil {
		return nil, err
	}
	maps.Copy(secrets, req.secretValues)
	inputs, err := engine.ResumeInputs(run, wf, secrets)
	if err != nil {
		return nil, cannotResume{err}
	}
	if req.RetryFailed && run.Status != journal.RunSucceeded {
		if run, err = s.approveFailed(run, req.By); err != nil {
			return nil, err
		}
	}
	x := s.prepare(wf.Servers, wf.Own, ws, req.TrustWorkspace)
	defer x.close()
	acted := false
	_, err = s.track(ctx, a, req.Events, func(ctx context.Context, events func(engine.Event), _ func(journal.ID)) (*journal.Run, error) {
		out, did, err := s.engine(x, events).Resume(ctx, run, wf, inputs)
		acted = did
		return out, err
	})
	s.letGo(id, a)
	if err != nil {
		return nil, journalFailed(err)
	}
	return s.report(id, acted)
}

// trustStillGiven refuses to resume, without --trust-workspace, a run whose
// calls were sent trusting workspace ws by that flag when the trust store
// does not trust ws: the run would lose the trust it started with, and
// every call needing a replay would be decided workspace_not_trusted.
func (s *Service) trustStillGiven(run *journal.Run, ws string) error {
	if ok, _ := trust.Workspace(s.o.TrustStore, ws, false); ok {
		return nil
	}
	invs, err := s.j.RunInvocations(run.ID)
	if err != nil {
		return err
	}
	for _, inv := range invs {
		for _, a := range inv.Attempts {
			if a.Trust != nil && a.Trust.WorkspaceSource == "flag" {
				return &TrustFlagError{Run: run.ID, Workspace: ws}
			}
		}
	}
	return nil
}

// journaledWorkflow loads a run's journaled definition against the servers
// configured now in the workspace the run belongs to, and returns it with
// that workspace.
func (s *Service) journaledWorkflow(run *journal.Run) (*workflow.Workflow, string, error) {
	ws := s.o.Workspace
	if run.Workspace != "" && run.Workspace != ws {
		if st, err := os.Stat(run.Workspace); err != nil || !st.IsDir() {
			return nil, "", fmt.Errorf("run %s belongs to workspace %s, which no longer exists", run.ID.Short(), run.Workspace)
		}
		ws = run.Workspace
	}
	external, err := s.External(ws)
	if err != nil {
		return nil, "", err
	}
	if server, ok := workflow.ProxyServer(run.Workflow, run.Source); ok {
		// A proxy session's steps are the calls the journal holds.
		wf, err := s.proxyWorkflow(run, server, external)
		return wf, ws, err
	}
	wf, err := s.loaded.load(run.Source, run.Definition, external)
	if err != nil {
		return nil, "", fmt.Errorf("run %s: journaled definition: %w", run.ID.Short(), err)
	}
	return wf, ws, nil
}

// Resumable lists the runs that did not succeed and that nothing runs,
// newest first within each status: running but abandoned (interrupted;
// not going in this service, nor, on a shared journal, held by a live
// worker), failed, cancelled, blocked. Every front end lists them by this
// rule, through whichever door.
func (s *Service) Resumable() ([]journal.ID, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	held := map[journal.ID]bool{}
	s.mu.Lock()
	for id := range s.active {
		held[id] = true
	}
	s.mu.Unlock()
	if sh, ok := s.j.(journal.Shared); ok {
		ws, err := sh.Workers()
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			for _, id := range w.Runs {
				held[id] = held[id] || w.Live
			}
		}
	}
	var ids []journal.ID
	for _, st := range []journal.RunStatus{journal.RunRunning, journal.RunFailed, journal.RunCancelled, journal.RunBlocked} {
		runs, err := s.j.Runs(journal.RunFilter{Status: st})
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if st == journal.RunRunning && (held[r.ID] || ProxyAlive(&r)) {
				continue
			}
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// approveFailed journals an operator's approval to send again the newest
// invocation of each step and item of run that failed or returned a tool
// error, and returns the run as it now is.
func (s *Service) approveFailed(run *journal.Run, by string) (*journal.Run, error) {
	invs, err := s.j.RunInvocations(run.ID)
	if err != nil {
		return nil, err
	}
	type unit struct {
		step string
		item int
	}
	newest := map[unit]journal.Invocation{}
	for _, inv := range invs { // time-ordered: the newest wins
		newest[unit{inv.Step, inv.Item}] = inv
	}
	approved := 0
	for _, inv := range newest {
		if inv.State != journal.StateFailed && !(inv.State == journal.StateCompleted && inv.ToolError) {
			continue
		}
		r := journal.Resolution{By: by, As: journal.StateRetryApproved, Why: "resume --retry-failed"}
		if err := s.j.Resolve(inv.ID, r, nil); err != nil {
			return nil, err
		}
		approved++
	}
	if approved == 0 {
		return run, nil
	}
	return s.j.Run(run.ID)
}

// ErrCannotResume: the run cannot be resumed here, as things are (its
// workspace is not on this machine, its definition no longer loads against
// the servers configured, a secret input is missing). An operator fixes
// the cause and resumes it.
var ErrCannotResume = errors.New("the run cannot be resumed here")

type cannotResume struct{ err error }

func (e cannotResume) Error() string   { return e.err.Error() }
func (e cannotResume) Unwrap() []error { return []error{ErrCannotResume, e.err} }

// Abandon blocks a run a worker claimed but cannot resume (an
// ErrCannotResume, why), so that workers stop claiming it: blocked, not
// failed, because a call of it may be in flight, whose outcome only a
// resume decides; an operator resumes it once the cause is fixed.
func (s *Service) Abandon(id journal.ID, why error) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := s.acquire(id); err != nil {
		return err // another worker has it now
	}
	defer s.release(id)
	return s.j.SetRunStatus(id, journal.RunBlocked, &journal.Error{Code: CodeCannotResume,
		Message: fmt.Sprintf("%v; fix it, then resume the run", why)})
}

// Release lets another worker take a run this process holds but does not
// run (a claim it could not act on). Nothing to do on a journal that is
// not shared, nor for a run going here (a resume since holds it, and
// lets it go itself).
func (s *Service) Release(id journal.ID) {
	if !s.Going(id) {
		s.release(id)
	}
}

// CodeCannotResume blocks a run that a worker claimed and could not
// resume.
const CodeCannotResume = "MCPFLOW_CANNOT_RESUME"
