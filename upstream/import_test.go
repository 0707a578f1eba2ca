package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// portable replaces the machine's paths in golden output.
func portable(t *testing.T, b []byte) []byte {
	t.Helper()
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(abs), []byte("$TESTDATA"))
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		b = bytes.ReplaceAll(b, []byte(home), []byte("$HOME"))
	}
	return b
}

func renderJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return portable(t, append(b, '\n'))
}

// configFiles lists the .json and .yaml files under dir (recursively when
// deep), golden files excluded.
func configFiles(t *testing.T, dir string, deep bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && !deep {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".json", ".yaml":
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no inputs in %s", dir)
	}
	return out
}

// TestImportGolden imports every well-formed file of every format and
// compares the parsed Set with its .golden file.
func TestImportGolden(t *testing.T) {
	for _, path := range configFiles(t, filepath.Join("testdata", "import"), true) {
		t.Run(filepath.ToSlash(strings.TrimPrefix(path, "testdata/import/")), func(t *testing.T) {
			set, err := Import(path)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			for name, srv := range set {
				if err := srv.Validate(); err != nil {
					t.Errorf("imported server %s does not validate: %v", name, err)
				}
			}
			golden(t, path+".golden", renderJSON(t, set))
		})
	}
}

// TestImportErrorsGolden reads every malformed file and compares the error
// with its .err file. Every error is a *ConfigError with a line and column.
func TestImportErrorsGolden(t *testing.T) {
	for _, path := range configFiles(t, filepath.Join("testdata", "import-bad"), false) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			set, err := Import(path)
			if err == nil {
				t.Fatalf("Import succeeded with %v, want an error", set.Names())
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v (%T) is not a *ConfigError wrapping ErrConfig", err, err)
			}
			if ce.Line < 1 || ce.Column < 1 {
				t.Errorf("error %q has no position (line %d, column %d)", err, ce.Line, ce.Column)
			}
			golden(t, path+".err", portable(t, []byte(err.Error()+"\n")))
		})
	}
}

func TestLoadWorkspaceGolden(t *testing.T) {
	dir := filepath.Join("testdata", "workspace")
	set, src, err := LoadWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "workspace.golden"), renderJSON(t, map[string]any{"source": src, "servers": set}))
	// mcpflow.yaml's own entry wins over the imported one, whole.
	if d := set["docs"]; d.URL != "https://docs.internal.example.com/mcp" || !d.Trust {
		t.Errorf("docs = %+v, want mcpflow.yaml's entry", d)
	}
}

func TestLoadWorkspaceWithoutFile(t *testing.T) {
	set, src, err := LoadWorkspace(t.TempDir())
	if err != nil || len(set) != 0 || src.File != "" || len(src.Imports) != 0 {
		t.Errorf("LoadWorkspace(empty dir) = %v, %+v, %v; want no servers, no source, no error", set, src, err)
	}
	// An empty mcpflow.yaml is not an error either.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, WorkspaceFile), nil, 0o644)
	if set, _, err := LoadWorkspace(dir); err != nil || len(set) != 0 {
		t.Errorf("LoadWorkspace(empty mcpflow.yaml) = %v, %v", set, err)
	}
}

// TestServersFlagAlsoImported: a file given with --servers that
// mcpflow.yaml imports too is read twice, under two spellings of its path;
// each of its entries is one entry, which shadows nothing but what it
// overrides (mcpflow.yaml's own b).
func TestServersFlagAlsoImported(t *testing.T) {
	dir := filepath.Join("testdata", "twice")
	flag, err := filepath.Abs(filepath.Join(dir, "servers.json"))
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := LoadExternal(dir, flag)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join(dir, "servers.golden"), renderJSON(t, set))
	if a := set["a"]; len(a.Shadows) != 0 {
		t.Errorf("a shadows %q, want nothing: it is one entry read twice", a.Shadows)
	}
}

// TestDisplayedGolden: an entry shown (servers list's TARGET) reads as it
// would start: a default applies where its variable is unset or empty,
// and a variable the environment sets stays a reference, its value unshown.
func TestDisplayedGolden(t *testing.T) {
	dir := filepath.Join("testdata", "targets")
	set, err := Import(filepath.Join(dir, "servers.json"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"EMPTY_DIR": "", "PROJ_TOKEN": "s3cret", "PROJ_KEY": "k3y"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	shown := map[string]any{}
	for name, srv := range set {
		d := srv.Displayed(lookup)
		shown[name] = map[string]any{"command": d.Command, "args": d.Args, "cwd": d.Cwd, "url": d.URL}
	}
	got := renderJSON(t, shown)
	golden(t, filepath.Join(dir, "servers.golden"), got)
	if bytes.Contains(got, []byte("s3cret")) || bytes.Contains(got, []byte("k3y")) {
		t.Error("a value of the environment is shown")
	}
}
