package journal_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func TestMethodNames(t *testing.T) {
	for _, tc := range []struct {
		m            journal.Method
		name         string
		known, reads bool
	}{
		{journal.MethodCall, "tools/call", true, false},
		{journal.MethodRead, "resources/read", true, true},
		{journal.MethodPrompt, "prompts/get", true, true},
		// A newer mcpflow's method is judged as a call: the safe side.
		{journal.Method("tasks/get"), "tasks/get", false, false},
		{journal.Method("tools/call"), "tools/call", false, false},
	} {
		if got := tc.m.String(); got != tc.name {
			t.Errorf("Method(%q).String() = %q, want %q", string(tc.m), got, tc.name)
		}
		if tc.m.Known() != tc.known || tc.m.Reads() != tc.reads {
			t.Errorf("Method(%q): known %v reads %v, want %v and %v", string(tc.m), tc.m.Known(), tc.m.Reads(), tc.known, tc.reads)
		}
	}
}

// oldRecord is an invocation record as mcpflow wrote it before it
// journaled anything but tools/call: it has no method member.
const oldRecord = `{"id":"01900000-0000-7000-8000-000000000001","run_id":"01900000-0000-7000-8000-000000000002","step":"greet","item":-1,"server":"demo","tool":"greet","arguments":{"name":"Ada"},"annotations":{"readOnlyHint":true},"trust":{"server":false,"workspace":false},"idempotency_key":"01900000-0000-7000-8000-000000000001","state":"completed","attempts":[{"n":1,"sent_at":"2025-01-02T03:04:05Z","kind":"first","ended_at":"2025-01-02T03:04:06Z"}],"result":{"content":[{"type":"text","text":"Hello, Ada!"}],"is_error":false},"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06Z"}`

// TestOldRecordIsACall: a record without a method reads as a tools/call,
// and is written back byte for byte as it was (no method member appears).
func TestOldRecordIsACall(t *testing.T) {
	inv, err := journal.ParseInvocation([]byte(oldRecord))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Method != journal.MethodCall || inv.Method.String() != "tools/call" || inv.Method.Reads() {
		t.Errorf("method %q (%s), reads %v: want a tools/call", string(inv.Method), inv.Method, inv.Method.Reads())
	}
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != oldRecord {
		t.Errorf("written back as\n%s\nwant\n%s", b, oldRecord)
	}
}

// TestMethodIsJournaled: each method is kept by every backend, through the
// intent, the outcome and a read; a tools/call's record has no method
// member, as before.
func TestMethodIsJournaled(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		for _, tc := range []struct {
			m          journal.Method
			tool, args string
		}{
			{journal.MethodCall, "greet", `{"name":"Ada"}`},
			{journal.MethodRead, "file:///demo/notes.txt", `{"uri":"file:///demo/notes.txt"}`},
			{journal.MethodPrompt, "review", `{"topic":"journals"}`},
		} {
			in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "demo", Tool: tc.tool, Method: tc.m,
				Arguments: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Finish(in, journal.Outcome{State: done, Result: &journal.Result{StructuredContent: json.RawMessage(`{"contents":[]}`)}}); err != nil {
				t.Fatal(err)
			}
			inv, err := j.Invocation(in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Method != tc.m || inv.Tool != tc.tool || inv.State != done {
				t.Errorf("%s: read back method %q tool %q state %s", tc.m, string(inv.Method), inv.Tool, inv.State)
			}
			b := raw(t, j.Invocation, in.ID)
			if has := bytes.Contains(b, []byte(`"method":`)); has != (tc.m != journal.MethodCall) {
				t.Errorf("%s: record %s", tc.m, b)
			}
		}
	})
}
