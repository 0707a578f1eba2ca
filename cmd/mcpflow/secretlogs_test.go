package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/workflow"
)

// TestSecretsNotInServerLogs: a server that logs a secret argument it
// received — as a log message and on its stderr — leaves the secret out of
// .mcpflow/logs/SERVER.log, in a run of its own and in mcpflow server,
// whose sessions serve every run.
func TestSecretsNotInServerLogs(t *testing.T) {
	const token = "TOKEN-5512-SECRET"
	const wf = `name: secretlog
inputs:
  token: {type: string, secret: true}
servers: {demo: {builtin: demo}}
steps:
  - {id: say, server: demo, tool: log, with: {message: "using ${{ inputs.token }} now", stderr: true}}
  - {id: again, server: demo, tool: log, with: {message: "again ${{ inputs.token }}", level: warning, stderr: true}}
`
	for _, viaServer := range []bool{false, true} {
		name := map[bool]string{false: "run", true: "server"}[viaServer]
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			file := c.workflow("secretlog.yaml", wf)
			if viaServer {
				srv, wait := c.startServer()
				// The server's sessions, and their logs, end with it.
				defer func() { c.stopServer(srv, wait); checkServerLog(t, c, token) }()
			} else {
				defer checkServerLog(t, c, token)
			}
			if r := c.run("run", file, "--input", "token="+token); r.code != 0 || strings.Contains(r.stdout+r.stderr, token) {
				t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// checkServerLog reads the demo server's log: the calls' log messages and
// stderr lines are there, with the secret redacted.
func checkServerLog(t *testing.T, c *cli, token string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.workspace, ".mcpflow", "logs", "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if strings.Contains(log, token) {
		t.Errorf("the server's log holds the secret:\n%s", log)
	}
	for _, want := range []string{
		"[info] demo: using " + workflow.Redacted + " now\n",    // log message
		"demo: log info: using " + workflow.Redacted + " now\n", // stderr
		"[warning] demo: again " + workflow.Redacted + "\n",
		"demo: log warning: again " + workflow.Redacted + "\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the server's log lacks %q:\n%s", want, log)
		}
	}
}
