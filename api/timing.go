package api

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// How long things took, read from the journal once for every front end:
// the CLI (runs show, journal show, the line that ends a run) and the web
// UI (its timeline) say the same.
//
// A call's time is the time of its attempts, each from its send to its
// end. An attempt the process died during has no known end: the journal
// marks it interrupted when a resume finds it (journal.Attempt.Interrupted),
// and its time is not counted, rather than counted up to the resume. A
// run's wall time goes from its start to its end; its work time is the
// time at least one of its calls was in flight; the rest is gaps, each
// with the cause the journal shows for it.

// Timing is how a run's time went.
type Timing struct {
	// Start and End bound the run: its start (or its first send, if that
	// is earlier: clocks of several workers), and its end — now while it
	// goes, its last update if it stopped without one.
	Start, End time.Time
	// Wall is End - Start.
	Wall time.Duration
	// Work is the time at least one call of the run was in flight.
	Work time.Duration
	// Gaps are the periods with no call in flight, in order: those with a
	// cause (see GapKind), and the idle ones of at least MinIdle or a
	// fifth of Wall. A run that ended has none after its last call:
	// what is left is its end being written.
	Gaps []Gap
}

// Waited is the time of the gaps with a cause: waiting for approval, for
// an operator, for a resume.
func (t Timing) Waited() time.Duration {
	var d time.Duration
	for _, g := range t.Gaps {
		if g.Kind != GapIdle {
			d += g.Duration()
		}
	}
	return d
}

// Gap is a period with no call of the run in flight.
type Gap struct {
	From, To time.Time
	Kind     GapKind
	// Step is the step the gap waited on, with its for_each item
	// ("charge", "fan[2]"); "" for an idle gap.
	Step string
}

// Duration is To - From.
func (g Gap) Duration() time.Duration { return g.To.Sub(g.From) }

// Text says what the run waited for in the gap, as the CLI and the web UI
// say it.
func (g Gap) Text() string {
	switch g.Kind {
	case GapApproval:
		return "step " + g.Step + " waited for approval, then for a resume"
	case GapBlocked:
		return "the outcome of step " + g.Step + " was unknown: it waited for an operator to resolve it, then for a resume"
	case GapStopped:
		return "mcpflow stopped while step " + g.Step + " was in flight; nothing ran until a resume found it"
	case GapCancelled:
		return "the run was cancelled at step " + g.Step + "; nothing ran until a resume"
	}
	return "nothing in flight"
}

// GapKind is why nothing was in flight.
type GapKind uint8

const (
	// GapIdle: no cause the journal shows — between steps, a retry's
	// backoff, a server starting, or a run that ended until a resume.
	GapIdle GapKind = iota
	// GapApproval: a step waited for an operator's approval (then for
	// the resume that ran it).
	GapApproval
	// GapBlocked: a call's outcome was unknown (or it timed out) and the
	// run waited for an operator to resolve it and resume.
	GapBlocked
	// GapStopped: mcpflow stopped while a call was in flight, and nothing
	// ran the run until a resume found the call.
	GapStopped
	// GapCancelled: the run was cancelled (its call in flight aborted),
	// and nothing ran it until a resume.
	GapCancelled
)

var gapNames = [...]string{GapIdle: "idle", GapApproval: "approval", GapBlocked: "blocked", GapStopped: "stopped", GapCancelled: "cancelled"}

// String is the kind's stable name: idle, approval, blocked, stopped,
// cancelled.
func (k GapKind) String() string {
	if int(k) < len(gapNames) {
		return gapNames[k]
	}
	return "GapKind(" + strconv.Itoa(int(k)) + ")"
}

func (k GapKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// MinIdle is the shortest idle gap Timing reports, unless the gap takes a
// fifth of the run (idleShare): shorter ones are the engine's own time
// between calls.
const MinIdle = time.Second

// idleShare: an idle gap of at least Wall/idleShare is reported (the
// servers starting, in a run of a few quick calls).
const idleShare = 5

// TimingOf is how run's time went, from its invocations; now ends the
// calls in flight, and the run, while it goes. It is a pure function of
// its arguments.
func TimingOf(run *journal.Run, invs []journal.Invocation, now time.Time) Timing {
	live := run.Status == journal.RunRunning
	t := Timing{Start: run.StartedAt}
	switch {
	case run.FinishedAt != nil:
		t.End = *run.FinishedAt
	case live:
		t.End = now
	default:
		t.End = run.UpdatedAt
	}
	var work []span
	var marks []onset
	for i := range invs {
		inv := &invs[i]
		step := StepLabel(inv)
		for j := range inv.Attempts {
			a := &inv.Attempts[j]
			if a.SentAt.Before(t.Start) {
				t.Start = a.SentAt
			}
			if a.Interrupted {
				// Nothing ran from the moment mcpflow stopped (not known:
				// at the latest, once this call was in flight) until a
				// resume found the call.
				marks = append(marks, onset{a.SentAt, GapStopped, step})
				if a.EndedAt != nil {
					marks = append(marks, onset{*a.EndedAt, GapIdle, ""})
				}
				continue
			}
			end, ok := AttemptEnd(inv, j, live, now)
			if !ok {
				// No outcome, and nothing runs the run: the process
				// stopped with the call in flight.
				marks = append(marks, onset{a.SentAt, GapStopped, step})
				continue
			}
			work = append(work, span{a.SentAt, end})
			if end.After(t.End) {
				t.End = end
			}
			switch a.Failure {
			case replay.ClassAborted:
				marks = append(marks, onset{end, GapCancelled, step})
			case replay.ClassTimedOut:
				// Unless the step's retry sent it again at once, the run
				// stopped for an operator.
				if !retried(inv, a.N) {
					marks = append(marks, onset{end, GapBlocked, step})
				}
			}
		}
		for _, d := range inv.Decisions {
			if d.Verdict == replay.OutcomeUnknown {
				marks = append(marks, onset{d.At, GapBlocked, step})
			}
		}
	}
	for _, a := range run.Approvals {
		marks = append(marks, onset{a.RequestedAt, GapApproval, a.Step})
	}
	if t.End.Before(t.Start) {
		t.End = t.Start
	}
	t.Wall = t.End.Sub(t.Start)
	// At one instant, the cause that came later wins: a resume's mark,
	// then a stop, a cancel, an approval asked, an outcome found unknown.
	slices.SortStableFunc(marks, func(a, b onset) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return int(rank[a.kind]) - int(rank[b.kind])
	})
	merged := merge(work, t.Start, t.End)
	for _, s := range merged {
		t.Work += s.to.Sub(s.from)
	}
	// The gaps are what the work leaves of [Start, End]; each is cut where
	// a cause begins, and each piece takes the cause in force: the latest
	// begun since the work before the gap began.
	minIdle := min(MinIdle, t.Wall/idleShare)
	from, since := t.Start, t.Start
	ends := merged
	if live || len(merged) == 0 {
		ends = append(ends, span{t.End, t.End})
	}
	for _, s := range ends {
		if s.from.After(from) {
			t.Gaps = append(t.Gaps, gapsIn(from, s.from, since, marks, minIdle)...)
		}
		since, from = s.from, maxTime(from, s.to)
	}
	return t
}

// retried reports whether attempt n of inv was followed at once by
// another, by its step's retry (a decision journaled with its end).
func retried(inv *journal.Invocation, n int) bool {
	for _, d := range inv.Decisions {
		if d.Attempt == n && d.Verdict == verdict.Retry {
			return true
		}
	}
	return false
}

// span is an interval of time.
type span struct{ from, to time.Time }

// onset is a moment a cause of waiting began (or, GapIdle, ended).
type onset struct {
	at   time.Time
	kind GapKind
	step string
}

// rank orders the causes that begin at one instant.
var rank = [...]uint8{GapIdle: 0, GapStopped: 1, GapCancelled: 2, GapApproval: 3, GapBlocked: 4}

// merge sorts spans, clips them to [start, end] and merges those that
// overlap or touch.
func merge(spans []span, start, end time.Time) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var out []span
	for _, s := range spans {
		s.from, s.to = maxTime(s.from, start), minTime(s.to, end)
		if s.to.Before(s.from) {
			continue
		}
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			out[n-1].to = maxTime(out[n-1].to, s.to)
			continue
		}
		out = append(out, s)
	}
	return out
}

// gapsIn cuts the gap [from, to) at the causes that begin in it; a piece
// takes the cause in force, the latest begun at or after since (when the
// work before the gap began); without one it is idle. Pieces of one cause
// are joined; idle ones shorter than minIdle are left out.
func gapsIn(from, to, since time.Time, marks []onset, minIdle time.Duration) []Gap {
	cur := Gap{From: from, Kind: GapIdle}
	var out []Gap
	add := func(g Gap) {
		if !g.To.After(g.From) || (g.Kind == GapIdle && g.Duration() < minIdle) {
			return
		}
		if n := len(out); n > 0 && out[n-1].Kind == g.Kind && out[n-1].Step == g.Step && out[n-1].To.Equal(g.From) {
			out[n-1].To = g.To
			return
		}
		out = append(out, g)
	}
	for _, m := range marks {
		if m.at.Before(since) {
			continue
		}
		if !m.at.Before(to) {
			break
		}
		if m.at.After(from) {
			cur.To = m.at
			add(cur)
			cur = Gap{From: m.at}
		}
		cur.Kind, cur.Step = m.kind, m.step
	}
	cur.To = to
	add(cur)
	return out
}

// AttemptEnd is when attempt j of inv ended, and whether that is known:
// its EndedAt; now for the last attempt of a call in flight while its run
// goes (live). An interrupted attempt's end, or the end of one that never
// got an outcome, is not known.
func AttemptEnd(inv *journal.Invocation, j int, live bool, now time.Time) (time.Time, bool) {
	a := &inv.Attempts[j]
	switch {
	case a.Interrupted:
		return time.Time{}, false
	case a.EndedAt != nil:
		return maxTime(*a.EndedAt, a.SentAt), true
	case live && j == len(inv.Attempts)-1 && inv.State == journal.StateIntent:
		return maxTime(now, a.SentAt), true
	}
	return time.Time{}, false
}

// CallTiming is how long one call's attempts took.
type CallTiming struct {
	// Work is the time of its attempts, each from its send to its end (to
	// now for one in flight); the time between attempts is not counted.
	Work time.Duration
	// Interrupted counts the attempts mcpflow stopped during: their time
	// is not known, and not in Work.
	Interrupted int
	// InFlight: the last attempt goes on (its run goes).
	InFlight bool
	// Unknown: no attempt has a known end (nothing sent, or every attempt
	// interrupted or without an outcome).
	Unknown bool
}

// Text is the call's time as a front end shows it, each duration written
// by dur: "1.2s", "1.2s so far" while it goes, "1.2s + 1 interrupted",
// "interrupted" when no attempt has a known end but some were
// interrupted, and none when nothing is known.
func (c CallTiming) Text(dur func(time.Duration) string, none string) string {
	interrupted := ""
	if c.Interrupted > 0 {
		interrupted = fmt.Sprintf("%d interrupted", c.Interrupted)
	}
	switch {
	case c.Unknown && interrupted != "":
		return "interrupted"
	case c.Unknown:
		return none
	case c.InFlight:
		return dur(c.Work) + " so far"
	case interrupted != "":
		return dur(c.Work) + " + " + interrupted
	}
	return dur(c.Work)
}

// CallTimingOf is how long inv's attempts took; live says its run goes
// (now ends the attempt in flight).
func CallTimingOf(inv *journal.Invocation, live bool, now time.Time) CallTiming {
	c := CallTiming{Unknown: true}
	for j := range inv.Attempts {
		a := &inv.Attempts[j]
		if a.Interrupted {
			c.Interrupted++
		}
		end, ok := AttemptEnd(inv, j, live, now)
		if !ok {
			continue
		}
		c.Work += end.Sub(a.SentAt)
		c.Unknown = false
		if a.EndedAt == nil {
			c.InFlight = true
		}
	}
	return c
}

// Attempt outcomes, as AttemptOutcome names them; the others are failure
// classes (replay.Class names: connection_lost, timed_out, …).
const (
	OutcomeAnswered    = "answered"
	OutcomeInterrupted = "interrupted"
	OutcomeInFlight    = "in_flight"
	OutcomeNone        = "no_outcome"
)

// AttemptOutcome names how attempt j of inv ended, as every view shows
// it: answered; tool_error (a result with isError: the tool ran and said
// it failed); a failure class (connection_lost, timed_out, …);
// interrupted (mcpflow stopped while it was in flight); in_flight (the
// last attempt of a call of a run that goes: live); no_outcome.
func AttemptOutcome(inv *journal.Invocation, j int, live bool) string {
	a := &inv.Attempts[j]
	switch {
	case a.Interrupted:
		return OutcomeInterrupted
	case a.EndedAt == nil && live && j == len(inv.Attempts)-1 && inv.State == journal.StateIntent:
		return OutcomeInFlight
	case a.EndedAt == nil:
		return OutcomeNone
	case a.Failure != "":
		return string(a.Failure)
	case j == len(inv.Attempts)-1 && inv.ToolError:
		return ToolError
	case j < len(inv.Attempts)-1:
		// A result arrived, and yet the call was sent again: only a tool
		// error is (an operator's retry of a call that completed with one
		// leaves its attempt without a failure class).
		return ToolError
	}
	return OutcomeAnswered
}

// StepLabel is an invocation's step as every view names it: its id, with
// the for_each item ("fan[2]").
func StepLabel(inv *journal.Invocation) string {
	if inv.Item >= 0 {
		return fmt.Sprintf("%s[%d]", inv.Step, inv.Item)
	}
	return inv.Step
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
