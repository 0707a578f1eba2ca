package service

import (
	"context"
	"errors"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// followEvery is how often Follow reads the journal.
const followEvery = 200 * time.Millisecond

// Follow follows a run from the journal until it is no longer running —
// a run that goes in another process sharing the journal (a worker) —
// reporting what each read finds as events: a call started, a call
// settled, the run's end. Progress within a call is not journaled, so it
// is not reported. It returns the run as committed when it ended, or ctx's
// error.
func (s *Service) Follow(ctx context.Context, ref string, events func(engine.Event)) (*Report, error) {
	id, err := s.findRun(ref)
	if err != nil {
		return nil, err
	}
	return FollowReads(ctx, func() (*Report, error) { return s.report(id, false) }, nil, events)
}

// FollowReads follows a run by reading it (read: from the journal, or
// through the process that serves it) as Follow does, until it is no
// longer running: every followEvery while reads bring news, less often
// (up to followQuiet) while they do not. goes, when set, says whether a
// running run still goes somewhere (a proxy session's process:
// ProxyAlive): once it does not, and a read after that still finds the
// run running, FollowReads returns *AbandonedError.
func FollowReads(ctx context.Context, read func() (*Report, error), goes func(*journal.Run) bool, events func(engine.Event)) (*Report, error) {
	if events == nil {
		events = func(engine.Event) {}
	}
	var seen Seen
	every, gone := followEvery, false
	for {
		rep, err := read()
		if err != nil {
			return nil, err
		}
		run := rep.Run
		news := false
		seen.Report(rep, func(ev engine.Event) {
			news = true
			events(ev)
		})
		if run.Status != journal.RunRunning {
			if seen.started {
				t := api.TimingOf(run, rep.Invocations, time.Now())
				events(engine.Event{Kind: engine.RunFinished, Run: run.ID, Workflow: run.Workflow, Status: run.Status, Err: run.Error,
					Elapsed: t.Wall, Work: t.Work, Waited: t.Waited()})
			}
			return rep, nil
		}
		if goes != nil && !goes(run) {
			if gone {
				return nil, &AbandonedError{Run: run.ID}
			}
			gone = true // read once more: it may have ended as its process did
			continue
		}
		gone = false
		if every = min(every*2, followQuiet); news {
			every = followEvery
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// followQuiet is how often FollowReads reads a run that has not moved for
// a while.
const followQuiet = time.Second

// FollowProxy follows run id, a proxy session's going in its own process,
// whose events reach no server: from what read reads of it, until it ends
// or its process is gone (*AbandonedError: the next proxy session or
// resume settles it). ctx ending stops following (*DetachedError).
func FollowProxy(ctx context.Context, id journal.ID, read func() (*Report, error), events func(engine.Event)) (*Report, error) {
	rep, err := FollowReads(ctx, read, ProxyAlive, events)
	if errors.Is(err, context.Canceled) {
		return nil, &DetachedError{Run: id}
	}
	return rep, err
}

// Seen is what a follower of a run has reported of it so far, as events:
// the run's start, each call started, each call settled. A follower that
// attaches to a run going elsewhere first reports what the run did before
// (Report), then only what it has not reported yet (Fresh), as gh run
// watch shows a run from its start.
type Seen struct {
	started bool
	states  map[journal.ID]journal.State
}

// Report hands on, as events, what rep shows of a run that has not been
// reported: its start (while it runs), then each invocation started or
// settled since. It does not report the run's end.
func (s *Seen) Report(rep *Report, events func(engine.Event)) {
	id := rep.Run.ID
	if s.states == nil {
		s.states = map[journal.ID]journal.State{}
	}
	if rep.Run.Status == journal.RunRunning && s.Fresh(engine.Event{Kind: engine.RunStarted}) {
		events(engine.Event{Kind: engine.RunStarted, Run: id, Workflow: rep.Run.Workflow})
	}
	for _, inv := range rep.Invocations {
		prev, known := s.states[inv.ID]
		if known && prev == inv.State {
			continue
		}
		s.states[inv.ID] = inv.State
		ev := engine.Event{Run: id, Step: inv.Step, Item: inv.Item, Server: inv.Server, Tool: inv.Tool, Method: inv.Method,
			Invocation: inv.ID, State: inv.State, Attempt: len(inv.Attempts), Err: inv.Error}
		if !known {
			ev.Kind = engine.StepStarted
			events(ev)
		}
		if inv.State != journal.StateIntent {
			ev.Kind = engine.StepFinished
			if inv.State == journal.StateCompleted {
				ev.Text = contentText(inv.Method, inv.Result)
			}
			if n := len(inv.Attempts); n > 0 {
				if end, ok := api.AttemptEnd(&inv, n-1, false, time.Time{}); ok {
					ev.Elapsed = end.Sub(inv.Attempts[n-1].SentAt)
				}
			}
			events(ev)
		}
	}
}

// Fresh reports whether a live event says something not reported yet, and
// notes it: a run's start once, a call's start once, a call's settling
// once per state. Progress and the run's end are always fresh.
func (s *Seen) Fresh(ev engine.Event) bool {
	if s.states == nil {
		s.states = map[journal.ID]journal.State{}
	}
	switch ev.Kind {
	case engine.RunStarted:
		fresh := !s.started
		s.started = true
		return fresh
	case engine.StepStarted:
		if _, known := s.states[ev.Invocation]; known {
			return false
		}
		s.states[ev.Invocation] = journal.StateIntent
	case engine.StepFinished:
		if st, known := s.states[ev.Invocation]; known && st == ev.State {
			return false
		}
		s.states[ev.Invocation] = ev.State
	}
	return true
}

// contentText is a result's text as the engine reports a completed
// request (api.ResultText), nothing shortened.
func contentText(m journal.Method, res *journal.Result) string {
	if res == nil {
		return ""
	}
	return api.ResultText(m, res.Content, res.StructuredContent)
}
