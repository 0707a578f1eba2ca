package upstream

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestClaudeCodeProjectServers: Claude Code's ~/.claude.json contributes
// its user-scoped servers and the servers `claude mcp add` put under the
// workspace's own project (which win over user-scoped ones of the same
// name), not those of other projects; imported without a workspace, only
// the user-scoped ones.
func TestClaudeCodeProjectServers(t *testing.T) {
	ws := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "claude-code", "claude.json"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	file := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(src), "PROJECT", ws)), 0o600); err != nil {
		t.Fatal(err)
	}
	set, _, err := LoadExternal(ws, file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), " "); got != "db github notes" {
		t.Errorf("servers %q, want db github notes (not other)", got)
	}
	if n := set["notes"]; n == nil || len(n.Args) != 1 || n.Args[0] != "--project" {
		t.Errorf("notes = %+v, want the project's entry", n)
	}
	if db := set["db"]; db == nil || !strings.Contains(db.Origin, ".claude.json:") {
		t.Errorf("db = %+v, want its origin in .claude.json", db)
	}
	got := strings.ReplaceAll(string(renderJSON(t, set)), home, "$CLAUDE_HOME")
	golden(t, filepath.Join("testdata", "claude-code", "claude.json.golden"), []byte(got))
	alone, err := Import(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(alone.Names(), " "); got != "github notes" {
		t.Errorf("without a workspace: %q, want the user-scoped github notes", got)
	}
}

// TestUnsetVariableAsSpelled: a variable an imported file spells
// ${env:NAME} is reported as the user wrote it when it is not set, where
// it is, and with what to set; mcpflow's own ${NAME} keeps its own advice.
func TestUnsetVariableAsSpelled(t *testing.T) {
	set, err := Import(filepath.Join("testdata", "import", "cursor-mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	unset := func(string) (string, bool) { return "", false }
	_, err = set["linear"].expand("header Authorization", set["linear"].Headers["Authorization"], unset)
	want := `testdata/import/cursor-mcp.json:5:36: server "linear": header Authorization: ${env:LINEAR_API_KEY}: environment variable not set (expected LINEAR_API_KEY set in mcpflow's environment)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrUnsetVariable) {
		t.Errorf("got %v\nwant %s", err, want)
	}
	own := &Server{Name: "s"}
	if _, err := own.expand("url", "https://x/${TOKEN}", unset); err == nil || !strings.Contains(err.Error(), "${TOKEN}: environment variable not set (expected it set, or ${TOKEN:-DEFAULT})") {
		t.Errorf("own spelling: %v", err)
	}
}

// TestClaudeCodeScopes: when ~/.claude.json and a project's .mcp.json are
// both read, Claude Code's own rules decide, whichever file mcpflow read
// first and however (import: or --servers): local scope wins over the
// project's .mcp.json, which wins over user scope; the .mcp.json servers
// that projects[DIR].disabledMcpjsonServers names, and those a non-empty
// enabledMcpjsonServers does not, are left out, with where and why — and a
// user-scoped entry of a name left out stays in effect.
func TestClaudeCodeScopes(t *testing.T) {
	dir := filepath.Join("testdata", "claude-code", "scopes")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ws, home := t.TempDir(), t.TempDir()
	claude, mcpjson := filepath.Join(home, ".claude.json"), filepath.Join(ws, ".mcp.json")
	for path, src := range map[string]string{claude: strings.ReplaceAll(read("claude.json"), "PROJECT", ws), mcpjson: read("mcp.json")} {
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var first *Config
	for _, c := range []struct {
		name    string
		imports string
		flag    string
	}{
		{".mcp.json then ~/.claude.json", "[.mcp.json, " + claude + "]", ""},
		{"~/.claude.json then .mcp.json", "[" + claude + ", .mcp.json]", ""},
		{"--servers ~/.claude.json", "[.mcp.json]", claude},
		{"--servers .mcp.json", "[" + claude + "]", mcpjson},
	} {
		if err := os.WriteFile(filepath.Join(ws, WorkspaceFile), []byte("import: "+c.imports+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(ws, c.flag)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if first == nil {
			first = cfg
			disabled := map[string]string{}
			for name, d := range cfg.Disabled {
				disabled[name] = d.Reason()
			}
			got := string(renderJSON(t, map[string]any{"servers": cfg.Servers, "disabled": disabled}))
			got = strings.ReplaceAll(strings.ReplaceAll(got, home, "$CLAUDE_HOME"), ws, "$WS")
			golden(t, filepath.Join(dir, "scopes.golden"), []byte(got))
		}
		var won, wonFirst, off, offFirst []string
		for _, name := range first.Servers.Names() {
			wonFirst = append(wonFirst, name+" "+first.Servers[name].Origin)
		}
		for _, name := range cfg.Servers.Names() {
			won = append(won, name+" "+cfg.Servers[name].Origin)
		}
		for _, name := range slices.Sorted(maps.Keys(first.Disabled)) {
			offFirst = append(offFirst, name+" "+first.Disabled[name].Reason())
		}
		for _, name := range slices.Sorted(maps.Keys(cfg.Disabled)) {
			off = append(off, name+" "+cfg.Disabled[name].Reason())
		}
		if !slices.Equal(won, wonFirst) || !slices.Equal(off, offFirst) {
			t.Errorf("%s: in effect %q, left out %q;\nwant %q and %q, as read the other way", c.name, won, off, wonFirst, offFirst)
		}
	}
}
