package workflow_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/workflow"
)

// FuzzLoad: any input gives a workflow or a clear positioned error; never a
// panic or a hang.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("../examples/workflows/*.yaml")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	seeds, _ := filepath.Glob("testdata/validate/*.txtar")
	for _, p := range seeds {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte("name: w\nsteps: [{id: a, server: s, tool: t, with: {x: '${{ [1,2].map(x, x * 2) }}'}}]"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, src []byte) {
		wf, err := workflow.Load("f.yaml", src, nil)
		if err == nil && (wf.Name == "" || len(wf.Steps) == 0) {
			t.Fatalf("accepted a workflow without name or steps: %q", src)
		}
		if err == nil {
			return
		}
		var errs workflow.Errors
		if !errors.As(err, &errs) || !errors.Is(err, workflow.ErrInvalid) {
			t.Fatalf("error is not a workflow.Errors: %T %v", err, err)
		}
		for i, e := range errs {
			if e.File != "f.yaml" {
				t.Fatalf("error does not name the file: %v", e)
			}
			if i > 0 && !before(errs[i-1], e) {
				t.Fatalf("errors out of order or repeated:\n%v", err)
			}
		}
	})
}

// FuzzExpression: any expression compiles or fails cleanly, and evaluating
// a compiled one returns a value or an error within the limits.
func FuzzExpression(f *testing.F) {
	for _, s := range []string{
		"inputs.n + 1", "steps.a.structuredContent.list.map(x, x * 2)", "'a' + inputs.s",
		"[1,2,3].exists(x, x > 2)", "inputs.missing", "size(inputs.s) > 2 ? 'long' : 'short'",
		"{'a': {'b': 1}}", "1 / 0", "[[1]].map(x, x.map(y, y))", "inputs.s.upperAscii()",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if strings.ContainsAny(expr, "\n\r") || strings.Contains(expr, "}}") {
			return
		}
		src := "name: w\ninputs: {n: {type: number, default: 2}, s: {default: abc}}\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t}\n  - {id: b, server: s, tool: t, if: " + quote(expr) + "}\n"
		wf, err := workflow.Load("f.yaml", []byte(src), nil)
		if err != nil {
			return
		}
		inputs, err := wf.ParseInputs(nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = workflow.EvalCondition(context.Background(), wf.Steps[1], inputs, map[string]any{"a": map[string]any{"structuredContent": map[string]any{"list": []any{1.0, 2.0}}}})
	})
}

func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// before reports whether a sorts before b, as Join sorts.
func before(a, b *workflow.PosError) bool {
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	if a.Column != b.Column {
		return a.Column < b.Column
	}
	return a.Msg < b.Msg
}
