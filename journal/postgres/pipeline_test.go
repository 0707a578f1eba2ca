package postgres_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// step writes what the engine writes for one step: the outcome of the
// previous call queued (FinishLater), then the intent of the next (Begin),
// which commits both.
func step(t *testing.T, j journal.Store, prev journal.Intent, run journal.ID) (journal.Intent, error) {
	t.Helper()
	p, err := j.FinishLater(prev, journal.Outcome{State: done, Result: &journal.Result{Content: json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "srv", Tool: "t", Arguments: json.RawMessage(`{}`)})
	if werr := p.Wait(); err == nil {
		err = werr
	}
	return in, err
}

// TestPipelinedSteps: a step of a run this worker holds (the previous
// outcome and the next intent) commits in one pipeline, durable as a
// transaction's commit: a reader sees both.
func TestPipelinedSteps(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	reader := journaltest.OpenStore(t, location, &journal.Options{ReadOnly: true})
	run := newRun(t, a)
	in := begin(t, a, run, "srv", "t")
	before := a.PipedCommits()
	var ids []journal.ID
	for range 5 {
		next, err := step(t, a, in, run)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
		in = next
	}
	if got := a.PipedCommits() - before; got != 5 {
		t.Errorf("%d of 5 steps pipelined", got)
	}
	for _, id := range ids {
		if s := state(t, reader, id); s != done {
			t.Errorf("invocation %s is %s, want completed", id.Short(), s)
		}
	}
	if s := state(t, reader, in.ID); s != intent {
		t.Errorf("last intent is %s", s)
	}
}

// TestPipelineFindsARecordChangedElsewhere: the record of a call in
// flight changed by another process (here an interruption journaled by
// another writer) is not what the pipeline expects: the write runs as a
// transaction, which reads the record afresh and refuses the outcome
// (ErrTransition) without writing it; the next intent of the step still
// commits.
func TestPipelineFindsARecordChangedElsewhere(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	other := openWorker(t, location, "other", false)
	run := newRun(t, a)
	in := begin(t, a, run, "srv", "t")
	lost := journal.Outcome{State: unknown, Failure: "connection_lost", Error: &journal.Error{Code: "X", Message: "lost"}}
	if err := other.Interrupted(in.ID, lost); err != nil {
		t.Fatal(err)
	}
	p, err := a.FinishLater(in, journal.Outcome{State: done, Result: &journal.Result{Content: json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := a.Begin(&journal.Invocation{RunID: run, Step: "s2", Item: -1, Server: "srv", Tool: "t"})
	if err != nil {
		t.Fatalf("the next intent: %v", err)
	}
	if err := p.Wait(); !errors.Is(err, journal.ErrTransition) {
		t.Fatalf("outcome of a call interrupted elsewhere: %v; want ErrTransition", err)
	}
	if s := state(t, other, in.ID); s != unknown {
		t.Errorf("invocation is %s, want outcome_unknown as the other writer left it", s)
	}
	if s := state(t, other, next.ID); s != intent {
		t.Errorf("next intent is %s", s)
	}
}

// TestPipelineFencesALostRun: once another worker took the run (a new
// epoch), neither the outcome nor the next intent of the worker that lost
// it is written, pipelined or not, and it learns the run is lost.
func TestPipelineFencesALostRun(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	b := openWorker(t, location, "b", true)
	var gone lostRuns
	a.OnLost(gone.add)
	run := newRun(t, a)
	in := begin(t, a, run, "srv", "t")
	in, err := step(t, a, in, run) // the cache holds the record in flight
	if err != nil {
		t.Fatal(err)
	}
	// b takes the run over, as a claim after a's lease expired would.
	sql(t, location, `UPDATE mcpflow_runs r SET owner = 'b', session = w.session, epoch = r.epoch + 1
		FROM mcpflow_workers w WHERE w.id = 'b' AND r.id = $1::uuid`, run.String())
	before := a.PipedCommits()
	if _, err := step(t, a, in, run); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("a step of the worker that lost the run: %v; want ErrLeaseLost", err)
	}
	if a.PipedCommits() != before {
		t.Error("a pipeline committed for a lost run")
	}
	if !gone.has(run) {
		t.Error("the worker was not told it lost the run")
	}
	invs, err := b.RunInvocations(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 2 || invs[1].State != intent {
		t.Fatalf("after the refused step: %d invocations, the last %v; want 2, still in flight", len(invs), invs[len(invs)-1].State)
	}
}

// TestPipelinedRunStartAndEnd: a run's creation rides with its first
// intent, and its end with its last outcome, each in one pipeline; ending
// it as succeeded while a call is in flight is refused (ErrTransition) as
// in a transaction, and so is creating a run whose id is taken.
func TestPipelinedRunStartAndEnd(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	reader := journaltest.OpenStore(t, location, &journal.Options{ReadOnly: true})
	before := a.PipedCommits()
	r := &journal.Run{Workflow: "wf", Definition: []byte("name: wf\n"), Workspace: "/ws"}
	created, err := a.CreateRunLater(r)
	if err != nil {
		t.Fatal(err)
	}
	in := begin(t, a, r.ID, "srv", "t")
	if err := created.Wait(); err != nil {
		t.Fatal(err)
	}
	p, err := a.FinishLater(in, journal.Outcome{State: done, Result: &journal.Result{Content: json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	ended, err := a.EndRun(r.ID, journal.RunSucceeded, nil, map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := a.PipedCommits() - before; got != 2 {
		t.Errorf("%d pipelines for the start and the end, want 2", got)
	}
	if ended.Status != journal.RunSucceeded || ended.Outputs["n"] != 1.0 {
		t.Errorf("ended run: %s %v", ended.Status, ended.Outputs)
	}
	got, err := reader.Run(r.ID)
	if err != nil || got.Status != journal.RunSucceeded {
		t.Fatalf("run as read: %v, %v", got, err)
	}
	if s := state(t, reader, in.ID); s != done {
		t.Errorf("last call is %s", s)
	}
	other := newRun(t, a)
	begin(t, a, other, "srv", "t")
	if _, err := a.EndRun(other, journal.RunSucceeded, nil, nil); !errors.Is(err, journal.ErrTransition) {
		t.Fatalf("succeeded with a call in flight: %v; want ErrTransition", err)
	}
	if got, err := reader.Run(other); err != nil || got.Status != journal.RunRunning {
		t.Fatalf("run refused its end: %v, %v; want running", got, err)
	}
	again := &journal.Run{ID: r.ID, Workflow: "wf"}
	if err := a.CreateRun(again); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("a run whose id is taken: %v; want ErrExists", err)
	}
}
