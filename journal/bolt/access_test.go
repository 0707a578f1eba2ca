package bolt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestOpenErrorSaysWhatItIs: an operating-system refusal is not damage.
func TestOpenErrorSaysWhatItIs(t *testing.T) {
	for _, tc := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{&fs.PathError{Op: "open", Path: "j", Err: syscall.EROFS}, journal.ErrInaccessible, "the file system is read-only"},
		{&fs.PathError{Op: "open", Path: "j", Err: syscall.EACCES}, journal.ErrInaccessible, "permission denied"},
		{&fs.PathError{Op: "open", Path: "j", Err: syscall.ENOENT}, journal.ErrInaccessible, "the file disappeared"},
		{errors.New("invalid page type: 0: 4"), journal.ErrDamaged, "invalid page type"},
	} {
		got := openError("j", tc.err)
		if !errors.Is(got, tc.sentinel) || !strings.Contains(got.Error(), tc.want) {
			t.Errorf("openError(%v) = %v, want %v saying %q", tc.err, got, tc.sentinel, tc.want)
		}
		if tc.sentinel != journal.ErrDamaged && errors.Is(got, journal.ErrDamaged) {
			t.Errorf("openError(%v) calls it damaged", tc.err)
		}
	}
}

func TestOpenDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	if err := os.Symlink(filepath.Join(dir, "gone", "journal.db"), path); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := Open(path, &journal.Options{ReadOnly: ro})
		if !errors.Is(err, journal.ErrInaccessible) || errors.Is(err, journal.ErrDamaged) || !strings.Contains(err.Error(), "symbolic link to") {
			t.Errorf("read-only %v: %v, want a dangling link named as such", ro, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); err == nil {
		t.Error("Open created the link's target directory")
	}
}

// TestOpenUnwritable: a journal its user may read but not write is refused
// for writing as inaccessible, never as damaged. (Root writes anyway.)
func TestOpenUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root bypasses file modes")
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, nil)
	if !errors.Is(err, journal.ErrInaccessible) || errors.Is(err, journal.ErrDamaged) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("0400 journal opened for writing: %v", err)
	}
}

// TestCompactKeepsSymlinkAndCleansLeftovers: compacting a journal reached
// through a symbolic link replaces the file the link points to, keeps the
// link, and removes what a killed compact left behind.
func TestCompactKeepsSymlinkAndCleansLeftovers(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "journal.db")
	os.MkdirAll(filepath.Dir(real), 0o700)
	j, err := Open(real, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	link := filepath.Join(dir, "journal.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, "data", ".journal.db.123.tmp")
	old := filepath.Join(dir, "data", ".journal.db.compact-456")
	for _, p := range []string{leftover, old} {
		os.WriteFile(p, []byte("half a copy"), 0o600)
	}
	if _, _, err := Compact(link); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st.Mode(), err)
	}
	if rj, err := Open(link, &journal.Options{ReadOnly: true}); err != nil {
		t.Errorf("the journal through the link: %v", err)
	} else {
		rj.Close()
	}
	for _, p := range []string{leftover, old} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
}
