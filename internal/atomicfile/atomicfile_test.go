package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leftovers lists the files in dir other than want.
func leftovers(t *testing.T, dir string, want ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
outer:
	for _, e := range entries {
		for _, w := range want {
			if e.Name() == w {
				continue outer
			}
		}
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != "new" {
		t.Errorf("content %q, want new", got)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if l := leftovers(t, dir, "f.json"); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

func TestReplaceFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Replace(path, 0o600, func(f *os.File) error {
		f.WriteString("half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Replace error = %v, want boom", err)
	}
	if got := read(t, path); got != "old" {
		t.Errorf("content %q after a failed Replace, want old", got)
	}
	if l := leftovers(t, dir, "f"); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

func TestCreateNeverClobbers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	fill := func(s string) func(*os.File) error {
		return func(f *os.File) error { _, err := f.WriteString(s); return err }
	}
	if err := Create(path, 0o600, fill("first")); err != nil {
		t.Fatal(err)
	}
	if err := Create(path, 0o600, fill("second")); err != nil {
		t.Fatalf("Create over an existing file: %v, want nil (the existing file wins)", err)
	}
	if got := read(t, path); got != "first" {
		t.Errorf("content %q, want first", got)
	}
	if l := leftovers(t, dir, "j.db"); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// A Create killed after it linked its file into place leaves the temporary
// name on the file; RemoveLinkedLeftovers removes that name, and no other:
// not another name of the file, not a temporary file that is another file.
func TestRemoveLinkedLeftovers(t *testing.T) {
	dir := t.TempDir()
	for name, want := range map[string]bool{
		".journal.db.123.tmp": true, ".journal.db.tmp": false, ".journal.db..tmp": false,
		".journal.db.12a.tmp": false, ".journal.db.123.tmp.x": false, "journal.db.123.tmp": false, ".journal.dbx.123.tmp": false,
	} {
		if got := IsTempName(name, filepath.Join(dir, "journal.db")); got != want {
			t.Errorf("IsTempName(%q) = %v, want %v", name, got, want)
		}
	}
	path := filepath.Join(dir, "journal.db")
	if err := Create(path, 0o600, func(f *os.File) error { _, err := f.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, ".journal.db.123456.tmp")
	if err := os.Link(path, leftover); err != nil { // as the killed Create left it
		t.Skip("no hard links here:", err)
	}
	mine := filepath.Join(dir, "copy.db")
	if err := os.Link(path, mine); err != nil {
		t.Fatal(err)
	}
	// Named like a temporary file, but not one Create makes: the user's.
	kept := filepath.Join(dir, ".journal.db.old.tmp")
	if err := os.Link(path, kept); err != nil {
		t.Fatal(err)
	}
	pending := filepath.Join(dir, ".journal.db.654321.tmp") // a Create not linked yet
	if err := os.WriteFile(pending, []byte("pending"), 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveLinkedLeftovers(path)
	if err != nil || len(removed) != 1 || removed[0] != leftover {
		t.Fatalf("removed %v, %v; want only %s", removed, err, leftover)
	}
	if got := leftovers(t, dir, "journal.db"); len(got) != 3 || got[0] != ".journal.db.654321.tmp" || got[1] != ".journal.db.old.tmp" || got[2] != "copy.db" {
		t.Errorf("left in the directory: %v, want the pending file and the other two names", got)
	}
	if read(t, path) != "new" || read(t, pending) != "pending" {
		t.Error("a file's contents changed")
	}
	if removed, err := RemoveLinkedLeftovers(path); err != nil || len(removed) != 0 {
		t.Errorf("again: %v, %v; want nothing", removed, err)
	}
}
