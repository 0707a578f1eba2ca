package httpapi

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpflow/mcpflow/internal/inputfile"
	"github.com/mcpflow/mcpflow/service"
)

// forbiddenError is a request for something the server does not give
// through its API (403): a file outside its workspace.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }
func (e *forbiddenError) Unwrap() error { return service.ErrForbidden }

// workflowOf is the workflow a request names, as a file name and its
// text: src named name (over the unix socket only), or else the file name
// inside the workspace (see readWorkspaceFile).
func (s *Server) workflowOf(r *http.Request, name, src string) (string, []byte, error) {
	if src == "" {
		return s.readWorkspaceFile(name)
	}
	if overTCP(r) {
		// Trust is granted by the user, never by a text someone else
		// wrote: a workflow sent by a client could declare servers that
		// run any command as the server's user, or read its environment.
		return "", nil, &forbiddenError{"a workflow's text is taken only over the unix socket (by the journal's owner): over TCP, the API runs workflow files of the server's workspace"}
	}
	if name == "" {
		name = "workflow.yaml"
	}
	return name, []byte(src), nil
}

// readWorkspaceFile reads the workflow file name (absolute, or relative to
// the workspace) if it lies inside the server's workspace, symbolic links
// followed, and outside its .mcpflow (the journal, logs, the socket);
// anything else is a forbiddenError, and is not opened. The API must not
// be a way to read the server user's other files — a key, a token —
// whatever an error message would then say of them. The file is read
// through an os.Root of the workspace, so a link swapped in after the
// check cannot lead out of it.
func (s *Server) readWorkspaceFile(name string) (string, []byte, error) {
	ws := s.o.Workspace
	if ws == "" {
		return "", nil, &forbiddenError{"this server has no workspace to read workflow files from"}
	}
	refuse := func(why string) error {
		return &forbiddenError{fmt.Sprintf("%s: %s; the API reads workflow files only from the server's workspace %s, outside .mcpflow", name, why, ws)}
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", nil, refuse("the workspace cannot be resolved")
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(ws, path)
	}
	path = filepath.Clean(path)
	// Lexically first, so that nothing is even looked at outside; then
	// with links followed.
	var rel string
	for _, dir := range []string{ws, realWS} {
		if r, ok := relWithin(dir, path); ok {
			rel = r
			break
		}
	}
	switch {
	case rel == "":
		return "", nil, refuse("outside the workspace")
	case inMcpflow(rel):
		return "", nil, refuse("inside the workspace's .mcpflow")
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, badRequest("%s: no such file in the workspace", name)
	} else if err != nil {
		return "", nil, refuse("it cannot be resolved")
	}
	realRel, ok := relWithin(realWS, real)
	switch {
	case !ok:
		return "", nil, refuse("a link that leads outside the workspace")
	case inMcpflow(realRel):
		return "", nil, refuse("a link into the workspace's .mcpflow")
	}
	f, err := os.OpenInRoot(realWS, realRel)
	if err != nil {
		return "", nil, refuse("it cannot be opened within the workspace")
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", nil, badRequest("%s: not a regular file", name)
	}
	b, err := inputfile.ReadReader(f, name, 0)
	if err != nil {
		return "", nil, badRequest("%s: %v", name, err)
	}
	return real, b, nil
}

// relWithin is path relative to dir when it is dir or lies under it (both
// clean and absolute).
func relWithin(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// inMcpflow reports whether rel (relative to the workspace) is in its
// .mcpflow, in any case (a case-insensitive file system has one).
func inMcpflow(rel string) bool {
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	return strings.EqualFold(first, ".mcpflow")
}
