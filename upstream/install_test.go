package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/mcpflow/mcpflow/internal/jsonpos"
)

const installExe = "/usr/local/bin/mcpflow"

// installCase is one archive of testdata/install: its header says the
// client, the file, the workspace ("/ws" unless said), the servers
// mcpflow.yaml defines, and the secrets the output must not show.
type installCase struct {
	client     *Client
	opts       *InstallOptions
	secrets    []string
	config     []byte
	goldenPath string
}

func readInstallCase(t testing.TB, path string) *installCase {
	t.Helper()
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &installCase{opts: &InstallOptions{Executable: installExe, Workspace: "/ws", Configured: map[string]string{}},
		goldenPath: strings.TrimSuffix(path, ".txtar") + ".golden"}
	for _, line := range strings.Split(strings.TrimSpace(string(a.Comment)), "\n") {
		key, val, _ := strings.Cut(line, ": ")
		switch key {
		case "client":
			if c.client, err = LookupClient(val); err != nil {
				t.Fatal(err)
			}
		case "file":
			c.opts.File = val
		case "workspace":
			c.opts.Workspace = val
		case "configured":
			c.opts.Configured[val] = "/ws/mcpflow.yaml:3:3"
		case "secret":
			c.secrets = append(c.secrets, val)
		default:
			t.Fatalf("%s: unknown header %q", path, line)
		}
	}
	for _, f := range a.Files {
		if f.Name == "config" {
			c.config = f.Data
		}
	}
	return c
}

// renderInstall is what the golden files hold: the diff, the YAML and
// each entry's fate.
func renderInstall(in *Install) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# diff (redacted: %v)\n%s# yaml\n%s# entries\n", in.Redacted, in.Diff, in.YAML)
	for _, e := range in.Entries {
		fmt.Fprintf(&b, "%s scope=%q %s at=%s", e.Name, e.Scope, e.Action, e.At)
		if e.Reason != "" {
			fmt.Fprintf(&b, " reason=%q", e.Reason)
		}
		if e.Configured != "" {
			fmt.Fprintf(&b, " configured=%s", e.Configured)
		}
		if len(e.Args) > 0 {
			fmt.Fprintf(&b, " args=%q", e.Args)
		}
		for _, p := range e.Pass {
			fmt.Fprintf(&b, " pass=%s<-%q", p.Name, p.From)
		}
		if len(e.Read) > 0 {
			fmt.Fprintf(&b, " read=%v", e.Read)
		}
		for _, w := range e.Warnings {
			fmt.Fprintf(&b, "\n  warning: %s", w)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestPlanInstall: for each client's format, the change printed (diff and
// YAML) and what becomes of each entry, against testdata/install/*.golden;
// no secret of the file is shown; the new file keeps the values it
// passes, parses, and routing it again changes nothing.
func TestPlanInstall(t *testing.T) {
	files, err := filepath.Glob("testdata/install/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c := readInstallCase(t, path)
			in, err := PlanInstall(c.client, c.config, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			out := renderInstall(in)
			golden(t, c.goldenPath, out)
			for _, s := range c.secrets {
				if bytes.Contains(out, []byte(s)) {
					t.Errorf("the output shows the secret %q", s)
				}
				if !bytes.Contains(in.New, []byte(s)) {
					t.Errorf("the new file lost the value %q", s)
				}
			}
			checkRoutedImport(t, c, in)
			again, err := PlanInstall(c.client, in.New, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.New, in.New) {
				t.Errorf("routing the new file again changes it:\n%s", again.Diff)
			}
			if p, _, _ := again.Counts(); p != 0 {
				t.Errorf("routing the new file again proxies %d entries", p)
			}
		})
	}
}

// checkRoutedImport: mcpflow imports each entry routed, in the new file,
// as a stdio server that starts the executable with the entry's Args.
func checkRoutedImport(t *testing.T, c *installCase, in *Install) {
	t.Helper()
	root, err := jsonpos.Parse(in.New)
	if err != nil {
		t.Fatalf("the new file does not parse: %v\n%s", err, in.New)
	}
	p := &jimporter{file: c.opts.File, src: in.New, dialect: c.client.dialect}
	pl := &planner{c: c.client, o: c.opts, p: p, src: in.New}
	sets, err := pl.serverSets(root)
	if err != nil {
		t.Fatal(err)
	}
	routed := 0
	for _, s := range sets {
		for _, f := range s.servers.Keys {
			e := in.Entries[routed]
			routed++
			if e.Action != InstallProxy {
				continue
			}
			srv, err := p.entry(f.Name, f.Val)
			if err != nil || srv.Command != installExe || srv.Transport() != TransportStdio || strings.Join(srv.Args, " ") != strings.Join(e.Args, " ") {
				t.Errorf("entry %s of the new file imports as %+v, %v", f.Name, srv, err)
			}
		}
	}
}

// TestPlanInstallUnchanged: a file whose servers all run mcpflow proxy
// already, or that has none, gives no diff and no YAML.
func TestPlanInstallUnchanged(t *testing.T) {
	c, _ := LookupClient("claude-desktop")
	o := &InstallOptions{File: "/c.json", Executable: installExe, Workspace: "/ws"}
	for _, src := range []string{`{}`, `{"mcpServers": {}}`, `{"mcpServers": {"a": {"command": "mcpflow", "args": ["proxy", "a"]}}}`} {
		in, err := PlanInstall(c, []byte(src), o)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if in.Diff != nil || in.YAML != nil || !bytes.Equal(in.New, in.Old) {
			t.Errorf("%s: diff %q, yaml %q", src, in.Diff, in.YAML)
		}
	}
	if _, err := PlanInstall(c, []byte(`{"servers": {}}`), o); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Claude Desktop") {
		t.Errorf("a VS Code file read as Claude Desktop's: %v", err)
	}
	if _, err := PlanInstall(c, []byte(`{"mcpServers": [`), o); !errors.Is(err, ErrConfig) {
		t.Errorf("malformed JSON: %v", err)
	}
}

// TestLookupClient: a known name, a typo and an unknown name.
func TestLookupClient(t *testing.T) {
	if c, err := LookupClient("vscode"); err != nil || c.Title != "VS Code" {
		t.Errorf("vscode = %v, %v", c, err)
	}
	_, err := LookupClient("claude-destkop")
	if !errors.Is(err, ErrUnknownClient) || !strings.Contains(err.Error(), `did you mean "claude-desktop"?`) {
		t.Errorf("typo: %v", err)
	}
	_, err = LookupClient("emacs")
	want := `unknown client "emacs" (known: claude-desktop, claude-code, cursor, vscode, gemini, qwen)`
	if err == nil || err.Error() != want {
		t.Errorf("unknown: %v, want %s", err, want)
	}
}

// FuzzPlanInstall: no file makes the planner panic; its errors are
// *ConfigError; what it plans parses, and routing it again changes
// nothing.
func FuzzPlanInstall(f *testing.F) {
	files, _ := filepath.Glob("testdata/install/*.txtar")
	for _, path := range files {
		f.Add(readInstallCase(f, path).config)
	}
	for _, s := range []string{`{"mcpServers":{"a":{"command":"x","env":{"A":1}}}}`, `{"servers":{"a":{"url":"http://h",},},}`, `{"mcpServers": /* x`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, name := range []string{"claude-desktop", "vscode", "gemini"} {
			c, _ := LookupClient(name)
			o := &InstallOptions{File: "/c/.claude.json", Executable: installExe, Workspace: "/ws"}
			in, err := PlanInstall(c, src, o)
			if err != nil {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("%s: error %v is not a *ConfigError", name, err)
				}
				continue
			}
			if _, err := jsonpos.Parse(in.New); err != nil {
				t.Fatalf("%s: the new file does not parse: %v\n%s", name, err, in.New)
			}
			again, err := PlanInstall(c, in.New, o)
			if err != nil || !bytes.Equal(again.New, in.New) {
				t.Fatalf("%s: routing again: %v\n%s", name, err, again.Diff)
			}
		}
	})
}
