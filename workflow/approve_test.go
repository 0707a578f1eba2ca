package workflow_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/workflow"
)

func TestApproveLoads(t *testing.T) {
	src := []byte(`name: w
servers: {s: {builtin: demo}}
steps:
  - {id: plain, server: s, tool: t}
  - {id: yes, server: s, tool: t, approve: true}
  - {id: no, server: s, tool: t, approve: false}
  - {id: said, server: s, tool: t, approve: "  Roll out to production?  "}
  - {id: each, server: s, tool: t, for_each: [1, 2], approve: "Both regions?"}
`)
	wf, err := workflow.Load("w.yaml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step    string
		approve bool
		message string
	}{
		{"plain", false, ""},
		{"yes", true, ""},
		{"no", false, ""},
		{"said", true, "Roll out to production?"},
		{"each", true, "Both regions?"},
	} {
		st := wf.Step(tc.step)
		if st.Approve != tc.approve || st.ApproveMessage != tc.message {
			t.Errorf("step %s: approve %v %q, want %v %q", tc.step, st.Approve, st.ApproveMessage, tc.approve, tc.message)
		}
	}
}

// TestSchemaApprove keeps the schema's approve: in step with the loader's.
func TestSchemaApprove(t *testing.T) {
	rs, _ := loadSchema(t)
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"true", true},
		{"false", true},
		{`"Deploy?"`, true},
		{`""`, false},
		{"1", false},
		{"[x]", false},
		{`"deploy ${{ inputs.v }}"`, false},
	} {
		src := []byte("name: w\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t, approve: " + tc.value + "}\n")
		_, loadErr := workflow.Load("w.yaml", src, nil)
		schemaErr := rs.Validate(yamlToJSON(t, src))
		if (loadErr == nil) != tc.ok || (schemaErr == nil) != tc.ok {
			t.Errorf("approve: %s: loader %v, schema %v; want ok=%v", tc.value, loadErr, schemaErr, tc.ok)
		}
	}
}
