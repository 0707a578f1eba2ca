package workflow_test

import (
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/workflow"
)

// TestErrorsNeverQuoteValues: a file that is not a workflow — a key, a
// token, a config file read by mistake — never comes back in an error
// about the document's shape; the error says where and what kind.
func TestErrorsNeverQuoteValues(t *testing.T) {
	const secret = "sk-live-4f9a8b7c6d5e"
	for _, tc := range []struct{ name, src, says string }{
		{"a token", secret + "\n", "f.yaml:1:1: workflow: expected a mapping, found a string"},
		{"a number", "31337\n", "found a number"},
		{"a key file", "-----BEGIN KEY-----\n" + secret + "\n-----END KEY-----\n", "found a string"},
		{"a list of tokens", "- " + secret + "\n", "found a list"},
		{"a boolean", "name: x\nsteps:\n  - {id: a, server: s, tool: t, approve: " + secret + "}\n", ""},
		{"a duration", "name: x\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t, timeout: " + secret + "}\n", "expected a positive duration"},
		{"a concurrency", "name: x\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t, for_each: '${{ [1] }}', concurrency: 31337}\n", "found a number out of range"},
		{"retry attempts", "name: x\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: a, server: s, tool: t, retry: {attempts: " + secret + "}}\n", "found a string"},
		{"an alias", "a: *" + secret + "\n", "an alias names an anchor"},
		{"a server entry", "name: x\nservers: {s: " + secret + "}\nsteps: []\n", "found a string"},
	} {
		_, err := workflow.Load("f.yaml", []byte(tc.src), nil)
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, "31337") || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %s (want it to say %q, and no value)", tc.name, msg, tc.says)
		}
	}
}
