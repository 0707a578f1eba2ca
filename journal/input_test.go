package journal_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// askFor is an input_required outcome asking one elicitation ("confirm")
// and one roots listing ("roots").
func askFor(answers ...journal.Answer) journal.Outcome {
	return journal.Outcome{State: intent,
		Decision: &journal.Decision{Verdict: verdict.Continue, Reason: "input_required", View: verdict.Current},
		Input: &journal.Input{
			Requests: json.RawMessage(`{"confirm":{"method":"elicitation/create","params":{"message":"Pay?","requestedSchema":{"type":"object"}}},"roots":{"method":"roots/list"}}`),
			State:    "opaque-state",
			Answers:  answers,
		}}
}

// TestInputAnsweredThenContinued: a result that asks for input keeps the
// invocation in flight, waiting; answers are journaled with who and when,
// each once; only when every request is answered does a continuation
// follow, carrying the answers and the state as journaled — on both
// engines, and with the payload sealed.
func TestInputAnsweredThenContinued(t *testing.T) {
	for _, opts := range []*journal.Options{nil, {Key: journal.NewKey()}} {
		journaltest.Each(t, opts, func(t *testing.T, j journal.Store) { inputAnsweredThenContinued(t, j) })
	}
}

func inputAnsweredThenContinued(t *testing.T, j journal.Store) {
	{
		run := newRun(t, j)
		in := begin(t, j, run, "demo", "transfer")
		if err := j.Finish(in, askFor(journal.Answer{Key: "roots", Response: json.RawMessage(`{"roots":[]}`), By: "workflow"})); err != nil {
			t.Fatal(err)
		}
		inv, err := j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		w := inv.WaitingInput()
		if inv.State != intent || w == nil || w.Attempt != 1 || w.State != "opaque-state" || len(w.Answers) != 1 || w.Answers[0].At.IsZero() {
			t.Fatalf("after input_required: state %s, waiting %+v", inv.State, w)
		}
		if open, _ := w.Unanswered(); len(open) != 1 || open[0] != "confirm" {
			t.Errorf("unanswered: %v, want [confirm]", open)
		}
		// Not before every request is answered.
		if _, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindContinuation}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("continuation before the answers: %v, want ErrTransition", err)
		}
		// Nor another kind of attempt while it waits.
		if _, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindReplay}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("replay of a waiting call: %v, want ErrTransition", err)
		}
		for _, bad := range [][]journal.Answer{
			{{Key: "nope", Response: json.RawMessage(`{}`), By: "ann"}},
			{{Key: "roots", Response: json.RawMessage(`{}`), By: "ann"}}, // answered by the workflow
			{{Key: "confirm", Response: json.RawMessage(`{}`), By: " "}},
		} {
			if _, err := j.Answer(in.ID, 1, bad); !errors.Is(err, journal.ErrTransition) {
				t.Errorf("answer %+v: %v, want ErrTransition", bad, err)
			}
		}
		if _, err := j.Answer(in.ID, 2, []journal.Answer{{Key: "confirm", Response: json.RawMessage(`{}`), By: "ann"}}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("answer to an attempt that did not ask: %v, want ErrTransition", err)
		}
		got, err := j.Answer(in.ID, 1, []journal.Answer{{Key: "confirm", Response: json.RawMessage(`{"action":"accept","content":{"ok":true}}`), By: "ann"}})
		if err != nil {
			t.Fatal(err)
		}
		if a := got.Answer("confirm"); a == nil || a.By != "ann" || a.At.IsZero() {
			t.Errorf("answer as journaled: %+v", a)
		}
		next, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindContinuation})
		if err != nil {
			t.Fatal(err)
		}
		if next.Kind != journal.KindContinuation || next.Continuation == nil || next.Continuation.State != "opaque-state" {
			t.Fatalf("continuation intent: %+v", next)
		}
		var responses map[string]map[string]any
		if err := json.Unmarshal(next.Continuation.Responses, &responses); err != nil || responses["confirm"]["action"] != "accept" || responses["roots"] == nil {
			t.Errorf("continuation responses: %s (%v)", next.Continuation.Responses, err)
		}
		finish(t, j, next, done)
		inv, err = j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tally := inv.Tally(); tally.Continuations != 1 || tally.AgainstBudget != 0 || inv.Sent(1) != journal.KindContinuation {
			t.Errorf("tally %+v, kind of attempt 2 %s", tally, inv.Sent(1))
		}
		if inv.WaitingInput() != nil || len(inv.Inputs) != 1 || len(inv.Inputs[0].Answers) != 2 {
			t.Errorf("after the continuation: inputs %+v", inv.Inputs)
		}
		journal.CheckInvocation(inv, "invocation", func(name, format string, args ...any) {
			t.Errorf("check: "+name+": "+format, args...)
		})
	}
}

// TestAnswerReturnsACopy: the Input Answer returns is the caller's:
// changing it changes nothing the journal holds, not even through the
// next write of the invocation (which reads the record the last write
// put).
func TestAnswerReturnsACopy(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		in := begin(t, j, run, "demo", "transfer")
		if err := j.Ask(in.ID, 1, journal.Input{Requests: askFor().Input.Requests}); err != nil {
			t.Fatal(err)
		}
		got, err := j.Answer(in.ID, 1, []journal.Answer{{Key: "confirm", Response: json.RawMessage(`{"action":"decline"}`), By: "ann"}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range got.Answers {
			got.Answers[i].By = "changed"
		}
		finish(t, j, in, done)
		inv, err := j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range inv.Inputs[0].Answers {
			if a.By == "changed" {
				t.Errorf("the journal holds %+v, changed by the caller of Answer", a)
			}
		}
	})
}

// TestAnswerGivenTellsWaiters: the calls waiting for an answer to an
// invocation are told once one is journaled through this journal, on both
// engines; not when an answer is refused, nor for another invocation.
func TestAnswerGivenTellsWaiters(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		teller, ok := j.(interface {
			AnswerGiven(journal.ID) (<-chan struct{}, func())
		})
		if !ok {
			t.Fatalf("%T tells no answers", j)
		}
		run := newRun(t, j)
		in := begin(t, j, run, "demo", "transfer")
		if err := j.Ask(in.ID, 1, journal.Input{Requests: askFor().Input.Requests}); err != nil {
			t.Fatal(err)
		}
		first, stop1 := teller.AnswerGiven(in.ID)
		second, stop2 := teller.AnswerGiven(in.ID)
		elsewhere, stop3 := teller.AnswerGiven(journal.NewID())
		defer stop1()
		defer stop2()
		defer stop3()
		told := func(c <-chan struct{}) bool {
			select {
			case <-c:
				return true
			default:
				return false
			}
		}
		if _, err := j.Answer(in.ID, 1, []journal.Answer{{Key: "nosuch", Response: json.RawMessage(`{}`), By: "ann"}}); !errors.Is(err, journal.ErrTransition) {
			t.Fatalf("answer to no request: %v, want ErrTransition", err)
		}
		if told(first) || told(second) {
			t.Error("a refused answer was told")
		}
		if _, err := j.Answer(in.ID, 1, []journal.Answer{{Key: "confirm", Response: json.RawMessage(`{"action":"accept"}`), By: "ann"}}); err != nil {
			t.Fatal(err)
		}
		if !told(first) || !told(second) {
			t.Error("an answer journaled was not told to both waiters")
		}
		if told(elsewhere) {
			t.Error("another invocation's waiter was told")
		}
		finish(t, j, in, done)
	})
}
