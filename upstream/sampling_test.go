package upstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeWorkspace writes mcpflow.yaml (and any other files) into a new
// directory and returns it.
func writeWorkspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadSampling(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{WorkspaceFile: `servers:
  demo: {builtin: demo}
sampling:
  provider: openai-compatible
  base_url: ${OLLAMA_URL:-http://localhost:11434/v1}
  model: llama3.2
  api_key: ${SAMPLING_TEST_KEY}
  approve: true
  timeout: 90s
`})
	cfg, err := LoadConfig(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Sampling
	file := filepath.Join(dir, WorkspaceFile)
	if s == nil || s.Provider != SamplingOpenAICompatible || s.BaseURL != "${OLLAMA_URL:-http://localhost:11434/v1}" || s.Model != "llama3.2" ||
		s.APIKey != "${SAMPLING_TEST_KEY}" || !s.Approve || s.Timeout != 90*time.Second || s.Origin != file+":4:3" {
		t.Fatalf("sampling = %+v", s)
	}
	if len(cfg.Servers) != 1 {
		t.Errorf("servers %v", cfg.Servers)
	}

	env := map[string]string{"SAMPLING_TEST_KEY": "sk-secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	x, err := s.Expand(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if x.APIKey != "sk-secret" || x.BaseURL != "http://localhost:11434/v1" || s.APIKey != "${SAMPLING_TEST_KEY}" {
		t.Errorf("expanded %+v from %+v", x, s)
	}
	// Shown, the expanded copy hides its key; the section as read shows
	// only the reference.
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if got := fmt.Sprintf(f, x); strings.Contains(got, "sk-secret") || !strings.Contains(got, "<redacted>") {
			t.Errorf("%s of the expanded section: %s", f, got)
		}
	}
	if got := s.String(); !strings.Contains(got, "api_key: ${SAMPLING_TEST_KEY}") {
		t.Errorf("String() = %s", got)
	}

	env["OLLAMA_URL"] = "localhost:11434"
	_, err = s.Expand(lookup)
	if want := file + `:5:13: sampling.base_url: ${OLLAMA_URL:-http://localhost:11434/v1} expands to a value that "localhost:11434" is not http or https (expected an http:// or https:// URL such as http://localhost:11434/v1)`; err == nil || err.Error() != want {
		t.Errorf("bad base_url:\n got  %v\n want %s", err, want)
	}
	delete(env, "OLLAMA_URL")

	delete(env, "SAMPLING_TEST_KEY")
	_, err = s.Expand(lookup)
	want := file + ":7:12: sampling.api_key: ${SAMPLING_TEST_KEY}: environment variable not set (expected it set, or ${SAMPLING_TEST_KEY:-DEFAULT})"
	if !errors.Is(err, ErrUnsetVariable) || err.Error() != want {
		t.Errorf("unset variable:\n got  %v\n want %s", err, want)
	}
}

func TestLoadWithoutSampling(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{WorkspaceFile: "servers:\n  demo: {builtin: demo}\n"})
	cfg, err := LoadConfig(dir, "")
	if err != nil || cfg.Sampling != nil {
		t.Fatalf("LoadConfig = %+v, %v; want no sampling", cfg, err)
	}
	if cfg, err := LoadConfig(t.TempDir(), ""); err != nil || cfg.Sampling != nil {
		t.Fatalf("no mcpflow.yaml: %+v, %v", cfg, err)
	}
}

func TestSamplingErrors(t *testing.T) {
	for _, tc := range []struct{ section, want string }{
		{"sampling: yes", `:1:11: sampling: expected a mapping with provider, base_url and model, found a string`},
		{"sampling:\n  base_url: http://h/v1\n  model: m", `:2:3: sampling: missing provider (expected provider: openai-compatible)`},
		{"sampling:\n  provider: anthropic\n  base_url: http://h/v1\n  model: m", `:2:13: sampling.provider: unknown provider "anthropic" (supported: openai-compatible)`},
		{"sampling:\n  provider: openai-compatible\n  model: m", `:2:3: sampling: missing base_url (expected the API's root, such as base_url: http://localhost:11434/v1)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1", `:2:3: sampling: missing model (expected the model to ask, such as model: llama3.2)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: ''", `:4:10: sampling.model: empty (expected the model to ask, such as llama3.2)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: localhost:11434\n  model: m", `:3:13: sampling.base_url: url "localhost:11434" is not http or https (expected an http:// or https:// URL such as http://localhost:11434/v1)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1?key=x\n  model: m", `:3:13: sampling.base_url: has a query or a fragment (expected none: /chat/completions is added to its path)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://me:pw@h/v1\n  model: m", `:3:13: sampling.base_url: holds a user name or password (expected the key in api_key)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: m\n  api_key: ${1KEY}", `:5:12: sampling.api_key: bad variable reference ${1KEY} (expected ${NAME} or ${NAME:-DEFAULT}, NAME of letters, digits and _)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: m\n  approve: sometimes", `:5:12: sampling.approve: expected true or false, found a string`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: m\n  timeout: soon", `:5:12: sampling.timeout: "soon" is not a duration (expected a number with a unit, such as "30s" or "2m")`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: m\n  api-key: x", `:5:3: sampling: unknown key "api-key" (did you mean "api_key"?)`},
		{"sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: [a]", `:4:10: sampling.model: expected a string, found a list`},
		{"sampling:\n  provider: openai-compatible\n  provider: openai-compatible", `:3:3: sampling: duplicate key "provider" (expected each key once)`},
	} {
		t.Run(strings.SplitN(tc.want, ": ", 3)[1], func(t *testing.T) {
			dir := writeWorkspace(t, map[string]string{WorkspaceFile: tc.section + "\n"})
			_, err := LoadConfig(dir, "")
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if want := filepath.Join(dir, WorkspaceFile) + tc.want; err.Error() != want {
				t.Errorf("\n got  %s\n want %s", err, want)
			}
		})
	}
}

// TestSamplingOnlyInTheWorkspaceFile: an imported file and a --servers
// file hold servers; the provider (and its key) is the workspace's.
func TestSamplingOnlyInTheWorkspaceFile(t *testing.T) {
	section := "sampling:\n  provider: openai-compatible\n  base_url: http://h/v1\n  model: m\n"
	dir := writeWorkspace(t, map[string]string{
		WorkspaceFile: "import: [more.yaml]\n",
		"more.yaml":   "servers:\n  a: {builtin: demo}\n" + section,
		"flag.yaml":   section,
	})
	_, err := LoadConfig(dir, "")
	want := filepath.Join(dir, "more.yaml") + ":4:3: sampling: only the workspace's mcpflow.yaml configures sampling (expected servers: only in this file)"
	if !errors.Is(err, ErrConfig) || err.Error() != want {
		t.Errorf("imported:\n got  %v\n want %s", err, want)
	}
	os.WriteFile(filepath.Join(dir, WorkspaceFile), nil, 0o600)
	_, err = LoadConfig(dir, filepath.Join(dir, "flag.yaml"))
	if !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), filepath.Join(dir, "flag.yaml")+":2:3: sampling: only the workspace's") {
		t.Errorf("--servers: %v", err)
	}
}
