package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// completions runs the shell's completion request and returns the values
// offered, one a line, without their descriptions.
func (c *cli) completions(args ...string) []string {
	c.t.Helper()
	r := c.run(append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		c.t.Fatalf("__complete %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	var out []string
	for _, l := range lines(r.stdout) {
		if strings.HasPrefix(l, ":") { // the directive
			continue
		}
		v, _, _ := strings.Cut(l, "\t")
		out = append(out, v)
	}
	return out
}

// TestCompletionOffersWhatTheCommandTakes: approve offers the runs that
// wait for approval, then their pending steps; runs cancel offers only the
// runs going somewhere, not finished ones.
func TestCompletionOffersWhatTheCommandTakes(t *testing.T) {
	c := newCLI(t)
	ship := c.workflow("ship.yaml", `name: ship
servers: {demo: {builtin: demo}}
steps:
  - {id: build, server: demo, tool: greet, with: {name: build}}
  - {id: deploy, server: demo, tool: greet, approve: "Deploy?", with: {name: deploy}}
`)
	hello := c.workflow("hello.yaml", "name: hello\nservers: {demo: {builtin: demo}}\nsteps:\n  - {id: a, server: demo, tool: greet, with: {name: x}}\n")
	slow := c.workflow("slow.yaml", `name: slow
servers: {demo: {builtin: demo}}
steps:
  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 60}}
`)
	if r := c.run("run", ship); r.code != exitBlocked {
		t.Fatalf("ship: exit %d, want 3\n%s", r.code, r.stderr)
	}
	shipID := strings.TrimSpace(c.run("runs", "list", "--jq", ".[0].id").stdout)
	if r := c.run("run", hello); r.code != 0 {
		t.Fatalf("hello: exit %d\n%s", r.code, r.stderr)
	}
	if got := c.completions("approve", ""); strings.Join(got, " ") != shipID {
		t.Errorf("approve <TAB> = %q, want only the run waiting for approval %s", got, shipID)
	}
	if got := c.completions("approve", shipID[:13], ""); strings.Join(got, " ") != "deploy" {
		t.Errorf("approve RUN <TAB> = %q, want its pending step deploy", got)
	}
	if got := c.completions("runs", "cancel", ""); len(got) != 0 {
		t.Errorf("runs cancel <TAB> with nothing going = %q, want nothing", got)
	}

	owner, ownerDone := c.background("run", slow)
	waitServing(t, filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock"), "the run", ownerDone)
	var slowID string
	for deadline := time.Now().Add(20 * time.Second); slowID == "" || slowID == "null"; time.Sleep(20 * time.Millisecond) {
		slowID = strings.TrimSpace(c.run("runs", "list", "--status", "running", "--jq", ".[0].id").stdout)
		if time.Now().After(deadline) {
			owner.Process.Kill()
			t.Fatalf("the slow run never showed as running")
		}
	}
	if got := c.completions("runs", "cancel", ""); strings.Join(got, " ") != slowID {
		t.Errorf("runs cancel <TAB> = %q, want only the running run %s", got, slowID)
	}
	if got := c.completions("approve", ""); strings.Join(got, " ") != shipID {
		t.Errorf("approve <TAB> while a run goes = %q, want %s", got, shipID)
	}
	if r := c.run("runs", "cancel", slowID); r.code != 0 {
		t.Errorf("runs cancel: exit %d\n%s", r.code, r.stderr)
	}
	ownerDone()
}

// TestCompletionOfToolsInAnUntrustedWorkspace: call SERVER <TAB> offers
// the tools of servers from the user's own configuration — a file outside
// the workspace, or the --servers file the user names — in a workspace
// not trusted; for a server the workspace's files define it offers
// nothing, and starts nothing.
func TestCompletionOfToolsInAnUntrustedWorkspace(t *testing.T) {
	c := newCLI(t)
	home := t.TempDir()
	c.env = []string{"HOME=" + home, "MCPFLOW_EXE=" + c.exe()}
	demo := `{"command": "${env:MCPFLOW_EXE}", "args": ["demo-server"], "env": {"MCPFLOW_TEST_AS_MAIN": "1"}}`
	c.writeFile(filepath.Join(home, ".cursor", "mcp.json"), `{"mcpServers": {"cur": `+demo+`}}`)
	named := filepath.Join(c.workspace, "servers.json")
	c.writeFile(named, `{"mcpServers": {"mine": `+demo+`}}`)
	c.writeFile(filepath.Join(c.workspace, ".mcp.json"), `{"mcpServers": {"evil": {"command": "sh", "args": ["-c", "touch PWNED; exit 1"]}}}`)
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), "import: [~/.cursor/mcp.json, .mcp.json]\n")
	for _, args := range [][]string{{"call", "cur", "gr"}, {"--servers", named, "call", "mine", "gr"}} {
		if got := c.completions(args...); strings.Join(got, " ") != "greet" {
			t.Errorf("%q <TAB> = %q, want the tool greet", args, got)
		}
	}
	if got := c.completions("call", "evil", ""); len(got) != 0 {
		t.Errorf("call evil <TAB> = %q, want nothing", got)
	}
	if _, err := os.Stat(filepath.Join(c.workspace, "PWNED")); err == nil {
		t.Fatal("completion started a server the untrusted workspace's files define")
	}
}
