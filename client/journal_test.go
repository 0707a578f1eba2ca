package client_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/client"
	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// owner is a process that holds a workspace's journal and serves it on
// the workspace socket, as a command holds it (door.Own): the journal's
// owner that a proxy's engine writes through.
type owner struct {
	t      *testing.T
	ws     string
	socket string
	store  journal.Store
	svc    *service.Service
	srv    *door.Server
}

// newOwner opens a journal in a fresh workspace (sealed with key, when not
// nil) and serves it. The journal is checked and closed when t ends.
func newOwner(t *testing.T, key *journal.Key) *owner {
	t.Helper()
	ws := t.TempDir()
	o := &owner{t: t, ws: ws, socket: filepath.Join(ws, ".mcpflow", "mcpflow.sock")}
	o.store = journaltest.OpenPath(t, filepath.Join(ws, ".mcpflow", "journal.db"), &journal.Options{Key: key})
	var err error
	if o.svc, err = service.New(o.store, &service.Options{Workspace: ws, TrustStore: trust.OpenStore(t.TempDir())}); err != nil {
		t.Fatal(err)
	}
	o.serve()
	t.Cleanup(o.stop)
	return o
}

// serve serves the journal on the workspace socket.
func (o *owner) serve() {
	o.t.Helper()
	var err error
	if o.srv, err = door.Own(o.svc, o.ws, o.socket, "test", "mcpflow proxy demo"); err != nil {
		o.t.Fatal(err)
	}
}

// stop stops serving (the socket goes); the journal stays open for the
// test to read.
func (o *owner) stop() {
	if o.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.srv.Stop(ctx); err != nil {
		o.t.Error(err)
	}
	o.srv = nil
}

// journal is the engine's journal through the owner's socket, as a proxy
// gets it.
func (o *owner) journal() *client.Journal {
	o.t.Helper()
	c := client.New(o.socket, nil)
	o.t.Cleanup(c.Close)
	j, err := c.Journal(context.Background())
	if err != nil {
		o.t.Fatal(err)
	}
	return j
}

// runOn runs the workflow src with an engine on j, its sessions its own
// (a pool of stdio demo servers started in ws), as a proxy runs one.
func runOn(t *testing.T, j engine.Journal, ws, src string, events func(engine.Event)) (*journal.Run, error) {
	t.Helper()
	wf, err := workflow.Load("proxy.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, j, ws, wf, events).Run(context.Background(), wf, nil, ws)
}

// newEngine is an engine on j with sessions of its own to the servers of
// wf, started in ws, closed when t ends.
func newEngine(t *testing.T, j engine.Journal, ws string, wf *workflow.Workflow, events func(engine.Event)) *engine.Engine {
	t.Helper()
	pool := upstream.NewPool(wf.Servers, &upstream.Options{Workspace: ws})
	t.Cleanup(func() { pool.Close() })
	eng := &engine.Engine{
		Journal: j,
		Trust: func(string) journal.Trust {
			return journal.Trust{Server: true, Workspace: true, WorkspaceSource: "store"}
		},
		Events: events,
	}
	eng.UsePool(pool)
	return eng
}

// threeSteps calls a read-only tool, an idempotent one and an unsafe one
// (ledger_append declares nothing), and skips a fourth; fault, when set,
// is the demo's fault on ledger_append.
func threeSteps(fault string) string {
	env := ""
	if fault != "" {
		env = ", env: {MCPFLOW_DEMO_FAULT: " + fault + ", MCPFLOW_DEMO_FAULT_TOOL: ledger_append}"
	}
	return `name: proxied
servers:
  demo: {builtin: demo, trust: true` + env + `}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: shout, server: demo, tool: upper, with: {text: "${{ steps.greet.text }}"}}
  - {id: record, server: demo, tool: ledger_append, with: {entry: "${{ steps.shout.text }}"}}
  - {id: never, server: demo, tool: greet, if: "false", with: {name: nobody}}
`
}

// shape is what a run journaled, without what two runs of one workflow
// cannot share (ids, times, where they ran, the upstream's error text):
// the same for a run through the owner and a run on a journal of its own.
// It checks what those are made of: every invocation of the run, its
// idempotency key its id.
func shape(t *testing.T, run *journal.Run, invs []journal.Invocation) string {
	t.Helper()
	r := *run
	r.ID, r.StartedAt, r.UpdatedAt, r.FinishedAt, r.Workspace = journal.ID{}, time.Time{}, time.Time{}, nil, ""
	r.Approvals = append([]journal.Approval(nil), r.Approvals...)
	for i := range r.Approvals {
		r.Approvals[i].RequestedAt = time.Time{}
	}
	out := struct {
		Run         journal.Run
		Invocations []journal.Invocation
	}{Run: r}
	for _, inv := range invs {
		if inv.RunID != run.ID || inv.IdempotencyKey != inv.ID.String() {
			t.Errorf("invocation %s of run %s: idempotency key %q", inv.ID, inv.RunID, inv.IdempotencyKey)
		}
		inv.ID, inv.RunID, inv.IdempotencyKey, inv.CreatedAt, inv.UpdatedAt = journal.ID{}, journal.ID{}, "", time.Time{}, time.Time{}
		inv.Attempts = append([]journal.Attempt(nil), inv.Attempts...)
		for i := range inv.Attempts {
			a := &inv.Attempts[i]
			// The upstream's error text is the operator's, and how a
			// dead server's connection reads ("EOF", "connection closed")
			// is a race: its failure class says what it proved.
			a.SentAt, a.Detail = time.Time{}, ""
			if a.EndedAt != nil {
				a.EndedAt = &time.Time{}
			}
		}
		inv.Decisions = append([]journal.Decision(nil), inv.Decisions...)
		for i := range inv.Decisions {
			inv.Decisions[i].At = time.Time{}
		}
		inv.Inputs = append([]journal.Input(nil), inv.Inputs...)
		for i := range inv.Inputs {
			inv.Inputs[i].Answers = append([]journal.Answer(nil), inv.Inputs[i].Answers...)
			for k := range inv.Inputs[i].Answers {
				inv.Inputs[i].Answers[k].At = time.Time{}
			}
		}
		out.Invocations = append(out.Invocations, inv)
	}
	// Items of a fan-out are journaled in the order they start.
	slices.SortStableFunc(out.Invocations, func(a, b journal.Invocation) int {
		return cmp.Or(strings.Compare(a.Step, b.Step), cmp.Compare(a.Item, b.Item))
	})
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// journaled is the run as the store holds it, with its invocations.
func journaled(t *testing.T, j journal.Store, id journal.ID) (*journal.Run, []journal.Invocation) {
	t.Helper()
	run, err := j.Run(id)
	if err != nil {
		t.Fatal(err)
	}
	invs, err := j.RunInvocations(id)
	if err != nil {
		t.Fatal(err)
	}
	return run, invs
}

// local runs src on a journal of its own, in a workspace of its own: what
// the run through the owner must have journaled.
func local(t *testing.T, key *journal.Key, src string) string {
	t.Helper()
	ws := t.TempDir()
	j := journaltest.OpenPath(t, filepath.Join(ws, ".mcpflow", "journal.db"), &journal.Options{Key: key})
	run, err := runOn(t, j, ws, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, invs := journaled(t, j, run.ID)
	return shape(t, got, invs)
}

// TestEngineThroughTheOwner: the engine of a process that does not hold
// the journal runs a workflow on its own server sessions, journaling
// through the owner's socket; the owner's journal then holds the run and
// every invocation — intent, attempts, outcomes, the skipped step, the
// results and idempotency keys — exactly as a run on a journal of its own
// does, sealed or not (a sealed journal's digests are keyed by the owner).
func TestEngineThroughTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  *journal.Key
	}{{"plain", nil}, {"sealed", journal.NewKey()}} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner(t, tc.key)
			j := o.journal()
			if j.Sealed() != (tc.key != nil) {
				t.Fatalf("Sealed() = %v through the owner, want %v", j.Sealed(), tc.key != nil)
			}
			var mu sync.Mutex
			var finished []engine.Event
			run, err := runOn(t, j, o.ws, threeSteps(""), func(ev engine.Event) {
				if ev.Kind == engine.StepFinished {
					mu.Lock()
					finished = append(finished, ev)
					mu.Unlock()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != journal.RunSucceeded {
				t.Fatalf("run %s: %v", run.Status, run.Error)
			}
			gotRun, invs := journaled(t, o.store, run.ID)
			if len(invs) != 4 || invs[2].State != journal.StateCompleted || invs[3].State != journal.StateSkipped {
				t.Fatalf("owner's journal: %d invocations: %+v", len(invs), invs)
			}
			if res := string(invs[2].Result.Content); !strings.Contains(res, "appended row 3") { // greet's and upper's rows first
				t.Errorf("ledger_append's result %s", res)
			}
			if prefix := "sha256:"; tc.key != nil {
				prefix = "hmac-sha256:"
				if !strings.HasPrefix(invs[0].ArgumentsDigest, prefix) {
					t.Errorf("digest %q, want %s…", invs[0].ArgumentsDigest, prefix)
				}
			}
			got, want := shape(t, gotRun, invs), local(t, tc.key, threeSteps(""))
			if got != want {
				t.Errorf("journaled through the owner:\n%s\nwant, as on a journal of its own:\n%s", got, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(finished) != 4 {
				t.Errorf("%d steps reported finished, want 4 (the skipped one too)", len(finished))
			}
		})
	}
}

// TestConstructsThroughTheOwner: a fan-out whose items write at once
// through one Journal, and a gate that stops the run for an approval,
// journal on the owner what they journal on a journal of their own.
func TestConstructsThroughTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		status    journal.RunStatus
		invs      int
	}{
		{"fan-out", `name: fan
servers: {demo: {builtin: demo}}
steps:
  - {id: shout, server: demo, tool: upper, for_each: ["a", "b", "c", "d"], concurrency: 4, with: {text: "${{ item }}"}}
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
`, journal.RunSucceeded, 5},
		{"approval", `name: gate
servers: {demo: {builtin: demo}}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: record, server: demo, tool: ledger_append, approve: "Write it?", with: {entry: x}}
`, journal.RunBlocked, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner(t, nil)
			run, err := runOn(t, o.journal(), o.ws, tc.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			gotRun, invs := journaled(t, o.store, run.ID)
			if gotRun.Status != tc.status || len(invs) != tc.invs {
				t.Fatalf("run %s with %d invocations, want %s with %d (error %v)", gotRun.Status, len(invs), tc.status, tc.invs, gotRun.Error)
			}
			if got, want := shape(t, gotRun, invs), local(t, nil, tc.src); got != want {
				t.Errorf("journaled through the owner:\n%s\nwant, as on a journal of its own:\n%s", got, want)
			}
		})
	}
}

// TestLostConnectionThroughTheOwner: the unsafe ledger_append's server dies
// after its side effect committed; the owner's journal has the invocation
// outcome_unknown with the decision that made it so, the run blocked, as a
// run on a journal of its own has them.
func TestLostConnectionThroughTheOwner(t *testing.T) {
	o := newOwner(t, nil)
	src := threeSteps("exit-after-commit")
	run, err := runOn(t, o.journal(), o.ws, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotRun, invs := journaled(t, o.store, run.ID)
	if gotRun.Status != journal.RunBlocked || len(invs) != 3 {
		t.Fatalf("run %s with %d invocations, want blocked with 3", gotRun.Status, len(invs))
	}
	rec := invs[2]
	if rec.State != journal.StateOutcomeUnknown || len(rec.Decisions) != 1 || len(rec.Attempts) != 1 || rec.Attempts[0].EndedAt == nil {
		t.Fatalf("ledger_append journaled %s, decisions %+v, attempts %+v", rec.State, rec.Decisions, rec.Attempts)
	}
	if got, want := shape(t, gotRun, invs), local(t, nil, src); got != want {
		t.Errorf("journaled through the owner:\n%s\nwant, as on a journal of its own:\n%s", got, want)
	}
}

// TestOwnerGoneMidRun: the owner stops while a call is in flight; the
// call's outcome cannot be journaled, and the run stops with the error
// (service.ErrUnreachable), nothing panicking. The owner's journal keeps
// what it committed: the first step completed, the second's intent
// without an outcome. Once the owner is back, a resume through it settles
// the call as a crash mid-call (count_slowly is read-only: replayed).
func TestOwnerGoneMidRun(t *testing.T) {
	o := newOwner(t, nil)
	j := o.journal()
	src := `name: cut
servers: {demo: {builtin: demo}}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: count, server: demo, tool: count_slowly, with: {n: 20, delay_ms: 50}}
`
	var stopped sync.WaitGroup
	var once sync.Once
	var runID journal.ID
	run, err := runOn(t, j, o.ws, src, func(ev engine.Event) {
		if ev.Kind == engine.StepProgress && ev.Step == "count" {
			once.Do(func() {
				runID = ev.Run
				stopped.Go(o.stop)
			})
		}
	})
	stopped.Wait()
	if err == nil || !errors.Is(err, service.ErrUnreachable) {
		t.Fatalf("run %+v, error %v: want the owner unreachable", run, err)
	}
	if runID.IsZero() {
		t.Fatal("count_slowly reported no progress")
	}
	gotRun, invs := journaled(t, o.store, runID)
	if gotRun.Status != journal.RunRunning || len(invs) != 2 {
		t.Fatalf("owner's journal: run %s with %d invocations", gotRun.Status, len(invs))
	}
	last := invs[1].LastAttempt()
	if invs[0].State != journal.StateCompleted || invs[1].State != journal.StateIntent || last == nil || last.EndedAt != nil {
		t.Fatalf("owner's journal: %s then %s, last attempt %+v", invs[0].State, invs[1].State, last)
	}

	o.serve()
	j = o.journal()
	gotRun, err = j.Run(runID)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.Load(gotRun.Source, gotRun.Definition, nil)
	if err != nil {
		t.Fatal(err)
	}
	resumed, acted, err := newEngine(t, j, o.ws, wf, nil).Resume(context.Background(), gotRun, wf, nil)
	if err != nil || !acted || resumed.Status != journal.RunSucceeded {
		t.Fatalf("resume through the owner: %+v, acted %v, %v", resumed, acted, err)
	}
	_, invs = journaled(t, o.store, runID)
	count := invs[1]
	if count.State != journal.StateCompleted || len(count.Attempts) != 2 || !count.Attempts[0].Interrupted || count.Attempts[1].Kind != journal.KindReplay {
		t.Errorf("count_slowly after the resume: %s, attempts %+v", count.State, count.Attempts)
	}
}

// TestWritesAfterTheOwner: once the owner stopped serving, every write and
// read fails with service.ErrUnreachable and writes nothing; while the
// owner serves a closed journal, with journal.ErrClosed; refusals of the
// journal come back as its sentinels; a closed Journal refuses everything.
func TestWritesAfterTheOwner(t *testing.T) {
	o := newOwner(t, nil)
	j := o.journal()
	run := &journal.Run{Workflow: "w"}
	if err := j.CreateRun(run); err != nil || run.ID.IsZero() || run.Status != journal.RunRunning {
		t.Fatalf("CreateRun: %v, run %+v", err, run)
	}
	inv := &journal.Invocation{RunID: run.ID, Step: "s", Item: -1, Server: "demo", Tool: "greet"}
	in, err := j.Begin(inv)
	if err != nil || !in.Valid() || in.IdempotencyKey != inv.ID.String() || inv.State != journal.StateIntent || len(inv.Attempts) != 1 {
		t.Fatalf("Begin: %v, intent %+v, invocation %+v", err, in, inv)
	}
	// The journal's refusals, as the owner's store returned them.
	if _, err := j.Again(inv.ID, journal.NextAttempt{Kind: journal.KindRetry}); !errors.Is(err, journal.ErrTransition) {
		t.Errorf("Again with an attempt open: %v, want ErrTransition", err)
	}
	if _, err := j.Invocation(journal.ID{1}); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("an unknown invocation: %v, want ErrNotFound", err)
	}
	if err := j.Finish(journal.Intent{ID: inv.ID, Attempt: 1}, journal.Outcome{State: journal.StateCompleted}); !errors.Is(err, journal.ErrTransition) {
		t.Errorf("Finish with an intent not issued: %v, want ErrTransition", err)
	}

	o.stop()
	done := journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"hi"}]`)}}
	if err := j.Finish(in, done); !errors.Is(err, service.ErrUnreachable) {
		t.Errorf("Finish after the owner stopped: %v, want ErrUnreachable", err)
	}
	if p, err := j.FinishLater(in, done); p != nil || !errors.Is(err, service.ErrUnreachable) {
		t.Errorf("FinishLater after the owner stopped: %v, %v", p, err)
	}
	if _, err := j.Begin(&journal.Invocation{RunID: run.ID, Step: "t", Item: -1, Server: "demo", Tool: "greet"}); !errors.Is(err, service.ErrUnreachable) {
		t.Errorf("Begin after the owner stopped: %v", err)
	}
	if _, err := j.EndRun(run.ID, journal.RunFailed, nil, nil); !errors.Is(err, service.ErrUnreachable) {
		t.Errorf("EndRun after the owner stopped: %v", err)
	}
	if _, err := j.RunInvocations(run.ID); !errors.Is(err, service.ErrUnreachable) {
		t.Errorf("RunInvocations after the owner stopped: %v", err)
	}
	if got := journaltest.StateOf(t, o.store, inv.ID); got != journal.StateIntent {
		t.Errorf("the owner's journal has the invocation %s, want intent as last committed", got)
	}
	if invs, _ := o.store.RunInvocations(run.ID); len(invs) != 1 {
		t.Errorf("the owner's journal has %d invocations, want 1", len(invs))
	}

	// An owner that serves a journal closed under it.
	o2 := newOwner(t, nil)
	j2 := o2.journal()
	if err := o2.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j2.CreateRun(&journal.Run{Workflow: "w"}); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("a write to a closed journal: %v, want ErrClosed", err)
	}

	j.Close()
	if err := j.SetRunStatus(run.ID, journal.RunFailed, nil); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("a write after Close: %v, want ErrClosed", err)
	}
}

// TestSealedDigestNeedsTheOwner: a keyed digest is the owner's (the same
// as its store's); one that gets no answer breaks the Journal, so that
// the empty digest it returns is never journaled.
func TestSealedDigestNeedsTheOwner(t *testing.T) {
	o := newOwner(t, journal.NewKey())
	j := o.journal()
	args := []byte(`{"name":"Ada"}`)
	if got, want := j.Digest(args), o.store.Digest(args); got != want || !strings.HasPrefix(got, "hmac-sha256:") {
		t.Errorf("Digest through the owner %q, the owner's %q", got, want)
	}
	o.stop()
	if got := j.Digest(args); got != "" {
		t.Errorf("Digest with the owner gone: %q", got)
	}
	o.serve() // the owner is back: the Journal stays broken all the same
	if err := j.CreateRun(&journal.Run{Workflow: "w"}); !errors.Is(err, service.ErrUnreachable) {
		t.Errorf("a write after a digest got no answer: %v", err)
	}
	if runs, _ := o.store.Runs(journal.RunFilter{}); len(runs) != 0 {
		t.Errorf("the owner's journal has %d runs, want none", len(runs))
	}
}
