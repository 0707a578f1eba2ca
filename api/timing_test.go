package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ptr(t time.Time) *time.Time { return &t }

// sent is an attempt sent at s and ended at e (no end when e < 0).
func sent(n int, s, e float64) journal.Attempt {
	a := journal.Attempt{N: n, SentAt: at(s)}
	if e >= 0 {
		a.EndedAt = ptr(at(e))
	}
	return a
}

// gapsText writes gaps as "kind step from-to" in seconds after t0.
func gapsText(gaps []Gap) string {
	var parts []string
	for _, g := range gaps {
		parts = append(parts, fmt.Sprintf("%s %s %g-%g", g.Kind, g.Step, g.From.Sub(t0).Seconds(), g.To.Sub(t0).Seconds()))
	}
	return strings.Join(parts, "; ")
}

func TestTimingOf(t *testing.T) {
	interrupted := func(n int, s, found float64) journal.Attempt {
		a := sent(n, s, found)
		a.Failure, a.Interrupted = "connection_lost", true
		return a
	}
	failedAs := func(a journal.Attempt, class failure.Class) journal.Attempt { a.Failure = class; return a }
	inv := func(step string, item int, st journal.State, attempts ...journal.Attempt) journal.Invocation {
		return journal.Invocation{Step: step, Item: item, State: st, Attempts: attempts}
	}
	ended := func(st journal.RunStatus, end float64) *journal.Run {
		return &journal.Run{Status: st, StartedAt: t0, UpdatedAt: at(end), FinishedAt: ptr(at(end))}
	}
	for _, tc := range []struct {
		name       string
		run        *journal.Run
		invs       []journal.Invocation
		now        float64
		work, wall float64
		gaps       string
		waited     float64
	}{
		{
			name: "steps one after the other",
			run:  ended(journal.RunSucceeded, 1.2),
			invs: []journal.Invocation{
				inv("a", -1, journal.StateCompleted, sent(1, 0.01, 0.5)),
				inv("b", -1, journal.StateCompleted, sent(1, 0.51, 1.15)),
			},
			work: 1.13, wall: 1.2,
		},
		{
			name: "a quick run, most of it a server starting",
			run:  ended(journal.RunSucceeded, 0.21),
			invs: []journal.Invocation{inv("a", -1, journal.StateCompleted, sent(1, 0.18, 0.2))},
			work: 0.02, wall: 0.21, gaps: "idle  0-0.18",
		},
		{
			name: "cancelled: nothing after its last call, its end being written",
			run:  ended(journal.RunCancelled, 5.004),
			invs: []journal.Invocation{inv("s", -1, journal.StateAborted, failedAs(sent(1, 1, 5), "aborted"))},
			work: 4, wall: 5.004, gaps: "idle  0-1",
		},
		{
			name: "killed with a call in flight, replayed on resume 15s later",
			run:  ended(journal.RunSucceeded, 16.4),
			invs: []journal.Invocation{
				inv("a", -1, journal.StateCompleted, sent(1, 0.1, 1)),
				inv("b", -1, journal.StateCompleted, interrupted(1, 1.1, 16), sent(2, 16.1, 16.3)),
			},
			work: 1.1, wall: 16.4, gaps: "stopped b 1.1-16", waited: 14.9,
		},
		{
			name: "an approval asked, given a minute later, resumed half a minute after",
			run: func() *journal.Run {
				r := ended(journal.RunSucceeded, 90.3)
				r.Approvals = []journal.Approval{{Step: "deploy", RequestedAt: at(0.35), State: journal.ApprovalApproved, At: ptr(at(60))}}
				return r
			}(),
			invs: []journal.Invocation{
				inv("build", -1, journal.StateCompleted, sent(1, 0.1, 0.3)),
				inv("deploy", -1, journal.StateCompleted, sent(1, 90, 90.2)),
			},
			work: 0.4, wall: 90.3, gaps: "approval deploy 0.35-90", waited: 89.65,
		},
		{
			name: "an outcome unknown, resolved, resumed",
			run:  ended(journal.RunSucceeded, 121),
			invs: []journal.Invocation{
				{Step: "charge", Item: -1, State: journal.StateCompleted,
					Attempts:    []journal.Attempt{failedAs(sent(1, 1, 2), "connection_lost")},
					Decisions:   []journal.Decision{{Attempt: 1, At: at(2), Verdict: verdict.OutcomeUnknown}},
					Resolutions: []journal.Resolution{{At: at(100), As: journal.StateCompleted, From: journal.StateOutcomeUnknown}}},
				inv("receipt", -1, journal.StateCompleted, sent(1, 120, 121)),
			},
			work: 2, wall: 121, gaps: "idle  0-1; blocked charge 2-120", waited: 118,
		},
		{
			name: "killed, then found on resume to be unsafe: stopped, then blocked",
			run:  ended(journal.RunSucceeded, 61),
			invs: []journal.Invocation{
				{Step: "charge", Item: -1, State: journal.StateCompleted,
					Attempts:  []journal.Attempt{interrupted(1, 1, 20)},
					Decisions: []journal.Decision{{Attempt: 1, At: at(20), Verdict: verdict.OutcomeUnknown}}},
				inv("receipt", -1, journal.StateCompleted, sent(1, 60, 61)),
			},
			work: 1, wall: 61, gaps: "idle  0-1; stopped charge 1-20; blocked charge 20-60", waited: 59,
		},
		{
			name: "a fan-out item lost when mcpflow stopped, the other done",
			run:  ended(journal.RunSucceeded, 21),
			invs: []journal.Invocation{
				inv("fan", 0, journal.StateCompleted, sent(1, 1, 3)),
				inv("fan", 1, journal.StateCompleted, interrupted(1, 1.5, 20), sent(2, 20.1, 20.5)),
			},
			work: 2.4, wall: 21, gaps: "idle  0-1; stopped fan[1] 3-20", waited: 17,
		},
		{
			name: "a timeout retried after a backoff is not a wait",
			run:  ended(journal.RunSucceeded, 9),
			invs: []journal.Invocation{{Step: "slow", Item: -1, State: journal.StateCompleted,
				Attempts:  []journal.Attempt{failedAs(sent(1, 0, 5), "timed_out"), sent(2, 7, 8.5)},
				Decisions: []journal.Decision{{Attempt: 1, At: at(5), Verdict: verdict.Retry}}}},
			work: 6.5, wall: 9, gaps: "idle  5-7",
		},
		{
			name: "cancelled, resumed later: the call replayed",
			run:  ended(journal.RunSucceeded, 51),
			invs: []journal.Invocation{{Step: "s", Item: -1, State: journal.StateCompleted,
				Attempts:  []journal.Attempt{failedAs(sent(1, 0, 2), "aborted"), sent(2, 50, 51)},
				Decisions: []journal.Decision{{Attempt: 1, At: at(50), Verdict: verdict.Replay}}}},
			work: 3, wall: 51, gaps: "cancelled s 2-50", waited: 48,
		},
		{
			name: "a run going, its call in flight",
			run:  &journal.Run{Status: journal.RunRunning, StartedAt: t0, UpdatedAt: at(2)},
			invs: []journal.Invocation{inv("slow", -1, journal.StateIntent, sent(1, 2, -1))},
			now:  5, work: 3, wall: 5, gaps: "idle  0-2",
		},
		{
			name: "a run left running by a dead process: its call has no known end",
			run:  &journal.Run{Status: journal.RunCancelled, StartedAt: t0, UpdatedAt: at(3), FinishedAt: ptr(at(3))},
			invs: []journal.Invocation{inv("s", -1, journal.StateIntent, sent(1, 1, -1))},
			work: 0, wall: 3, gaps: "idle  0-1; stopped s 1-3", waited: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := TimingOf(tc.run, tc.invs, at(tc.now))
			sec := func(d time.Duration) float64 { return d.Seconds() }
			if !near(sec(tm.Work), tc.work) || !near(sec(tm.Wall), tc.wall) || !near(sec(tm.Waited()), tc.waited) {
				t.Errorf("work %v, wall %v, waited %v; want %vs, %vs, %vs", tm.Work, tm.Wall, tm.Waited(), tc.work, tc.wall, tc.waited)
			}
			if got := gapsText(tm.Gaps); got != tc.gaps {
				t.Errorf("gaps %q\nwant %q", got, tc.gaps)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

func TestCallTimingOf(t *testing.T) {
	lost := sent(1, 1, 16)
	lost.Failure, lost.Interrupted = "connection_lost", true
	inv := &journal.Invocation{Item: -1, State: journal.StateCompleted, Attempts: []journal.Attempt{lost, sent(2, 16.1, 16.3)}}
	c := CallTimingOf(inv, false, at(99))
	if !near(c.Work.Seconds(), 0.2) || c.Interrupted != 1 || c.InFlight || c.Unknown {
		t.Errorf("replayed after a crash: %+v, want 200ms of work, 1 interrupted", c)
	}
	if got := AttemptOutcome(inv, 0, false) + " " + AttemptOutcome(inv, 1, false); got != "interrupted answered" {
		t.Errorf("outcomes %q", got)
	}
	only := &journal.Invocation{Item: -1, State: journal.StateOutcomeUnknown, Attempts: []journal.Attempt{lost}}
	if c := CallTimingOf(only, false, at(99)); !c.Unknown || c.Work != 0 || c.Interrupted != 1 {
		t.Errorf("interrupted only: %+v, want its time unknown", c)
	}
	going := &journal.Invocation{Item: -1, State: journal.StateIntent, Attempts: []journal.Attempt{sent(1, 1, -1)}}
	if c := CallTimingOf(going, true, at(4)); !near(c.Work.Seconds(), 3) || !c.InFlight {
		t.Errorf("in flight: %+v, want 3s so far", c)
	}
	if got := AttemptOutcome(going, 0, true) + " " + AttemptOutcome(going, 0, false); got != "in_flight no_outcome" {
		t.Errorf("outcomes %q", got)
	}
	toolErr := &journal.Invocation{Item: -1, State: journal.StateCompleted, ToolError: true,
		Attempts: []journal.Attempt{{N: 1, SentAt: at(0), EndedAt: ptr(at(1)), Failure: "tool_error"}, sent(2, 2, 3)}}
	if got := AttemptOutcome(toolErr, 0, false) + " " + AttemptOutcome(toolErr, 1, false); got != "tool_error tool_error" {
		t.Errorf("tool errors %q", got)
	}
	// A tool error an operator approved for a retry, then answered: the
	// first attempt ended without a failure class, and was a tool error.
	retried := &journal.Invocation{Item: -1, State: journal.StateCompleted,
		Attempts:    []journal.Attempt{sent(1, 0, 1), sent(2, 60, 61)},
		Resolutions: []journal.Resolution{{At: at(30), From: journal.StateCompleted, As: journal.StateRetryApproved}}}
	if got := AttemptOutcome(retried, 0, false) + " " + AttemptOutcome(retried, 1, false); got != "tool_error answered" {
		t.Errorf("a tool error retried by an operator, then answered: %q", got)
	}
}
