package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestGeminiToolFilters: a Gemini CLI settings.json's includeTools and
// excludeTools narrow what mcpflow lists and calls, through the real stdio
// path; $VAR in command is expanded as Gemini does.
func TestGeminiToolFilters(t *testing.T) {
	c := newCLI(t)
	settings := filepath.Join(c.workspace, ".gemini", "settings.json")
	c.writeFile(settings, `{
  "mcpServers": {
    "g": {
      "command": "$MCPFLOW_EXE",
      "args": ["demo-server"],
      "env": {"MCPFLOW_TEST_AS_MAIN": "1"},
      "includeTools": ["greet", "upper", "ledger_append"],
      "excludeTools": ["ledger_append"]
    }
  }
}`)
	c.env = []string{"MCPFLOW_EXE=" + c.exe()}
	r := c.run("servers", "tools", "g", "--servers", settings, "--trust-workspace", "-o", "json", "--jq", `[.[].name] | join(",")`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "greet,upper" {
		t.Errorf("servers tools: exit %d %q, want only greet,upper\n%s", r.code, r.stdout, r.stderr)
	}
	for tool, says := range map[string]string{
		"ledger_append":  `excludes tool "ledger_append"`,
		"not_idempotent": "allows only greet, upper, ledger_append",
	} {
		r := c.run("call", "g", tool, "--servers", settings, "--arg", "entry=x")
		if r.code != exitUsage || !strings.Contains(r.stderr, says) {
			t.Errorf("call %s: exit %d, want 2 saying %q\n%s", tool, r.code, says, r.stderr)
		}
	}
	if n := c.ledgerCount("ledger_append") + c.ledgerCount("not_idempotent"); n != 0 {
		t.Errorf("%d excluded calls ran", n)
	}
	if r := c.run("call", "g", "greet", "--servers", settings, "--arg", "name=Ada"); r.code != 0 || !strings.Contains(r.stdout, "Hello, Ada!") {
		t.Errorf("call greet: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestVSCodeInputsAndEnvFile: a VS Code server that asks for an input waits
// for MCPFLOW_INPUT_<ID> and only it: the file's other servers work; its
// envFile reaches the server, under its env.
func TestVSCodeInputsAndEnvFile(t *testing.T) {
	c := newCLI(t)
	mcp := filepath.Join(c.workspace, ".vscode", "mcp.json")
	c.writeFile(mcp, `// VS Code
{
  "inputs": [{"type": "promptString", "id": "api-key", "description": "Demo key", "password": true}],
  "servers": {
    "keyed": {
      "type": "stdio",
      "command": "${env:MCPFLOW_EXE}",
      "args": ["demo-server"],
      "env": {"MCPFLOW_TEST_AS_MAIN": "1", "DEMO_KEY": "${input:api-key}"},
      "envFile": "${workspaceFolder}/.env",
    },
    "plain": {"command": "${env:MCPFLOW_EXE}", "args": ["demo-server"], "env": {"MCPFLOW_TEST_AS_MAIN": "1"}},
  },
}`)
	c.writeFile(filepath.Join(c.workspace, ".env"), "# demo\nexport MCPFLOW_DEMO_LEDGER=\"from-envfile.jsonl\"\nMCPFLOW_TEST_AS_MAIN=0 # env wins\n")
	c.env = []string{"MCPFLOW_EXE=" + c.exe()}
	r := c.run("call", "keyed", "greet", "--servers", mcp, "--arg", "name=x")
	if r.code == 0 || !strings.Contains(r.stderr, "MCPFLOW_INPUT_API_KEY") {
		t.Errorf("keyed without its input: exit %d, want it named\n%s", r.code, r.stderr)
	}
	if r := c.run("call", "plain", "greet", "--servers", mcp, "--arg", "name=x"); r.code != 0 {
		t.Errorf("another server of the file: exit %d\n%s", r.code, r.stderr)
	}
	c.env = append(c.env, "MCPFLOW_INPUT_API_KEY=k")
	if r := c.run("call", "keyed", "ledger_append", "--servers", mcp, "--arg", "entry=e"); r.code != 0 {
		t.Fatalf("keyed with its input: exit %d\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(c.workspace, "from-envfile.jsonl")); err != nil || !strings.Contains(string(b), `"entry":"e"`) {
		t.Errorf("the envFile did not reach the server: %v %s", err, b)
	}
}

// TestShadowingAndIgnoredKeysAreVisible: servers list says which of two
// entries of the same name wins, and which keys of an imported entry
// mcpflow does not apply, with their file:line:col; JSON carries both.
func TestShadowingAndIgnoredKeysAreVisible(t *testing.T) {
	c := newCLI(t)
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), "import: [.vscode/mcp.json]\nservers:\n  demo: {builtin: demo}\n")
	c.writeFile(filepath.Join(c.workspace, ".vscode", "mcp.json"), "{\n  \"servers\": {\n    \"demo\": {\"command\": \"x\"},\n    \"notes\": {\"command\": \"notes-mcp\", \"dev\": {\"watch\": \"src\"}}\n  }\n}\n")
	r := c.run("servers", "list", "--no-connect")
	for _, want := range []string{
		"warning: server demo: " + filepath.Join(c.workspace, "mcpflow.yaml") + ":3:9 wins over the entry at " + filepath.Join(c.workspace, ".vscode", "mcp.json") + ":3:13",
		"warning: server notes: " + filepath.Join(c.workspace, ".vscode", "mcp.json") + `:4:39: key "dev" is not used by mcpflow (ignored)`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("servers list: want %q on stderr\n%s", want, r.stderr)
		}
	}
	r = c.run("servers", "list", "--no-connect", "--jq", `.[] | "\(.name) \(.shadows | length) \(.warnings | length)"`)
	if got := strings.TrimSpace(r.stdout); got != "demo 1 0\nnotes 0 1" {
		t.Errorf("servers list JSON: %q", got)
	}
}

// TestVSCodeInputAskedOnATerminal: on a terminal, a VS Code input a server
// needs is asked for before anything starts, without echo, and reaches the
// server.
func TestVSCodeInputAskedOnATerminal(t *testing.T) {
	c := newCLI(t)
	mcp := keyedByInput(c)
	code, out := ptyAnswer(t, c, "server keyed asks for a VS Code input (MCPFLOW_INPUT_LEDGER): ", "typed-ledger.jsonl", "call", "keyed", "ledger_append", "--servers", mcp, "--arg", "entry=e")
	if code != 0 || strings.Contains(out, "typed-ledger.jsonl") {
		t.Errorf("exit %d; the answer must not be echoed:\n%s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(c.workspace, "typed-ledger.jsonl")); err != nil || !strings.Contains(string(b), `"entry":"e"`) {
		t.Errorf("the answer did not reach the server: %v", err)
	}
}

// keyedByInput writes a VS Code mcp.json whose server keyed (the demo)
// keeps its ledger where the input ledger says, and returns its path.
func keyedByInput(c *cli) string {
	mcp := filepath.Join(c.workspace, ".vscode", "mcp.json")
	c.writeFile(mcp, `{
  "inputs": [{"type": "promptString", "id": "ledger", "description": "Ledger file", "password": true}],
  "servers": {"keyed": {"command": "${env:MCPFLOW_EXE}", "args": ["demo-server"], "env": {"MCPFLOW_TEST_AS_MAIN": "1", "MCPFLOW_DEMO_LEDGER": "${input:ledger}"}}}
}`)
	c.env = []string{"MCPFLOW_EXE=" + c.exe()}
	return mcp
}

// TestVSCodeInputQuestionEndsOnCtrlC: Ctrl-C at the question ends the
// command as interrupted, with nothing started, and does not wait for a
// line that will never come.
func TestVSCodeInputQuestionEndsOnCtrlC(t *testing.T) {
	c := newCLI(t)
	mcp := keyedByInput(c)
	code, out := ptyKeys(t, c, "server keyed asks for a VS Code input (MCPFLOW_INPUT_LEDGER): ", "\x03", "call", "keyed", "ledger_append", "--servers", mcp, "--arg", "entry=e")
	if code != exitInterrupted {
		t.Errorf("exit %d, want %d:\n%s", code, exitInterrupted, out)
	}
	if _, err := os.Stat(c.journalPath()); err == nil {
		if runs, _ := c.openJournal().Runs(journal.RunFilter{}); len(runs) != 0 {
			t.Errorf("Ctrl-C at the question started %d runs", len(runs))
		}
	}
}

// TestClaudeCodeSettingsLeaveOut: a .mcp.json server that Claude Code's
// settings for the project leave out is not used; servers list says why
// when asked for it by name, and so does a call.
func TestClaudeCodeSettingsLeaveOut(t *testing.T) {
	c := newCLI(t)
	home := t.TempDir()
	c.env = []string{"HOME=" + home}
	c.writeFile(filepath.Join(home, ".claude.json"), `{
  "mcpServers": {},
  "projects": {
    "`+c.workspace+`": {"mcpServers": {}, "enabledMcpjsonServers": [], "disabledMcpjsonServers": ["off"]}
  }
}`)
	c.writeFile(filepath.Join(c.workspace, ".mcp.json"), `{"mcpServers": {"on": {"command": "on-mcp"}, "off": {"command": "off-mcp"}}}`)
	c.writeFile(filepath.Join(c.workspace, "mcpflow.yaml"), "import: [.mcp.json, ~/.claude.json]\n")
	if r := c.run("servers", "list", "--no-connect", "--jq", ".[].name"); r.code != 0 || strings.TrimSpace(r.stdout) != "on" {
		t.Errorf("servers list: exit %d %q, want only on\n%s", r.code, r.stdout, r.stderr)
	}
	why := "is in Claude Code's disabledMcpjsonServers at " + filepath.Join(home, ".claude.json") + ":4:"
	if r := c.run("servers", "list", "--no-connect", "off"); r.code != 0 || !strings.Contains(r.stdout, "left out: the entry at "+filepath.Join(c.workspace, ".mcp.json")+":1:") || !strings.Contains(r.stdout, why) {
		t.Errorf("servers list off: exit %d, want why\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("call", "off", "greet"); r.code != exitUsage || !strings.Contains(r.stderr, why) {
		t.Errorf("call off: exit %d, want 2 saying why\n%s", r.code, r.stderr)
	}
}

// TestUnsetVariableFailsOnlyItsServer: an unset ${VAR} in one entry's env
// fails that server when it starts, naming the variable and where it is;
// listing servers, and using the file's other servers, work.
func TestUnsetVariableFailsOnlyItsServer(t *testing.T) {
	c := newCLI(t)
	file := filepath.Join(c.workspace, "servers.json")
	c.writeFile(file, `{
  "mcpServers": {
    "needs": {"command": "${env:MCPFLOW_EXE}", "args": ["demo-server"], "env": {"MCPFLOW_TEST_AS_MAIN": "1", "TOKEN": "${env:MCPFLOW_TEST_NEVER_SET}"}},
    "plain": {"command": "${env:MCPFLOW_EXE}", "args": ["demo-server"], "env": {"MCPFLOW_TEST_AS_MAIN": "1"}}
  }
}`)
	c.env = []string{"MCPFLOW_EXE=" + c.exe()}
	unset := file + `:3:119: server "needs": env TOKEN: ${env:MCPFLOW_TEST_NEVER_SET}: environment variable not set`
	if r := c.run("servers", "list", "--servers", file, "--trust-workspace", "-o", "json", "--jq", `.[] | "\(.name) \(.connects) \(.error // "")"`); r.code != 0 ||
		!strings.Contains(r.stdout, "needs false "+unset) || !strings.Contains(r.stdout, "plain true \n") {
		t.Errorf("servers list: exit %d, want both listed, needs failing where its variable is\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("call", "plain", "greet", "--servers", file, "--arg", "name=Ada"); r.code != 0 || !strings.Contains(r.stdout, "Hello, Ada!") {
		t.Errorf("call plain: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wf := c.workflow("plain.yaml", "name: p\nsteps:\n  - {id: a, server: plain, tool: greet, with: {name: Bo}}\n")
	if r := c.run("run", wf, "--servers", file); r.code != 0 {
		t.Errorf("run of a workflow using plain: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("call", "needs", "greet", "--servers", file, "--arg", "name=Ada"); r.code == 0 || !strings.Contains(r.stderr, unset) {
		t.Errorf("call needs: exit %d, want a failure saying %q\n%s", r.code, unset, r.stderr)
	}
}

// TestServersListTargetAsStarted: TARGET shows an entry as it would start:
// the default of an unset variable, and a set variable as a reference,
// its value unshown.
func TestServersListTargetAsStarted(t *testing.T) {
	c := newCLI(t)
	file := filepath.Join(c.workspace, ".mcp.json")
	c.writeFile(file, `{"mcpServers": {"p": {"command": "npx", "args": ["proj-mcp", "${PROJ_DIR:-/srv/projects}", "${PROJ_TOKEN:-none}"]}}}`)
	c.env = []string{"PROJ_TOKEN=s3cret"}
	r := c.run("servers", "list", "--no-connect", "--servers", file, "--jq", ".[].target")
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != "npx proj-mcp /srv/projects ${PROJ_TOKEN}" {
		t.Errorf("servers list: exit %d, target %q, want the default applied and the set value unshown\n%s", r.code, got, r.stderr)
	}
}
