package api

import (
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// Event is a run event as the API streams it (server-sent events, one JSON
// object per event).
type Event struct {
	// Kind is run_started, step_started, step_progress, step_finished or
	// run_finished (a run's progress), or a person's decision on it:
	// EventApproval, EventAnswer (see OfPerson).
	Kind       string  `json:"kind"`
	Run        string  `json:"run"`
	Workflow   string  `json:"workflow,omitempty"`
	Step       string  `json:"step,omitempty"`
	Item       *int    `json:"item,omitempty"`
	Server     string  `json:"server,omitempty"`
	Tool       string  `json:"tool,omitempty"`
	Method     string  `json:"method,omitempty"` // resources/read or prompts/get; absent for a tools/call
	Invocation string  `json:"invocation,omitempty"`
	State      string  `json:"state,omitempty"`
	Attempt    int     `json:"attempt,omitempty"`
	Progress   float64 `json:"progress,omitempty"`
	Total      float64 `json:"total,omitempty"`
	Message    string  `json:"message,omitempty"`
	Text       string  `json:"text,omitempty"`
	// ElapsedMS is a step's time; for run_finished the run's wall time
	// (start to end, resumes and all), with WorkMS the time a call was in
	// flight and WaitedMS the time it waited for an approval, an operator
	// or a resume (see Timing).
	ElapsedMS int64          `json:"elapsed_ms,omitempty"`
	WorkMS    int64          `json:"work_ms,omitempty"`
	WaitedMS  int64          `json:"waited_ms,omitempty"`
	Status    string         `json:"status,omitempty"`
	Error     *journal.Error `json:"error,omitempty"`
	At        time.Time      `json:"at"`
}

// EventApproval is the kind of the event of a decision on a step's
// approval gate: Step, State (approved or rejected), Text (the reason).
// It is not a run's progress: a run it continues reports its own events.
const EventApproval = "approval_decided"

// EventAnswer is the kind of the event of an answer to a question a
// server asked during a step's call: Step, and Text saying who answered
// which question (never the answer).
const EventAnswer = "input_answered"

// OfPerson reports whether e is a person's decision on a run (an approval,
// an answer) rather than the run's progress, which a follower of the run
// passes over: a decision that continues the run makes the run report its
// own progress.
func (e Event) OfPerson() bool { return e.Kind == EventApproval || e.Kind == EventAnswer }
