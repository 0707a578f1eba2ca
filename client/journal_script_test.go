package client_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// writeAll makes every write of engine.Journal on j, each as the engine
// makes it — a question asked during a call and answered, a result that
// asks for input and its continuation, an interrupted call decided
// outcome_unknown, a retry, a skip, an approval gate, run statuses and
// the run's end — and returns the run and what the writes returned, as
// the caller sees it (ids and times left out).
func writeAll(t *testing.T, j engine.Journal) (journal.ID, []any) {
	t.Helper()
	var got []any
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	intent := func(in journal.Intent) journal.Intent {
		t.Helper()
		if !in.Valid() {
			t.Fatalf("intent %+v is not Valid", in)
		}
		in.ID, in.RunID, in.IdempotencyKey = journal.ID{}, journal.ID{}, ""
		return in
	}
	run := &journal.Run{Workflow: "all", Definition: []byte("name: all\n"), Inputs: map[string]any{"n": 1.0}, Secrets: []string{"k"}}
	check("CreateRun", j.CreateRun(run))
	got = append(got, run.Status, run.Digest)
	trust := journal.Trust{Server: true, Workspace: true, WorkspaceSource: "store"}
	newInv := func(step string) *journal.Invocation {
		args := json.RawMessage(`{"a":1}`)
		return &journal.Invocation{RunID: run.ID, Step: step, Item: -1, Server: "s", Tool: "t", Arguments: args,
			ArgumentsDigest: j.Digest(args), Annotations: json.RawMessage(`{"readOnlyHint":true}`), Trust: trust}
	}
	text := &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`), StructuredContent: json.RawMessage(`{"ok":true}`)}
	asks := json.RawMessage(`{"q":{"method":"elicitation/create","params":{"message":"name?"}}}`)
	answer := []journal.Answer{{Key: "q", Response: json.RawMessage(`{"action":"accept","content":{"name":"x"}}`), By: "ada"}}

	// Asked during the call, answered, completed.
	inv := newInv("ask")
	in, err := j.Begin(inv)
	check("Begin", err)
	got = append(got, intent(in), inv.State, len(inv.Attempts))
	check("Ask", j.Ask(in.ID, in.Attempt, journal.Input{Requests: asks}))
	input, err := j.Answer(in.ID, in.Attempt, answer)
	check("Answer", err)
	input.Answers[0].At = time.Time{}
	got = append(got, input)
	check("Finish", j.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: text}))

	// A result that asks for input, answered, continued.
	inv = newInv("continued")
	in, err = j.Begin(inv)
	check("Begin", err)
	check("Finish", j.Finish(in, journal.Outcome{State: journal.StateIntent, Detail: "input_required",
		Decision: &journal.Decision{Verdict: verdict.Continue, Reason: "input_required", View: verdict.SendTime},
		Input:    &journal.Input{Requests: asks, State: "opaque"}}))
	_, err = j.Answer(in.ID, in.Attempt, answer)
	check("Answer", err)
	in, err = j.Again(in.ID, journal.NextAttempt{Kind: journal.KindContinuation, Trust: trust, Annotations: json.RawMessage(`{"readOnlyHint":true}`)})
	check("Again", err)
	got = append(got, intent(in))
	p, err := j.FinishLater(in, journal.Outcome{State: journal.StateCompleted, Result: text})
	check("FinishLater", err)
	check("Wait", p.Wait())

	// Interrupted, then decided: its outcome unknown.
	inv = newInv("interrupted")
	in, err = j.Begin(inv)
	check("Begin", err)
	check("Interrupted", j.Interrupted(in.ID, journal.Outcome{State: journal.StateIntent, Failure: failure.Lost, Detail: "mcpflow stopped"}))
	check("Decide", j.Decide(in.ID, journal.Decision{Verdict: verdict.OutcomeUnknown, Reason: "no_annotations", View: verdict.SendTime},
		journal.StateOutcomeUnknown, &journal.Error{Code: "MCPFLOW_OUTCOME_UNKNOWN", Message: "may have run"}))
	err = j.Decide(in.ID, journal.Decision{Verdict: verdict.Replay}, journal.StateIntent, nil)
	got = append(got, errors.Is(err, journal.ErrTransition))

	// A tool error, retried.
	inv = newInv("retried")
	in, err = j.Begin(inv)
	check("Begin", err)
	check("Finish", j.Finish(in, journal.Outcome{State: journal.StateIntent, Result: &journal.Result{Content: json.RawMessage(`[]`), IsError: true}, Failure: failure.ToolError,
		Decision: &journal.Decision{Verdict: verdict.Retry, Reason: "retry_on_tool_error", View: verdict.Current}}))
	in, err = j.Again(in.ID, journal.NextAttempt{Kind: journal.KindRetry, Trust: trust})
	check("Again", err)
	got = append(got, intent(in))
	check("Finish", j.Finish(in, journal.Outcome{State: journal.StateFailed, Error: &journal.Error{Code: "MCPFLOW_TOOL_ERROR", Message: "again"}, Failure: failure.ToolError}))

	// Skipped, now and later.
	inv = newInv("skipped")
	check("Skip", j.Skip(inv))
	got = append(got, inv.State, inv.IdempotencyKey == inv.ID.String())
	p, err = j.SkipLater(newInv("skipped later"))
	check("SkipLater", err)
	check("Wait", p.Wait())

	// A gate, statuses, the end.
	a, err := j.RequestApproval(run.ID, "gate", "Ship it?")
	check("RequestApproval", err)
	a.RequestedAt = time.Time{}
	got = append(got, a)
	check("SetRunStatus", j.SetRunStatus(run.ID, journal.RunBlocked, &journal.Error{Code: "MCPFLOW_APPROVAL_REQUIRED", Message: "gate"}))
	check("SetRunStatus", j.SetRunStatus(run.ID, journal.RunRunning, nil))
	_, err = j.EndRun(run.ID, journal.RunSucceeded, nil, map[string]any{"x": 1})
	got = append(got, errors.Is(err, journal.ErrTransition))
	ended, err := j.EndRun(run.ID, journal.RunFailed, &journal.Error{Code: "MCPFLOW_TOOL_ERROR", Message: "step retried failed"}, map[string]any{"x": 1})
	check("EndRun", err)
	got = append(got, ended.Status, ended.Error, ended.Outputs, ended.FinishedAt != nil)
	return run.ID, got
}

// TestEveryWriteAsTheStore: every write of engine.Journal, made through
// the owner, leaves in the owner's journal what it leaves in a journal
// written directly, and returns to the caller what the store returns;
// sealed too, under the same key (the digests keyed alike).
func TestEveryWriteAsTheStore(t *testing.T) {
	for _, key := range []*journal.Key{nil, journal.NewKey()} {
		t.Run(map[bool]string{true: "plain", false: "sealed"}[key == nil], func(t *testing.T) { everyWriteAsTheStore(t, key) })
	}
}

func everyWriteAsTheStore(t *testing.T, key *journal.Key) {
	ws := t.TempDir()
	direct := journaltest.OpenPath(t, filepath.Join(ws, "journal.db"), &journal.Options{Key: key})
	wantID, wantGot := writeAll(t, direct)
	o := newOwner(t, key)
	gotID, gotGot := writeAll(t, o.journal())

	same := func(what string, got, want any) {
		t.Helper()
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		if string(g) != string(w) {
			t.Errorf("%s through the owner:\n%s\nwant, as the store:\n%s", what, g, w)
		}
	}
	same("what the writes returned", gotGot, wantGot)
	gotRun, gotInvs := journaled(t, o.store, gotID)
	wantRun, wantInvs := journaled(t, direct, wantID)
	same("the journal", shape(t, gotRun, gotInvs), shape(t, wantRun, wantInvs))
	if len(gotInvs) != 6 {
		t.Errorf("%d invocations, want 6", len(gotInvs))
	}
}
