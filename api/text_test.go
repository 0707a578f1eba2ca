package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestTexts: the one reading of a content list's text, used by the
// engine (steps.ID.text), the CLI and the follow of a worker's run.
func TestTexts(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    []string
	}{
		{`[{"type":"text","text":"a"},{"type":"image","data":"x"},{"type":"text","text":"b\nc"}]`, []string{"a", "b\nc"}},
		{`[{"type":"text","text":""}]`, []string{""}},
		{`[]`, nil},
		{`null`, nil},
		{`{"type":"text","text":"not a list"}`, nil},
		{`not json`, nil},
	} {
		if got := Texts(json.RawMessage(tc.content)); !slices.Equal(got, tc.want) {
			t.Errorf("Texts(%s) = %q, want %q", tc.content, got, tc.want)
		}
	}
	if got := ContentText(json.RawMessage(`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`)); got != "a\nb" {
		t.Errorf("ContentText = %q", got)
	}
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"a\nb", 10, "a b"}, {"héllo wörld", 5, "héllo…"}, {"", 3, ""}} {
		if got := OneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		st        journal.State
		toolError bool
		want      string
	}{
		{journal.StateCompleted, true, "tool_error"},
		{journal.StateCompleted, false, "completed"},
		{journal.StateRetryApproved, true, "retry_approved"},
		{journal.StateFailed, false, "failed"},
	} {
		if got := StateLabel(tc.st, tc.toolError); got != tc.want {
			t.Errorf("StateLabel(%s, %v) = %q, want %q", tc.st, tc.toolError, got, tc.want)
		}
	}
}
