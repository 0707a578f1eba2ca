package workflow_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/workflow"
)

// TestExpressionSeesTheStepsItReads: an expression is given the steps it
// names, whole numbers as ints; one that reads steps other than by a
// literal name (size, an index that is not a literal, a macro) sees them
// all.
func TestExpressionSeesTheStepsItReads(t *testing.T) {
	steps := map[string]any{
		"a": map[string]any{"structuredContent": map[string]any{"n": 1.0}},
		"b": map[string]any{"structuredContent": map[string]any{"n": 2.0}},
	}
	for _, tc := range []struct {
		expr string
		want any
	}{
		{"steps.a.structuredContent.n + 1", int64(2)},
		{"steps['b'].structuredContent.n * 10", int64(20)},
		{"size(steps)", int64(2)},
		{"steps[inputs.which].structuredContent.n", int64(2)},
		{"steps.all(k, steps[k].structuredContent.n > 0)", true},
		{"has(steps.a.structuredContent.m)", false},
	} {
		src := "name: x\ninputs: {which: {type: string}}\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t}\n  - {id: b, server: s, tool: t}\n  - {id: c, server: s, tool: t, with: {v: \"${{ " + tc.expr + " }}\"}}\n"
		wf, err := workflow.Load("x.yaml", []byte(src), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		got, err := wf.Steps[2].With.Eval(t.Context(), workflow.Vars{Inputs: map[string]any{"which": "b"}, Steps: steps})
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if v := got.(map[string]any)["v"]; v != tc.want {
			t.Errorf("%s = %#v, want %#v", tc.expr, v, tc.want)
		}
	}
}
