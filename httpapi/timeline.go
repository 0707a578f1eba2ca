package httpapi

import (
	"fmt"
	"html/template"
	"strconv"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

// timeline is a run drawn across time, Gantt-like: one row per invocation,
// a bar from its first send to the end of its last attempt, the attempts
// as segments of the bar, and marks for replays, replay decisions and
// operators' resolutions. Positions are percentages of the axis, which
// runs from the run's start (or its first send, if earlier) to the last
// attempt's end, the run's end, or now while the run goes.
type timeline struct {
	Start time.Time
	Span  time.Duration
	Ticks []tick
	Rows  []timelineRow
}

// tick is a label on the axis.
type tick struct {
	At    float64 // percent of the axis
	Label string
}

// timelineRow is one invocation.
type timelineRow struct {
	ID    journal.ID
	Label string // the step, with the fan-out item
	Tool  string // server/tool
	State string // a state name, or tool_error
	Title string // a tooltip summing the row up
	// Left and Width place the bar; NoBar when nothing was sent (skipped).
	Left, Width float64
	NoBar       bool
	Segments    []segment
	Marks       []mark
}

// segment is one attempt, placed within its bar (percent of the bar).
type segment struct {
	N           int
	Left, Width float64
	Failed      bool
	Title       string
}

// mark is a replay, a decision or a resolution, placed on the axis.
type mark struct {
	Kind   string // replay, decision, resolution
	Symbol string
	At     float64
	Title  string
}

// minBar is the narrowest bar drawn (percent), so that an instant shows.
const minBar = 0.8

// timelineOf lays out the invocations of run; now ends the bars of calls
// in flight while the run goes. It is a pure function of its arguments.
func timelineOf(run *journal.Run, invs []journal.Invocation, now time.Time) timeline {
	running := run.Status == journal.RunRunning
	start, end := run.StartedAt, run.StartedAt
	if run.FinishedAt != nil && run.FinishedAt.After(end) {
		end = *run.FinishedAt
	}
	for i := range invs {
		inv := &invs[i]
		for j := range inv.Attempts {
			a := &inv.Attempts[j]
			if a.SentAt.Before(start) {
				start = a.SentAt
			}
			if e := attemptEnd(inv, j, running, now); e.After(end) {
				end = e
			}
		}
		for _, d := range inv.Decisions {
			if d.At.After(end) {
				end = d.At
			}
		}
	}
	if running && now.After(end) {
		end = now
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	pos := func(t time.Time) float64 { return clamp(float64(t.Sub(start)) / float64(span) * 100) }
	tl := timeline{Start: start, Span: span}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		label := "0"
		if f > 0 {
			label = "+" + shortDuration(time.Duration(f*float64(span)))
		}
		tl.Ticks = append(tl.Ticks, tick{At: f * 100, Label: label})
	}
	for i := range invs {
		tl.Rows = append(tl.Rows, rowOf(&invs[i], running, now, pos))
	}
	return tl
}

func rowOf(inv *journal.Invocation, running bool, now time.Time, pos func(time.Time) float64) timelineRow {
	r := timelineRow{ID: inv.ID, Label: stepLabel(inv), Tool: inv.Server + "/" + inv.Tool, State: stateName(inv)}
	if len(inv.Attempts) == 0 {
		r.NoBar, r.Left = true, pos(inv.CreatedAt)
		r.Title = fmt.Sprintf("%s — %s: %s, nothing sent", r.Label, r.Tool, r.State)
		return r
	}
	first := inv.Attempts[0].SentAt
	last := attemptEnd(inv, len(inv.Attempts)-1, running, now)
	r.Left = pos(first)
	r.Width = pos(last) - r.Left
	if r.Width < minBar {
		r.Width = minBar
	}
	if r.Left+r.Width > 100 {
		r.Left = 100 - r.Width
	}
	took := last.Sub(first)
	r.Title = fmt.Sprintf("%s — %s: %s, %d attempt%s, %s", r.Label, r.Tool, r.State, len(inv.Attempts), plural(len(inv.Attempts)), shortDuration(took))
	barSpan := float64(took)
	for j := range inv.Attempts {
		a := &inv.Attempts[j]
		e := attemptEnd(inv, j, running, now)
		s := segment{N: a.N, Failed: a.Failure != "", Left: 0, Width: 100}
		if barSpan > 0 {
			s.Left = clamp(float64(a.SentAt.Sub(first)) / barSpan * 100)
			s.Width = clamp(float64(e.Sub(a.SentAt)) / barSpan * 100)
		}
		if s.Left+s.Width > 100 {
			s.Width = 100 - s.Left
		}
		s.Title = fmt.Sprintf("attempt %d: sent %s, %s", a.N, clock(a.SentAt), shortDuration(e.Sub(a.SentAt)))
		switch {
		case a.Failure != "":
			s.Title += ", " + string(a.Failure)
		case a.EndedAt == nil:
			s.Title += ", no outcome yet"
		default:
			s.Title += ", answered"
		}
		switch k := inv.Sent(j); k {
		case journal.KindFirst:
		case journal.KindReplay:
			s.Title += " (a replay)"
			r.Marks = append(r.Marks, mark{Kind: "replay", Symbol: "↻", At: pos(a.SentAt),
				Title: fmt.Sprintf("attempt %d is a replay: sent again after a lost connection, at %s", a.N, clock(a.SentAt))})
		default:
			s.Title += " (" + kindText(k) + ")"
		}
		r.Segments = append(r.Segments, s)
	}
	for _, d := range inv.Decisions {
		r.Marks = append(r.Marks, mark{Kind: "decision", Symbol: "◆", At: pos(d.At),
			Title: fmt.Sprintf("replay decision on attempt %d at %s: %s — %s (view: %s)", d.Attempt, clock(d.At), d.Verdict, d.Reason, d.View)})
	}
	for _, res := range inv.Resolutions {
		// A resolution comes when an operator gets to it, often long after
		// the run stopped: it is marked at the bar's end at the latest.
		at := pos(res.At)
		if end := r.Left + r.Width; at > end {
			at = end
		}
		r.Marks = append(r.Marks, mark{Kind: "resolution", Symbol: "✎", At: at,
			Title: fmt.Sprintf("resolved %s → %s by %s at %s: %s", res.From, res.As, res.By, res.At.UTC().Format(time.DateTime), res.Why)})
	}
	return r
}

// attemptEnd is when attempt j of inv ended: its EndedAt; for the last
// attempt of a call still in flight, now; else (an attempt whose end was
// not journaled) the invocation's last update.
func attemptEnd(inv *journal.Invocation, j int, running bool, now time.Time) time.Time {
	a := &inv.Attempts[j]
	e := inv.UpdatedAt
	switch {
	case a.EndedAt != nil:
		e = *a.EndedAt
	case j < len(inv.Attempts)-1:
		e = inv.Attempts[j+1].SentAt
	case running && inv.State == journal.StateIntent:
		e = now
	}
	if e.Before(a.SentAt) {
		e = a.SentAt
	}
	return e
}

// style places an element: left and width in percent.
func style(left, width float64) template.CSS {
	return template.CSS("left:" + pct(left) + ";width:" + pct(width))
}

// at places a mark.
func at(left float64) template.CSS { return template.CSS("left:" + pct(left)) }

func pct(v float64) string { return strconv.FormatFloat(clamp(v), 'f', 2, 64) + "%" }

func clamp(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 100:
		return 100
	}
	return v
}

// stepLabel is an invocation's step, with its fan-out item.
func stepLabel(inv *journal.Invocation) string {
	if inv.Item >= 0 {
		return fmt.Sprintf("%s[%d]", inv.Step, inv.Item)
	}
	return inv.Step
}

// kindText says why an attempt was sent, and kindTitle explains it.
func kindText(k journal.AttemptKind) string { return api.KindText(k) }

func kindTitle(k journal.AttemptKind) string {
	switch k {
	case journal.KindRetry:
		return "sent again because the step's retry asked for it"
	case journal.KindReplay:
		return "sent again after a lost connection, because the replay rule cleared it"
	case journal.KindFirstDelivery:
		return "sent again because the attempt before it provably did not run"
	case journal.KindOperatorRetry:
		return "sent again because an operator approved it"
	}
	return "the first send"
}

// stateName is an invocation's state as shown: tool_error for a call that
// completed with a tool error.
func stateName(inv *journal.Invocation) string { return api.StateLabel(inv.State, inv.ToolError) }

// shortDuration reads well at a glance: 840ms, 2.4s, 3m12s, 5h4m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
