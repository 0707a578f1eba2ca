package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

func TestToolValidateDemoTools(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})
	s := connect(t, &Server{Name: "demo", URL: url}, nil)
	tools := checkDiscovery(t, s)
	for _, tc := range []struct {
		tool, args string
		field      string // "" with ok: valid
		reason     string
		ok         bool
	}{
		{tool: "greet", args: `{"name":"Ada"}`, ok: true},
		{tool: "greet", args: `{}`, field: "name", reason: "missing (required)"},
		{tool: "greet", args: ``, field: "name", reason: "missing (required)"},
		{tool: "greet", args: `null`, field: "name", reason: "missing (required)"},
		{tool: "greet", args: `{"name":12345}`, field: "name", reason: `has type "integer", want "string"`},
		{tool: "greet", args: `{"name":"x","extra":1}`, field: "extra", reason: "not accepted by the tool (unexpected additional property)"},
		{tool: "greet", args: `["Ada"]`, reason: "not an object (expected a JSON object of named arguments)"},
		{tool: "greet", args: `{"name":`, reason: "not valid JSON (expected a JSON object)"},
		{tool: "put_record", args: `{"key":"k"}`, field: "value", reason: "missing (required)"},
		{tool: "count_slowly", args: `{}`, ok: true},
		{tool: "count_slowly", args: `{"n":5000}`, field: "n", reason: "greater than the maximum 1000"},
		{tool: "count_slowly", args: `{"n":"five"}`, field: "n", reason: `has type "string", want "integer"`},
		{tool: "ledger_count", args: `{}`, ok: true},
	} {
		err := tools[tc.tool].Validate(json.RawMessage(tc.args))
		if tc.ok {
			if err != nil {
				t.Errorf("%s %s: %v, want valid", tc.tool, tc.args, err)
			}
			continue
		}
		var ae *ArgsError
		if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("%s %s: err = %v, want an *ArgsError", tc.tool, tc.args, err)
			continue
		}
		if ae.Tool != tc.tool || ae.Field != tc.field || ae.Reason != tc.reason {
			t.Errorf("%s %s: got {%s %q %q}, want {%s %q %q}", tc.tool, tc.args, ae.Tool, ae.Field, ae.Reason, tc.tool, tc.field, tc.reason)
		}
		if strings.Contains(err.Error(), "12345") || strings.Contains(err.Error(), "five") {
			t.Errorf("error %q shows the argument's value", err)
		}
	}
}

func TestToolValidateMessages(t *testing.T) {
	tool := Tool{Name: "ship", InputSchema: json.RawMessage(`{
		"type": "object",
		"required": ["to"],
		"properties": {
			"to": {"type": "object", "required": ["zip"], "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}},
			"tags": {"type": "array", "items": {"type": "string"}}
		}
	}`)}
	for args, want := range map[string]string{
		`{"to":{}}`:                             "tool ship: argument to.zip: missing (required)",
		`{"to":{"zip":"hunter2"}}`:              `tool ship: argument to.zip: does not match the pattern "^[0-9]{5}$"`,
		`{"to":{"zip":"12345"},"tags":["a",1]}`: `tool ship: argument tags[]: has type "integer", want "string"`,
		`{"tags":[]}`:                           "tool ship: argument to: missing (required)",
	} {
		err := tool.Validate(json.RawMessage(args))
		if err == nil || err.Error() != want {
			t.Errorf("Validate(%s) = %v, want %s", args, err, want)
		}
	}
	// No schema, or one that cannot be used: the server decides.
	for _, schema := range []string{``, `not json`, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["a"]}`} {
		if err := (Tool{Name: "x", InputSchema: json.RawMessage(schema)}).Validate(json.RawMessage(`{}`)); err != nil {
			t.Errorf("schema %q: %v, want nil", schema, err)
		}
	}
}

func TestRedactValuesNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"maximum: 5000 is greater than 1000.000000":                       "greater than the maximum 1000",
		"minimum: 0.5 is less than 1.250000":                              "less than the minimum 1.25",
		`minLength: "ab" contains 2 Unicode code points, fewer than 10`:   "2 characters, fewer than 10",
		`maxLength: "abc" contains 100 Unicode code points, more than 20`: "100 characters, more than 20",
	} {
		if got := redactValues(in); got != want {
			t.Errorf("redactValues(%q) = %q, want %q", in, got, want)
		}
	}
}

// Calls share a tool's resolved schema: many at once, valid and not, each
// gets its own verdict (under -race: the schema is only read).
func TestToolValidateConcurrently(t *testing.T) {
	tool := Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":10}},"required":["n"]}`)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				n := (g + i) % 20
				err := tool.Validate(json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)))
				var ae *ArgsError
				if n <= 10 && err != nil || n > 10 && (!errors.As(err, &ae) || ae.Field != "n") {
					t.Errorf("n=%d: %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := (Tool{Name: "t", InputSchema: json.RawMessage(`{"type":`)}).Validate(json.RawMessage(`{"x":1}`)); err != nil {
		t.Errorf("a schema that is not JSON rejected arguments: %v", err)
	}
}
