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
// as segments of the bar coloured by how each ended, and marks for
// replays, interrupted attempts, replay decisions and operators'
// resolutions. Positions are percentages of the axis, which runs from the
// run's start to its end (now while it goes).
//
// The axis shows the work: a gap in which no call was in flight (api.Gap:
// waiting for an approval, for an operator, for a resume after mcpflow
// stopped; or idle) is drawn as a band of its own, marked with its length
// and cause, and a long one is compressed to a fixed width, so that a
// 15-minute wait does not squeeze the calls around it into slivers.
type timeline struct {
	Start time.Time
	// Wall is the axis's time, Work the time a call was in flight.
	Wall, Work time.Duration
	Ticks      []tick
	Gaps       []gapBand
	Rows       []timelineRow
}

// tick is a label on the axis.
type tick struct {
	At    float64 // percent of the axis
	Label string
}

// gapBand is a gap of the run, placed on the axis.
type gapBand struct {
	Left, Width float64
	Kind        string // an api.GapKind name
	Label       string // its length, for the axis
	Title       string
	// Compressed: drawn narrower than its time.
	Compressed bool
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
	// Outcome is how the attempt ended (api.AttemptOutcome): answered,
	// tool_error, a failure class, interrupted, in_flight, no_outcome.
	Outcome string
	// Failed: the attempt ended without a result it could use (hatched).
	Failed bool
	Title  string
}

// mark is a replay, an interrupted attempt, a decision or a resolution,
// placed on the axis.
type mark struct {
	Kind   string // replay, interrupted, decision, resolution
	Symbol string
	At     float64
	Title  string
}

// minBar is the narrowest bar drawn (percent), so that an instant shows.
const minBar = 0.8

// Compressed gaps: each is drawn gapWidth wide (percent), and all of them
// together at most gapsWidth, when their time would take more.
const (
	gapWidth  = 6.0
	gapsWidth = 36.0
)

// timelineOf lays out the invocations of run; now ends the bars of calls
// in flight while the run goes. It is a pure function of its arguments.
func timelineOf(run *journal.Run, invs []journal.Invocation, now time.Time) timeline {
	live := run.Status == journal.RunRunning
	t := api.TimingOf(run, invs, now)
	ax := axisOf(t)
	tl := timeline{Start: t.Start, Wall: t.Wall, Work: t.Work}
	for _, f := range []float64{0, 25, 50, 75, 100} {
		label := "0"
		if f > 0 {
			label = "+" + shortDuration(ax.timeAt(f).Sub(t.Start))
		}
		tl.Ticks = append(tl.Ticks, tick{At: f, Label: label})
	}
	for i, g := range t.Gaps {
		left, right := ax.pos(g.From), ax.pos(g.To)
		tl.Gaps = append(tl.Gaps, gapBand{Left: left, Width: right - left, Kind: g.Kind.String(), Label: shortDuration(g.Duration()),
			Title:      fmt.Sprintf("+%s: %s, %s", shortDuration(g.From.Sub(t.Start)), g.Text(), shortDuration(g.Duration())),
			Compressed: ax.squeezed[i]})
	}
	for i := range invs {
		tl.Rows = append(tl.Rows, rowOf(&invs[i], live, now, ax.pos))
	}
	return tl
}

// axis maps times to positions: pieces of time, each drawn from left to
// left+width percent, the gaps compressed.
type axis struct {
	pieces []piece
	// squeezed says which of the timing's gaps are compressed.
	squeezed []bool
}

type piece struct {
	from, to    time.Time
	left, width float64
}

// axisOf lays out t's axis. A gap is compressed to gapWidth (less when
// there are many) when its time would take more; the rest of the axis is
// shared by time. A gap that would be narrower at that scale is drawn at
// it.
func axisOf(t api.Timing) axis {
	if t.Wall <= 0 {
		return axis{pieces: []piece{{from: t.Start, to: t.Start.Add(time.Millisecond), width: 100}}, squeezed: make([]bool, len(t.Gaps))}
	}
	w := gapWidth
	if n := float64(len(t.Gaps)); n*w > gapsWidth {
		w = gapsWidth / n
	}
	squeezed := make([]bool, len(t.Gaps))
	for i := range t.Gaps {
		squeezed[i] = true
	}
	var scale float64 // percent per nanosecond of the time drawn at scale
	for {
		rest, room := t.Wall, 100.0
		for i, g := range t.Gaps {
			if squeezed[i] {
				rest -= g.Duration()
				room -= w
			}
		}
		if rest <= 0 {
			// Nothing but gaps: all at scale.
			scale = 100 / float64(t.Wall)
			clear(squeezed)
			break
		}
		scale = room / float64(rest)
		changed := false
		for i, g := range t.Gaps {
			if squeezed[i] && float64(g.Duration())*scale <= w {
				squeezed[i], changed = false, true
			}
		}
		if !changed {
			break
		}
	}
	ax := axis{squeezed: squeezed}
	left, at := 0.0, t.Start
	add := func(to time.Time, width float64) {
		if to.After(at) {
			ax.pieces = append(ax.pieces, piece{from: at, to: to, left: left, width: width})
			left += width
			at = to
		}
	}
	for i, g := range t.Gaps {
		add(g.From, float64(g.From.Sub(at))*scale)
		width := float64(g.Duration()) * scale
		if squeezed[i] {
			width = w
		}
		add(g.To, width)
	}
	add(t.End, float64(t.End.Sub(at))*scale)
	if len(ax.pieces) == 0 {
		ax.pieces = []piece{{from: t.Start, to: t.Start.Add(time.Millisecond), width: 100}}
	}
	return ax
}

// pos is where t is on the axis (percent), clamped to it.
func (a axis) pos(t time.Time) float64 {
	first := a.pieces[0]
	if !t.After(first.from) {
		return first.left
	}
	for _, p := range a.pieces {
		if !t.After(p.to) {
			return clamp(p.left + float64(t.Sub(p.from))/float64(p.to.Sub(p.from))*p.width)
		}
	}
	last := a.pieces[len(a.pieces)-1]
	return clamp(last.left + last.width)
}

// timeAt is the time at position x (percent): pos's inverse.
func (a axis) timeAt(x float64) time.Time {
	for _, p := range a.pieces {
		if x <= p.left+p.width && p.width > 0 {
			return p.from.Add(time.Duration((x - p.left) / p.width * float64(p.to.Sub(p.from))))
		}
	}
	return a.pieces[len(a.pieces)-1].to
}

func rowOf(inv *journal.Invocation, live bool, now time.Time, pos func(time.Time) float64) timelineRow {
	r := timelineRow{ID: inv.ID, Label: stepLabel(inv), Tool: api.TargetOf(inv), State: stateName(inv)}
	if len(inv.Attempts) == 0 {
		r.NoBar, r.Left = true, pos(inv.CreatedAt)
		r.Title = fmt.Sprintf("%s — %s: %s, nothing sent", r.Label, r.Tool, r.State)
		return r
	}
	// The bar goes from the first send to the last end known: an
	// interrupted attempt ends where it was sent (its end is not known).
	first, last := inv.Attempts[0].SentAt, inv.Attempts[0].SentAt
	ends := make([]time.Time, len(inv.Attempts))
	for j := range inv.Attempts {
		a := &inv.Attempts[j]
		e, ok := api.AttemptEnd(inv, j, live, now)
		if !ok {
			e = a.SentAt
		}
		ends[j] = e
		if e.After(last) {
			last = e
		}
	}
	r.Left = pos(first)
	r.Width = pos(last) - r.Left
	if r.Width < minBar {
		r.Width = minBar
	}
	if r.Left+r.Width > 100 {
		r.Left = 100 - r.Width
	}
	r.Title = fmt.Sprintf("%s — %s: %s, %d attempt%s, %s", r.Label, r.Tool, r.State, len(inv.Attempts), plural(len(inv.Attempts)), callTook(inv, live, now))
	for j := range inv.Attempts {
		a := &inv.Attempts[j]
		s := segment{N: a.N, Outcome: api.AttemptOutcome(inv, j, live)}
		s.Failed = s.Outcome != api.OutcomeAnswered && s.Outcome != api.OutcomeInFlight
		s.Left = clamp((pos(a.SentAt) - r.Left) / r.Width * 100)
		s.Width = clamp((pos(ends[j]) - pos(a.SentAt)) / r.Width * 100)
		if s.Left+s.Width > 100 {
			s.Width = 100 - s.Left
		}
		s.Title = fmt.Sprintf("attempt %d: sent %s, ", a.N, clock(a.SentAt))
		switch s.Outcome {
		case api.OutcomeInterrupted:
			s.Title += "interrupted: mcpflow stopped while it was in flight; how long it ran is not known"
			found := ""
			if a.EndedAt != nil {
				found = fmt.Sprintf(" (a resume found it at %s)", clock(*a.EndedAt))
			}
			r.Marks = append(r.Marks, mark{Kind: "interrupted", Symbol: "✕", At: pos(a.SentAt),
				Title: fmt.Sprintf("attempt %d was interrupted: mcpflow stopped while it was in flight%s", a.N, found)})
		case api.OutcomeInFlight:
			s.Title += shortDuration(ends[j].Sub(a.SentAt)) + ", no outcome yet"
		case api.OutcomeNone:
			s.Title += "no outcome recorded"
		case api.OutcomeAnswered:
			s.Title += shortDuration(ends[j].Sub(a.SentAt)) + ", answered"
		case api.ToolError:
			s.Title += shortDuration(ends[j].Sub(a.SentAt)) + ", the tool answered with an error"
		default:
			s.Title += shortDuration(ends[j].Sub(a.SentAt)) + ", " + s.Outcome
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

// callTook is how long a call took, as the web UI says it: the time of its
// attempts (api.CallTimingOf), its interrupted attempts apart.
func callTook(inv *journal.Invocation, live bool, now time.Time) string {
	return api.CallTimingOf(inv, live, now).Text(shortDuration, "—")
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
func stepLabel(inv *journal.Invocation) string { return api.StepLabel(inv) }

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
func stateName(inv *journal.Invocation) string { return api.InvocationState(inv) }

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
