package trust

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMayLook: a command that only looks starts an entry from a file of an
// untrusted workspace only when the user named that file on the command
// line (under any spelling of its path), not another file of the
// workspace; the user's own files outside it, the flag and the store
// decide as before. Naming a file grants no workspace trust.
func TestMayLook(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	named, other := filepath.Join(ws, "servers.json"), filepath.Join(ws, ".mcp.json")
	link := filepath.Join(outside, "link.json")
	for _, f := range []string{named, other, filepath.Join(outside, "mine.json")} {
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(named, link); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(mustGetwd(t), named)
	if err != nil {
		t.Fatal(err)
	}
	store := OpenStore(t.TempDir())
	for _, c := range []struct {
		what  string
		file  string
		named []string
		flag  bool
		want  bool
	}{
		{"no file", "", nil, false, true},
		{"the user's own file outside", filepath.Join(outside, "mine.json"), nil, false, true},
		{"a workspace file", other, nil, false, false},
		{"a workspace file, another named", other, []string{named}, false, false},
		{"the named file", named, []string{named}, false, true},
		{"the named file, named relative", named, []string{rel}, false, true},
		{"the named file, named through a link", named, []string{link}, false, true},
		{"no name given", named, []string{""}, false, false},
		{"--trust-workspace", other, nil, true, true},
	} {
		if got := MayLook(LookOptions{Workspace: ws, File: c.file, Named: c.named, Flag: c.flag, Store: store}); got != c.want {
			t.Errorf("%s: MayLook = %v, want %v", c.what, got, c.want)
		}
	}
	if ok, _ := Workspace(store, ws, false); ok {
		t.Error("naming a file trusted the workspace")
	}
	if err := store.Add(ws); err != nil {
		t.Fatal(err)
	}
	if !MayLook(LookOptions{Workspace: ws, File: other, Store: store}) {
		t.Error("a trusted workspace's file may not start")
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
