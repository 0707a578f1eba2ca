package trust

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/internal/atomicfile"
	"github.com/mcpflow/mcpflow/internal/inputfile"
	"github.com/mcpflow/mcpflow/internal/jsonpos"
)

// File is the name of the trust store's file in its directory.
const File = "trusted-workspaces.json"

// trustVersion is the version of the file format this package writes.
const trustVersion = 1

// Store is the user's list of trusted workspace directories: the
// workspace trust gate of the replay rule. It lives outside any workspace
// (by default in ~/.config/mcpflow), so no file in a workspace can trust
// that workspace; only the user can, with Add (mcpflow trust add) or, for
// one command, --trust-workspace (see [Workspace]).
//
// A trusted directory covers its subdirectories, matched by whole path
// components: trusting /a/b trusts /a/b/c but not /a/bc. Paths are stored
// canonical: absolute, cleaned, symlinks resolved, so a symlinked workspace
// matches the directory it points to.
//
// Writes (Add, Remove) hold an exclusive flock on File+".lock" for the
// read-modify-write, and replace the file atomically (temporary file in the
// same directory, fsync, rename, fsync of the directory): concurrent
// writers in any number of processes lose nothing, and a crash leaves the
// old or the new list. Reads take no lock. A file that does not parse is
// reported and never overwritten.
type Store struct {
	dir string
	err error // why there is no dir
}

// trustFile is the JSON form of the store.
type trustFile struct {
	Version    int          `json:"version"`
	Workspaces []trustEntry `json:"workspaces"`
}

type trustEntry struct {
	Path  string    `json:"path"`
	Added time.Time `json:"added"`
}

// DefaultDir is $XDG_CONFIG_HOME/mcpflow, or ~/.config/mcpflow when
// XDG_CONFIG_HOME is unset or not absolute.
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "mcpflow"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%w: no configuration directory: %v", ErrStore, err)
	}
	return filepath.Join(home, ".config", "mcpflow"), nil
}

// OpenStore returns the store in dir ("" = DefaultDir()).
// Nothing is read or created until a method needs it; the directory is
// created 0700 and the file 0600 on the first Add.
func OpenStore(dir string) *Store {
	if dir == "" {
		d, err := DefaultDir()
		return &Store{dir: d, err: err}
	}
	return &Store{dir: dir}
}

// Path is the store's file.
func (s *Store) Path() string { return filepath.Join(s.dir, File) }

// CanonicalPath returns path absolute, cleaned and with symlinks resolved.
// The path must exist.
func CanonicalPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// Add trusts the directory at path (and so its subdirectories). Adding a
// directory already in the store changes nothing.
func (s *Store) Add(path string) error {
	dir, err := CanonicalPath(path)
	if err != nil {
		return fmt.Errorf("trust %s: %w", path, unwrapPath(err))
	}
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("trust %s: %w", path, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("trust %s: not a directory (expected a workspace directory)", path)
	}
	return s.update(func(f *trustFile) error {
		for _, e := range f.Workspaces {
			if e.Path == dir {
				return nil
			}
		}
		f.Workspaces = append(f.Workspaces, trustEntry{Path: dir, Added: time.Now().UTC().Truncate(time.Second)})
		return nil
	})
}

// Remove takes the directory at path out of the store. A path that no
// longer exists is matched as given (absolute and cleaned), so stale entries
// can be removed. Removing a directory that is not in the store is an error
// wrapping ErrNotTrusted; it says so when a trusted parent still covers it.
func (s *Store) Remove(path string) error {
	dir, err := CanonicalPath(path)
	if err != nil {
		if dir, err = filepath.Abs(path); err != nil {
			return fmt.Errorf("untrust %s: %w", path, err)
		}
	}
	return s.update(func(f *trustFile) error {
		for i, e := range f.Workspaces {
			if e.Path == dir {
				f.Workspaces = append(f.Workspaces[:i], f.Workspaces[i+1:]...)
				return nil
			}
		}
		if parent := covering(f.Workspaces, dir); parent != "" {
			return fmt.Errorf("%w: %s is not in the trust store, but it stays trusted through %s (expected that directory instead)", ErrNotTrusted, dir, parent)
		}
		return fmt.Errorf("%w: %s is not in the trust store", ErrNotTrusted, dir)
	})
}

// List returns the trusted directories, sorted.
func (s *Store) List() ([]string, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(f.Workspaces))
	for _, e := range f.Workspaces {
		out = append(out, e.Path)
	}
	sort.Strings(out)
	return out, nil
}

// Trusted reports whether the directory at path is trusted, and by which
// stored directory (itself or the nearest trusted parent).
func (s *Store) Trusted(path string) (bool, string, error) {
	dir, err := CanonicalPath(path)
	if err != nil {
		return false, "", fmt.Errorf("check trust of %s: %w", path, unwrapPath(err))
	}
	f, err := s.read()
	if err != nil {
		return false, "", err
	}
	if m := covering(f.Workspaces, dir); m != "" {
		return true, m, nil
	}
	return false, "", nil
}

// covering returns the longest stored directory that is dir or a parent
// of it, by whole path components; "" if none.
func covering(entries []trustEntry, dir string) string {
	best := ""
	for _, e := range entries {
		if covers(e.Path, dir) && len(e.Path) > len(best) {
			best = e.Path
		}
	}
	return best
}

// Within reports whether path lies in dir (or is dir), by whole path
// components after making both canonical where they exist — the rule a
// trusted directory covers its subdirectories by.
func Within(dir, path string) bool {
	canon := func(p string) string {
		if c, err := CanonicalPath(p); err == nil {
			return c
		}
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	return covers(canon(dir), canon(path))
}

func covers(trusted, dir string) bool {
	if trusted == dir {
		return true
	}
	prefix := trusted
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(dir, prefix)
}

// Workspace is the workspace trust gate. flag is --trust-workspace,
// which trusts the workspace for that one command: source "flag". Else the
// store decides: source "store:DIR", DIR being the trusted directory that
// matched. Untrusted: false, "". A store that cannot be read (store nil,
// corrupt, unreadable) fails closed: untrusted; call store.Trusted to
// learn why.
func Workspace(store *Store, workspace string, flag bool) (trusted bool, source string) {
	if flag {
		return true, "flag"
	}
	if store == nil {
		return false, ""
	}
	ok, dir, err := store.Trusted(workspace)
	if err != nil || !ok {
		return false, ""
	}
	return true, "store:" + dir
}

// read loads the store; a missing file is an empty store.
func (s *Store) read() (*trustFile, error) {
	if s.err != nil {
		return nil, s.err
	}
	data, err := inputfile.Read(s.Path(), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return &trustFile{Version: trustVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return parseFile(s.Path(), data)
}

func parseFile(path string, data []byte) (*trustFile, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w %s is corrupt: %s (fix or delete the file; mcpflow will not overwrite it)", ErrStore, path, fmt.Sprintf(format, args...))
	}
	var f trustFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		msg, off := jsonpos.ErrorPos(data, err)
		line, col := jsonpos.LineCol(data, off)
		return nil, corrupt("line %d, column %d: %s", line, col, msg)
	}
	if dec.More() {
		return nil, corrupt("data after the JSON object")
	}
	switch {
	case f.Version == 0:
		return nil, corrupt("no version")
	case f.Version > trustVersion:
		return nil, fmt.Errorf("%w %s has version %d, written by a newer mcpflow (this one reads version %d)", ErrStore, path, f.Version, trustVersion)
	}
	for i, e := range f.Workspaces {
		if !filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path {
			return nil, corrupt("workspaces[%d]: %q is not a clean absolute path", i, e.Path)
		}
	}
	return &f, nil
}

// update runs fn on the store under the lock and writes the result.
func (s *Store) update(fn func(*trustFile) error) error {
	if s.err != nil {
		return s.err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	unlock, err := lockFile(s.Path() + ".lock")
	if err != nil {
		return fmt.Errorf("%w: lock: %v", ErrStore, err)
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	f.Version = trustVersion
	sort.Slice(f.Workspaces, func(i, j int) bool { return f.Workspaces[i].Path < f.Workspaces[j].Path })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(s.Path(), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}

// unwrapPath drops the *fs.PathError wrapper, whose path the message names
// already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
