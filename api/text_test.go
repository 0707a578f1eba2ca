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

// TestAttemptsOfARecordWithoutKinds: a record journaled before attempts
// had kinds is shown with the kinds its decisions say — an operator's
// retry, once flagged a replay, is an operator's retry — without changing
// the record; and the counts name each kind.
func TestAttemptsOfARecordWithoutKinds(t *testing.T) {
	inv := &journal.Invocation{
		Attempts: []journal.Attempt{{N: 1, Failure: "connection_lost"}, {N: 2, Replay: true, Failure: "connection_lost"}, {N: 3, Replay: true}},
		Decisions: []journal.Decision{{Attempt: 1, Verdict: "replay", View: "send_time"}, {Attempt: 1, Verdict: "replay", View: "rediscovered"},
			{Attempt: 2, Verdict: "outcome_unknown", View: "send_time"}, {Attempt: 2, Verdict: "replay", View: "operator"}},
	}
	got := AttemptsOf(inv)
	want := []journal.AttemptKind{journal.KindFirst, journal.KindReplay, journal.KindOperatorRetry}
	for i, a := range got {
		if a.Kind != want[i] || a.Replay != (want[i] == journal.KindReplay) {
			t.Errorf("attempt %d shown as %q (replay %v), want %q", a.N, a.Kind, a.Replay, want[i])
		}
	}
	if inv.Attempts[1].Kind != "" || !inv.Attempts[2].Replay {
		t.Errorf("the record was changed: %+v", inv.Attempts)
	}
	if s := AttemptsText(inv); s != "3 (1 replay, 1 operator retry)" {
		t.Errorf("AttemptsText = %q", s)
	}
	for _, tc := range []struct {
		inv  journal.Invocation
		want string
	}{
		{journal.Invocation{}, "0"},
		{journal.Invocation{Attempts: []journal.Attempt{{N: 1, Kind: journal.KindFirst}}}, "1"},
		{journal.Invocation{Attempts: []journal.Attempt{{N: 1, Kind: journal.KindFirst}, {N: 2, Kind: journal.KindRetry}, {N: 3, Kind: journal.KindRetry},
			{N: 4, Kind: journal.KindFirstDelivery}}}, "4 (2 retries, 1 first delivery)"},
	} {
		if s := AttemptsText(&tc.inv); s != tc.want {
			t.Errorf("AttemptsText = %q, want %q", s, tc.want)
		}
	}
}

func TestTargetAndResultText(t *testing.T) {
	for _, tc := range []struct {
		m          journal.Method
		name, want string
	}{
		{journal.MethodCall, "greet", "demo/greet"},
		{journal.MethodRead, "file:///demo/notes.txt", "resource demo file:///demo/notes.txt"},
		{journal.MethodPrompt, "review", "prompt demo review"},
		{journal.Method("tasks/get"), "x", "demo/x"},
	} {
		if got := Target(tc.m, "demo", tc.name); got != tc.want {
			t.Errorf("Target(%s, demo, %s) = %q, want %q", tc.m, tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		m                   journal.Method
		content, structured string
		want                string
	}{
		{journal.MethodCall, `[{"type":"text","text":"a"},{"type":"image","data":"AA"},{"type":"text","text":"b"}]`, `{"x":1}`, "a\nb"},
		{journal.MethodRead, ``, `{"contents":[{"uri":"u","text":"a"},{"uri":"b","blob":"AA"},{"uri":"c","text":""}]}`, "a\n"},
		{journal.MethodPrompt, ``, `{"messages":[{"role":"user","content":{"type":"text","text":"q"}},{"role":"assistant","content":{"type":"image","data":"AA"}},{"role":"assistant","content":{"type":"text","text":"r"}}]}`, "q\nr"},
		{journal.MethodRead, ``, `{"truncated":true}`, ""},
	} {
		if got := ResultText(tc.m, json.RawMessage(tc.content), json.RawMessage(tc.structured)); got != tc.want {
			t.Errorf("ResultText(%s) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
