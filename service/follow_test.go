package service_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// TestSeenReportKeepsText: a call settled in the journal is reported with
// its text content exactly, newlines and all, as the engine reports a live
// one: front ends shorten it where they show it to people.
func TestSeenReportKeepsText(t *testing.T) {
	text := "line one\nline two\n\tindented"
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": text}})
	run, inv := journal.NewID(), journal.NewID()
	rep := &service.Report{
		Run: &journal.Run{ID: run, Workflow: "w", Status: journal.RunSucceeded},
		Invocations: []journal.Invocation{{ID: inv, RunID: run, Step: "s", Item: -1, Server: "demo", Tool: "upper",
			State: journal.StateCompleted, Result: &journal.Result{Content: content}}},
	}
	var got []engine.Event
	var seen service.Seen
	seen.Report(rep, func(ev engine.Event) { got = append(got, ev) })
	if len(got) != 2 || got[1].Kind != engine.StepFinished {
		t.Fatalf("events %+v, want a step started and finished", got)
	}
	if got[1].Text != text {
		t.Errorf("text = %q, want %q", got[1].Text, text)
	}
}
