package elicit_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/elicit"
)

// The conformance suite's SEP-1034 question: every field optional, each
// with a default.
const defaultsSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "default": "John Doe"},
	"age": {"type": "integer", "default": 30},
	"score": {"type": "number", "default": 95.5},
	"status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
	"verified": {"type": "boolean", "default": true},
	"nickname": {"type": "string"}
}, "required": []}`

// WithDefaults answers each field the content lacks with the schema's
// default, keeps what the content gives (null included), leaves fields
// without a default out, and does not change its argument; the result
// fits the schema.
func TestWithDefaults(t *testing.T) {
	q := &elicit.Question{Mode: "form", Message: "defaults?", Schema: json.RawMessage(defaultsSchema)}
	for _, tc := range []struct {
		name    string
		content map[string]any
		want    string
	}{
		{"nothing given", nil, `{"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}`},
		{"some given", map[string]any{"age": 41, "status": "pending", "nickname": "Al"},
			`{"age":41,"name":"John Doe","nickname":"Al","score":95.5,"status":"pending","verified":true}`},
		{"false and null kept", map[string]any{"verified": false, "name": nil},
			`{"age":30,"name":null,"score":95.5,"status":"active","verified":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.content)
			got, err := q.WithDefaults(tc.content)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if string(b) != tc.want {
				t.Errorf("WithDefaults(%s) = %s, want %s", before, b, tc.want)
			}
			if after, _ := json.Marshal(tc.content); string(after) != string(before) {
				t.Errorf("WithDefaults changed its argument: %s, was %s", after, before)
			}
			if tc.name != "false and null kept" {
				if err := q.Check(got); err != nil {
					t.Errorf("the completed answer does not fit the schema: %v", err)
				}
			}
		})
	}
	// A question without a schema (URL mode) has no defaults.
	got, err := (&elicit.Question{Mode: "url", URL: "https://example.com"}).WithDefaults(map[string]any{"a": 1})
	if err != nil || len(got) != 1 || got["a"] != 1 {
		t.Errorf("URL question: %v, %v", got, err)
	}
}
