package trust

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
)

// canon is the canonical form of a test directory (t.TempDir may itself
// sit behind a symlink, as on macOS).
func canon(t *testing.T, p string) string {
	t.Helper()
	c, err := CanonicalPath(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mkdirs(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(root, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func wantTrusted(t *testing.T, s *Store, path string, want bool, wantMatch string) {
	t.Helper()
	ok, match, err := s.Trusted(path)
	if err != nil {
		t.Fatalf("Trusted(%s): %v", path, err)
	}
	if ok != want || match != wantMatch {
		t.Errorf("Trusted(%s) = %v, %q; want %v, %q", path, ok, match, want, wantMatch)
	}
}

func TestTrustStoreSymlinkedWorkspace(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks")
	}
	root := t.TempDir()
	mkdirs(t, root, "real/project")
	link := filepath.Join(root, "link")
	if err := os.Symlink(filepath.Join(root, "real", "project"), link); err != nil {
		t.Fatal(err)
	}
	s := OpenStore(t.TempDir())
	if err := s.Add(link + "/./"); err != nil {
		t.Fatal(err)
	}
	real := canon(t, filepath.Join(root, "real", "project"))
	if l, err := s.List(); err != nil || len(l) != 1 || l[0] != real {
		t.Errorf("List() = %v, %v; want [%s], the resolved directory", l, err, real)
	}
	wantTrusted(t, s, link, true, real)
	wantTrusted(t, s, filepath.Join(root, "real", "project"), true, real)
	// Adding the real path again adds nothing: it is the same entry.
	if err := s.Add(filepath.Join(root, "real", "project")); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(); len(l) != 1 {
		t.Errorf("List() = %v after adding the same directory twice", l)
	}
	// Removing through the link removes the entry.
	if err := s.Remove(link); err != nil {
		t.Fatal(err)
	}
	wantTrusted(t, s, real, false, "")
}

func TestTrustStoreParentCoversChild(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a/b/c/d", "a/bc", "a/b2")
	s := OpenStore(t.TempDir())
	if err := s.Add(filepath.Join(root, "a", "b")); err != nil {
		t.Fatal(err)
	}
	ab := canon(t, filepath.Join(root, "a", "b"))
	wantTrusted(t, s, filepath.Join(root, "a", "b"), true, ab)
	wantTrusted(t, s, filepath.Join(root, "a", "b", "c", "d"), true, ab)
	wantTrusted(t, s, filepath.Join(root, "a", "bc"), false, "") // not a component match
	wantTrusted(t, s, filepath.Join(root, "a", "b2"), false, "")
	wantTrusted(t, s, filepath.Join(root, "a"), false, "") // a child does not cover its parent
	// The nearest trusted directory is the one reported.
	if err := s.Add(filepath.Join(root, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	wantTrusted(t, s, filepath.Join(root, "a", "b", "c", "d"), true, canon(t, filepath.Join(root, "a", "b", "c")))
	if _, _, err := s.Trusted(filepath.Join(root, "nope")); err == nil {
		t.Error("Trusted of a missing directory: no error")
	}
}

func TestTrustStoreRemove(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "p/child", "gone")
	s := OpenStore(filepath.Join(t.TempDir(), "cfg"))
	p := canon(t, filepath.Join(root, "p"))
	for _, d := range []string{"p", "gone"} {
		if err := s.Add(filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	// A child of a trusted directory is not in the store; saying so names
	// the parent that keeps it trusted.
	err := s.Remove(filepath.Join(root, "p", "child"))
	if !errors.Is(err, ErrNotTrusted) || !strings.Contains(err.Error(), "stays trusted through "+p) {
		t.Errorf("Remove(child) = %v, want ErrNotTrusted naming %s", err, p)
	}
	if err := s.Remove(filepath.Join(root, "p")); err != nil {
		t.Fatal(err)
	}
	wantTrusted(t, s, filepath.Join(root, "p", "child"), false, "")
	if err := s.Remove(filepath.Join(root, "p")); !errors.Is(err, ErrNotTrusted) {
		t.Errorf("second Remove = %v, want ErrNotTrusted", err)
	}
	// A directory deleted since it was trusted can still be removed.
	gone := canon(t, filepath.Join(root, "gone"))
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(gone); err != nil {
		t.Errorf("Remove(deleted dir) = %v", err)
	}
	if l, err := s.List(); err != nil || len(l) != 0 {
		t.Errorf("List() = %v, %v; want empty", l, err)
	}
}

func TestTrustStoreFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcpflow")
	s := OpenStore(dir)
	if l, err := s.List(); err != nil || len(l) != 0 {
		t.Fatalf("List of a store never written = %v, %v", l, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("reading created the store directory")
	}
	if err := s.Add(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{dir: 0o700, s.Path(): 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	if err := s.Add(filepath.Join(dir, File)); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Add(a file) = %v", err)
	}
}

func TestTrustStoreCorruptFile(t *testing.T) {
	root := t.TempDir()
	s := OpenStore(root)
	for _, tc := range []struct{ content, want string }{
		{"{\n  \"version\": 1,\n  \"workspaces\": [\n    {\"path\": \"/a\"},,\n  ]\n}\n", "line 4, column 20: invalid character ','"},
		{"{\"version\": 1, \"workspaces\": [{\"path\": \"relative/dir\"}]}", `workspaces[0]: "relative/dir" is not a clean absolute path`},
		{"{\"workspaces\": []}", "no version"},
		{"{\"version\": 1, \"workspaces\": [], \"trust_everything\": true}", `unknown field "trust_everything"`},
		{"", "unexpected end of JSON input"},
		{"{\"version\": 7, \"workspaces\": []}", "written by a newer mcpflow"},
	} {
		if err := os.WriteFile(s.Path(), []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.List()
		if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), s.Path()) {
			t.Errorf("List of %q: %v; want ErrStore naming the file and %q", tc.content, err, tc.want)
		}
		if err := s.Add(t.TempDir()); !errors.Is(err, ErrStore) {
			t.Errorf("Add over %q: %v, want ErrStore", tc.content, err)
		}
		if ok, src := Workspace(s, root, false); ok || src != "" {
			t.Errorf("a corrupt store trusted the workspace (%q)", src)
		}
		if got, _ := os.ReadFile(s.Path()); string(got) != tc.content {
			t.Errorf("the corrupt file was overwritten: %q", got)
		}
	}
}

// TestTrustStoreConcurrentWriters: writers in many goroutines and in two
// other processes add different directories at once; none is lost.
func TestTrustStoreConcurrentWriters(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	storeDir := filepath.Join(t.TempDir(), "cfg")
	root := t.TempDir()
	var want []string
	newDir := func(name string) string {
		mkdirs(t, root, name)
		p := filepath.Join(root, name)
		want = append(want, canon(t, p))
		return p
	}
	const goroutines, perChild = 16, 12
	var local []string
	for i := range goroutines {
		local = append(local, newDir(fmt.Sprintf("g%02d", i)))
	}
	var children [2][]string
	for c := range children {
		for i := range perChild {
			children[c] = append(children[c], newDir(fmt.Sprintf("c%d-%02d", c, i)))
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, goroutines+len(children))
	for c, dirs := range children {
		cmd := exec.Command(self(t), "-test.run=^$")
		cmd.Env = append(os.Environ(), trustChildEnv+"="+storeDir, trustChildDirs+"="+strings.Join(dirs, string(os.PathListSeparator)))
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("child %d: %v: %s", c, err, out)
			}
		})
	}
	for _, d := range local {
		wg.Go(func() {
			if err := OpenStore(storeDir).Add(d); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := OpenStore(storeDir).List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("store holds %d directories, want %d", len(got), len(want))
	}
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("lost %s", w)
		}
	}
}

func TestWorkspace(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "trusted/ws", "other")
	s := OpenStore(t.TempDir())
	if err := s.Add(filepath.Join(root, "trusted")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		store *Store
		ws    string
		flag  bool
		ok    bool
		src   string
	}{
		{s, filepath.Join(root, "trusted", "ws"), false, true, "store:" + canon(t, filepath.Join(root, "trusted"))},
		{s, filepath.Join(root, "trusted", "ws"), true, true, "flag"},
		{s, filepath.Join(root, "other"), true, true, "flag"},
		{s, filepath.Join(root, "other"), false, false, ""},
		{nil, filepath.Join(root, "other"), false, false, ""},
		{nil, filepath.Join(root, "other"), true, true, "flag"},
		{s, filepath.Join(root, "missing"), false, false, ""},
	} {
		ok, src := Workspace(tc.store, tc.ws, tc.flag)
		if ok != tc.ok || src != tc.src {
			t.Errorf("Workspace(%s, flag %v) = %v, %q; want %v, %q", tc.ws, tc.flag, ok, src, tc.ok, tc.src)
		}
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	if d, err := DefaultDir(); err != nil || d != filepath.Join("/xdg", "mcpflow") {
		t.Errorf("with XDG_CONFIG_HOME: %q, %v", d, err)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative")
	t.Setenv("HOME", "/home/someone")
	if d, err := DefaultDir(); runtime.GOOS != "windows" && (err != nil || d != "/home/someone/.config/mcpflow") {
		t.Errorf("with a relative XDG_CONFIG_HOME: %q, %v; want ~/.config/mcpflow", d, err)
	}
	if got := OpenStore("").Path(); runtime.GOOS != "windows" && got != "/home/someone/.config/mcpflow/"+File {
		t.Errorf("OpenStore(\"\").Path() = %q", got)
	}
}

// TestNoFileGrantsWorkspaceTrust: whatever an imported file says, it only
// ever sets server trust, and nothing in the results says anything about
// the workspace.
func TestNoFileGrantsWorkspace(t *testing.T) {
	set, err := upstream.Import(filepath.Join("..", "upstream", "testdata", "import", "gemini", ".gemini", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !set["python-tools"].Trust || set["filtered"].Trust || set["sse-server"].Trust {
		t.Errorf("server trust not carried over as declared: %+v", set)
	}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, upstream.WorkspaceFile), []byte("servers:\n  d: {builtin: demo, trust: true}\n"), 0o644)
	if _, _, err := upstream.LoadWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	store := OpenStore(t.TempDir())
	if ok, src := Workspace(store, ws, false); ok || src != "" {
		t.Errorf("workspace trusted (%q) after reading its files", src)
	}
	if l, _ := store.List(); len(l) != 0 {
		t.Errorf("reading files changed the trust store: %v", l)
	}
}

func TestWithin(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a/b", "ab")
	link := filepath.Join(root, "link")
	os.Symlink(filepath.Join(root, "a"), link)
	for _, tc := range []struct {
		dir, path string
		want      bool
	}{
		{"a", "a", true},
		{"a", "a/b/x.yaml", true},
		{"a", "ab/x.yaml", false}, // by whole components
		{"link", "a/b", true},     // symlinks resolved
		{"a/b", "a", false},
	} {
		if got := Within(filepath.Join(root, tc.dir), filepath.Join(root, tc.path)); got != tc.want {
			t.Errorf("Within(%s, %s) = %v, want %v", tc.dir, tc.path, got, tc.want)
		}
	}
}
