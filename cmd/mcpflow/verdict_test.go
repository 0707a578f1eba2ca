package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

// TestServersToolsVerdictIsTheEnginesVerdict: for every annotation shape —
// safe, unsafe, contradictory, absent and malformed — the replay verdict
// `mcpflow servers tools` shows is the one the engine journals when a call
// of that tool loses its connection (the send-time decision), because both
// come from replay.Judge.
func TestServersToolsVerdictIsTheEnginesVerdict(t *testing.T) {
	c := newCLI(t)
	if r := c.run("trust", "add"); r.code != 0 {
		t.Fatalf("trust add: %+v", r)
	}
	conf := "servers:\n  demo: {builtin: demo, trust: true}\n"
	if err := os.WriteFile(filepath.Join(c.workspace, "mcpflow.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// upper sends malformed annotations: a hint that is null, not a boolean
	// (go-sdk's typed listing accepts it; mcpflow reads the raw one).
	c.env = append(c.env, "MCPFLOW_DEMO_ANNOTATIONS=upper={\"idempotentHint\":null}")
	r := c.run("servers", "tools", "demo", "-o", "json")
	if r.code != 0 {
		t.Fatalf("servers tools: %+v", r)
	}
	var tools []api.Tool
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	for _, tv := range tools {
		verdict := "outcome_unknown"
		if tv.Replay.Safe {
			verdict = "replay"
		}
		shown[tv.Name] = verdict + "/" + tv.Replay.Reason
	}
	calls := map[string]string{
		"greet":              `{"name": "Ada"}`,
		"upper":              `{"text": "a"}`,
		"ledger_append":      `{"entry": "e"}`,
		"put_record":         `{"key": "k", "value": "v"}`,
		"not_idempotent":     `{}`,
		"contradictory_read": `{}`,
	}
	want := map[string]string{
		"greet":              "replay/declared_read_only",
		"upper":              "outcome_unknown/malformed_annotations",
		"ledger_append":      "outcome_unknown/no_annotations",
		"put_record":         "replay/declared_idempotent",
		"not_idempotent":     "outcome_unknown/not_declared_idempotent_or_read_only",
		"contradictory_read": "outcome_unknown/contradictory_read_only",
	}
	for tool, args := range calls {
		if shown[tool] != want[tool] {
			t.Errorf("servers tools shows %s for %s, want %s", shown[tool], tool, want[tool])
		}
		env := c.env
		c.env = append(c.env, "MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL="+tool)
		r := c.run("call", "demo", tool, "--args", args)
		c.env = env
		if r.code != exitBlocked {
			t.Errorf("call %s with its answer lost: exit %d, want 3 (blocked)\n%s%s", tool, r.code, r.stdout, r.stderr)
		}
	}
	j := c.openJournal()
	defer j.Close()
	invs, err := j.Invocations(journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if len(inv.Decisions) == 0 {
			t.Errorf("%s: no decision journaled", inv.Tool)
			continue
		}
		d := inv.Decisions[0]
		if got := string(d.Verdict) + "/" + d.Reason; got != shown[inv.Tool] || d.View != "send_time" {
			t.Errorf("%s: the engine journaled %s (%s view); servers tools shows %s", inv.Tool, got, d.View, shown[inv.Tool])
		}
	}
	if len(invs) != len(calls) {
		t.Errorf("%d invocations journaled, want %d", len(invs), len(calls))
	}
}
