package workflow_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/workflow"
)

const enumSteps = "servers:\n  demo: {builtin: demo}\nsteps:\n  - {id: a, server: demo, tool: greet}\n"

// TestInputEnum: enum: lists the only values an input takes, typed as
// the input; the default and every value given must be one of them.
func TestInputEnum(t *testing.T) {
	wf, err := workflow.Load("wf.yaml", []byte("name: x\ninputs:\n"+
		"  region: {type: string, enum: [eu, us], default: eu}\n"+
		"  size: {type: number, enum: [1, \"2\"]}\n"+
		"  pin: {type: string, secret: true, enum: [\"1234\", \"0000\"]}\n"+enumSteps), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := wf.Input("size").Enum; !reflect.DeepEqual(got, []any{1.0, 2.0}) {
		t.Errorf("size enum %#v", got)
	}
	in, err := wf.ParseInputsFrom(map[string]any{"size": 2}, []string{"region=us"})
	if err != nil || !reflect.DeepEqual(in, map[string]any{"region": "us", "size": 2.0}) {
		t.Errorf("inputs %v, %v", in, err)
	}
	for _, tc := range []struct {
		pairs []string
		want  string
	}{
		{[]string{"region=asia"}, `region: "asia" is not one of "eu", "us"`},
		{[]string{"size=3"}, `size: 3 is not one of 1, 2`},
		{[]string{"pin=9999"}, `pin: not one of the values it takes`},
	} {
		_, err := wf.ParseInputsFrom(nil, tc.pairs)
		if !errors.Is(err, workflow.ErrInput) || !strings.HasSuffix(err.Error(), tc.want) || strings.Contains(err.Error(), "9999") {
			t.Errorf("%v: %v, want …%s", tc.pairs, err, tc.want)
		}
	}
	for _, tc := range []struct{ inputs, want string }{
		{"  r: {enum: []}\n", "input r.enum: an empty list: give the values it takes, or no enum:"},
		{"  r: {enum: eu}\n", "input r.enum: expected a list of the values it takes, found a string"},
		{"  r: {type: number, enum: [1, x]}\n", `input r.enum: "x" is not a number`},
		{"  r: {enum: [a, a]}\n", "input r.enum: a value given twice"},
		{"  r: {enum: [a, b], default: c}\n", `input r.default: not one of its enum: ("a", "b")`},
	} {
		_, err := workflow.Load("wf.yaml", []byte("name: x\ninputs:\n"+tc.inputs+enumSteps), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.inputs, err, tc.want)
		}
	}
}
