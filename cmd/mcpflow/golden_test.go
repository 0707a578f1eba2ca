package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// inProcess runs the CLI in this process, as a user would run mcpflow in
// workspace ws. The builtin demo server is this test binary, which acts as
// mcpflow when asMainEnv is set.
func inProcess(t *testing.T, ws string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"--workspace", ws}, args...)
	if len(args) > 0 && args[0] == "__complete" {
		// The shell passes the words typed after the command name.
		full = append([]string{"__complete", "--workspace", ws}, args[1:]...)
	}
	code := run(full, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<ID>"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}(-[0-9a-f]{4})?\b`), "<ID>"},
	{regexp.MustCompile(`(hmac-)?sha256:[0-9a-f]{64}`), "<DIGEST>"},
	{regexp.MustCompile(`"sealed":"[A-Za-z0-9+/=]+"`), `"sealed":"<SEALED>"`},
	{regexp.MustCompile(`\d+ → \d+ bytes`), "<SIZE> → <SIZE> bytes"}, // the file grows in steps that depend on timing
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`), "<TIME>"},
	{regexp.MustCompile(`\b\d+s ago\b`), "<AGO>"},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s)\b`), "<DUR>"},
	{regexp.MustCompile(` {2,}`), " "},
}

func normalize(s, ws, cfg string) string {
	s = strings.ReplaceAll(s, cfg, "<CONFIG>")
	s = strings.ReplaceAll(s, ws, "<WS>")
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestGolden runs each command in process against one workspace and
// compares its output, normalized for ids, times and paths, with
// testdata/golden.
func TestGolden(t *testing.T) {
	ws, cfg := t.TempDir(), t.TempDir()
	t.Setenv(asMainEnv, "1")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("NO_COLOR", "1")
	t.Setenv("MCPFLOW_JOURNAL", "")
	hello := abs(t, repoFile("examples", "workflows", "hello.yaml"))
	bad := filepath.Join(ws, "bad.yaml")
	os.WriteFile(bad, []byte("name: bad\nservers: {demo: {builtin: demo}}\nsteps:\n  - {id: a, server: demo, tool: greet, wiht: {}}\n"), 0o600)
	cp := func(src string) string {
		b, _ := os.ReadFile(src)
		dst := filepath.Join(ws, filepath.Base(src))
		os.WriteFile(dst, b, 0o600)
		return dst
	}
	hello = cp(hello)

	var runID, invID string
	steps := []struct {
		name string
		args func() []string
	}{
		{"version", func() []string { return []string{"version"} }},
		{"unknown-command", func() []string { return []string{"frobnicate"} }},
		{"journal-list-empty", func() []string { return []string{"journal", "list"} }},
		{"validate", func() []string { return []string{"validate", hello} }},
		{"validate-error", func() []string { return []string{"validate", bad} }},
		{"servers-list", func() []string { return []string{"servers", "list", "--workflow", hello} }},
		{"servers-tools", func() []string { return []string{"servers", "tools", "demo", "--workflow", hello} }},
		{"servers-tools-one", func() []string { return []string{"servers", "tools", "demo", "count_slowly", "--workflow", hello} }},
		{"servers-tools-one-enum", func() []string { return []string{"servers", "tools", "demo", "log", "--workflow", hello} }},
		{"servers-tools-one-json", func() []string {
			return []string{"servers", "tools", "demo", "greet", "--workflow", hello, "-o", "json"}
		}},
		{"servers-tools-unknown-tool", func() []string { return []string{"servers", "tools", "demo", "gret", "--workflow", hello} }},
		{"servers-tools-json", func() []string {
			return []string{"servers", "tools", "demo", "--workflow", hello, "-o", "json", "--trust-workspace"}
		}},
		{"servers-resources", func() []string { return []string{"servers", "resources", "demo", "--workflow", hello} }},
		{"servers-resources-json", func() []string {
			return []string{"servers", "resources", "demo", "--workflow", hello, "-o", "json"}
		}},
		{"servers-prompts", func() []string { return []string{"servers", "prompts", "demo", "--workflow", hello} }},
		{"servers-prompts-json", func() []string { return []string{"servers", "prompts", "demo", "--workflow", hello, "-o", "json"} }},
		{"servers-prompts-unknown-server", func() []string { return []string{"servers", "prompts", "dmeo", "--workflow", hello} }},
		{"complete-servers-resources", func() []string {
			return []string{"__complete", "servers", "resources", "--workflow", hello, ""}
		}},
		{"trust-list-empty", func() []string { return []string{"trust", "list"} }},
		{"trust-add", func() []string { return []string{"trust", "add"} }},
		{"trust-list", func() []string { return []string{"trust", "list", "-o", "json"} }},
		{"run", func() []string { return []string{"run", hello, "--input", "name=Ada"} }},
		{"run-json", func() []string { return []string{"run", hello, "-o", "json"} }},
		{"run-bad-input", func() []string { return []string{"run", hello, "--input", "nmae=x"} }},
		{"runs-list", func() []string { return []string{"runs", "list"} }},
		{"journal-list", func() []string { return []string{"journal", "list", "--limit", "3"} }},
		{"journal-list-json", func() []string { return []string{"journal", "list", "--limit", "1", "-o", "json"} }},
		{"journal-list-fields", func() []string { return []string{"journal", "list", "--limit", "2", "--json", "step,state,attempts"} }},
		{"journal-list-unknown-field", func() []string { return []string{"journal", "list", "--json", "step,bogus"} }},
		{"journal-list-cut", func() []string { return []string{"journal", "list", "--limit", "2"} }},
		{"runs-list-jq", func() []string {
			return []string{"runs", "list", "--jq", `.[0] | .workflow + ": " + (.steps | map(.step) | join(","))`}
		}},
		{"runs-list-workflow", func() []string {
			return []string{"runs", "list", "--workflow", "hello", "--since", "1h", "--time-format", "iso"}
		}},
		{"runs-list-bad-time-format", func() []string { return []string{"runs", "list", "--time-format", "unix"} }},
		{"runs-show", func() []string { return []string{"runs", "show", runID} }},
		{"journal-show", func() []string { return []string{"journal", "show", invID, "--payload"} }},
		{"journal-resolve-completed-invocation", func() []string { return []string{"journal", "resolve", invID, "--as", "failed", "--reason", "x"} }},
		{"resume-succeeded", func() []string { return []string{"resume", runID} }},
		{"journal-check", func() []string { return []string{"journal", "check"} }},
		{"journal-check-json", func() []string { return []string{"journal", "check", "-o", "json"} }},
		{"journal-export", func() []string { return []string{"journal", "export", "--since", "1h"} }},
		{"journal-export-jq", func() []string {
			return []string{"journal", "export", "--jq", `select(.step == "shout") | "\(.tool) \(.state) item=\(.item)"`}
		}},
		{"runs-list-jsonl", func() []string { return []string{"runs", "list", "--limit", "1", "-o", "jsonl"} }},
		{"journal-prune-dry-run", func() []string { return []string{"journal", "prune", "--before", "2000-01-01", "--dry-run"} }},
		{"journal-prune-missing-before", func() []string { return []string{"journal", "prune"} }},
		{"journal-compact", func() []string { return []string{"journal", "compact"} }},
		{"journal-list-bad-state", func() []string { return []string{"journal", "list", "--state", "done"} }},
		{"trust-remove", func() []string { return []string{"trust", "remove"} }},
		{"complete-resume", func() []string { return []string{"__complete", "resume", ""} }},
		{"complete-servers", func() []string { return []string{"__complete", "servers", "tools", "--workflow", hello, ""} }},
	}
	for _, s := range steps {
		code, out, errs := inProcess(t, ws, s.args()...)
		if s.name == "run" {
			var runs []map[string]any
			_, js, _ := inProcess(t, ws, "runs", "list", "-o", "json")
			json.Unmarshal([]byte(js), &runs)
			runID = runs[0]["id"].(string)
			invID = runs[0]["steps"].([]any)[0].(map[string]any)["invocation"].(string)
		}
		got := fmt.Sprintf("$ mcpflow %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(s.args(), " "), code, out, errs)
		checkGolden(t, s.name, normalize(got, ws, cfg))
	}
}

func TestGoldenCall(t *testing.T) {
	ws, cfg := t.TempDir(), t.TempDir()
	t.Setenv(asMainEnv, "1")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("NO_COLOR", "1")
	os.WriteFile(filepath.Join(ws, "mcpflow.yaml"), []byte("servers:\n  demo: {builtin: demo}\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"call", []string{"call", "demo", "greet", "--arg", "name=Ada"}},
		{"call-typed", []string{"call", "demo", "count_slowly", "--arg", "n=3", "--arg", "delay_ms=1", "-o", "json"}},
		{"call-missing-argument", []string{"call", "demo", "greet"}},
		{"call-unknown-tool", []string{"call", "demo", "gret"}},
		{"call-unknown-server", []string{"call", "dmeo", "greet"}},
		{"call-tool-error", []string{"call", "demo", "fail", "--arg", "message=disk full"}},
		{"complete-call-tools", []string{"__complete", "call", "demo", "c"}},
		{"call-media", []string{"call", "demo", "media"}},
	} {
		code, out, errs := inProcess(t, ws, tc.args...)
		got := fmt.Sprintf("$ mcpflow %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tc.args, " "), code, out, errs)
		checkGolden(t, tc.name, normalize(got, ws, cfg))
	}
	// journal show renders the same content, and the structured content.
	_, js, _ := inProcess(t, ws, "journal", "list", "--tool", "media", "--limit", "1", "-o", "json")
	var invs []struct{ ID string }
	if err := json.Unmarshal([]byte(js), &invs); err != nil || len(invs) != 1 {
		t.Fatalf("journal list: %v %s", err, js)
	}
	args := []string{"journal", "show", invs[0].ID, "--payload"}
	code, out, errs := inProcess(t, ws, args...)
	got := fmt.Sprintf("$ mcpflow %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out, errs)
	checkGolden(t, "journal-show-media", normalize(got, ws, cfg))
}

// TestCallSendsArgumentsAsGiven: expression syntax inside --args, at any
// depth, is sent literally; the journaled definition holds no server entry.
func TestCallSendsArgumentsAsGiven(t *testing.T) {
	ws, cfg := t.TempDir(), t.TempDir()
	t.Setenv(asMainEnv, "1")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.WriteFile(filepath.Join(ws, "mcpflow.yaml"), []byte("servers:\n  demo: {builtin: demo, env: {API_KEY: sk-live-LITERAL}}\n"), 0o600)
	args := `{"key":"${{ 1 + 1 }}","value":"${{ [\"a\"] }} and ${{ 2 }}"}`
	code, out, errs := inProcess(t, ws, "call", "demo", "put_record", "--args", args, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Invocation struct {
			Result struct {
				Structured map[string]string `json:"structured_content"`
			} `json:"result"`
		} `json:"invocation"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if s := got.Invocation.Result.Structured; s["key"] != "${{ 1 + 1 }}" || s["value"] != `${{ ["a"] }} and ${{ 2 }}` {
		t.Errorf("the server received %v", s)
	}
	b, _ := os.ReadFile(filepath.Join(ws, ".mcpflow", "journal.db"))
	if bytes.Contains(b, []byte("sk-live-LITERAL")) {
		t.Error("the server entry's env reached the journal")
	}
}
