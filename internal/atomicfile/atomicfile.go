// Package atomicfile is mcpflow's one crash-safe file writer: a file is
// built in a temporary file beside its destination, fsynced and closed, then
// renamed (or linked) into place, and the directory is fsynced so that the
// new name survives a crash. A crash at any point leaves the old file or the
// new one at the destination, never a mix.
//
// # Caveats
//
//   - The temporary file is created with mode 0600 and then given the mode
//     asked for; it lives in the destination's directory (a rename across
//     file systems is not atomic) and is removed on any error.
//   - A leftover temporary file (the process was killed between creating
//     and renaming it) starts with "." and the destination's name.
//   - A Create killed between linking its file into place and removing the
//     temporary name leaves the destination with a second name;
//     RemoveLinkedLeftovers removes it.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile replaces path with data, with mode perm.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Replace(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Replace replaces path with a file that fill writes. fill gets the open
// temporary file; it may also reopen it by name (f.Name()), for example to
// let a database write it, as long as it leaves its contents complete when
// it returns. The file is fsynced after fill returns.
func Replace(path string, perm fs.FileMode, fill func(f *os.File) error) error {
	return build(path, perm, fill, os.Rename)
}

// Create puts a file that fill writes at path only if path does not exist
// yet: the complete file is linked into place, so another process never
// sees a partial one. When path appeared meanwhile, it wins, the new file is
// dropped, and Create returns nil: the caller validates what is there.
func Create(path string, perm fs.FileMode, fill func(f *os.File) error) error {
	return build(path, perm, fill, func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	})
}

// RemoveLinkedLeftovers removes the temporary names that a Create killed
// after linking its file to path left on that file: names in path's
// directory that Create gives its temporary files and that are path's
// file itself. What the killed Create would have done next, and nothing
// else: a temporary file that is another file (a Create not linked yet,
// perhaps still running) is left alone. It returns the names removed.
func RemoveLinkedLeftovers(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !IsTempName(name, path) {
			continue
		}
		other := filepath.Join(dir, name)
		if ost, err := os.Lstat(other); err != nil || !os.SameFile(st, ost) {
			continue
		}
		switch err := os.Remove(other); {
		case err == nil:
			removed = append(removed, other)
		case !errors.Is(err, fs.ErrNotExist): // else the Create removed it meanwhile
			return removed, err
		}
	}
	if len(removed) > 0 {
		// The Create may have been killed before it synced the directory:
		// path's name must survive a crash before anything is written to
		// the file under it.
		return removed, SyncDir(dir)
	}
	return removed, nil
}

// IsTempName reports whether name, an entry of path's directory, is the
// name of a temporary file that WriteFile, Replace or Create made for
// path: a dot, path's name, a dot, digits, ".tmp".
func IsTempName(name, path string) bool {
	rest, ok := strings.CutPrefix(name, "."+filepath.Base(path)+".")
	if !ok {
		return false
	}
	digits, ok := strings.CutSuffix(rest, ".tmp")
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}

func build(path string, perm fs.FileMode, fill func(*os.File) error, place func(tmp, path string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		f.Close() // a second Close only reports os.ErrClosed
		// After a rename there is nothing left to remove; after a link the
		// temporary name goes, the destination stays.
		os.Remove(tmp)
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := place(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so that a file created, renamed or linked in
// it survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
