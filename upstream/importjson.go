package upstream

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/internal/jsonpos"
)

// dialect is the family of an imported JSON file. They differ in where the
// servers are and in what a url without a type means.
type dialect int

const (
	// {"mcpServers": …}: Claude Desktop, Claude Code's .mcp.json, Cursor. A
	// url without a type is streamable HTTP.
	dialectMCPServers dialect = iota
	// {"mcpServers": …} of Gemini CLI or Qwen Code settings.json: url is
	// SSE, httpUrl streamable HTTP, timeout in milliseconds, trust.
	dialectGemini
	// {"servers": …, "inputs": […]}: VS Code's .vscode/mcp.json (or
	// {"mcp": {"servers": …}} in its settings.json).
	dialectVSCode
)

// geminiKeys are entry keys only Gemini CLI and Qwen Code use; one of them
// in an mcpServers file marks the whole file as theirs.
var geminiKeys = []string{"httpUrl", "trust", "timeout", "includeTools", "excludeTools"}

// jimporter reads one JSON servers file.
type jimporter struct {
	file      string
	canon     string // file absolute, symbolic links resolved
	src       []byte
	dialect   dialect
	workspace string            // what ${workspaceFolder} means
	inputs    map[string]string // VS Code input id → description
}

func (p *jimporter) errAt(off int, server, format string, args ...any) *ConfigError {
	line, col := jsonpos.LineCol(p.src, off)
	return &ConfigError{File: p.file, Line: line, Column: col, Server: server, Msg: fmt.Sprintf(format, args...)}
}

// importJSON reads the servers of a Claude Desktop, Cursor, .mcp.json,
// VS Code or Gemini CLI / Qwen Code file, or Claude Code's ~/.claude.json,
// whose projects[project] contributes the project's local-scoped servers
// (those `claude mcp add` puts there by default) and the user's choices
// about the project's .mcp.json servers (see Disabled).
func importJSON(file string, src []byte, project string) (*reading, error) {
	p := &jimporter{file: file, canon: canonicalFile(file), src: src, workspace: workspaceOf(file)}
	root, err := jsonpos.Parse(src)
	if err != nil {
		msg, off := jsonpos.ErrorPos(src, err)
		return nil, p.errAt(off, "", "%s", msg)
	}
	if root.Kind != jsonpos.Object {
		return nil, p.errAt(root.Off, "", "expected an object with \"mcpServers\" or \"servers\", found %s", root.KindName())
	}
	mcp, hasMCP := root.Field("mcpServers")
	vs, hasVS := root.Field("servers")
	if !hasMCP && !hasVS {
		if nested, ok := root.Field("mcp"); ok {
			vs, hasVS = nested.Field("servers")
		}
	}
	projects, claudeCode := root.Field("projects")
	claudeCode = claudeCode && projects.Kind == jsonpos.Object || filepath.Base(file) == ".claude.json"
	var servers *jsonpos.Node
	switch {
	case hasMCP && hasVS:
		return nil, p.errAt(vs.Off, "", "has both \"mcpServers\" and \"servers\" (expected one: mcpServers for Claude Desktop, Cursor, .mcp.json, Gemini CLI or Qwen Code; servers for VS Code)")
	case hasMCP:
		servers, p.dialect = mcp, dialectMCPServers
		if isGemini(file, mcp) {
			p.dialect = dialectGemini
		}
	case hasVS:
		servers, p.dialect = vs, dialectVSCode
		p.readInputs(root)
	default:
		return nil, p.errAt(root.Off, "", "no \"mcpServers\" or \"servers\" object (expected {\"mcpServers\": {NAME: {...}}} as in Claude Desktop, Cursor, .mcp.json, Gemini CLI and Qwen Code, or {\"servers\": {NAME: {...}}} as in VS Code)")
	}
	claudeCode = claudeCode && p.dialect == dialectMCPServers
	sc := scopeNone
	switch {
	case claudeCode:
		sc = scopeUser
	case p.dialect == dialectMCPServers && filepath.Base(file) == ".mcp.json":
		sc = scopeProject
	}
	set, err := p.entries(servers, sc)
	if err != nil {
		return nil, err
	}
	r := &reading{sets: []Set{set}}
	entry := projectEntry(root, project)
	if !claudeCode || entry == nil {
		return r, nil
	}
	if scoped, ok := entry.Field("mcpServers"); ok {
		own, err := p.entries(scoped, scopeLocal)
		if err != nil {
			return nil, err
		}
		r.sets = append(r.sets, own)
	}
	c, err := p.projectChoices(entry, project)
	if err != nil {
		return nil, err
	}
	if c != nil {
		r.choices = append(r.choices, c)
	}
	return r, nil
}

// entries converts an object of server entries by name, read from
// Claude Code's scope sc (scopeNone for other clients).
func (p *jimporter) entries(servers *jsonpos.Node, sc scope) (Set, error) {
	if servers.Kind != jsonpos.Object {
		return nil, p.errAt(servers.Off, "", "expected an object of servers by name, found %s", servers.KindName())
	}
	set := Set{}
	for _, f := range servers.Keys {
		if f.Name == "" {
			return nil, p.errAt(f.Off, "", "empty server name (expected a non-empty name)")
		}
		if _, dup := set[f.Name]; dup {
			return nil, p.errAt(f.Off, "", "duplicate server %q (expected each name once)", f.Name)
		}
		srv, err := p.entry(f.Name, f.Val)
		if err != nil {
			return nil, err
		}
		if srv != nil {
			srv.scope = sc
			set[f.Name] = srv
		}
	}
	return set, nil
}

// projectEntry is Claude Code's projects[project] object, or nil. The
// project is matched by its absolute path, symbolic links resolved or not.
func projectEntry(root *jsonpos.Node, project string) *jsonpos.Node {
	projects, ok := root.Field("projects")
	if !ok || project == "" || projects.Kind != jsonpos.Object {
		return nil
	}
	want := map[string]bool{filepath.Clean(project): true}
	if real, err := filepath.EvalSymlinks(project); err == nil {
		want[real] = true
	}
	for _, f := range projects.Keys {
		if want[filepath.Clean(f.Name)] && f.Val.Kind == jsonpos.Object {
			return f.Val
		}
	}
	return nil
}

func isGemini(file string, servers *jsonpos.Node) bool {
	if filepath.Base(file) == "settings.json" {
		return true
	}
	for _, f := range servers.Keys {
		for _, k := range geminiKeys {
			if _, ok := f.Val.Field(k); ok {
				return true
			}
		}
	}
	return false
}

// workspaceOf is the folder a config file belongs to: the parent of a
// .vscode, .cursor, .gemini or .qwen directory, else the file's directory.
func workspaceOf(file string) string {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		dir = filepath.Dir(file)
	}
	switch filepath.Base(dir) {
	case ".vscode", ".cursor", ".gemini", ".qwen":
		return filepath.Dir(dir)
	}
	return dir
}

func (p *jimporter) readInputs(root *jsonpos.Node) {
	in, ok := root.Field("inputs")
	if !ok || in.Kind != jsonpos.Array {
		return
	}
	p.inputs = map[string]string{}
	for _, it := range in.Items {
		id, _ := it.Field("id")
		desc, _ := it.Field("description")
		if id != nil && id.Kind == jsonpos.String {
			p.inputs[id.Str] = ""
			if desc != nil && desc.Kind == jsonpos.String {
				p.inputs[id.Str] = desc.Str
			}
		}
	}
}

// entry converts one server object. It returns nil, nil for an entry with
// "disabled": true.
func (p *jimporter) entry(name string, n *jsonpos.Node) (*Server, error) {
	if n.Kind != jsonpos.Object {
		return nil, p.errAt(n.Off, name, "expected an object with command or url, found %s", n.KindName())
	}
	if d, ok := n.Field("disabled"); ok && d.Kind == jsonpos.Bool && d.Bool {
		return nil, nil
	}
	line, col := jsonpos.LineCol(p.src, n.Off)
	srv := &Server{Name: name, Origin: fmt.Sprintf("%s:%d:%d", p.file, line, col), File: p.file,
		at: fmt.Sprintf("%s:%d:%d", p.canon, line, col)}
	pos := map[string]int{"": n.Off} // mcpflow key → offset, for validation errors
	var urlKey string
	for _, f := range n.Keys {
		v := f.Val
		var err error
		switch f.Name {
		case "command":
			srv.Command, err = p.str(name, f.Name, v)
			pos["command"] = v.Off
		case "args":
			srv.Args, err = p.strList(name, f.Name, v)
			pos["args"] = v.Off
		case "env":
			srv.Env, err = p.strMap(name, f.Name, v)
			pos["env"] = v.Off
		case "cwd":
			srv.Cwd, err = p.str(name, f.Name, v)
			pos["cwd"] = v.Off
		case "envFile":
			srv.EnvFile, err = p.str(name, f.Name, v)
			pos["env_file"] = v.Off
		case "headers":
			srv.Headers, err = p.strMap(name, f.Name, v)
			pos["headers"] = v.Off
		case "url", "httpUrl":
			if urlKey != "" {
				return nil, p.errAt(f.Off, name, "sets both %s and %s (expected one of them)", urlKey, f.Name)
			}
			urlKey = f.Name
			srv.URL, err = p.str(name, f.Name, v)
			pos["url"] = v.Off
		case "type":
			var t string
			t, err = p.str(name, f.Name, v)
			pos["type"] = v.Off
			if err == nil {
				srv.Type, err = p.transportType(name, t, v)
			}
		case "includeTools", "excludeTools":
			if p.dialect != dialectGemini {
				p.ignored(srv, f)
				continue
			}
			var list []string
			if list, err = p.strList(name, f.Name, v); err == nil {
				if f.Name == "includeTools" {
					srv.IncludeTools = list
				} else {
					srv.ExcludeTools = list
				}
			}
		case "trust":
			if v.Kind != jsonpos.Bool {
				return nil, p.errAt(v.Off, name, "trust: expected true or false, found %s", v.KindName())
			}
			srv.Trust = v.Bool // server trust only; no file grants workspace trust
		case "timeout":
			if p.dialect != dialectGemini {
				p.ignored(srv, f)
				continue
			}
			ms, perr := strconv.ParseFloat(v.Str, 64)
			if v.Kind != jsonpos.Number || perr != nil || ms < 0 {
				return nil, p.errAt(v.Off, name, "timeout: expected a number of milliseconds, found %s", v.KindName())
			}
			srv.CallTimeout = time.Duration(ms * float64(time.Millisecond))
			pos["call_timeout"] = v.Off
		case "disabled":
		default:
			p.ignored(srv, f)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case urlKey == "httpUrl" && srv.Type == TransportSSE:
		return nil, p.errAt(pos["type"], name, "type sse with httpUrl (expected url for an SSE server, or type http)")
	case urlKey == "url" && srv.Type == "" && p.dialect == dialectGemini:
		srv.Type = TransportSSE // Gemini CLI: url is an SSE endpoint, httpUrl streamable HTTP
	}
	// Keep entries in their simplest form: stdio and http are the defaults.
	if srv.Type == TransportStdio && srv.URL == "" || srv.Type == TransportHTTP && srv.URL != "" {
		srv.Type = ""
	}
	if err := p.translate(srv, pos); err != nil {
		return nil, err
	}
	p.place(srv, n)
	if pr := srv.check(); pr != nil {
		off, ok := pos[pr.key]
		if !ok {
			off = n.Off
		}
		return nil, p.errAt(off, name, "%s", jsonWording(pr.msg))
	}
	return srv, nil
}

// place records where each value of the entry n that may refer to a
// variable is (see Server.places).
func (p *jimporter) place(srv *Server, n *jsonpos.Node) {
	at := func(key string, v *jsonpos.Node) {
		line, col := jsonpos.LineCol(p.src, v.Off)
		srv.place(key, fmt.Sprintf("%s:%d:%d", p.file, line, col))
	}
	for _, f := range n.Keys {
		switch f.Name {
		case "command", "cwd", "url":
			at(f.Name, f.Val)
		case "httpUrl":
			at("url", f.Val)
		case "envFile":
			at("env_file", f.Val)
		case "args":
			for i, it := range f.Val.Items {
				at(fmt.Sprintf("args[%d]", i), it)
			}
		case "env", "headers":
			for _, e := range f.Val.Keys {
				at(placeKey(f.Name, e.Name), e.Val)
			}
		}
	}
}

// informational are entry keys that change nothing mcpflow does: they are
// read by people, or by the client that wrote them, only.
var informational = []string{"description", "title", "name", "disabled", "icon", "$schema"}

// ignored notes a key of an entry that mcpflow does not apply.
func (p *jimporter) ignored(srv *Server, f jsonpos.Field) {
	if slices.Contains(informational, f.Name) {
		return
	}
	line, col := jsonpos.LineCol(p.src, f.Off)
	srv.Warnings = append(srv.Warnings, fmt.Sprintf("%s:%d:%d: key %q is not used by mcpflow (ignored)", p.file, line, col, f.Name))
}

// jsonWording adapts validation messages, worded for mcpflow's YAML, to
// the JSON formats.
func jsonWording(msg string) string {
	return strings.Replace(msg, "(expected one of builtin: demo, command: PROGRAM or url: https://HOST/PATH)",
		`(expected "command": "PROGRAM" or "url": "https://HOST/PATH")`, 1)
}

func (p *jimporter) transportType(name, t string, v *jsonpos.Node) (string, error) {
	switch strings.ToLower(t) {
	case "stdio":
		return TransportStdio, nil
	case "http", "streamable-http", "streamable_http", "streamablehttp":
		return TransportHTTP, nil
	case "sse":
		return TransportSSE, nil
	}
	return "", p.errAt(v.Off, name, "type: unknown type %q (expected \"stdio\", \"http\" or \"sse\")", t)
}

func (p *jimporter) str(server, key string, v *jsonpos.Node) (string, error) {
	if v.Kind != jsonpos.String {
		return "", p.errAt(v.Off, server, "%s: expected a string, found %s", key, v.KindName())
	}
	return v.Str, nil
}

func (p *jimporter) strList(server, key string, v *jsonpos.Node) ([]string, error) {
	if v.Kind != jsonpos.Array {
		return nil, p.errAt(v.Off, server, "%s: expected an array of strings, found %s", key, v.KindName())
	}
	out := make([]string, 0, len(v.Items))
	for i, it := range v.Items {
		switch it.Kind {
		case jsonpos.String, jsonpos.Number:
			out = append(out, it.Str)
		default:
			return nil, p.errAt(it.Off, server, "%s[%d]: expected a string, found %s", key, i, it.KindName())
		}
	}
	return out, nil
}

func (p *jimporter) strMap(server, key string, v *jsonpos.Node) (map[string]string, error) {
	if v.Kind != jsonpos.Object {
		return nil, p.errAt(v.Off, server, "%s: expected an object of \"NAME\": \"VALUE\", found %s", key, v.KindName())
	}
	out := map[string]string{}
	for _, f := range v.Keys {
		switch f.Val.Kind {
		case jsonpos.String, jsonpos.Number:
			out[f.Name] = f.Val.Str
		case jsonpos.Bool:
			out[f.Name] = strconv.FormatBool(f.Val.Bool)
		default:
			return nil, p.errAt(f.Val.Off, server, "%s.%s: expected a string, found %s", key, f.Name, f.Val.KindName())
		}
	}
	return out, nil
}

// translate rewrites the other clients' variable syntax into mcpflow's
// ${VAR}: ${env:VAR} becomes ${VAR}; ${workspaceFolder} and ${userHome}
// are replaced by their paths; Gemini's bare $VAR, in every string,
// becomes ${VAR}; VS Code's ${input:ID} becomes ${MCPFLOW_INPUT_ID}.
func (p *jimporter) translate(srv *Server, pos map[string]int) error {
	tr := func(key, s string) (string, error) {
		if p.dialect == dialectGemini {
			s = bracedVars(s) // Gemini CLI reads $VAR as ${VAR} in every string
		}
		out, err := p.translateVars(s, srv)
		if err != nil {
			return "", p.errAt(pos[key], srv.Name, "%s: %v", key, err)
		}
		return out, nil
	}
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"command", &srv.Command}, {"cwd", &srv.Cwd}, {"env_file", &srv.EnvFile}, {"url", &srv.URL}} {
		if *f.dst, err = tr(f.key, *f.dst); err != nil {
			return err
		}
	}
	for i := range srv.Args {
		if srv.Args[i], err = tr("args", srv.Args[i]); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		key string
		m   map[string]string
	}{{"env", srv.Env}, {"headers", srv.Headers}} {
		for _, k := range sortedKeys(m.m) {
			if m.m[k], err = tr(m.key, m.m[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *jimporter) translateVars(s string, srv *Server) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed %q (expected ${NAME})", s[i:])
		}
		b.WriteString(s[:i])
		ref, body := s[i:i+end+1], s[i+2:i+end]
		s = s[i+end+1:]
		kind, arg, hasColon := strings.Cut(body, ":")
		switch {
		case body == "workspaceFolder":
			b.WriteString(p.workspace)
		case body == "workspaceFolderBasename":
			b.WriteString(filepath.Base(p.workspace))
		case body == "userHome":
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("%s: %v", ref, err)
			}
			b.WriteString(home)
		case body == "pathSeparator" || body == "/":
			b.WriteString(string(filepath.Separator))
		case hasColon && kind == "env" && validVarName(arg):
			b.WriteString("${" + arg + "}")
			if srv.spelled == nil {
				srv.spelled = map[string]string{}
			}
			srv.spelled[arg] = ref
		case hasColon && kind == "input" && arg != "":
			// VS Code prompts for it; mcpflow reads it from the
			// environment when the server starts, so only this server
			// waits for it.
			b.WriteString("${" + InputEnv(arg) + "}")
		case validVarName(kind) && (!hasColon || strings.HasPrefix(arg, "-")):
			b.WriteString(ref) // already ${VAR} or ${VAR:-default}
		default:
			return "", fmt.Errorf("unsupported variable %s (expected %s)", ref, p.varSyntax())
		}
	}
}

// InputEnv is the environment variable that supplies VS Code's
// ${input:ID}: MCPFLOW_INPUT_ and the id upper-cased, any character other
// than a letter or digit as _ (as for a workflow's inputs).
func InputEnv(id string) string {
	b := []byte(strings.ToUpper(id))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return "MCPFLOW_INPUT_" + string(b)
}

// varSyntax is the variable syntax the file's own client understands.
func (p *jimporter) varSyntax() string {
	switch p.dialect {
	case dialectGemini:
		return "$NAME or ${NAME}"
	case dialectVSCode:
		return "${env:NAME}, ${input:ID}, ${workspaceFolder} or ${userHome}"
	}
	return "${env:NAME} (Cursor and Claude Code), ${workspaceFolder} or ${userHome}"
}

// bracedVars rewrites $NAME as ${NAME}, leaving ${…} and lone $ alone.
func bracedVars(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) || !(s[i+1] == '_' || isLetter(s[i+1])) {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || isLetter(s[j]) || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		b.WriteString("${" + s[i+1:j] + "}")
		i = j - 1
	}
	return b.String()
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
