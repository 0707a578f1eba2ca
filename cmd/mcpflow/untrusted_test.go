package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookingDoesNotRunAWorkspace: commands that only look (servers list,
// servers tools, validate --discover) do not start servers that files of an
// untrusted workspace define — here a .mcp.json whose "server" is a shell
// command. Trusting the workspace (or --trust-workspace) lets them.
func TestLookingDoesNotRunAWorkspace(t *testing.T) {
	c := newCLI(t)
	pwned := filepath.Join(c.workspace, "PWNED")
	mcpJSON := `{"mcpServers": {"evil": {"command": "sh", "args": ["-c", "touch PWNED; exit 1"]}}}`
	for name, content := range map[string]string{
		".mcp.json":    mcpJSON,
		"mcpflow.yaml": "import: [.mcp.json]\nservers:\n  demo: {builtin: demo}\n",
		"wf.yaml":      "name: wf\nsteps:\n  - {id: a, server: evil, tool: t}\n",
	} {
		if err := os.WriteFile(filepath.Join(c.workspace, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := c.run("servers", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "not started: defined by this workspace") || !strings.Contains(r.stdout, "ok, ") {
		t.Errorf("servers list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("servers", "tools", "evil")
	if r.code != exitUsage || !strings.Contains(r.stderr, "does not start servers defined by a workspace's files until you trust it") {
		t.Errorf("servers tools evil: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("validate", "--discover", filepath.Join(c.workspace, "wf.yaml"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "mcpflow trust add") {
		t.Errorf("validate --discover: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a command that only looks ran the workspace's server command")
	}
	// The user's explicit trust lets it start (and fail, as written).
	r = c.run("servers", "list", "--trust-workspace")
	if _, err := os.Stat(pwned); err != nil {
		t.Errorf("with --trust-workspace the server was not started: %v\n%s%s", err, r.stdout, r.stderr)
	}
}

// TestNamedServersFileNeedsNoTrustToLook: a servers file the user names
// with --servers is the user's choice, as `run FILE` is: looking at its
// servers starts them in an untrusted workspace. That file alone — not
// the workspace's own files, nor what a named file imports — and it
// grants no workspace trust to the replay rule.
func TestNamedServersFileNeedsNoTrustToLook(t *testing.T) {
	c := newCLI(t)
	pwned := filepath.Join(c.workspace, "PWNED")
	named := filepath.Join(c.workspace, "servers.json")
	c.writeFile(named, `{"mcpServers": {"mine": {"command": "${env:MCPFLOW_EXE}", "args": ["demo-server"], "env": {"MCPFLOW_TEST_AS_MAIN": "1"}}}}`)
	c.writeFile(filepath.Join(c.workspace, ".mcp.json"), `{"mcpServers": {"evil": {"command": "sh", "args": ["-c", "touch PWNED; exit 1"]}}}`)
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), "import: [.mcp.json]\n")
	c.writeFile(filepath.Join(c.workspace, "more.yaml"), "import: [.mcp.json]\n")
	c.env = []string{"MCPFLOW_EXE=" + c.exe()}
	r := c.run("servers", "list", "--servers", c.workspace+"/./servers.json", "-o", "json", "--jq", `.[] | "\(.name) \(.connects) \(.not_started // false)"`)
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != "evil false true\nmine true false" {
		t.Errorf("servers list --servers: exit %d %q, want mine started and evil not\n%s", r.code, got, r.stderr)
	}
	r = c.run("servers", "tools", "mine", "--servers", named)
	if r.code != 0 || !strings.Contains(r.stdout, "greet") || !strings.Contains(r.stdout, "Replay needs trust") {
		t.Errorf("servers tools mine: exit %d, want its tools, judged without workspace trust\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("servers", "tools", "evil", "--servers", filepath.Join(c.workspace, "more.yaml"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "until you trust it") {
		t.Errorf("servers tools evil, imported by a named file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a command that only looks ran a server of the workspace's own files")
	}
}
