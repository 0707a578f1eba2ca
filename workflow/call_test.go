package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// TestCallRoundTrips: the one-step workflow of `mcpflow call` is built as a
// value, and its journaled definition loads back to the same arguments —
// "${{" included, which is sent as text, never evaluated.
func TestCallRoundTrips(t *testing.T) {
	set := upstream.Set{"demo": {Name: "demo", Builtin: "demo"}}
	args := map[string]any{
		"name":     "Ada ${{ inputs.secret }}",
		"count":    3.0,
		"nested":   map[string]any{"list": []any{"${{ env.HOME }}", true, nil}},
		"template": "}} ${{",
	}
	wf, err := workflow.Call("demo", "greet", args, set)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wf.Steps[0].With.Eval(t.Context(), workflow.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, args) {
		t.Errorf("value arguments = %v, want %v", got, args)
	}
	if !strings.Contains(string(wf.Source), "!literal") {
		t.Errorf("definition does not mark its arguments literal:\n%s", wf.Source)
	}
	loaded, err := workflow.Load(wf.Path, wf.Source, set)
	if err != nil {
		t.Fatalf("the journaled definition does not load: %v\n%s", err, wf.Source)
	}
	back, err := loaded.Steps[0].With.Eval(t.Context(), workflow.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, args) || loaded.Name != wf.Name || loaded.Steps[0].Tool != "greet" {
		t.Errorf("loaded back %v (%s), want %v", back, loaded.Name, args)
	}
	if _, err := workflow.Call("nope", "greet", nil, set); err == nil || !strings.Contains(err.Error(), "demo") {
		t.Errorf("unknown server: %v, want an error naming the configured ones", err)
	}
}
