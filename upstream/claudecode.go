package upstream

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/mcpflow/mcpflow/internal/jsonpos"
)

// Claude Code keeps servers in three scopes (claude mcp add --scope):
// user, in ~/.claude.json's mcpServers; project, in the .mcp.json at a
// project's root, shared through its repository; and local, in
// ~/.claude.json's projects[DIR].mcpServers, for one project. Of two
// entries of one name, local wins over project and project over user,
// whichever file mcpflow read first ([Merge]).
//
// The servers of a project's .mcp.json are also subject to the user's
// choices in ~/.claude.json's projects[DIR]: disabledMcpjsonServers
// leaves out those it names; a non-empty enabledMcpjsonServers leaves out
// all it does not name. (Claude Code writes both lists, empty, for every
// project it opens: an empty list is no choice.)

// scope is the Claude Code scope an entry was read from; scopeNone for
// the files of other clients and mcpflow's own.
type scope int8

const (
	scopeNone scope = iota
	scopeUser
	scopeProject
	scopeLocal
)

// outranks reports whether a wins over b in either order: both are Claude
// Code's entries, and a's scope is the higher.
func outranks(a, b *Server) bool {
	return a.scope != scopeNone && b.scope != scopeNone && a.scope > b.scope
}

// Claude Code's settings about a project's .mcp.json servers.
const (
	settingDisabled = "disabledMcpjsonServers"
	settingEnabled  = "enabledMcpjsonServers"
)

// Disabled is an entry of a project's .mcp.json that Claude Code's
// settings for that project leave out: mcpflow does not use it either.
type Disabled struct {
	// Server is the entry as read; its Origin says where.
	Server *Server
	// Setting is the setting that leaves it out: disabledMcpjsonServers
	// (which names it) or enabledMcpjsonServers (which does not). At is
	// where that setting is, FILE:LINE:COL.
	Setting, At string
}

// Reason says why the entry is left out, and where.
func (d *Disabled) Reason() string {
	if d.Setting == settingEnabled {
		return fmt.Sprintf("the entry at %s is not in Claude Code's %s at %s", d.Server.Origin, d.Setting, d.At)
	}
	return fmt.Sprintf("the entry at %s is in Claude Code's %s at %s", d.Server.Origin, d.Setting, d.At)
}

// mcpjsonChoices are the user's choices, in ~/.claude.json, about the
// servers of one project's .mcp.json.
type mcpjsonChoices struct {
	mcpjson           string // the project's .mcp.json, canonical (canonicalFile)
	disabled, enabled []string
	// disabledAt and enabledAt are where the lists are, FILE:LINE:COL.
	disabledAt, enabledAt string
}

// leaves says whether the choices leave srv out, and by which setting.
func (c *mcpjsonChoices) leaves(srv *Server) *Disabled {
	if srv.scope != scopeProject || canonicalFile(srv.File) != c.mcpjson {
		return nil
	}
	switch {
	case slices.Contains(c.disabled, srv.Name):
		return &Disabled{Server: srv, Setting: settingDisabled, At: c.disabledAt}
	case len(c.enabled) > 0 && !slices.Contains(c.enabled, srv.Name):
		return &Disabled{Server: srv, Setting: settingEnabled, At: c.enabledAt}
	}
	return nil
}

// reading is what reading files of servers gave, before their sets are
// merged: the sets, lowest precedence first, and the choices about
// .mcp.json servers found on the way, which apply to every set read with
// them whichever came first.
type reading struct {
	sets    []Set
	choices []*mcpjsonChoices
	// sampling is the file's sampling: section, if it has one (only
	// mcpflow.yaml's is kept: see importFile).
	sampling *Sampling
}

func (r *reading) add(o *reading) {
	r.sets = append(r.sets, o.sets...)
	r.choices = append(r.choices, o.choices...)
}

// merge leaves out the entries the choices leave out, then merges the
// sets (see Merge). It returns the servers in effect and those left out,
// by name.
func (r *reading) merge() (Set, map[string]*Disabled) {
	disabled := map[string]*Disabled{}
	sets := make([]Set, len(r.sets))
	for i, set := range r.sets {
		sets[i] = Set{}
		for name, srv := range set {
			if d := r.leftOut(srv); d != nil {
				disabled[name] = d
			} else {
				sets[i][name] = srv
			}
		}
	}
	return Merge(sets...), disabled
}

// leftOut says whether a choice leaves srv out, and which.
func (r *reading) leftOut(srv *Server) *Disabled {
	for _, c := range r.choices {
		if d := c.leaves(srv); d != nil {
			return d
		}
	}
	return nil
}

// projectChoices reads the choices of projects[project] in a Claude Code
// ~/.claude.json about the project's .mcp.json; nil when there are none.
func (p *jimporter) projectChoices(entry *jsonpos.Node, project string) (*mcpjsonChoices, error) {
	c := &mcpjsonChoices{mcpjson: canonicalFile(filepath.Join(project, ".mcp.json"))}
	for _, l := range []struct {
		key  string
		list *[]string
		at   *string
	}{{settingDisabled, &c.disabled, &c.disabledAt}, {settingEnabled, &c.enabled, &c.enabledAt}} {
		n, ok := entry.Field(l.key)
		if !ok {
			continue
		}
		if n.Kind != jsonpos.Array {
			return nil, p.errAt(n.Off, "", "projects[%q].%s: expected an array of server names, found %s", project, l.key, n.KindName())
		}
		for i, it := range n.Items {
			if it.Kind != jsonpos.String {
				return nil, p.errAt(it.Off, "", "projects[%q].%s[%d]: expected a server name, found %s", project, l.key, i, it.KindName())
			}
			*l.list = append(*l.list, it.Str)
		}
		line, col := jsonpos.LineCol(p.src, n.Off)
		*l.at = fmt.Sprintf("%s:%d:%d", p.file, line, col)
	}
	if len(c.disabled) == 0 && len(c.enabled) == 0 {
		return nil, nil
	}
	return c, nil
}
