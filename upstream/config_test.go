package upstream

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/didyoumean"

	"go.yaml.in/yaml/v3"
)

// entryNode parses src (a workflow-like document) and returns the value of
// servers.NAME, as the workflow loader will hand it to ParseEntry.
func entryNode(t *testing.T, src, name string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "servers" {
			continue
		}
		m := root.Content[i+1]
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == name {
				return m.Content[j+1]
			}
		}
	}
	t.Fatalf("no servers.%s in %q", name, src)
	return nil
}

func TestParseEntry(t *testing.T) {
	src := `name: w
servers:
  all:
    command: srv
    args: [--port, 8080, "${PORT:-1}"]
    env: {A: "1", B: "${B}"}
    cwd: tools
    trust: true
    connect_timeout: 5s
    call_timeout: 1m
  remote:
    url: https://example.com/mcp
    type: http
    headers: {Authorization: "Bearer ${TOKEN}"}
`
	got, err := ParseEntry("wf.yaml", "all", entryNode(t, src, "all"))
	if err != nil {
		t.Fatal(err)
	}
	if at := canonicalFile("wf.yaml") + ":4:5"; got.at != at {
		t.Errorf("at = %q, want %q", got.at, at)
	}
	got.at = "" // compared above
	want := &Server{Name: "all", Command: "srv", Args: []string{"--port", "8080", "${PORT:-1}"}, Env: map[string]string{"A": "1", "B": "${B}"},
		Cwd: "tools", Trust: true, ConnectTimeout: 5 * time.Second, CallTimeout: time.Minute, Origin: "wf.yaml:4:5", File: "wf.yaml",
		places: map[string]string{"command": "wf.yaml:4:14", "args[0]": "wf.yaml:5:12", "args[1]": "wf.yaml:5:20", "args[2]": "wf.yaml:5:26",
			"env A": "wf.yaml:6:14", "env B": "wf.yaml:6:22", "cwd": "wf.yaml:7:10"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseEntry = %+v\nwant        %+v", got, want)
	}
	remote, err := ParseEntry("wf.yaml", "remote", entryNode(t, src, "remote"))
	if err != nil {
		t.Fatal(err)
	}
	if remote.Transport() != TransportHTTP || remote.Headers["Authorization"] != "Bearer ${TOKEN}" {
		t.Errorf("remote = %+v", remote)
	}
}

func TestParseEntryErrors(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{"builtin: demo\n    conect_timeout: 5s", `wf.yaml:5:5: server s: unknown key "conect_timeout" (did you mean "connect_timeout"?)`},
		{"builtin: demo\n    workspace_trust: true", `wf.yaml:5:5: server s: unknown key "workspace_trust": workspace trust cannot be granted by a file (expected ` + "`mcpflow trust add DIR`" + ` or --trust-workspace; a server entry's trust: is server trust)`},
		{"command: x\n    type: sse", `wf.yaml:5:11: server s: type sse without a url (expected url: https://HOST/PATH, or type stdio)`},
		{"url: https://h/mcp\n    type: stdio", `wf.yaml:5:11: server s: type stdio with a url (expected type http or sse, or a command instead of the url)`},
		{"url: https://h/mcp\n    args: [a]", `wf.yaml:5:11: server s: args applies only to servers started with builtin or command (expected no args with a url)`},
		{"url: https://h/mcp\n    type: websocket", `wf.yaml:5:11: server s: unknown type "websocket" (expected stdio, http or sse)`},
		{"url: /relative", `wf.yaml:4:10: server s: url "/relative" is not http or https (expected an http:// or https:// URL such as https://example.com/mcp)`},
		{"url: http://", `wf.yaml:4:10: server s: url "http://" has no host (expected an http:// or https:// URL such as https://example.com/mcp)`},
		{"command: x\n    call_timeout: soon", `wf.yaml:5:19: server s: call_timeout: "soon" is not a duration (expected a number with a unit, such as "30s" or "2m")`},
		{"command: x\n    env: [A=1]", `wf.yaml:5:10: server s: env: expected a mapping of NAME: VALUE, found a list`},
		{"command: x\n    env: {A: ${B}", ``}, // a YAML error, reported by the caller's decoder
		{"command: [x]", `wf.yaml:4:14: server s: command: expected a string, found a list`},
		{"trust: true", `wf.yaml:4:5: server s: says neither how to start nor where to reach the server (expected one of builtin: demo, command: PROGRAM or url: https://HOST/PATH)`},
		{"command: x\n    env: {A: \"${1BAD}\"}", `wf.yaml:5:10: server s: env A: bad variable reference ${1BAD} (expected ${NAME} or ${NAME:-DEFAULT}, NAME of letters, digits and _)`},
	} {
		src := "name: w\nservers:\n  s:\n    " + tc.entry + "\n"
		var doc yaml.Node
		if yaml.Unmarshal([]byte(src), &doc) != nil {
			if tc.want != "" {
				t.Errorf("%q: not YAML", tc.entry)
			}
			continue
		}
		_, err := ParseEntry("wf.yaml", "s", entryNode(t, src, "s"))
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
			t.Errorf("%q: err = %v, want a *ConfigError", tc.entry, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%q:\n got  %s\n want %s", tc.entry, err, tc.want)
		}
		if ce.File != "wf.yaml" || ce.Line == 0 || ce.Column == 0 || ce.Server != "s" {
			t.Errorf("%q: fields %+v", tc.entry, ce)
		}
	}
	if _, err := ParseEntry("wf.yaml", "s", nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil node: %v", err)
	}
}

func TestValidateAndTransport(t *testing.T) {
	for _, tc := range []struct {
		srv       Server
		transport string
		err       string
	}{
		{Server{Name: "d", Builtin: "demo"}, "stdio", ""},
		{Server{Name: "c", Command: "x", Type: "stdio"}, "stdio", ""},
		{Server{Name: "h", URL: "https://h/mcp"}, "http", ""},
		{Server{Name: "h", URL: "https://h/mcp", Type: "http"}, "http", ""},
		{Server{Name: "s", URL: "https://h/sse", Type: "sse"}, "sse", ""},
		{Server{Name: "v", URL: "https://${HOST}/mcp"}, "http", ""},
		{Server{Name: "x"}, "stdio", "server x: says neither how to start nor where to reach the server (expected one of builtin: demo, command: PROGRAM or url: https://HOST/PATH)"},
		{Server{Name: "x", Builtin: "demo", Command: "y"}, "stdio", "server x: sets both builtin and command (expected exactly one of builtin, command or url)"},
		{Server{Name: "x", Command: "y", URL: "https://h"}, "http", "server x: sets both command and url (expected exactly one of builtin, command or url)"},
		{Server{Name: "x", Builtin: "other"}, "stdio", `server x: unknown builtin "other" (expected demo)`},
		{Server{Name: "x", URL: "https://h", Cwd: "."}, "http", "server x: cwd applies only to servers started with builtin or command (expected no cwd with a url)"},
		{Server{Name: "x", Command: "y", ConnectTimeout: -1}, "stdio", `server x: negative connect_timeout (expected a positive duration such as "30s")`},
		{Server{Builtin: "demo"}, "stdio", "empty server name (expected a non-empty key under servers)"},
	} {
		if got := tc.srv.Transport(); got != tc.transport {
			t.Errorf("%+v: Transport() = %q, want %q", tc.srv, got, tc.transport)
		}
		err := tc.srv.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%+v: %v", tc.srv, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, ErrConfig)):
			t.Errorf("%+v: err = %v, want %s", tc.srv, err, tc.err)
		}
	}
}

// TestMergePrecedence: later sets win, whole entries, no field mixing.
func TestMergePrecedence(t *testing.T) {
	workspace := Set{
		"docs": {Name: "docs", URL: "https://ws/mcp", Trust: true, Headers: map[string]string{"A": "1"}},
		"only": {Name: "only", Builtin: "demo"},
	}
	flagFile := Set{"docs": {Name: "docs", Command: "from-flag"}}
	workflow := Set{"docs": {Name: "docs", URL: "https://wf/mcp"}}
	got := Merge(workspace, flagFile, workflow)
	if d := got["docs"]; d != workflow["docs"] || d.Trust || d.Headers != nil {
		t.Errorf("docs = %+v, want the workflow's entry, untouched", d)
	}
	if got["only"] != workspace["only"] {
		t.Errorf("only = %+v", got["only"])
	}
	if d := Merge(workspace, flagFile)["docs"]; d.Command != "from-flag" || d.Trust {
		t.Errorf("flag over workspace: %+v", d)
	}
	if len(Merge()) != 0 || Merge(nil, Set{}) == nil {
		t.Error("Merge of nothing should be an empty, non-nil Set")
	}
	if len(workspace) != 2 || workspace["docs"].URL != "https://ws/mcp" {
		t.Error("Merge changed its input")
	}
}

func TestServerJSONRoundTrip(t *testing.T) {
	in := &Server{Name: "s", URL: "https://h/mcp", Type: "sse", Headers: map[string]string{"A": "b"}, Trust: true,
		ConnectTimeout: 1500 * time.Millisecond, CallTimeout: 2 * time.Minute, Origin: "f.yaml:1:2"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"connect_timeout":"1.5s"`) || !strings.Contains(string(b), `"call_timeout":"2m0s"`) {
		t.Errorf("durations not written as strings: %s", b)
	}
	var out Server
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, &out) {
		t.Errorf("round trip: %+v != %+v", out, *in)
	}
}

func TestRedacted(t *testing.T) {
	s := &Server{Name: "s", URL: "https://h", Headers: map[string]string{"Authorization": "Bearer abc", "X-Key": "${KEY}"}}
	r := s.Redacted()
	if r.Headers["Authorization"] != "<redacted>" || r.Headers["X-Key"] != "${KEY}" {
		t.Errorf("Redacted headers = %v", r.Headers)
	}
	if s.Headers["Authorization"] != "Bearer abc" {
		t.Error("Redacted changed the original")
	}
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"A": "1", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"plain":               "plain",
		"$A and $$ and $":     "$A and $$ and $",
		"${A}":                "1",
		"x${A}y${A}z":         "x1y1z",
		"${MISSING:-dflt}":    "dflt",
		"${EMPTY:-dflt}":      "dflt",
		"${EMPTY}":            "",
		"${A:-dflt}":          "1",
		"$${A} stays literal": "${A} stays literal",
	} {
		got, err := expandVars(in, lookup)
		if err != nil || got != want {
			t.Errorf("expandVars(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"${MISSING}": "${MISSING}: environment variable not set (expected it set, or ${MISSING:-DEFAULT})",
		"${A":        `unclosed "${A" (expected ${NAME})`,
		"${}":        "bad variable reference ${} (expected ${NAME} or ${NAME:-DEFAULT}, NAME of letters, digits and _)",
		"${env:A}":   "bad variable reference ${env:A} (expected ${NAME} or ${NAME:-DEFAULT}, NAME of letters, digits and _)",
	} {
		_, err := expandVars(in, lookup)
		if err == nil || err.Error() != want {
			t.Errorf("expandVars(%q) error = %v, want %s", in, err, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{"comand": "command", "URL": "url", "heders": "headers", "zzzzzz": "", "x": ""} {
		if got := didyoumean.Closest(in, entryKeys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzImportJSON: no input makes the JSON importer panic, and every error
// is a positioned *ConfigError.
func FuzzImportJSON(f *testing.F) {
	for _, s := range []string{
		`{"mcpServers":{"a":{"command":"x","args":["1"],"env":{"A":"${B}"}}}}`,
		`{"servers":{"a":{"type":"sse","url":"http://h/sse"}},"inputs":[{"id":"k"}]}`,
		`{"mcpServers":{"a":{"httpUrl":"http://h","timeout":5,"trust":true}}}`,
		`// c` + "\n" + `{"servers":{"a":{"command":"${input:k}",},},}`,
		`{"mcpServers": /* x`, `[`, `"\ud800"`, `{"mcp":{"servers":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := importJSON("f.json", src, "")
		if err == nil {
			set, _ := r.merge()
			for _, s := range set {
				if s.Validate() != nil {
					t.Errorf("imported an invalid entry: %+v", s)
				}
			}
			return
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Line < 1 || ce.Column < 1 {
			t.Errorf("error %v is not a positioned *ConfigError", err)
		}
	})
}

// FuzzLoadYAML: the YAML reader (and ParseEntry under it) never panics and
// returns only *ConfigError.
func FuzzLoadYAML(f *testing.F) {
	for _, s := range []string{
		"servers:\n  d: {builtin: demo, trust: true}\n",
		"servers:\n  r: {url: 'https://h/mcp', headers: {A: b}, call_timeout: 1s}\n",
		"servers: &a\n  d: *a\n", "import: [x]\n", "servers:\n  d:\n    <<: {builtin: demo}\n",
		"- [", "servers: {d: {args: [!!binary aGk=]}}",
		"sampling: {provider: openai-compatible, base_url: 'http://h/v1', model: m, api_key: '${K}', approve: true, timeout: 1m}\n",
		"sampling: &s {provider: openai-compatible, base_url: '${U}', model: *s}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		r, _, err := loadYAML("f.yaml", src, t.TempDir(), false)
		if err == nil {
			if sm := r.sampling; sm != nil && (sm.Provider != SamplingOpenAICompatible || sm.Model == "" || sm.BaseURL == "" || sm.Timeout < 0) {
				t.Errorf("loaded an invalid sampling section: %v", sm)
			}
			set, _ := r.merge()
			for _, s := range set {
				if s.Validate() != nil {
					t.Errorf("loaded an invalid entry: %+v", s)
				}
			}
			return
		}
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("error %v (%T) is not a *ConfigError", err, err)
		}
	})
}

// TestEnvAllowedRestrictsExpansion: an entry with EnvAllowed set (a
// workflow's own server) expands only the variables it allows, whatever the
// environment holds.
func TestEnvAllowedRestrictsExpansion(t *testing.T) {
	lookup := func(string) (string, bool) { return "leaked", true }
	srv := &Server{Name: "r", URL: "http://127.0.0.1:1/${SECRET}", EnvAllowed: []string{}}
	_, err := Connect(t.Context(), srv, &Options{LookupEnv: lookup})
	if !errors.Is(err, ErrUnsetVariable) || strings.Contains(err.Error(), "leaked") {
		t.Errorf("Connect = %v, want ErrUnsetVariable without the value", err)
	}
	if got := (&Server{Command: "${A}", Args: []string{"${B:-x}", "$${C}"}, Env: map[string]string{"K": "${D}"}, Headers: map[string]string{"H": "${E}"}}).EnvRefs(); strings.Join(got, ",") != "A,B,D,E" {
		t.Errorf("EnvRefs = %v, want A,B,D,E", got)
	}
}
