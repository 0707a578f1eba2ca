package workflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/workflow"
)

func loadSchema(t *testing.T) (*jsonschema.Resolved, map[string]any) {
	t.Helper()
	b, err := os.ReadFile("../schema/workflow.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	return rs, raw
}

func yamlToJSON(t *testing.T, src []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

// TestSchemaAcceptsEveryExample keeps the published JSON Schema and the
// examples in agreement.
func TestSchemaAcceptsEveryExample(t *testing.T) {
	rs, _ := loadSchema(t)
	files, _ := filepath.Glob("../examples/workflows/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		src, _ := os.ReadFile(f)
		if _, err := workflow.Load(f, src, nil); err != nil {
			t.Errorf("loader rejects %s: %v", f, err)
		}
		if err := rs.Validate(yamlToJSON(t, src)); err != nil {
			t.Errorf("schema rejects %s: %v", f, err)
		}
	}
	bad := []byte("name: x\nsteps: [{id: a, server: s, tool: t, retrys: 3}]\n")
	if rs.Validate(yamlToJSON(t, bad)) == nil {
		t.Error("schema accepts an unknown step key")
	}
}

// TestSchemaKeysMatchLoader fails when the loader learns a key the schema
// does not document, or the other way round.
func TestSchemaKeysMatchLoader(t *testing.T) {
	_, raw := loadSchema(t)
	props := func(path ...string) []string {
		var cur any = raw
		for _, p := range path {
			cur = cur.(map[string]any)[p]
		}
		var keys []string
		for k := range cur.(map[string]any)["properties"].(map[string]any) {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	sorted := func(s []string) []string { c := slices.Clone(s); sort.Strings(c); return c }
	for _, tc := range []struct {
		name   string
		schema []string
		loader []string
	}{
		{"workflow", props(), workflow.WorkflowKeys},
		{"input", props("properties", "inputs", "additionalProperties"), workflow.InputKeys},
		{"step", props("$defs", "step"), workflow.StepKeys},
		{"retry", props("$defs", "step", "properties", "retry"), workflow.RetryKeys},
	} {
		if !slices.Equal(tc.schema, sorted(tc.loader)) {
			t.Errorf("%s keys: schema %v, loader %v", tc.name, tc.schema, sorted(tc.loader))
		}
	}
}
