package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// TestPlanResume covers every state a journaled invocation can be in when
// resume finds it — what a crash at any point, a failure or an operator's
// resolution leaves — and the plan for each. The plan is a pure function of
// the record: a decision already journaled is followed, never re-decided.
func TestPlanResume(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	ended := &at
	attempt := func(n int, endedAt *time.Time, failure replay.Class) journal.Attempt {
		return journal.Attempt{N: n, SentAt: at, EndedAt: endedAt, Failure: failure}
	}
	decision := func(n int, v verdict.Verdict, view verdict.View) journal.Decision {
		return journal.Decision{Attempt: n, At: at, Verdict: v, Reason: "r", View: view}
	}
	operator := &journal.Decision{Verdict: verdict.OperatorRetry, Reason: "operator_approved", View: verdict.Operator}

	for _, tc := range []struct {
		name string
		inv  journal.Invocation
		want engine.Plan
		err  string
	}{
		{
			name: "crash while the first call was in flight",
			inv:  journal.Invocation{State: journal.StateIntent, Attempts: []journal.Attempt{attempt(1, nil, "")}},
			want: engine.Plan{Kind: engine.PlanJudge, Interrupted: true},
		},
		{
			name: "crash while a replay was in flight",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "connection_lost"), {N: 2, SentAt: at, Kind: journal.KindReplay, Replay: true}},
				Decisions: []journal.Decision{decision(1, verdict.Replay, verdict.SendTime), decision(1, verdict.Replay, verdict.Rediscovered)}},
			want: engine.Plan{Kind: engine.PlanJudge, Interrupted: true},
		},
		{
			name: "crash after a lost connection was judged replayable, before reconnecting",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "connection_lost")},
				Decisions: []journal.Decision{decision(1, verdict.Replay, verdict.SendTime)}},
			want: engine.Plan{Kind: engine.PlanFollow, Class: replay.ClassLost},
		},
		{
			name: "a result asked for input nobody has given",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "")},
				Decisions: []journal.Decision{decision(1, verdict.Continue, verdict.Current)},
				Inputs:    []journal.Input{{Attempt: 1, Requests: []byte(`{"a":{"method":"elicitation/create"},"b":{"method":"elicitation/create"}}`), Answers: []journal.Answer{{Key: "a", Response: []byte(`{}`), By: "ann"}}}}},
			want: engine.Plan{Kind: engine.PlanAwaitInput},
		},
		{
			name: "a result asked for input, every request answered, crash before the continuation",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "")},
				Decisions: []journal.Decision{decision(1, verdict.Continue, verdict.Current)},
				Inputs:    []journal.Input{{Attempt: 1, Requests: []byte(`{"a":{"method":"elicitation/create"}}`), Answers: []journal.Answer{{Key: "a", Response: []byte(`{}`), By: "ann"}}}}},
			want: engine.Plan{Kind: engine.PlanContinue},
		},
		{
			name: "crash while a continuation was in flight",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, ""), {N: 2, SentAt: at, Kind: journal.KindContinuation}},
				Decisions: []journal.Decision{decision(1, verdict.Continue, verdict.Current)},
				Inputs:    []journal.Input{{Attempt: 1, Requests: []byte(`{"a":{"method":"elicitation/create"}}`), Answers: []journal.Answer{{Key: "a", Response: []byte(`{}`), By: "ann"}}}}},
			want: engine.Plan{Kind: engine.PlanJudge, Interrupted: true},
		},
		{
			name: "crash while a call waited open for an answer asked during it",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts: []journal.Attempt{attempt(1, nil, "")},
				Inputs:   []journal.Input{{Attempt: 1, Requests: []byte(`{"elicitation-1":{"method":"elicitation/create"}}`)}}},
			want: engine.Plan{Kind: engine.PlanJudge, Interrupted: true},
		},
		{
			name: "crash after a call that never left, before its first delivery",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "not_delivered")},
				Decisions: []journal.Decision{decision(1, verdict.FirstDelivery, verdict.SendTime)}},
			want: engine.Plan{Kind: engine.PlanFollow, Class: replay.ClassNotDelivered},
		},
		{
			name: "crash (or Ctrl-C) during the backoff of a retried tool error",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "tool_error")},
				Decisions: []journal.Decision{decision(1, verdict.Retry, verdict.Current)}},
			want: engine.Plan{Kind: engine.PlanResend, Sent: journal.KindRetry},
		},
		{
			name: "crash during the backoff of a retried rejection",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "rejected")},
				Decisions: []journal.Decision{decision(1, verdict.Retry, verdict.Current)}},
			want: engine.Plan{Kind: engine.PlanResend, Sent: journal.KindRetry},
		},
		{
			name: "crash during the backoff of a retried timeout (the call may have run)",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "timed_out")},
				Decisions: []journal.Decision{decision(1, verdict.Retry, verdict.Current)}},
			want: engine.Plan{Kind: engine.PlanFollow, Class: replay.ClassLost, Sent: journal.KindRetry},
		},
		{
			name: "crash during the backoff of a retried server error (the call may have run)",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "server_error")},
				Decisions: []journal.Decision{decision(1, verdict.Retry, verdict.Current)}},
			want: engine.Plan{Kind: engine.PlanFollow, Class: replay.ClassLost, Sent: journal.KindRetry},
		},
		{
			name: "completed",
			inv:  journal.Invocation{State: journal.StateCompleted, Attempts: []journal.Attempt{attempt(1, ended, "")}},
			want: engine.Plan{Kind: engine.PlanCompleted},
		},
		{
			name: "completed with a tool error",
			inv:  journal.Invocation{State: journal.StateCompleted, Attempts: []journal.Attempt{attempt(1, ended, "")}, Result: &journal.Result{IsError: true}},
			want: engine.Plan{Kind: engine.PlanCompleted},
		},
		{
			name: "resolved as completed by an operator",
			inv: journal.Invocation{State: journal.StateCompleted, Attempts: []journal.Attempt{attempt(1, ended, "connection_lost")},
				Resolutions: []journal.Resolution{{By: "ada", As: journal.StateCompleted}}},
			want: engine.Plan{Kind: engine.PlanCompleted},
		},
		{
			name: "outcome unknown",
			inv: journal.Invocation{State: journal.StateOutcomeUnknown, Attempts: []journal.Attempt{attempt(1, ended, "connection_lost")},
				Decisions: []journal.Decision{decision(1, verdict.OutcomeUnknown, verdict.SendTime)}},
			want: engine.Plan{Kind: engine.PlanBlocked},
		},
		{
			name: "rejected before running",
			inv:  journal.Invocation{State: journal.StateFailed, Attempts: []journal.Attempt{attempt(1, ended, "rejected")}},
			want: engine.Plan{Kind: engine.PlanResend, Sent: journal.KindFirstDelivery},
		},
		{
			name: "the session kept breaking before the call left",
			inv:  journal.Invocation{State: journal.StateFailed, Attempts: []journal.Attempt{attempt(4, ended, "not_delivered")}},
			want: engine.Plan{Kind: engine.PlanResend, Sent: journal.KindFirstDelivery},
		},
		{
			name: "rejected after an earlier attempt that may have run: the failure stands",
			inv: journal.Invocation{State: journal.StateFailed,
				Attempts:  []journal.Attempt{attempt(1, ended, "timed_out"), attempt(2, ended, "rejected")},
				Decisions: []journal.Decision{decision(1, verdict.Retry, verdict.Current)}},
			want: engine.Plan{Kind: engine.PlanFailed},
		},
		{
			name: "crash during the backoff of a retried rejection after a timeout: a retry of a call that may have run, judged",
			inv: journal.Invocation{State: journal.StateIntent,
				Attempts:  []journal.Attempt{attempt(1, ended, "timed_out"), attempt(2, ended, "rejected")},
				Decisions: []journal.Decision{decision(1, verdict.Retry, verdict.Current), decision(2, verdict.Retry, verdict.Current)}},
			want: engine.Plan{Kind: engine.PlanFollow, Class: replay.ClassLost, Sent: journal.KindRetry},
		},
		{
			name: "server error: may have run, failure stands",
			inv:  journal.Invocation{State: journal.StateFailed, Attempts: []journal.Attempt{attempt(1, ended, "server_error")}},
			want: engine.Plan{Kind: engine.PlanFailed},
		},
		{
			name: "rejected, then resolved as failed by an operator",
			inv: journal.Invocation{State: journal.StateFailed, Attempts: []journal.Attempt{attempt(1, ended, "rejected")},
				Resolutions: []journal.Resolution{{By: "ada", As: journal.StateFailed}}},
			want: engine.Plan{Kind: engine.PlanFailed},
		},
		{
			name: "retry approved by an operator",
			inv: journal.Invocation{State: journal.StateRetryApproved, Attempts: []journal.Attempt{attempt(1, ended, "connection_lost")},
				Resolutions: []journal.Resolution{{By: "ada", As: journal.StateRetryApproved}}},
			want: engine.Plan{Kind: engine.PlanResend, Sent: journal.KindOperatorRetry, Decision: operator},
		},
		{
			name: "aborted by Ctrl-C while in flight",
			inv:  journal.Invocation{State: journal.StateAborted, Attempts: []journal.Attempt{attempt(1, ended, "aborted")}},
			want: engine.Plan{Kind: engine.PlanJudge},
		},
		{
			name: "timed out",
			inv:  journal.Invocation{State: journal.StateTimedOut, Attempts: []journal.Attempt{attempt(1, ended, "timed_out")}},
			want: engine.Plan{Kind: engine.PlanJudge},
		},
		{
			name: "intent without an attempt is damage",
			inv:  journal.Invocation{State: journal.StateIntent},
			err:  "no attempt",
		},
		{
			name: "an ended attempt in state intent without a decision is damage",
			inv:  journal.Invocation{State: journal.StateIntent, Attempts: []journal.Attempt{attempt(1, ended, "connection_lost")}},
			err:  "no decision",
		},
		{
			name: "skipped steps are not resumed through a plan",
			inv:  journal.Invocation{State: journal.StateSkipped},
			err:  "cannot be resumed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := engine.PlanResume(&tc.inv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PlanResume = %+v, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.want.Kind || got.Class != tc.want.Class || got.Interrupted != tc.want.Interrupted || got.Sent != tc.want.Sent ||
				(got.Decision == nil) != (tc.want.Decision == nil) || (got.Decision != nil && *got.Decision != *tc.want.Decision) {
				t.Errorf("PlanResume = %+v (decision %+v)\nwant          %+v (decision %+v)", got, got.Decision, tc.want, tc.want.Decision)
			}
		})
	}
}

// TestPlanResumeCoversEveryState: every invocation state but skipped has a
// plan (skipped steps are continued by the run loop, not a plan).
func TestPlanResumeCoversEveryState(t *testing.T) {
	n := 0
	for s := journal.StateIntent; ; s++ {
		if _, err := journal.ParseState(s.String()); err != nil {
			break // past the last state
		}
		n++
		inv := journal.Invocation{State: s, Attempts: []journal.Attempt{{N: 1}}}
		if _, err := engine.PlanResume(&inv); err != nil && s != journal.StateSkipped {
			t.Errorf("state %s has no plan: %v", s, err)
		}
	}
	if n != 8 {
		t.Errorf("%d states, want 8: add the new one to TestPlanResume", n)
	}
}
