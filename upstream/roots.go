package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// WorkspaceRoot is the name of the root a server is told by default: the
// workspace directory.
const WorkspaceRoot = "workspace"

// CheckRoot checks how one entry of a roots: list is written, without
// looking at the disk: a path (absolute; relative, to the workspace; ~/,
// to the home directory) or a file:// URI of an absolute local path. The
// error says what was expected. Whether the directory exists is checked
// when a session connects (see [Connect]), against the workspace of the
// run.
func CheckRoot(root string) error {
	const want = "expected a directory path, relative to the workspace, or a file:///ABSOLUTE/PATH URI"
	switch {
	case strings.TrimSpace(root) == "":
		return fmt.Errorf("empty root (%s)", want)
	case strings.Contains(root, "${"):
		return fmt.Errorf("root %q: roots are not expanded (%s; ~/ is the home directory)", root, want)
	case strings.ContainsRune(root, 0):
		return fmt.Errorf("root %q holds a NUL byte (%s)", root, want)
	}
	scheme, _, isURI := strings.Cut(root, "://")
	if !isURI {
		return nil
	}
	if !strings.EqualFold(scheme, "file") {
		return fmt.Errorf("root %q is not a file:// URI (%s: MCP roots are local directories)", root, want)
	}
	u, err := url.Parse(root)
	switch {
	case err != nil:
		return fmt.Errorf("root %q does not parse as a URI (%s)", root, want)
	case u.Host != "" && !strings.EqualFold(u.Host, "localhost"):
		return fmt.Errorf("root %q names host %q (%s: MCP roots are local directories)", root, u.Host, want)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("root %q has a query, fragment or user (%s)", root, want)
	case !strings.HasPrefix(u.Path, "/"):
		return fmt.Errorf("root %q has no absolute path (%s)", root, want)
	}
	return nil
}

// RootList is a roots: list as read from a file (a workflow's, see
// [ParseRoots]): the roots as written and where each one is.
type RootList struct {
	Roots []string
	at    []filePos
}

// filePos is where a value was read: FILE, LINE and COLUMN.
type filePos struct {
	file      string
	line, col int
}

// ParseRoots reads a roots: list of mcpflow's YAML outside a server entry
// (a workflow's own), each entry checked as [CheckRoot] does. An empty
// list is not nil: it declares no root. The error is a *ConfigError
// positioned in file.
func ParseRoots(file string, node *yaml.Node) (*RootList, error) {
	return (&yamlParser{file: file}).roots(node)
}

func (p *yamlParser) roots(n *yaml.Node) (*RootList, error) {
	roots, err := p.strList(n, "roots")
	if err != nil {
		return nil, err
	}
	rl := &RootList{Roots: roots, at: make([]filePos, len(roots))}
	for i, r := range roots {
		item := n.Content[i]
		if err := CheckRoot(r); err != nil {
			return nil, p.errAt(item, "%s: %v", rootKey(i), err)
		}
		rl.at[i] = filePos{p.file, item.Line, item.Column}
	}
	return rl, nil
}

// InheritRoots returns the entry with the roots of rl as its Roots when
// the entry declares none of its own (its Roots is nil): a workflow's
// roots: apply to every server it uses whose entry says nothing. An entry
// with roots of its own (even none), or a nil rl, leaves the entry as it
// is; the entry given is never changed.
func (s *Server) InheritRoots(rl *RootList) *Server {
	if s.Roots != nil || rl == nil {
		return s
	}
	c := *s
	c.Roots = append([]string{}, rl.Roots...)
	c.rootsAt = rl.at
	return &c
}

func rootKey(i int) string { return fmt.Sprintf("roots[%d]", i) }

// CheckRoots checks that each of the entry's roots names an existing
// directory, a relative one taken relative to workspace, as [Connect]
// does before it starts the server. The error is a *ConfigError at the
// root, when where it was written is known.
func (s *Server) CheckRoots(workspace string) error {
	_, err := s.roots(workspace)
	return err
}

// roots resolves the roots the session declares: the workspace when
// Roots is nil, else each of Roots, a relative path taken relative to
// workspace. Each configured root must be an existing directory; the error
// is a *ConfigError naming it and where it was written.
func (s *Server) roots(workspace string) ([]*mcp.Root, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, &ConfigError{Server: s.Name, Msg: fmt.Sprintf("roots: the workspace %s: %v", workspace, err)}
	}
	if s.Roots == nil {
		return []*mcp.Root{{Name: WorkspaceRoot, URI: fileURI(ws)}}, nil
	}
	out := make([]*mcp.Root, 0, len(s.Roots))
	for i, r := range s.Roots {
		dir, msg := rootPath(r, ws)
		if msg == "" {
			msg = isDir(dir)
		}
		if msg != "" {
			e := &ConfigError{Server: s.Name, Msg: rootKey(i) + ": " + msg}
			if len(s.rootsAt) == len(s.Roots) {
				at := s.rootsAt[i]
				e.File, e.Line, e.Column = at.file, at.line, at.col
			}
			return nil, e
		}
		out = append(out, &mcp.Root{Name: r, URI: fileURI(dir)})
	}
	return out, nil
}

// rootPath is the absolute, cleaned directory a root names, or why it
// names none.
func rootPath(root, workspace string) (dir, problem string) {
	if err := CheckRoot(root); err != nil {
		return "", err.Error()
	}
	if strings.Contains(root, "://") {
		u, _ := url.Parse(root) // CheckRoot parsed it
		return filepath.Clean(filepath.FromSlash(u.Path)), ""
	}
	if rest, ok := strings.CutPrefix(root, "~/"); ok || root == "~" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Sprintf("root %q: no home directory: %v", root, err)
		}
		return filepath.Join(home, rest), ""
	}
	if filepath.IsAbs(root) {
		return filepath.Clean(root), ""
	}
	return filepath.Join(workspace, root), ""
}

// isDir says why dir is not an existing directory, or "".
func isDir(dir string) string {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dir + ": no such directory (expected an existing directory; a relative root is relative to the workspace)"
	case err != nil:
		return fmt.Sprintf("%s: %v (expected an existing directory)", dir, unwrapPathError(err))
	case !fi.IsDir():
		return dir + " is not a directory (expected a directory, not a file)"
	}
	return ""
}

// fileURI is the file:// URI of an absolute path, escaped as URIs are.
func fileURI(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}
