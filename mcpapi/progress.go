package mcpapi

import (
	"fmt"
	"math"
	"sync"

	"github.com/mcpflow/mcpflow/engine"
)

// progress turns a run's events into the values of notifications/progress,
// one a step started or finished and one when the run ends: total is the
// workflow's number of steps; the value counts the steps finished (a
// for_each step once an item finished) plus a half for a step that
// starts. The protocol wants each value above the last: a value that would
// not rise (items of one step, going concurrently) goes halfway from the
// last to the next whole number instead. Only the run's end reaches
// total: a for_each step may have items still to come.
type progress struct {
	mu       sync.Mutex
	total    float64
	finished map[string]bool
	last     float64
}

func newProgress(steps int) *progress {
	return &progress{total: float64(steps), finished: map[string]bool{}, last: -1}
}

// next is the notification for ev, or ok false for an event it does not
// report (a run's start, a tool's own progress).
func (p *progress) next(ev engine.Event) (value, total float64, msg string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := ev.Step
	if ev.Item >= 0 {
		name = fmt.Sprintf("%s[%d]", ev.Step, ev.Item)
	}
	var v float64
	switch ev.Kind {
	case engine.StepStarted:
		msg = "step " + name + " started"
		v = float64(len(p.finished)) + 0.5
	case engine.StepFinished:
		p.finished[ev.Step] = true
		msg = "step " + name + " finished: " + ev.State.String()
		if ev.Err != nil {
			msg += " (" + ev.Err.Code + ")"
		}
		v = float64(len(p.finished))
	case engine.RunFinished:
		p.last = p.total
		return p.total, p.total, "run " + ev.Status.String(), true
	default:
		return 0, 0, "", false
	}
	if v >= p.total || v <= p.last {
		next := math.Min(math.Floor(p.last)+1, p.total)
		v = p.last + (next-p.last)/2
	}
	p.last = v
	return v, p.total, msg, true
}
