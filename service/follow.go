package service

import (
	"context"
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
	seen := map[journal.ID]journal.State{}
	started := false
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		rep, err := s.report(id, false)
		if err != nil {
			return nil, err
		}
		run := rep.Run
		if !started && run.Status == journal.RunRunning {
			started = true
			events(engine.Event{Kind: engine.RunStarted, Run: id, Workflow: run.Workflow})
		}
		for _, inv := range rep.Invocations {
			prev, ok := seen[inv.ID]
			if ok && prev == inv.State {
				continue
			}
			seen[inv.ID] = inv.State
			ev := engine.Event{Run: id, Step: inv.Step, Item: inv.Item, Server: inv.Server, Tool: inv.Tool,
				Invocation: inv.ID, State: inv.State, Attempt: len(inv.Attempts), Err: inv.Error}
			if !ok {
				ev.Kind = engine.StepStarted
				events(ev)
			}
			if inv.State != journal.StateIntent {
				ev.Kind = engine.StepFinished
				if inv.State == journal.StateCompleted {
					ev.Text = contentText(inv.Result)
				}
				if n := len(inv.Attempts); n > 0 && inv.Attempts[n-1].EndedAt != nil {
					ev.Elapsed = inv.Attempts[n-1].EndedAt.Sub(inv.Attempts[n-1].SentAt)
				}
				events(ev)
			}
		}
		if run.Status != journal.RunRunning {
			if started {
				ev := engine.Event{Kind: engine.RunFinished, Run: id, Workflow: run.Workflow, Status: run.Status, Err: run.Error}
				if run.FinishedAt != nil {
					ev.Elapsed = run.FinishedAt.Sub(run.StartedAt)
				}
				events(ev)
			}
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// contentText is a result's text content on one line, as the engine
// reports a completed call (capped at 200 characters).
func contentText(res *journal.Result) string {
	if res == nil {
		return ""
	}
	return api.OneLine(api.ContentText(res.Content), 200)
}
