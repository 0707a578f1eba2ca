package journal_test

import (
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestSentAndTally: why each attempt was sent — journaled, or read from
// the decisions of a record journaled before kinds were — and the one
// count of sends by kind, with the sends that count against the replay
// budget.
func TestSentAndTally(t *testing.T) {
	type att struct {
		kind    journal.AttemptKind
		replay  bool // the flag of a record without kinds
		failure failure.Class
	}
	d := func(n int, v verdict.Verdict, view verdict.View) journal.Decision {
		return journal.Decision{Attempt: n, Verdict: v, View: view}
	}
	for _, tc := range []struct {
		name      string
		attempts  []att
		decisions []journal.Decision
		want      []journal.AttemptKind
		tally     journal.Tally
	}{
		{
			name:     "journaled kinds: two tool errors, the step's retry, an operator's retry",
			attempts: []att{{journal.KindFirst, false, failure.ToolError}, {journal.KindRetry, false, failure.ToolError}, {journal.KindOperatorRetry, false, failure.ToolError}},
			want:     []journal.AttemptKind{journal.KindFirst, journal.KindRetry, journal.KindOperatorRetry},
			tally:    journal.Tally{Attempts: 3, Retries: 1, OperatorRetries: 1},
		},
		{
			name:     "without kinds: the same, as journaled before (the operator's retry flagged a replay)",
			attempts: []att{{"", false, failure.ToolError}, {"", false, ""}, {"", true, failure.ToolError}},
			decisions: []journal.Decision{d(1, verdict.Retry, verdict.Current), d(2, verdict.NotRetried, verdict.Current),
				d(2, verdict.Replay, verdict.Operator)},
			want:  []journal.AttemptKind{journal.KindFirst, journal.KindRetry, journal.KindOperatorRetry},
			tally: journal.Tally{Attempts: 3, Retries: 1, OperatorRetries: 1},
		},
		{
			name:      "without kinds: lost, replayed after both views cleared it",
			attempts:  []att{{"", false, failure.Lost}, {"", true, ""}},
			decisions: []journal.Decision{d(1, verdict.Replay, verdict.SendTime), d(1, verdict.Replay, verdict.Rediscovered)},
			want:      []journal.AttemptKind{journal.KindFirst, journal.KindReplay},
			tally:     journal.Tally{Attempts: 2, Replays: 1, AgainstBudget: 1},
		},
		{
			name:     "without kinds: timed out, retried (a replay flag); the retry carried out on resume after a replay decision",
			attempts: []att{{"", false, failure.TimedOut}, {"", true, failure.TimedOut}, {"", true, ""}},
			decisions: []journal.Decision{d(1, verdict.Retry, verdict.Current), d(2, verdict.Retry, verdict.Current),
				d(2, verdict.Replay, verdict.Rediscovered)},
			want:  []journal.AttemptKind{journal.KindFirst, journal.KindRetry, journal.KindRetry},
			tally: journal.Tally{Attempts: 3, Retries: 2, AgainstBudget: 2},
		},
		{
			name:      "without kinds: never delivered, then a first delivery; a rejected call sent again on resume",
			attempts:  []att{{"", false, failure.NotDelivered}, {"", false, failure.Rejected}, {"", false, ""}},
			decisions: []journal.Decision{d(1, verdict.FirstDelivery, verdict.SendTime)},
			want:      []journal.AttemptKind{journal.KindFirst, journal.KindFirstDelivery, journal.KindFirstDelivery},
			tally:     journal.Tally{Attempts: 3, FirstDeliveries: 2},
		},
		{
			name:     "without kinds: a replay flag and no decision is a replay",
			attempts: []att{{"", false, failure.Lost}, {"", true, ""}},
			want:     []journal.AttemptKind{journal.KindFirst, journal.KindReplay},
			tally:    journal.Tally{Attempts: 2, Replays: 1, AgainstBudget: 1},
		},
		{
			name: "a replay never delivered, then its first delivery: one send against the budget",
			attempts: []att{{journal.KindFirst, false, failure.Lost}, {journal.KindReplay, false, failure.NotDelivered},
				{journal.KindFirstDelivery, false, ""}},
			want:  []journal.AttemptKind{journal.KindFirst, journal.KindReplay, journal.KindFirstDelivery},
			tally: journal.Tally{Attempts: 3, Replays: 1, FirstDeliveries: 1, AgainstBudget: 1},
		},
		{
			name: "a retry after a rejection that follows a call that may have run counts; one after a tool error does not",
			attempts: []att{{journal.KindFirst, false, failure.ServerError}, {journal.KindRetry, false, failure.Rejected},
				{journal.KindRetry, false, failure.ToolError}, {journal.KindRetry, false, ""}},
			want:  []journal.AttemptKind{journal.KindFirst, journal.KindRetry, journal.KindRetry, journal.KindRetry},
			tally: journal.Tally{Attempts: 4, Retries: 3, AgainstBudget: 2},
		},
		{
			name:      "an operator's retry of a call whose outcome was unknown counts against the budget",
			attempts:  []att{{journal.KindFirst, false, failure.Lost}, {journal.KindOperatorRetry, false, ""}},
			decisions: []journal.Decision{d(1, verdict.OutcomeUnknown, verdict.SendTime), d(1, verdict.OperatorRetry, verdict.Operator)},
			want:      []journal.AttemptKind{journal.KindFirst, journal.KindOperatorRetry},
			tally:     journal.Tally{Attempts: 2, OperatorRetries: 1, AgainstBudget: 1},
		},
		{
			name:     "a failure class of a newer mcpflow may have run",
			attempts: []att{{journal.KindFirst, false, "exploded"}, {journal.KindReplay, false, ""}},
			want:     []journal.AttemptKind{journal.KindFirst, journal.KindReplay},
			tally:    journal.Tally{Attempts: 2, Replays: 1, AgainstBudget: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := &journal.Invocation{Decisions: tc.decisions}
			for i, a := range tc.attempts {
				inv.Attempts = append(inv.Attempts, journal.Attempt{N: i + 1, Kind: a.kind, Replay: a.replay, Failure: a.failure})
			}
			for i, want := range tc.want {
				if got := inv.Sent(i); got != want {
					t.Errorf("Sent(%d) = %q, want %q", i, got, want)
				}
			}
			if got := inv.Tally(); got != tc.tally {
				t.Errorf("Tally() = %+v\nwant      %+v", got, tc.tally)
			}
		})
	}
}

// TestAttemptKinds: Begin journals the first send; Again journals the kind
// it is given, and refuses none, first, or a kind it does not know,
// writing nothing.
func TestAttemptKinds(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		in := begin(t, j, run, "srv", "t")
		if in.Kind != journal.KindFirst {
			t.Errorf("Begin's intent: kind %q", in.Kind)
		}
		if err := j.Finish(in, journal.Outcome{State: journal.StateFailed, Failure: failure.Rejected}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []journal.AttemptKind{"", journal.KindFirst, "again"} {
			if _, err := j.Again(in.ID, journal.NextAttempt{Kind: k}); !errors.Is(err, journal.ErrTransition) {
				t.Errorf("Again of kind %q: %v, want ErrTransition", k, err)
			}
		}
		next, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindFirstDelivery})
		if err != nil || next.Kind != journal.KindFirstDelivery {
			t.Fatalf("Again: %+v, %v", next, err)
		}
		inv, err := j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Attempts) != 2 || inv.Attempts[0].Kind != journal.KindFirst || inv.Attempts[1].Kind != journal.KindFirstDelivery ||
			inv.Attempts[1].Replay || inv.Attempts[0].Failure != failure.Rejected {
			t.Errorf("attempts: %+v", inv.Attempts)
		}
	})
}
