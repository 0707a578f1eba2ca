package main

import (
	"strings"
	"testing"
)

// TestMissingArgumentsAreNamed: a command given too few arguments names
// the ones missing and its usage line; too many, how many it takes.
// --version prints what version prints.
func TestMissingArgumentsAreNamed(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "mcpflow: missing FILE (usage: mcpflow run FILE)"},
		{[]string{"call", "demo"}, "mcpflow: missing TOOL (usage: mcpflow call SERVER TOOL)"},
		{[]string{"call"}, "mcpflow: missing SERVER TOOL (usage: mcpflow call SERVER TOOL)"},
		{[]string{"runs", "show", "a", "b"}, "mcpflow: mcpflow runs show takes 1 argument, got 2 (usage: mcpflow runs show RUN_ID)"},
	} {
		r := c.run(tc.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, tc.want+"\n") {
			t.Errorf("mcpflow %s: exit %d, want %d and %q\n%s", strings.Join(tc.args, " "), r.code, exitUsage, tc.want, r.stderr)
		}
	}
	v, flag := c.run("version"), c.run("--version")
	if v.code != 0 || flag.code != 0 || flag.stdout != v.stdout || !strings.HasPrefix(v.stdout, "mcpflow ") || !strings.Contains(v.stdout, "(journal schema ") {
		t.Errorf("version %q (exit %d) and --version %q (exit %d): want the same line", v.stdout, v.code, flag.stdout, flag.code)
	}
}
