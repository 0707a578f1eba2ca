package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
)

// TestTimelineGeometry lays out a run of a second, in tenths: no gap is
// long enough to be marked, the axis is the run's time.
func TestTimelineGeometry(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(100*time.Millisecond))) }
	ptr := func(t time.Time) *time.Time { return &t }
	end := at(10)
	run := &journal.Run{Status: journal.RunBlocked, StartedAt: t0, UpdatedAt: end, FinishedAt: &end}
	invs := []journal.Invocation{
		{ // 1s to 3s, answered
			Step: "fetch", Item: -1, Server: "demo", Tool: "greet", State: journal.StateCompleted,
			Attempts: []journal.Attempt{{N: 1, SentAt: at(1), EndedAt: ptr(at(3))}},
		},
		{ // 4s: lost; replayed 6s to 8s; a decision at 5s
			Step: "send", Item: 2, Server: "demo", Tool: "upper", State: journal.StateCompleted,
			Attempts: []journal.Attempt{
				{N: 1, SentAt: at(4), EndedAt: ptr(at(5)), Failure: "connection_lost"},
				{N: 2, SentAt: at(6), EndedAt: ptr(at(8)), Replay: true},
			},
			Decisions: []journal.Decision{{Attempt: 1, At: at(5), Verdict: verdict.Verdict("replay"), Reason: "idempotent", View: verdict.View("declared")}},
		},
		{ // an instant at 0.9s, lost, resolved an hour later
			Step: "charge", Item: -1, Server: "demo", Tool: "ledger_append", State: journal.StateOutcomeUnknown, UpdatedAt: at(9),
			Attempts:    []journal.Attempt{{N: 1, SentAt: at(9), EndedAt: ptr(at(9)), Failure: "connection_lost"}},
			Resolutions: []journal.Resolution{{By: "alice", At: at(3600), As: journal.StateCompleted, From: journal.StateOutcomeUnknown, Why: "in the ledger"}},
		},
		{Step: "skipped", Item: -1, Server: "demo", Tool: "greet", State: journal.StateSkipped, CreatedAt: at(10)},
	}
	tl := timelineOf(run, invs, at(99999))
	if !tl.Start.Equal(t0) || tl.Wall != time.Second || tl.Work != 500*time.Millisecond || len(tl.Gaps) != 0 {
		t.Fatalf("axis %v + %v (work %v, gaps %v), want %v + 1s, 500ms, none", tl.Start, tl.Wall, tl.Work, tl.Gaps, t0)
	}
	if got := fmt.Sprint(tl.Ticks); got != "[{0 0} {25 +250ms} {50 +500ms} {75 +750ms} {100 +1.0s}]" {
		t.Errorf("ticks %s", got)
	}
	if len(tl.Rows) != 4 {
		t.Fatalf("%d rows", len(tl.Rows))
	}
	fetch, send, charge, skipped := tl.Rows[0], tl.Rows[1], tl.Rows[2], tl.Rows[3]
	near := func(what string, got, want float64) {
		t.Helper()
		if d := got - want; d > 0.001 || d < -0.001 {
			t.Errorf("%s = %.3f, want %.3f", what, got, want)
		}
	}
	near("fetch left", fetch.Left, 10)
	near("fetch width", fetch.Width, 20)
	if len(fetch.Segments) != 1 || fetch.Segments[0].Left != 0 || fetch.Segments[0].Width != 100 || fetch.Segments[0].Failed || len(fetch.Marks) != 0 {
		t.Errorf("fetch: %+v", fetch)
	}
	if fetch.Label != "fetch" || fetch.Tool != "demo/greet" || fetch.State != "completed" {
		t.Errorf("fetch labels: %q %q %q", fetch.Label, fetch.Tool, fetch.State)
	}
	near("send left", send.Left, 40)
	near("send width", send.Width, 40)
	if send.Label != "send[2]" || len(send.Segments) != 2 {
		t.Fatalf("send: %+v", send)
	}
	// Within the bar (4s to 8s): attempt 1 at 0-25%, attempt 2 at 50-100%.
	near("attempt 1 left", send.Segments[0].Left, 0)
	near("attempt 1 width", send.Segments[0].Width, 25)
	near("attempt 2 left", send.Segments[1].Left, 50)
	near("attempt 2 width", send.Segments[1].Width, 50)
	if !send.Segments[0].Failed || send.Segments[1].Failed || send.Segments[0].Outcome != "connection_lost" || send.Segments[1].Outcome != "answered" {
		t.Errorf("failed segments: %+v", send.Segments)
	}
	if len(send.Marks) != 2 || send.Marks[0].Kind != "replay" || send.Marks[1].Kind != "decision" {
		t.Fatalf("send marks: %+v", send.Marks)
	}
	near("replay mark", send.Marks[0].At, 60)
	near("decision mark", send.Marks[1].At, 50)
	if !strings.Contains(send.Marks[1].Title, "replay — idempotent (view: declared)") {
		t.Errorf("decision title %q", send.Marks[1].Title)
	}
	// An instant gets the narrowest bar, kept on the axis; the resolution,
	// an hour later, is marked at the bar's end.
	near("charge width", charge.Width, minBar)
	near("charge left", charge.Left, 90)
	if len(charge.Marks) != 1 || charge.Marks[0].Kind != "resolution" {
		t.Fatalf("charge marks: %+v", charge.Marks)
	}
	near("resolution mark", charge.Marks[0].At, 90+minBar)
	if !strings.Contains(charge.Marks[0].Title, "resolved outcome_unknown → completed by alice") {
		t.Errorf("resolution title %q", charge.Marks[0].Title)
	}
	if !skipped.NoBar || skipped.Left != 100 || skipped.State != "skipped" {
		t.Errorf("skipped: %+v", skipped)
	}
}

// TestTimelineCompressesGaps: a run killed in a call and resumed 15
// minutes later is drawn as its work, the wait a band of its own,
// compressed, marked stopped; the interrupted attempt is an instant with
// its mark, coloured by how it ended.
func TestTimelineCompressesGaps(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ptr := func(t time.Time) *time.Time { return &t }
	end := at(902)
	run := &journal.Run{Status: journal.RunSucceeded, StartedAt: t0, UpdatedAt: end, FinishedAt: &end}
	invs := []journal.Invocation{
		{Step: "first", Item: -1, Server: "demo", Tool: "greet", State: journal.StateCompleted,
			Attempts: []journal.Attempt{{N: 1, SentAt: at(0), EndedAt: ptr(at(1))}}},
		{Step: "charge", Item: -1, Server: "demo", Tool: "upper", State: journal.StateCompleted,
			Attempts: []journal.Attempt{
				{N: 1, SentAt: at(1), EndedAt: ptr(at(901)), Failure: "connection_lost", Interrupted: true},
				{N: 2, SentAt: at(901), EndedAt: ptr(at(902)), Replay: true},
			}},
		{Step: "oops", Item: -1, Server: "demo", Tool: "fail", State: journal.StateCompleted, ToolError: true,
			Attempts: []journal.Attempt{{N: 1, SentAt: at(901.5), EndedAt: ptr(at(902))}}},
		{Step: "again", Item: -1, Server: "demo", Tool: "flaky", State: journal.StateCompleted, // a tool error an operator had sent again
			Attempts:    []journal.Attempt{{N: 1, SentAt: at(0.5), EndedAt: ptr(at(0.6))}, {N: 2, SentAt: at(901.6), EndedAt: ptr(at(901.7))}},
			Resolutions: []journal.Resolution{{At: at(500), From: journal.StateCompleted, As: journal.StateRetryApproved}}},
	}
	tl := timelineOf(run, invs, at(99999))
	if tl.Wall != 902*time.Second || tl.Work != 2*time.Second || len(tl.Gaps) != 1 {
		t.Fatalf("wall %v, work %v, gaps %+v; want 902s, 2s, one", tl.Wall, tl.Work, tl.Gaps)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if d := got - want; d > 0.001 || d < -0.001 {
			t.Errorf("%s = %.3f, want %.3f", what, got, want)
		}
	}
	g := tl.Gaps[0]
	if g.Kind != "stopped" || !g.Compressed || g.Label != "15m0s" || !strings.Contains(g.Title, "mcpflow stopped while step charge was in flight") {
		t.Errorf("gap %+v", g)
	}
	// The gap takes gapWidth; the two seconds of work share the rest.
	near("gap left", g.Left, (100-gapWidth)/2)
	near("gap width", g.Width, gapWidth)
	first, charge, oops := tl.Rows[0], tl.Rows[1], tl.Rows[2]
	near("first width", first.Width, (100-gapWidth)/2)
	near("charge left", charge.Left, (100-gapWidth)/2)
	near("charge width", charge.Width, 100-(100-gapWidth)/2)
	if len(charge.Segments) != 2 || charge.Segments[0].Outcome != "interrupted" || charge.Segments[0].Width != 0 || !charge.Segments[0].Failed {
		t.Errorf("charge's segments %+v", charge.Segments)
	}
	if len(charge.Marks) < 2 || charge.Marks[0].Kind != "interrupted" || charge.Marks[1].Kind != "replay" {
		t.Errorf("charge's marks %+v", charge.Marks)
	}
	if !strings.Contains(charge.Title, "1.0s + 1 interrupted") {
		t.Errorf("charge's title %q: its time is its replay's, the interrupted attempt apart", charge.Title)
	}
	if len(oops.Segments) != 1 || oops.Segments[0].Outcome != "tool_error" || !oops.Segments[0].Failed || oops.State != "tool_error" {
		t.Errorf("a tool error: %+v", oops)
	}
	if again := tl.Rows[3]; again.State != "completed" || len(again.Segments) != 2 || again.Segments[0].Outcome != "tool_error" || again.Segments[1].Outcome != "answered" {
		t.Errorf("a tool error sent again, then answered: %+v", again.Segments)
	}
	if got := fmt.Sprint(tl.Ticks[4]); got != "{100 +15m2s}" {
		t.Errorf("last tick %s", got)
	}
}

func TestTimelineOfARunGoing(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	run := &journal.Run{Status: journal.RunRunning, StartedAt: t0}
	invs := []journal.Invocation{{
		Step: "slow", Item: -1, State: journal.StateIntent, UpdatedAt: t0.Add(time.Second),
		Attempts: []journal.Attempt{{N: 1, SentAt: t0.Add(2 * time.Second)}},
	}}
	tl := timelineOf(run, invs, t0.Add(4*time.Second))
	// The call in flight runs to now, which ends the axis; the two idle
	// seconds before it (a server starting) are a gap, compressed.
	if tl.Wall != 4*time.Second || tl.Rows[0].Left != gapWidth || tl.Rows[0].Width != 100-gapWidth || len(tl.Gaps) != 1 || !tl.Gaps[0].Compressed || tl.Gaps[0].Kind != "idle" {
		t.Errorf("wall %v, bar %.2f+%.2f, gaps %+v; want 4s, the bar after a compressed idle gap", tl.Wall, tl.Rows[0].Left, tl.Rows[0].Width, tl.Gaps)
	}
	if !strings.Contains(tl.Rows[0].Segments[0].Title, "no outcome yet") {
		t.Errorf("segment title %q", tl.Rows[0].Segments[0].Title)
	}
	// Nothing sent: the axis is not empty.
	tl = timelineOf(&journal.Run{Status: journal.RunBlocked, StartedAt: t0, UpdatedAt: t0}, nil, t0)
	if tl.Wall != 0 || len(tl.Rows) != 0 || len(tl.Ticks) != 5 {
		t.Errorf("an empty run: %+v", tl)
	}
}

func TestStyleIsPercentages(t *testing.T) {
	if got := style(12.345, 150); got != "left:12.35%;width:100.00%" {
		t.Errorf("style %q", got)
	}
	if got := at(-3); got != "left:0.00%" {
		t.Errorf("at %q", got)
	}
	for d, want := range map[time.Duration]string{840 * time.Millisecond: "840ms", 2400 * time.Millisecond: "2.4s", 192 * time.Second: "3m12s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
