package mcpapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The tools every Server has besides its workflows'.
const (
	ToolListRuns = "list_runs"
	ToolShowRun  = "show_run"
)

// maxToolName is the longest name ToolName returns: the limit of the
// strictest clients (64), below the protocol's 128.
const maxToolName = 64

// ToolName is a workflow's name made tool-safe: ASCII letters, digits, _
// and - are kept; every run of other characters (spaces, dots, slashes,
// any other letter) becomes one _; a leading or trailing _ is dropped; the
// name is cut to 64 characters. A name left empty is "workflow". Case is
// kept: "Deploy" and "deploy" are two tools.
func ToolName(name string) string {
	var b strings.Builder
	under := false
	for _, r := range name {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			b.WriteRune(r)
			under = false
			continue
		}
		if !under {
			b.WriteByte('_')
			under = true
		}
	}
	s := strings.Trim(b.String(), "_")
	if len(s) > maxToolName {
		s = strings.TrimRight(s[:maxToolName], "_")
	}
	if s == "" {
		return "workflow"
	}
	return s
}

// Collision is a tool name more than one workflow file would take, or
// that a workflow would take from a tool of the Server's own: none of
// those workflows is offered.
type Collision struct {
	Tool  string
	Files []string // sorted
}

func (c Collision) String() string {
	if len(c.Files) == 1 {
		return fmt.Sprintf("tool %s: the name of one of mcpflow's own tools; workflow %s is not offered (rename it)", c.Tool, c.Files[0])
	}
	return fmt.Sprintf("tool %s: workflows %s all take this name; none of them is offered (rename all but one)", c.Tool, strings.Join(c.Files, ", "))
}

// assignNames gives each file its tool name (by names[file], the
// workflow's name) and returns the files offered under each name, and the
// collisions, sorted by tool: a name taken by several files, or by one of
// the Server's own tools, offers none of them.
func assignNames(names map[string]string) (map[string]string, []Collision) {
	byTool := map[string][]string{}
	for file, name := range names {
		t := ToolName(name)
		byTool[t] = append(byTool[t], file)
	}
	offered := map[string]string{}
	var collisions []Collision
	for _, t := range slices.Sorted(maps.Keys(byTool)) {
		files := byTool[t]
		slices.Sort(files)
		if len(files) > 1 || t == ToolListRuns || t == ToolShowRun {
			collisions = append(collisions, Collision{Tool: t, Files: files})
			continue
		}
		offered[t] = files[0]
	}
	return offered, collisions
}
