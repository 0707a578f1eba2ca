package workflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// TestAliasesReadAlikeInWorkflowsAndConfiguration: an anchor, an alias and a
// merge key mean the same in a workflow and in mcpflow.yaml, because both
// are read by internal/yamlpos.
func TestAliasesReadAlikeInWorkflowsAndConfiguration(t *testing.T) {
	dir := t.TempDir()
	conf := `servers:
  base: &base {builtin: demo, trust: true, call_timeout: 5s}
  copy: *base
  merged:
    <<: *base
    trust: false
`
	if err := os.WriteFile(filepath.Join(dir, upstream.WorkspaceFile), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	set, _, err := upstream.LoadWorkspace(dir)
	if err != nil {
		t.Fatalf("mcpflow.yaml with aliases: %v", err)
	}
	if c := set["copy"]; c == nil || c.Builtin != "demo" || !c.Trust || c.CallTimeout.String() != "5s" {
		t.Errorf("copy = %+v, want the base entry", c)
	}
	if m := set["merged"]; m == nil || m.Builtin != "demo" || m.Trust {
		t.Errorf("merged = %+v, want the base entry with trust false", m)
	}

	src := `name: aliases
servers:
  local: &srv {builtin: demo}
  again: *srv
steps:
  - id: a
    server: local
    tool: greet
    with: &args {name: Ada}
    retry: &r {attempts: 3, backoff: 2s}
  - id: b
    server: again
    tool: greet
    with:
      <<: *args
      punctuation: "!"
    retry: *r
`
	wf, err := workflow.Load("aliases.yaml", []byte(src), set)
	if err != nil {
		t.Fatalf("workflow with aliases: %v", err)
	}
	if a, b := wf.Steps[0].Retry, wf.Steps[1].Retry; a != b || b.Attempts != 3 || b.Backoff.String() != "2s" {
		t.Errorf("retry of b = %+v, want a's %+v", b, a)
	}
	if wf.Own["again"] == nil || wf.Own["again"].Builtin != "demo" {
		t.Errorf("server again = %+v, want the local entry", wf.Own["again"])
	}
	args, err := wf.Steps[1].With.Eval(t.Context(), workflow.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	if m := args.(map[string]any); m["name"] != "Ada" || m["punctuation"] != "!" {
		t.Errorf("with of b = %v, want name from the merge and punctuation", m)
	}

	// The same alias bomb is refused by both, with the same words.
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g"} {
		bomb += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	_, werr := workflow.Load("bomb.yaml", []byte(bomb), nil)
	if err := os.WriteFile(filepath.Join(dir, upstream.WorkspaceFile), []byte(bomb), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, serr := upstream.LoadWorkspace(dir)
	const want = "expands to more than 100000 nodes"
	for what, err := range map[string]error{"workflow": werr, "mcpflow.yaml": serr} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s alias bomb: error %v, want one saying %q", what, err, want)
		}
	}
}

// TestInputsFromFilesAndTheEnvironment: --input NAME=@FILE reads the value
// from a file, and MCPFLOW_INPUT_<NAME> supplies an input not given; an
// --input given wins. Neither shows the secret in the process list.
func TestInputsFromFilesAndTheEnvironment(t *testing.T) {
	wf, err := workflow.Load("w.yaml", []byte("name: w\ninputs:\n  api-token: {type: string, secret: true, required: true}\n  n: {type: number}\nsteps:\n  - {id: a, server: s, tool: t}\nservers: {s: {builtin: demo}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	got, err := wf.ParseInputs([]string{"api-token=@" + file})
	if err != nil || got["api-token"] != "from-file" {
		t.Errorf("@FILE: %v %v", got, err)
	}
	if workflow.InputEnv("api-token") != "MCPFLOW_INPUT_API_TOKEN" {
		t.Errorf("InputEnv = %s", workflow.InputEnv("api-token"))
	}
	t.Setenv("MCPFLOW_INPUT_API_TOKEN", "from-env")
	t.Setenv("MCPFLOW_INPUT_N", "3")
	got, err = wf.ParseInputs(nil)
	if err != nil || got["api-token"] != "from-env" || got["n"] != 3.0 {
		t.Errorf("environment: %v %v", got, err)
	}
	got, _ = wf.ParseInputs([]string{"api-token=given"})
	if got["api-token"] != "given" {
		t.Errorf("an --input does not win over the environment: %v", got)
	}
	if _, err := wf.ParseInputs([]string{"api-token=@/dev/zero"}); err == nil || !strings.Contains(err.Error(), "a device") {
		t.Errorf("@/dev/zero: %v", err)
	}
}

// TestStructuredSecretsAreRedactedPartByPart: an object input declared
// secret is redacted in every part wherever a part appears.
func TestStructuredSecretsAreRedactedPartByPart(t *testing.T) {
	secrets := workflow.SecretValues([]string{"creds"}, map[string]any{"creds": map[string]any{"user": "ada", "pass": "hunter2", "pin": 4321.0, "mfa": true}})
	got := workflow.RedactValue(map[string]any{"login": map[string]any{"pass": "hunter2", "note": "user ada"}, "pin": 4321.0}, secrets)
	b, _ := json.Marshal(got)
	for _, leaked := range []string{"hunter2", "ada", "4321"} {
		if strings.Contains(string(b), leaked) {
			t.Errorf("%s shown: %s", leaked, b)
		}
	}
}
