package servers

import (
	"errors"
	"os"
	"path/filepath"
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
// ${env:NAME} is reported as the user wrote it when it is not set, with
// what to set; mcpflow's own ${NAME} keeps its own advice.
func TestUnsetVariableAsSpelled(t *testing.T) {
	set, err := Import(filepath.Join("testdata", "import", "cursor-mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	unset := func(string) (string, bool) { return "", false }
	_, err = set["linear"].expand("header Authorization", set["linear"].Headers["Authorization"], unset)
	want := `server "linear": header Authorization: ${env:LINEAR_API_KEY}: environment variable not set (expected LINEAR_API_KEY set in mcpflow's environment)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrUnsetVariable) {
		t.Errorf("got %v\nwant %s", err, want)
	}
	own := &Server{Name: "s"}
	if _, err := own.expand("url", "https://x/${TOKEN}", unset); err == nil || !strings.Contains(err.Error(), "${TOKEN}: environment variable not set (expected it set, or ${TOKEN:-DEFAULT})") {
		t.Errorf("own spelling: %v", err)
	}
}
