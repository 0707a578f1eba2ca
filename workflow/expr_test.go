package workflow_test

import (
	"encoding/json"
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

// TestExpressionCostDoesNotGrowWithResults: an expression reads what it
// names and converts nothing else, so a large result it could reach (the
// step it reads, with 10,000 items) costs it no more than a small one
// (a few allocations, not one per item: before, 59,528).
func TestExpressionCostDoesNotGrowWithResults(t *testing.T) {
	src := "name: x\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t}\n  - {id: c, server: s, tool: t, with: {v: \"${{ steps.a.structuredContent.n + size(steps.a.content) }}\"}}\n"
	wf, err := workflow.Load("x.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	step := func(items int) map[string]any {
		content := make([]any, items)
		for i := range content {
			content[i] = map[string]any{"type": "text", "text": "x", "n": float64(i)}
		}
		return map[string]any{"a": map[string]any{"structuredContent": map[string]any{"n": 1.0}, "content": content}}
	}
	allocs := func(steps map[string]any) float64 {
		return testing.AllocsPerRun(20, func() {
			if _, err := wf.Steps[1].With.Eval(t.Context(), workflow.Vars{Steps: steps}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(step(1)), allocs(step(10000))
	if large > 2*small {
		t.Errorf("an evaluation allocates %.0f times when the step it reads has 1 item, %.0f times with 10,000", small, large)
	}
	got, _ := wf.Steps[1].With.Eval(t.Context(), workflow.Vars{Steps: step(10000)})
	if v := got.(map[string]any)["v"]; v != int64(10001) {
		t.Errorf("v = %#v, want 10001", v)
	}
}

// TestExpressionSeesGoContainersAsJSON: values in Go containers other
// than JSON's ([]float64, a map of them) read as JSON would give them,
// whole numbers as ints, whether an expression indexes or iterates.
func TestExpressionSeesGoContainersAsJSON(t *testing.T) {
	inputs := map[string]any{
		"floats": []float64{1, 2.5},
		"maps":   []map[string]any{{"a": 2.0}},
		"byName": map[string][]any{"x": {3.0}},
	}
	for _, tc := range []struct {
		expr string
		want any
	}{
		{"inputs.floats[0] + 1", int64(2)},
		{"inputs.floats[1] + 0.5", 3.0},
		{"inputs.floats.filter(x, type(x) == int).size()", int64(1)},
		{"inputs.maps[0].a * 2", int64(4)},
		{"inputs.maps.map(m, m.a + 1)[0]", int64(3)},
		{"inputs.byName.x[0] + 1", int64(4)},
		{"size(inputs.byName)", int64(1)},
	} {
		src := "name: x\ninputs: {floats: {type: array}, maps: {type: array}, byName: {type: object}}\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: c, server: s, tool: t, with: {v: \"${{ " + tc.expr + " }}\"}}\n"
		wf, err := workflow.Load("x.yaml", []byte(src), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		got, err := wf.Steps[0].With.Eval(t.Context(), workflow.Vars{Inputs: inputs, Steps: map[string]any{}})
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if v := got.(map[string]any)["v"]; v != tc.want {
			t.Errorf("%s = %#v, want %#v", tc.expr, v, tc.want)
		}
	}
}

// TestLazyValuesAreComputedWhenRead: a step's value that expressions
// compute on demand (its decoded content) is computed only by an
// expression that reads it, once however many read it, and reads as the
// value it computes, whole or in part, in conditions and in outputs.
func TestLazyValuesAreComputedWhenRead(t *testing.T) {
	computed := 0
	content := workflow.NewLazy(func() any {
		computed++
		return []any{map[string]any{"type": "text", "text": "hi"}}
	})
	steps := map[string]any{"a": map[string]any{"content": content, "text": "hi"}}
	eval := func(expr string) any {
		t.Helper()
		src := "name: x\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t}\n  - {id: b, server: s, tool: t, with: {v: \"${{ " + expr + " }}\"}}\n"
		wf, err := workflow.Load("x.yaml", []byte(src), nil)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got, err := wf.Steps[1].With.Eval(t.Context(), workflow.Vars{Steps: steps})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return got.(map[string]any)["v"]
	}
	if v := eval("steps.a.text"); v != "hi" || computed != 0 {
		t.Fatalf("steps.a.text = %#v, computed %d times: want hi, never computed", v, computed)
	}
	if v := eval("steps.a.content[0].text + '!'"); v != "hi!" || computed != 1 {
		t.Fatalf("steps.a.content[0].text = %#v, computed %d times: want hi!, once", v, computed)
	}
	if v := eval("size(steps.a.content)"); v != int64(1) || computed != 1 {
		t.Fatalf("size(steps.a.content) = %#v, computed %d times: want 1, still once", v, computed)
	}
	whole, _ := json.Marshal(eval("steps.a"))
	if string(whole) != `{"content":[{"text":"hi","type":"text"}],"text":"hi"}` {
		t.Fatalf("steps.a = %s", whole)
	}
}
