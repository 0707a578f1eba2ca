package service

import (
	"fmt"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// eventKinds names each event kind; EngineEvent reads the names back.
var eventKinds = map[engine.EventKind]string{
	engine.RunStarted:   "run_started",
	engine.StepStarted:  "step_started",
	engine.StepProgress: "step_progress",
	engine.StepFinished: "step_finished",
	engine.RunFinished:  "run_finished",
}

// EventOf is an engine event as the API streams it (`mcpflow run -o
// jsonl` prints the same shape).
func EventOf(ev engine.Event) api.Event {
	e := api.Event{
		Kind: eventKinds[ev.Kind], Run: ev.Run.String(), Workflow: ev.Workflow, Step: ev.Step,
		Server: ev.Server, Tool: ev.Tool, Method: string(ev.Method), Attempt: ev.Attempt, Progress: ev.Progress, Total: ev.Total,
		Message: ev.Message, Text: ev.Text, ElapsedMS: ev.Elapsed.Milliseconds(), Error: ev.Err, At: time.Now().UTC(),
	}
	if ev.Item >= 0 && ev.Step != "" {
		item := ev.Item
		e.Item = &item
	}
	if !ev.Invocation.IsZero() {
		e.Invocation = ev.Invocation.String()
	}
	if ev.Kind == engine.StepStarted || ev.Kind == engine.StepFinished {
		e.State = ev.State.String()
	}
	if ev.Kind == engine.RunFinished {
		e.Status = ev.Status.String()
		e.WorkMS, e.WaitedMS = ev.Work.Milliseconds(), ev.Waited.Milliseconds()
	}
	return e
}

// EngineEvent reads an event of the stream back as the engine event it
// was made from (At aside), for front ends that render engine events.
func EngineEvent(e api.Event) (engine.Event, error) {
	ev := engine.Event{
		Workflow: e.Workflow, Step: e.Step, Item: -1, Server: e.Server, Tool: e.Tool, Method: journal.Method(e.Method),
		Attempt: e.Attempt, Progress: e.Progress, Total: e.Total, Message: e.Message, Text: e.Text,
		Elapsed: time.Duration(e.ElapsedMS) * time.Millisecond, Err: e.Error,
		Work: time.Duration(e.WorkMS) * time.Millisecond, Waited: time.Duration(e.WaitedMS) * time.Millisecond,
	}
	for k, name := range eventKinds {
		if name == e.Kind {
			ev.Kind = k
		}
	}
	if ev.Kind == 0 {
		return ev, fmt.Errorf("event kind %q: unknown", e.Kind)
	}
	var err error
	if ev.Run, err = journal.ParseID(e.Run); err != nil {
		return ev, fmt.Errorf("event run %q: %w", e.Run, err)
	}
	if e.Item != nil {
		ev.Item = *e.Item
	}
	if e.Invocation != "" {
		if ev.Invocation, err = journal.ParseID(e.Invocation); err != nil {
			return ev, fmt.Errorf("event invocation %q: %w", e.Invocation, err)
		}
	}
	if e.State != "" {
		if ev.State, err = journal.ParseState(e.State); err != nil {
			return ev, err
		}
	}
	if e.Status != "" {
		if ev.Status, err = journal.ParseRunStatus(e.Status); err != nil {
			return ev, err
		}
	}
	return ev, nil
}
