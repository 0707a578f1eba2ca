package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// Event is a run event as the API streams it (server-sent events, one JSON
// object per event).
type Event struct {
	Kind       string         `json:"kind"` // run_started, step_started, step_progress, step_finished, run_finished
	Run        string         `json:"run"`
	Workflow   string         `json:"workflow,omitempty"`
	Step       string         `json:"step,omitempty"`
	Item       *int           `json:"item,omitempty"`
	Server     string         `json:"server,omitempty"`
	Tool       string         `json:"tool,omitempty"`
	Invocation string         `json:"invocation,omitempty"`
	State      string         `json:"state,omitempty"`
	Attempt    int            `json:"attempt,omitempty"`
	Progress   float64        `json:"progress,omitempty"`
	Total      float64        `json:"total,omitempty"`
	Message    string         `json:"message,omitempty"`
	Text       string         `json:"text,omitempty"`
	ElapsedMS  int64          `json:"elapsed_ms,omitempty"`
	Status     string         `json:"status,omitempty"`
	Error      *journal.Error `json:"error,omitempty"`
	At         time.Time      `json:"at"`
}

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
func EventOf(ev engine.Event) Event {
	e := Event{
		Kind: eventKinds[ev.Kind], Run: ev.Run.String(), Workflow: ev.Workflow, Step: ev.Step,
		Server: ev.Server, Tool: ev.Tool, Attempt: ev.Attempt, Progress: ev.Progress, Total: ev.Total,
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
	}
	return e
}

// EngineEvent reads an event of the stream back as the engine event it
// was made from (At aside), for front ends that render engine events.
func EngineEvent(e Event) (engine.Event, error) {
	ev := engine.Event{
		Workflow: e.Workflow, Step: e.Step, Item: -1, Server: e.Server, Tool: e.Tool,
		Attempt: e.Attempt, Progress: e.Progress, Total: e.Total, Message: e.Message, Text: e.Text,
		Elapsed: time.Duration(e.ElapsedMS) * time.Millisecond, Err: e.Error,
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

// hub hands every event to the subscribers that want it. A subscriber that
// falls behind by more than its buffer is dropped (its stream ends; a
// client reconnects and reads the run's state from the journal).
type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]bool
	closed bool
}

type subscriber struct {
	run string // "" for every run
	ch  chan Event
}

func (h *hub) init() { h.subs = map[*subscriber]bool{} }

// subscribe returns a subscription to the events of run ("" for all), and
// false when the hub is closed.
func (h *hub) subscribe(run string) (*subscriber, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	s := &subscriber{run: run, ch: make(chan Event, 256)}
	h.subs[s] = true
	return s, true
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s] {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.run != "" && s.run != e.Run {
			continue
		}
		select {
		case s.ch <- e:
		default: // too slow: dropped
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}
