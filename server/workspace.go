package server

import (
	"fmt"
	"path/filepath"
	"strings"
)

// forbiddenError is a request for something the server does not give
// through its API (403): a file outside its workspace.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

// workflowOf sets *file and *src to the workflow a request names: its
// text src named name, or else the file name inside the workspace (see
// workspaceFile), which the service will read.
func (s *Server) workflowOf(name, src string, file *string, source *[]byte) error {
	if src != "" {
		if name == "" {
			name = "workflow.yaml"
		}
		*file, *source = name, []byte(src)
		return nil
	}
	path, err := s.workspaceFile(name)
	if err != nil {
		return err
	}
	*file = path
	return nil
}

// workspaceFile is the path of the workflow file name (absolute, or
// relative to the workspace) if it lies inside the server's workspace,
// symbolic links followed, and outside its .mcpflow (the journal, logs,
// the socket); anything else is a forbiddenError. The API must not be a
// way to read the server user's other files — a key, a token — whatever
// an error message would then say of them. mcpflow commands send the
// workflow's text instead, read as their user.
func (s *Server) workspaceFile(name string) (string, error) {
	ws := s.o.Workspace
	if ws == "" {
		return "", &forbiddenError{"this server has no workspace to read workflow files from: send the workflow's text (source)"}
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(ws, path)
	}
	path = filepath.Clean(path)
	refuse := func(why string) error {
		return &forbiddenError{fmt.Sprintf("%s: %s; the API reads workflow files only from the server's workspace %s, outside .mcpflow (send the workflow's text as source instead)", name, why, ws)}
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", refuse("the workspace cannot be resolved")
	}
	// Lexically first, so that nothing is even looked at outside; then
	// with links followed.
	for _, dir := range []string{ws, realWS} {
		if within(dir, path) {
			if within(filepath.Join(dir, ".mcpflow"), path) {
				return "", refuse("inside the workspace's .mcpflow")
			}
			real, err := filepath.EvalSymlinks(path)
			switch {
			case err != nil:
				return path, nil // the service says what is wrong with it
			case !within(realWS, real):
				return "", refuse("a link that leads outside the workspace")
			case within(filepath.Join(realWS, ".mcpflow"), real):
				return "", refuse("a link into the workspace's .mcpflow")
			}
			return real, nil
		}
	}
	return "", refuse("outside the workspace")
}

// within reports whether path is dir or lies under it (both clean and
// absolute).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
