package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/internal/inputfile"
	"github.com/mcpflow/mcpflow/internal/yamlpos"
)

// WorkspaceFile is the name of the workspace's server configuration.
const WorkspaceFile = "mcpflow.yaml"

// Source says which files a workspace's servers came from.
type Source struct {
	// File is the mcpflow.yaml that was read; "" when the workspace has none.
	File string `json:"file"`
	// Imports are the files imported, in the order they were read (later
	// ones override earlier ones). Optional imports that do not exist are
	// not listed.
	Imports []string `json:"imports"`
	// Absent are the optional imports that did not exist when the file was
	// read: creating one changes the configuration.
	Absent []string `json:"-"`
}

// Files lists every file the configuration depends on: mcpflow.yaml (even
// when absent), its imports, and the optional imports that are absent.
func (s *Source) Files(dir string) []string {
	out := []string{filepath.Join(dir, WorkspaceFile)}
	out = append(out, s.Imports...)
	return append(out, s.Absent...)
}

// LoadWorkspace reads DIR/mcpflow.yaml if it exists:
//
//	import:                      # optional: files other clients already use
//	  - .vscode/mcp.json         # relative to DIR; ~/ is the home directory
//	  - {path: ~/.cursor/mcp.json, optional: true}
//	servers:                     # optional: entries as in a workflow
//	  demo: {builtin: demo}
//	sampling:                    # optional: see Sampling (LoadConfig reads it)
//	  provider: openai-compatible
//	  base_url: http://localhost:11434/v1
//	  model: llama3.2
//
// Imports are read in order, a later file overriding an earlier one's
// entry of the same name, and the file's own servers override them all.
// A workspace without mcpflow.yaml has no servers and no error.
//
// No key of this file (or of any imported file) grants workspace trust; an
// entry's trust is server trust. Errors are *ConfigError.
func LoadWorkspace(dir string) (Set, *Source, error) {
	r, src, err := loadWorkspace(dir)
	if err != nil {
		return nil, nil, err
	}
	set, _ := r.merge()
	return set, src, nil
}

func loadWorkspace(dir string) (*reading, *Source, error) {
	path := filepath.Join(dir, WorkspaceFile)
	src, err := inputfile.Read(path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return &reading{}, &Source{}, nil
	}
	if err != nil {
		return nil, nil, &ConfigError{File: path, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	return loadYAML(path, src, dir, true)
}

// Import reads a servers file given with --servers FILE. The format is
// detected from the content (JSON with comments is accepted):
//
//   - {"mcpServers": {NAME: {command, args, env} | {url, type, headers}}}:
//     Claude Desktop, Claude Code's .mcp.json, Cursor. A url without a type
//     is streamable HTTP.
//   - {"mcpServers": …} with Gemini CLI / Qwen Code keys (httpUrl, trust,
//     timeout, includeTools, excludeTools) or named settings.json: url is
//     SSE, httpUrl streamable HTTP, timeout is milliseconds (→ call_timeout),
//     trust is server trust.
//   - {"servers": {NAME: {type, command, args, env, url, headers}},
//     "inputs": […]}: VS Code's .vscode/mcp.json (also {"mcp": {"servers":
//     …}} of its settings.json).
//   - a .yaml or .yml file: mcpflow.yaml's shape; its imports are relative
//     to the file's directory.
//
// ${env:VAR} becomes ${VAR} (expanded at connect time); ${workspaceFolder}
// (the folder holding .vscode, .cursor, .gemini or .qwen, else the file's
// folder) and ${userHome} are replaced on import; VS Code's ${input:ID}
// becomes ${MCPFLOW_INPUT_ID} (see InputEnv), so only the server that uses
// it waits for it; Gemini CLI's $VAR becomes ${VAR} in every string.
// VS Code's envFile and Gemini's includeTools and excludeTools are
// honoured. Entries with "disabled": true are skipped. Errors are
// *ConfigError with the line and column in FILE.
func Import(path string) (Set, error) {
	r, _, err := importFile(path, true, "")
	if err != nil {
		return nil, err
	}
	set, _ := r.merge()
	return set, nil
}

// Config is the servers configured outside workflows (see LoadConfig).
type Config struct {
	// Servers are the entries in effect, by name.
	Servers Set
	// Files are every file the configuration depends on (see
	// Source.Files), then the --servers file and what it imports.
	Files []string
	// Read are the files read, in order: mcpflow.yaml when it exists, its
	// imports, the --servers file and its imports.
	Read []string
	// Disabled are the entries read and left out by their own client's
	// settings (Claude Code's disabledMcpjsonServers and
	// enabledMcpjsonServers), by name.
	Disabled map[string]*Disabled
	// Sampling is mcpflow.yaml's sampling: section; nil when it has none
	// (then mcpflow declares no sampling capability).
	Sampling *Sampling
}

// LoadConfig reads the servers configured outside workflows: the
// workspace's mcpflow.yaml (with its imports), then serversFile
// (--servers; "" for none), whose entries win — except that of Claude
// Code's entries, the higher scope wins (local, then a project's
// .mcp.json, then user), and the user's choices in ~/.claude.json about a
// project's .mcp.json servers apply to that .mcp.json however it was read.
func LoadConfig(workspace, serversFile string) (*Config, error) {
	r, src, err := loadWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	files := src.Files(workspace)
	var read []string
	if src.File != "" {
		read = append([]string{src.File}, src.Imports...)
	}
	if serversFile != "" {
		flag, nested, err := importFile(serversFile, true, workspace)
		if err != nil {
			return nil, err
		}
		r.add(flag)
		files = append(append(files, serversFile), nested...)
		read = append(append(read, serversFile), nested...)
	}
	set, disabled := r.merge()
	return &Config{Servers: set, Files: files, Read: read, Disabled: disabled, Sampling: r.sampling}, nil
}

// LoadExternal is LoadConfig's servers and files: it also returns every
// file that configuration depends on, so that a caller can tell when it
// changed.
func LoadExternal(workspace, serversFile string) (Set, []string, error) {
	c, err := LoadConfig(workspace, serversFile)
	if err != nil {
		return nil, nil, err
	}
	return c.Servers, c.Files, nil
}

// importFile reads one file of servers. project is the workspace whose
// project-scoped servers a Claude Code ~/.claude.json also contributes
// ("": none).
func importFile(path string, allowImport bool, project string) (*reading, []string, error) {
	src, err := inputfile.Read(path, 0)
	if err != nil {
		return nil, nil, &ConfigError{File: path, Msg: fmt.Sprintf("cannot read: %v", unwrapPathError(err))}
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		r, src, err := loadYAML(path, src, filepath.Dir(path), allowImport)
		if err != nil {
			return nil, nil, err
		}
		if r.sampling != nil {
			return nil, nil, r.sampling.notHere(path)
		}
		return r, src.Imports, nil
	}
	r, err := importJSON(path, src, project)
	return r, nil, err
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// loadYAML reads a file of mcpflow.yaml's shape. base is what relative
// imports are relative to.
func loadYAML(file string, src []byte, base string, allowImport bool) (r *reading, source *Source, err error) {
	source = &Source{File: file}
	r = &reading{}
	root, err := yamlpos.Parse(src)
	if err != nil {
		e := &ConfigError{File: file, Msg: err.Error() + " (expected valid YAML)"}
		if ye := (*yamlpos.Error)(nil); errors.As(err, &ye) {
			e.Line, e.Column, e.Msg = ye.Line, ye.Column, ye.Msg+" (expected valid YAML)"
		}
		return nil, nil, e
	}
	if root == nil || root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return r, source, nil // empty file
	}
	p := &yamlParser{file: file}
	fields, _, err := p.fields(root, []string{"import", "servers", "sampling"})
	if err != nil {
		return nil, nil, err
	}
	if n, ok := fields["sampling"]; ok {
		if r.sampling, err = p.parseSampling(n); err != nil {
			return nil, nil, err
		}
	}
	if n, ok := fields["import"]; ok {
		if !allowImport {
			return nil, nil, p.errAt(n, "import: an imported file cannot import others (expected servers: only)")
		}
		if n.Kind != yaml.SequenceNode {
			return nil, nil, p.errAt(n, "import: expected a list of file paths, found %s", yamlpos.KindName(n))
		}
		for i, item := range n.Content {
			path, optional, err := p.importItem(item, i)
			if err != nil {
				return nil, nil, err
			}
			path = resolvePath(base, path)
			if optional {
				if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
					source.Absent = append(source.Absent, path)
					continue
				}
			} else if _, err := os.Stat(path); err != nil {
				return nil, nil, p.errAt(item, "import[%d]: %s: %v (expected an existing file, or {path: …, optional: true})", i, path, unwrapPathError(err))
			}
			imported, nested, err := importFile(path, false, base)
			if err != nil {
				return nil, nil, err
			}
			r.add(imported)
			source.Imports = append(source.Imports, path)
			source.Imports = append(source.Imports, nested...)
		}
	}
	own := Set{}
	if n, ok := fields["servers"]; ok {
		if n.Kind != yaml.MappingNode {
			if n.Tag != "!!null" {
				return nil, nil, p.errAt(n, "servers: expected a mapping of server names, found %s", yamlpos.KindName(n))
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "" {
				return nil, nil, p.errAt(k, "servers: expected a server name, found %s", yamlpos.KindName(k))
			}
			if _, dup := own[k.Value]; dup {
				return nil, nil, p.errAt(k, "servers: duplicate server %q (expected each name once)", k.Value)
			}
			srv, err := ParseEntry(file, k.Value, v)
			if err != nil {
				return nil, nil, err
			}
			own[k.Value] = srv
		}
	}
	r.sets = append(r.sets, own)
	return r, source, nil
}

func (p *yamlParser) importItem(n *yaml.Node, i int) (path string, optional bool, err error) {
	what := fmt.Sprintf("import[%d]", i)
	if n.Kind == yaml.ScalarNode {
		path, err = p.str(n, what)
	} else {
		var f map[string]*yaml.Node
		if f, _, err = p.fields(n, []string{"path", "optional"}); err != nil {
			return "", false, err
		}
		pn, ok := f["path"]
		if !ok {
			return "", false, p.errAt(n, "%s: missing path (expected {path: FILE, optional: true})", what)
		}
		if path, err = p.str(pn, what+".path"); err != nil {
			return "", false, err
		}
		if on, ok := f["optional"]; ok {
			if optional, err = p.boolean(on, what+".optional"); err != nil {
				return "", false, err
			}
		}
	}
	if err == nil && path == "" {
		err = p.errAt(n, "%s: empty path (expected a file path)", what)
	}
	return path, optional, err
}

// resolvePath makes an import path absolute: ~/ is the home directory, a
// relative path is relative to base.
func resolvePath(base, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok || p == "~" {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// canonicalFile is file made absolute, its symbolic links resolved when it
// exists: one name for every spelling of one file.
func canonicalFile(file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return file
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// OwnServers reads DIR/mcpflow.yaml as LoadWorkspace does and returns the
// servers its own servers: defines, by name — not those it imports — and
// where its servers come from.
func OwnServers(dir string) (Set, *Source, error) {
	r, src, err := loadWorkspace(dir)
	if err != nil {
		return nil, nil, err
	}
	if src.File == "" || len(r.sets) == 0 {
		return Set{}, src, nil
	}
	return r.sets[len(r.sets)-1], src, nil
}
