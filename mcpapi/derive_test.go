package mcpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/workflow"
)

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"hello", "hello"},
		{"gated-record", "gated-record"},
		{"Greet & Shout!", "Greet_Shout"},
		{"deploy.prod v2", "deploy_prod_v2"},
		{"  spaced  out  ", "spaced_out"},
		{"_private_", "private"},
		{"café crème", "caf_cr_me"},
		{"über/alles", "ber_alles"},
		{"日本語", "workflow"},
		{"", "workflow"},
		{"a__b", "a__b"},
		{strings.Repeat("x", 70), strings.Repeat("x", 64)},
		{strings.Repeat("y", 63) + " z", strings.Repeat("y", 63)},
	} {
		if got := ToolName(tc.in); got != tc.want {
			t.Errorf("ToolName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAssignNamesReportsCollisions(t *testing.T) {
	offered, collisions := assignNames(map[string]string{
		"/w/a.yaml":     "deploy prod",
		"/w/b.yaml":     "deploy.prod",
		"/w/c.yaml":     "hello",
		"/w/d.yaml":     "list runs",
		"/w/e.yaml":     "show_run",
		"/w/other.yaml": "deploy-prod",
	})
	if want := map[string]string{"hello": "/w/c.yaml", "deploy-prod": "/w/other.yaml"}; !reflect.DeepEqual(offered, want) {
		t.Errorf("offered %v, want %v", offered, want)
	}
	want := []Collision{
		{Tool: "deploy_prod", Files: []string{"/w/a.yaml", "/w/b.yaml"}},
		{Tool: "list_runs", Files: []string{"/w/d.yaml"}},
		{Tool: "show_run", Files: []string{"/w/e.yaml"}},
	}
	if !reflect.DeepEqual(collisions, want) {
		t.Errorf("collisions %+v, want %+v", collisions, want)
	}
	if s := collisions[0].String(); !strings.Contains(s, "/w/a.yaml, /w/b.yaml") || !strings.Contains(s, "none of them is offered") {
		t.Errorf("collision says %q", s)
	}
}

func load(t *testing.T, src string) *workflow.Workflow {
	t.Helper()
	wf, err := workflow.Load("wf.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

const demoServer = "servers:\n  demo:\n    builtin: demo\n"

func TestInputSchema(t *testing.T) {
	for _, tc := range []struct {
		name, inputs, want string
	}{
		{"none", "", `{"additionalProperties":false,"properties":{},"type":"object"}`},
		{"types and required", `inputs:
  name: {type: string, description: who, required: true}
  n: {type: number}
  ok: {type: boolean}
  obj: {type: object}
  list: {type: array}
`, `{"additionalProperties":false,"properties":{"list":{"type":"array"},"n":{"type":"number"},"name":{"description":"who","type":"string"},"obj":{"type":"object"},"ok":{"type":"boolean"}},"required":["name"],"type":"object"}`},
		{"default makes it optional", `inputs:
  region: {type: string, required: true, default: eu-west-1}
  count: {type: number, default: 3}
`, `{"additionalProperties":false,"properties":{"count":{"default":3,"type":"number"},"region":{"default":"eu-west-1","type":"string"}},"type":"object"}`},
		{"enum", `inputs:
  region: {type: string, enum: [eu-west-1, us-east-1], default: us-east-1}
  size: {type: number, enum: [1, 2, 4]}
`, `{"additionalProperties":false,"properties":{"region":{"default":"us-east-1","enum":["eu-west-1","us-east-1"],"type":"string"},"size":{"enum":[1,2,4],"type":"number"}},"type":"object"}`},
		{"secret is writeOnly, its default and enum not shown", `inputs:
  token: {type: string, secret: true, required: true}
  pin: {type: string, secret: true, default: "1234", enum: ["1234", "0000"]}
`, `{"additionalProperties":false,"properties":{"pin":{"type":"string","writeOnly":true},"token":{"type":"string","writeOnly":true}},"required":["token"],"type":"object"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wf := load(t, "name: x\n"+tc.inputs+demoServer+"steps:\n  - {id: a, server: demo, tool: greet}\n")
			got, _ := json.Marshal(InputSchema(wf))
			if string(got) != tc.want {
				t.Errorf("schema\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestAnnotate(t *testing.T) {
	tool := func(raw string) StepHints { return HintsOf(json.RawMessage(raw), true) }
	read := StepHints{Read: true}
	unknown := HintsOf(nil, false)
	type want struct {
		ro, idem, destr bool
		open            string // "", "true", "false"
	}
	for _, tc := range []struct {
		name  string
		steps []StepHints
		want  want
	}{
		{"reads only", []StepHints{read, read}, want{true, true, false, ""}},
		{"read-only tools", []StepHints{tool(`{"readOnlyHint":true}`), read}, want{true, true, false, ""}},
		{"a read-only tool that says it is closed", []StepHints{tool(`{"readOnlyHint":true,"openWorldHint":false}`)}, want{true, true, false, "false"}},
		{"idempotent, destructive by default", []StepHints{tool(`{"readOnlyHint":true}`), tool(`{"idempotentHint":true}`)}, want{false, true, true, ""}},
		{"idempotent and not destructive", []StepHints{tool(`{"idempotentHint":true,"destructiveHint":false}`)}, want{false, true, false, ""}},
		{"additive, not idempotent", []StepHints{tool(`{"destructiveHint":false}`)}, want{false, false, false, ""}},
		{"no annotations", []StepHints{read, tool(``)}, want{false, false, true, ""}},
		{"empty annotations", []StepHints{tool(`{}`)}, want{false, false, true, ""}},
		{"malformed annotations are unknown", []StepHints{tool(`{"readOnlyHint":"yes"}`)}, want{false, false, true, ""}},
		{"unreachable server: safe defaults", []StepHints{read, unknown}, want{false, false, true, ""}},
		{"one unknown spoils read-only tools", []StepHints{tool(`{"readOnlyHint":true}`), unknown}, want{false, false, true, ""}},
		{"open world declared by one", []StepHints{tool(`{"readOnlyHint":true,"openWorldHint":false}`), tool(`{"readOnlyHint":true,"openWorldHint":true}`)}, want{true, true, false, "true"}},
		{"closed only when every step says so", []StepHints{tool(`{"readOnlyHint":true,"openWorldHint":false}`), read}, want{true, true, false, ""}},
		{"readOnly false explicitly", []StepHints{tool(`{"readOnlyHint":false,"idempotentHint":false,"destructiveHint":true}`)}, want{false, false, true, ""}},
		{"no steps claims nothing", nil, want{false, false, true, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Annotate("wf", tc.steps)
			open := ""
			if a.OpenWorldHint != nil {
				open = map[bool]string{true: "true", false: "false"}[*a.OpenWorldHint]
			}
			got := want{a.ReadOnlyHint, a.IdempotentHint, a.DestructiveHint != nil && *a.DestructiveHint, open}
			if a.DestructiveHint == nil {
				t.Fatal("destructiveHint absent: it is always said")
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if a.Title != "wf" {
				t.Errorf("title %q", a.Title)
			}
		})
	}
}

func TestProgressRisesToTotalAtTheEnd(t *testing.T) {
	p := newProgress(2)
	ev := func(k engine.EventKind, step string, item int) engine.Event {
		return engine.Event{Kind: k, Step: step, Item: item, State: journal.StateCompleted, Status: journal.RunSucceeded}
	}
	events := []engine.Event{
		{Kind: engine.RunStarted},
		ev(engine.StepStarted, "a", -1),
		{Kind: engine.StepProgress, Step: "a", Progress: 5},
		ev(engine.StepFinished, "a", -1),
		ev(engine.StepStarted, "fan", 0),
		ev(engine.StepStarted, "fan", 1),
		ev(engine.StepFinished, "fan", 1),
		ev(engine.StepStarted, "fan", 2),
		ev(engine.StepFinished, "fan", 0),
		ev(engine.StepFinished, "fan", 2),
		ev(engine.RunFinished, "", -1),
	}
	var values []float64
	var msgs []string
	for _, e := range events {
		v, total, msg, ok := p.next(e)
		if !ok {
			continue
		}
		if total != 2 {
			t.Errorf("total %v", total)
		}
		if len(values) > 0 && v <= values[len(values)-1] {
			t.Errorf("progress %v after %v: it must rise", v, values[len(values)-1])
		}
		if v > 2 || (v == 2 && e.Kind != engine.RunFinished) {
			t.Errorf("progress %v reaches the total before the run's end (%s)", v, msg)
		}
		values, msgs = append(values, v), append(msgs, msg)
	}
	wantMsgs := []string{"step a started", "step a finished: completed", "step fan[0] started", "step fan[1] started",
		"step fan[1] finished: completed", "step fan[2] started", "step fan[0] finished: completed", "step fan[2] finished: completed", "run succeeded"}
	if !reflect.DeepEqual(msgs, wantMsgs) {
		t.Errorf("messages %q", msgs)
	}
	if values[len(values)-1] != 2 {
		t.Errorf("last value %v", values[len(values)-1])
	}
}

func TestWorkflowFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.yaml", "a.yml", "mcpflow.yaml", "MCPFLOW.yml", "notes.txt", "sub/c.yaml"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := WorkflowFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "a.yml"), filepath.Join(dir, "b.yaml")}; !reflect.DeepEqual(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	if _, err := WorkflowFiles(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "cannot read the directory of workflows") {
		t.Errorf("missing dir: %v", err)
	}
}
