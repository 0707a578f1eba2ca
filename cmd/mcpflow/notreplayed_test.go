package main

import (
	"strings"
	"testing"
)

// TestBlockedRunSaysWhyNotReplayed: a blocked run's output names the
// reason each waiting call was not replayed, and the fix, not only the
// journal.
func TestBlockedRunSaysWhyNotReplayed(t *testing.T) {
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{nil, `not replayed: server "demo" is not trusted — set trust: true`},
	} {
		c := newCLI(t)
		c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
		r := c.run(append([]string{"run", repoFile("examples", "workflows", "outcome-unknown.yaml")}, tc.extra...)...)
		if r.code != exitBlocked || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("exit %d, want 3 and %q\n%s", r.code, tc.want, r.stderr)
		}
	}
}
