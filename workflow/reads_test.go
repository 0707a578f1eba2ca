package workflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/workflow"
)

// TestReadStepsLoad: resource: and prompt: steps load, as a URI (with the
// step's server:, or as {server, uri}) and as a prompt's name with its
// arguments in with:.
func TestReadStepsLoad(t *testing.T) {
	src := []byte(`name: w
inputs:
  who: {default: Ada}
servers: {demo: {builtin: demo}}
steps:
  - {id: notes, server: demo, resource: "file:///demo/notes.txt"}
  - {id: hello, resource: {server: demo, uri: "demo://greeting/${{ inputs.who }}"}}
  - id: ask
    server: demo
    prompt: review
    with: {text: "${{ steps.notes.text }}", focus: tone, n: 3, ok: true}
  - {id: call, server: demo, tool: greet, with: {name: x}}
  - {id: each, server: demo, resource: "demo://greeting/${{ item }}", for_each: [a, b]}
`)
	wf, err := workflow.Load("w.yaml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step, server, target string
		method               journal.Method
		literal              string
	}{
		{"notes", "demo", "file:///demo/notes.txt", journal.MethodRead, "file:///demo/notes.txt"},
		{"hello", "demo", "demo://greeting/${{ inputs.who }}", journal.MethodRead, ""},
		{"ask", "demo", "review", journal.MethodPrompt, ""},
		{"call", "demo", "greet", journal.MethodCall, ""},
		{"each", "demo", "demo://greeting/${{ item }}", journal.MethodRead, ""},
	} {
		st := wf.Step(tc.step)
		if st.Server != tc.server || st.Target() != tc.target || st.Method() != tc.method {
			t.Errorf("step %s: server %q target %q method %s; want %q %q %s", tc.step, st.Server, st.Target(), st.Method(), tc.server, tc.target, tc.method)
		}
		uri, ok := st.LiteralResource()
		if uri != tc.literal || ok != (tc.literal != "") {
			t.Errorf("step %s: literal resource %q %v, want %q", tc.step, uri, ok, tc.literal)
		}
	}
	v, err := wf.Step("hello").Resource.Eval(context.Background(), workflow.Vars{Inputs: map[string]any{"who": "Ada"}})
	if err != nil || v != "demo://greeting/Ada" {
		t.Errorf("hello's URI evaluates to %v, %v", v, err)
	}
	args, err := wf.Step("ask").With.Eval(context.Background(), workflow.Vars{Steps: map[string]any{"notes": map[string]any{"text": "note 1"}}})
	if err != nil {
		t.Fatal(err)
	}
	pa, err := workflow.PromptArguments(args)
	if err != nil || len(pa) != 4 || pa["text"] != "note 1" || pa["focus"] != "tone" || pa["n"] != "3" || pa["ok"] != "true" {
		t.Errorf("prompt arguments %v, %v", pa, err)
	}
	for _, bad := range []any{map[string]any{"a": []any{"x"}}, map[string]any{"a": nil}, map[string]any{"a": map[string]any{}}, "text"} {
		if _, err := workflow.PromptArguments(bad); err == nil {
			t.Errorf("PromptArguments(%v): no error", bad)
		}
	}
}

// TestReadStepErrors: a step has exactly one of tool:, resource: and
// prompt:; each mistake is named at its line and column.
func TestReadStepErrors(t *testing.T) {
	for _, tc := range []struct {
		name, step, want string
	}{
		{"neither", `{id: a, server: demo}`,
			`w.yaml:4:5: step a: missing one of "tool", "resource" or "prompt" (a step calls a tool, reads a resource or gets a prompt)`},
		{"tool and resource", `{id: a, server: demo, tool: greet, resource: "file:///x"}`,
			`w.yaml:4:50: step a.resource: a step has exactly one of tool:, resource: and prompt:, and this one has tool: too`},
		{"all three", `{id: a, server: demo, prompt: review, resource: "file:///x", tool: greet}`,
			"w.yaml:4:53: step a.resource: a step has exactly one of tool:, resource: and prompt:, and this one has prompt: too\n" +
				"w.yaml:4:72: step a.tool: a step has exactly one of tool:, resource: and prompt:, and this one has prompt: too"},
		{"a typo of resource", `{id: a, server: demo, resorce: "file:///x"}`,
			`w.yaml:4:27: steps[0]: unknown key "resorce" (did you mean "resource"?)`},
		{"no server", `{id: a, resource: "file:///x"}`,
			`w.yaml:4:5: steps[0]: missing required key "server"`},
		{"server twice", `{id: a, server: demo, resource: {server: demo, uri: "file:///x"}}`,
			`w.yaml:4:46: step a.resource.server: the step names its server twice (server: and resource.server); keep one`},
		{"resource mapping without uri", `{id: a, resource: {server: demo}}`,
			`w.yaml:4:23: step a.resource: missing required key "uri"`},
		{"resource mapping, unknown key", `{id: a, resource: {server: demo, url: "file:///x"}}`,
			`w.yaml:4:38: step a.resource: unknown key "url" (did you mean "uri"?)`},
		{"resource mapping, unknown server", `{id: a, resource: {server: dmeo, uri: "file:///x"}}`,
			`w.yaml:4:32: step a: unknown server "dmeo" (did you mean "demo"? declared servers: demo)`},
		{"resource list", `{id: a, server: demo, resource: [x]}`,
			`w.yaml:4:37: step a.resource: expected a string, found a list`},
		{"empty resource", `{id: a, server: demo, resource: " "}`,
			`w.yaml:4:37: step a.resource: expected a URI, found an empty string`},
		{"resource with unknown input", `{id: a, server: demo, resource: "file:///${{ inputs.nmae }}"}`,
			`w.yaml:4:37: step a.resource: expression "inputs.nmae": unknown input "nmae" (declared: none)`},
		{"resource with arguments", `{id: a, server: demo, resource: "file:///x", with: {a: 1}}`,
			`w.yaml:4:56: step a.with: a resource read takes no arguments (with: is for tool: and prompt:)`},
		{"item outside a loop", `{id: a, server: demo, resource: "demo://greeting/${{ item }}"}`,
			`w.yaml:4:37: step a.resource: expression "item": item and index exist only in the with: of a step that has for_each`},
		{"empty prompt", `{id: a, server: demo, prompt: ""}`,
			`w.yaml:4:35: step a.prompt: expected the name of a prompt, found an empty string`},
		{"elicit on a read", `{id: a, server: demo, resource: "file:///x", elicit: decline}`,
			`w.yaml:4:58: step a.elicit: only a tool: step answers a server's questions (elicit: is for the questions asked during a tool call)`},
		{"prompt argument list", `{id: a, server: demo, prompt: review, with: {text: [a, b], focus: null}}`,
			"w.yaml:4:56: step a.with: prompt argument text: expected a string, found a list (prompt arguments are strings)\n" +
				"w.yaml:4:71: step a.with: prompt argument focus: expected a string, found nothing (prompt arguments are strings)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: w\nservers: {demo: {builtin: demo}}\nsteps:\n  - " + tc.step + "\n"
			_, err := workflow.Load("w.yaml", []byte(src), nil)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Load:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

// TestSchemaReadSteps keeps the schema's resource: and prompt: in step with
// the loader's.
func TestSchemaReadSteps(t *testing.T) {
	rs, _ := loadSchema(t)
	for _, tc := range []struct {
		step string
		ok   bool
	}{
		{`{id: a, server: s, resource: "file:///x"}`, true},
		{`{id: a, resource: {server: s, uri: "file:///x"}}`, true},
		{`{id: a, server: s, prompt: p, with: {text: x}}`, true},
		{`{id: a, server: s, tool: t, resource: "file:///x"}`, false},
		{`{id: a, server: s}`, false},
		{`{id: a, resource: "file:///x"}`, false},
		{`{id: a, resource: {server: s}}`, false},
		{`{id: a, server: s, resource: {server: s, uri: "file:///x"}}`, false},
		{`{id: a, server: s, resource: "file:///x", with: {a: b}}`, false},
		{`{id: a, server: s, prompt: p, with: {text: [x]}}`, false},
		{`{id: a, server: s, prompt: p, elicit: decline}`, false},
		{`{id: a, server: s, tool: t, elicit: decline}`, true},
	} {
		src := []byte("name: w\nservers: {s: {builtin: demo}}\nsteps:\n  - " + tc.step + "\n")
		_, loadErr := workflow.Load("w.yaml", src, nil)
		schemaErr := rs.Validate(yamlToJSON(t, src))
		if (loadErr == nil) != tc.ok || (schemaErr == nil) != tc.ok {
			t.Errorf("%s: loader %v, schema %v; want ok=%v", tc.step, loadErr, schemaErr, tc.ok)
		}
	}
	if !strings.Contains(strings.Join(workflow.StepKeys, " "), "resource prompt") {
		t.Errorf("step keys %v", workflow.StepKeys)
	}
}
