package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/diff"
	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/internal/didyoumean"
	"github.com/mcpflow/mcpflow/internal/jsonpos"
)

// Client is an MCP client whose configuration file mcpflow imports, and
// whose servers PlanInstall can route through mcpflow proxy.
type Client struct {
	// Name is the client as a command line names it: claude-desktop,
	// claude-code, cursor, vscode, gemini or qwen.
	Name string
	// Title is the client as people call it: "Claude Desktop", …
	Title   string
	dialect dialect
}

// clients are the known clients, in the order they are listed.
var clients = []*Client{
	{Name: "claude-desktop", Title: "Claude Desktop", dialect: dialectMCPServers},
	{Name: "claude-code", Title: "Claude Code", dialect: dialectMCPServers},
	{Name: "cursor", Title: "Cursor", dialect: dialectMCPServers},
	{Name: "vscode", Title: "VS Code", dialect: dialectVSCode},
	{Name: "gemini", Title: "Gemini CLI", dialect: dialectGemini},
	{Name: "qwen", Title: "Qwen Code", dialect: dialectGemini},
}

// Clients lists the names of the known clients.
func Clients() []string {
	names := make([]string, len(clients))
	for i, c := range clients {
		names[i] = c.Name
	}
	return names
}

// LookupClient returns the client of that name. The error, wrapping
// ErrUnknownClient, lists the known ones and the likely intended one.
func LookupClient(name string) (*Client, error) {
	for _, c := range clients {
		if c.Name == name {
			return c, nil
		}
	}
	known := strings.Join(Clients(), ", ")
	if guess := didyoumean.Closest(name, Clients()); guess != "" {
		return nil, fmt.Errorf("%w %q (did you mean %q? known: %s)", ErrUnknownClient, name, guess, known)
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownClient, name, known)
}

// ConfigFiles are the files where the client keeps its MCP servers for
// workspace, the workspace's own first: the caller uses the first that
// exists. home is the user's home directory, configDir what
// os.UserConfigDir returns (Claude Desktop's and VS Code's user files are
// under it).
func (c *Client) ConfigFiles(workspace, home, configDir string) []string {
	switch c.Name {
	case "claude-desktop":
		return []string{filepath.Join(configDir, "Claude", "claude_desktop_config.json")}
	case "claude-code":
		return []string{filepath.Join(workspace, ".mcp.json"), filepath.Join(home, ".claude.json")}
	case "cursor":
		return []string{filepath.Join(workspace, ".cursor", "mcp.json"), filepath.Join(home, ".cursor", "mcp.json")}
	case "vscode":
		return []string{filepath.Join(workspace, ".vscode", "mcp.json"), filepath.Join(configDir, "Code", "User", "mcp.json")}
	case "gemini":
		return []string{filepath.Join(workspace, ".gemini", "settings.json"), filepath.Join(home, ".gemini", "settings.json")}
	case "qwen":
		return []string{filepath.Join(workspace, ".qwen", "settings.json"), filepath.Join(home, ".qwen", "settings.json")}
	}
	return nil
}

// serversKey is the key of the object that holds the client's servers.
func (c *Client) serversKey() string {
	if c.dialect == dialectVSCode {
		return "servers"
	}
	return "mcpServers"
}

// InstallOptions say where the proxy runs and what its workspace already
// configures.
type InstallOptions struct {
	// File is the client's configuration file: it names positions and the
	// diff, and ${workspaceFolder} is relative to it.
	File string
	// Executable is mcpflow's absolute path, the command of each new entry.
	Executable string
	// Workspace is the absolute workspace whose mcpflow.yaml the proxy
	// reads (--workspace); for Claude Code's ~/.claude.json, also the
	// project whose local-scoped servers are routed.
	Workspace string
	// Configured are the servers mcpflow.yaml defines itself (its servers:,
	// not its imports): name → where ("FILE:LINE:COL"). The proxy uses
	// those entries; the YAML leaves them out.
	Configured map[string]string
}

// InstallAction is what PlanInstall does with one entry of the file.
type InstallAction int8

const (
	// InstallProxy: the entry becomes mcpflow proxy NAME.
	InstallProxy InstallAction = iota
	// InstallAlready: the entry already runs mcpflow proxy; left alone.
	InstallAlready
	// InstallSkip: mcpflow cannot proxy the entry (Reason says why); left
	// unchanged.
	InstallSkip
)

func (a InstallAction) String() string {
	switch a {
	case InstallProxy:
		return "proxy"
	case InstallAlready:
		return "already"
	case InstallSkip:
		return "skip"
	}
	return fmt.Sprintf("InstallAction(%d)", int(a))
}

// InstallEntry is one server entry of the file and what becomes of it.
type InstallEntry struct {
	Name string
	// Scope is Claude Code's scope of the entry: "user", "local" (both in
	// ~/.claude.json) or "project" (.mcp.json); "" for other clients.
	Scope string
	// At is where the entry is, FILE:LINE:COL.
	At     string
	Action InstallAction
	// Reason says, for InstallSkip, why the entry is left unchanged; for
	// InstallAlready, the server it proxies.
	Reason string
	// Server is what mcpflow.yaml gets for InstallProxy: the entry as
	// mcpflow imports it, every env and header value written without a
	// ${VAR} reference (a literal, which may be a secret: all are treated
	// as one, as Server.Redacted does) replaced by a reference to a
	// variable the new entry passes (Pass). It holds no literal env or
	// header value of the file.
	Server *Server
	// Configured is where mcpflow.yaml already defines a server of this
	// name ("" when it does not): the proxy uses that entry, and the YAML
	// leaves this one out.
	Configured string
	// Args are the new entry's args: --workspace WORKSPACE proxy NAME.
	Args []string
	// Pass are the variables the new entry sets in its env, from the
	// values the old entry had, for Server's references to read.
	Pass []PassVar
	// Read are the other variables Server's references read: from the
	// environment the client starts mcpflow proxy in.
	Read []string
	// Warnings say what of the old entry the change does not carry over.
	Warnings []string
}

// PassVar is a variable the new entry sets, and where its value was.
type PassVar struct {
	// Name is the variable, as Server refers to it (${NAME}).
	Name string
	// From is what held the value in the old entry: "env KEY", "header
	// KEY", or "input ID" (VS Code asks for it, as it did).
	From string
}

// Install is the change that routes a client's servers through mcpflow
// proxy: nothing is written; the caller shows it.
type Install struct {
	Client *Client
	File   string
	// Old is the file as read; New the file after the change: only the
	// entries routed differ, byte for byte, comments and order kept. New
	// holds every value Old holds that the new entries pass on: show Diff,
	// never New.
	Old, New []byte
	// Diff is the unified diff of Old to New, each value that may be a
	// secret shown as "<redacted>" (env and header values that are not
	// only ${VAR} references, and strings under keys named like a token,
	// key or password); nil when nothing changes.
	Diff []byte
	// Redacted says whether Diff shows a value as "<redacted>": then it
	// cannot be applied as a patch.
	Redacted bool
	// YAML is mcpflow.yaml's servers: for the entries routed that
	// mcpflow.yaml does not define yet; nil when there are none.
	YAML []byte
	// Entries are the file's server entries, in the file's order.
	Entries []InstallEntry
}

// Counts returns how many entries each action got.
func (in *Install) Counts() (proxy, already, skip int) {
	for _, e := range in.Entries {
		switch e.Action {
		case InstallProxy:
			proxy++
		case InstallAlready:
			already++
		default:
			skip++
		}
	}
	return
}

// movedKeys are the keys of an entry that say how to reach the server:
// they move to mcpflow.yaml, and the new entry says how to start mcpflow
// proxy instead. Every other key stays (description, disabled, Gemini's
// trust, timeout and tool lists: the client still applies them).
var movedKeys = []string{"command", "args", "env", "cwd", "envFile", "url", "httpUrl", "headers", "type"}

// refusedKeys make an entry one mcpflow cannot proxy: the client signs in
// to the server itself.
var refusedKeys = []string{"oauth", "authProviderType"}

// PlanInstall works out the change to the configuration src of client c
// that routes each of its servers through mcpflow proxy: the new file
// (Install.New), the diff to show, mcpflow.yaml's entries, and what
// becomes of each entry. It reads what Import reads (the servers of
// Claude Code's ~/.claude.json for the user, and those of
// projects[Workspace]); an entry mcpflow would not import, or one the
// client signs in to, is left unchanged and says why. It writes nothing.
// A malformed file is a *ConfigError.
func PlanInstall(c *Client, src []byte, o *InstallOptions) (*Install, error) {
	if o == nil || o.Executable == "" || o.Workspace == "" {
		return nil, fmt.Errorf("upstream: PlanInstall needs the executable and the workspace")
	}
	p := &jimporter{file: o.File, canon: canonicalFile(o.File), src: src, dialect: c.dialect, workspace: workspaceOf(o.File)}
	root, err := jsonpos.Parse(src)
	if err != nil {
		msg, off := jsonpos.ErrorPos(src, err)
		return nil, p.errAt(off, "", "%s", msg)
	}
	if root.Kind != jsonpos.Object {
		return nil, p.errAt(root.Off, "", "expected an object with %q, found %s", c.serversKey(), root.KindName())
	}
	pl := &planner{c: c, o: o, p: p, src: src, inputs: map[string]string{}}
	if c.dialect == dialectVSCode {
		p.readInputs(root)
		for id := range p.inputs {
			pl.inputs[InputEnv(id)] = id
		}
	}
	sets, err := pl.serverSets(root)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		pl.plan(s.servers, s.scope)
	}
	in := &Install{Client: c, File: o.File, Old: src, Entries: pl.entries}
	b := &builder{src: src, secrets: secretSpans(root)}
	at := 0
	for _, e := range pl.edits {
		b.copy(at, e.from)
		e.write(b)
		at = e.to
	}
	b.copy(at, len(src))
	in.New = b.buf
	if !bytes.Equal(in.Old, in.New) {
		old := redact(src, b.secrets)
		in.Diff = unifiedDiff(o.File, old, redact(in.New, b.out))
		in.Redacted = bytes.Contains(in.Diff, []byte(redactedJSON))
	}
	in.YAML, err = installYAML(pl.entries)
	return in, err
}

// serverSet is one object of server entries and the Claude Code scope it
// is read from.
type serverSet struct {
	servers *jsonpos.Node
	scope   scope
}

// planner works out the change to one file.
type planner struct {
	c       *Client
	o       *InstallOptions
	p       *jimporter
	src     []byte
	inputs  map[string]string // VS Code: MCPFLOW_INPUT_X → input id
	entries []InstallEntry
	edits   []edit // in the file's order
}

// serverSets finds the objects of server entries the client reads from
// the file, the way Import does.
func (pl *planner) serverSets(root *jsonpos.Node) ([]serverSet, error) {
	key := pl.c.serversKey()
	other := "servers"
	if key == "servers" {
		other = "mcpServers"
	}
	servers, ok := root.Field(key)
	if !ok && pl.c.dialect == dialectVSCode {
		if nested, found := root.Field("mcp"); found {
			servers, ok = nested.Field("servers")
		}
	}
	if o, found := root.Field(other); !ok && found {
		return nil, pl.p.errAt(o.Off, "", "has %q, not %q (expected %s's format; is this another client's file?)", other, key, pl.c.Title)
	}
	var sets []serverSet
	sc := scopeNone
	if pl.c.Name == "claude-code" {
		sc = scopeProject
		if projects, found := root.Field("projects"); found && projects.Kind == jsonpos.Object || filepath.Base(pl.o.File) == ".claude.json" {
			sc = scopeUser
		}
	}
	if ok {
		sets = append(sets, serverSet{servers, sc})
	}
	if sc == scopeUser {
		if entry := projectEntry(root, pl.o.Workspace); entry != nil {
			if local, found := entry.Field("mcpServers"); found {
				sets = append(sets, serverSet{local, scopeLocal})
			}
		}
	}
	for _, s := range sets {
		if s.servers.Kind != jsonpos.Object {
			return nil, pl.p.errAt(s.servers.Off, "", "expected an object of servers by name, found %s", s.servers.KindName())
		}
	}
	return sets, nil
}

func (s scope) String() string {
	switch s {
	case scopeUser:
		return "user"
	case scopeProject:
		return "project"
	case scopeLocal:
		return "local"
	}
	return ""
}

// plan decides, entry by entry, what becomes of the servers of one object.
func (pl *planner) plan(servers *jsonpos.Node, sc scope) {
	count := map[string]int{}
	for _, f := range servers.Keys {
		count[f.Name]++
	}
	for _, f := range servers.Keys {
		line, col := jsonpos.LineCol(pl.src, f.Off)
		e := InstallEntry{Name: f.Name, Scope: sc.String(), At: fmt.Sprintf("%s:%d:%d", pl.o.File, line, col)}
		pl.decide(&e, f, count[f.Name])
		pl.entries = append(pl.entries, e)
	}
}

// decide makes e what becomes of the entry f, whose name the object
// holds count times.
func (pl *planner) decide(e *InstallEntry, f jsonpos.Field, count int) {
	skip := func(format string, args ...any) {
		e.Action, e.Reason = InstallSkip, fmt.Sprintf(format, args...)
	}
	n := f.Val
	switch {
	case f.Name == "":
		skip("empty server name")
		return
	case count > 1:
		skip("%d entries of this name in the same object (expected one)", count)
		return
	case n.Kind != jsonpos.Object:
		skip("expected an object with command or url, found %s", n.KindName())
		return
	}
	if target, ok := proxied(n, pl.o.Executable); ok {
		e.Action, e.Reason = InstallAlready, target
		return
	}
	if d, ok := n.Field("disabled"); ok && d.Kind == jsonpos.Bool && d.Bool {
		skip("disabled in %s", pl.c.Title)
		return
	}
	for _, k := range refusedKeys {
		if _, ok := n.Field(k); ok {
			skip("%s signs in to this server itself (%q); mcpflow does not do OAuth", pl.c.Title, k)
			return
		}
	}
	srv, err := pl.p.entry(f.Name, n)
	if err != nil {
		skip("%s", errMessage(err))
		return
	}
	pl.route(e, srv, n)
}

// errMessage is a *ConfigError without the file (the entry's position is
// shown beside it), or err's text.
func errMessage(err error) string {
	if ce, ok := err.(*ConfigError); ok {
		return ce.Msg
	}
	return err.Error()
}

// proxied reports whether the entry n already starts mcpflow proxy, and
// which server it proxies.
func proxied(n *jsonpos.Node, exe string) (string, bool) {
	cmd, ok := n.Field("command")
	if !ok || cmd.Kind != jsonpos.String {
		return "", false
	}
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(cmd.Str)), ".exe")
	if base != "mcpflow" && cmd.Str != exe {
		return "", false
	}
	args, _ := n.Field("args")
	if args == nil {
		return "", false
	}
	workspace := ""
	for i, a := range args.Items {
		next := ""
		if i+1 < len(args.Items) && args.Items[i+1].Kind == jsonpos.String {
			next = args.Items[i+1].Str
		}
		switch {
		case a.Kind != jsonpos.String:
		case a.Str == "--workspace":
			workspace = next
		case strings.HasPrefix(a.Str, "--workspace="):
			workspace = strings.TrimPrefix(a.Str, "--workspace=")
		case a.Str == "proxy":
			target := strings.TrimSpace("mcpflow proxy " + next)
			if workspace != "" {
				target += " (workspace " + workspace + ")"
			}
			return target, true
		}
	}
	return "", false
}

// route makes e the routing of srv, the entry n, through mcpflow proxy.
func (pl *planner) route(e *InstallEntry, srv *Server, n *jsonpos.Node) {
	e.Action = InstallProxy
	e.Configured = pl.o.Configured[srv.Name]
	e.Args = []string{"--workspace", pl.o.Workspace, "proxy", srv.Name}
	e.Warnings = srv.Warnings
	y := *srv
	y.Warnings, y.Origin, y.File, y.places, y.spelled = nil, "", "", nil, nil
	taken := map[string]bool{}
	for _, v := range srv.EnvRefs() {
		taken[v] = true
	}
	var pass []passValue
	rewrite := func(field string, m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		obj, _ := n.Field(field)
		for _, k := range sortedKeys(m) {
			if strings.Contains(m[k], "${") {
				// Written to keep the secret out ("Bearer ${TOKEN}"):
				// mcpflow expands it as the import does.
				out[k] = m[k]
				continue
			}
			name := k
			if field == "headers" || !validVarName(k) {
				name = envName(srv.Name + "_" + k)
			}
			for i := 2; taken[name]; i++ {
				name = fmt.Sprintf("%s_%d", envName(srv.Name+"_"+k), i)
			}
			taken[name] = true
			out[k] = "${" + name + "}"
			what := "env "
			if field == "headers" {
				what = "header "
			}
			val, _ := obj.Field(k)
			pass = append(pass, passValue{PassVar{Name: name, From: what + k}, val})
		}
		return out
	}
	y.Env, y.Headers = rewrite("env", srv.Env), rewrite("headers", srv.Headers)
	e.Server = &y
	passed := map[string]bool{}
	for _, pv := range pass {
		passed[pv.Name] = true
	}
	for _, v := range y.EnvRefs() {
		switch {
		case passed[v]:
		case pl.inputs[v] != "":
			// VS Code asks for its input, as it did, and passes it on.
			pass = append(pass, passValue{PassVar{Name: v, From: "input " + pl.inputs[v]}, nil})
		default:
			e.Read = append(e.Read, v)
		}
	}
	for _, pv := range pass {
		e.Pass = append(e.Pass, pv.PassVar)
	}
	if srv.Cwd != "" && !filepath.IsAbs(srv.Cwd) && !strings.HasPrefix(srv.Cwd, "${") {
		e.Warnings = append(e.Warnings, fmt.Sprintf("cwd %q becomes relative to the workspace %s", srv.Cwd, pl.o.Workspace))
	}
	pl.edits = append(pl.edits, pl.newEntry(e, n, pass))
}

// passValue is a variable the new entry passes and the old value it
// passes (nil: VS Code's ${input:ID}).
type passValue struct {
	PassVar
	val *jsonpos.Node
}

// envName makes s a variable name: upper case, any character other than a
// letter, a digit or _ as _.
func envName(s string) string {
	b := []byte(strings.ToUpper(s))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}

// edit replaces src[from:to] by what write writes.
type edit struct {
	from, to int
	write    func(*builder)
}

// newEntry is the edit that replaces the entry n by one that starts
// mcpflow proxy, in the client's shape and the entry's own layout: keys it
// does not move stay, in their order, as written; comments inside it move
// to its top.
func (pl *planner) newEntry(e *InstallEntry, n *jsonpos.Node, pass []passValue) edit {
	type member struct {
		key   string
		write func(*builder, string) // the value, given the indent of the entry's keys
	}
	str := func(s string) func(*builder, string) {
		return func(b *builder, _ string) { b.text(jsonString(s)) }
	}
	var members []member
	_, hadType := n.Field("type")
	if pl.c.dialect == dialectVSCode || hadType {
		members = append(members, member{"type", str(TransportStdio)})
	}
	members = append(members, member{"command", str(pl.o.Executable)})
	members = append(members, member{"args", func(b *builder, _ string) {
		quoted := make([]string, len(e.Args))
		for i, a := range e.Args {
			quoted[i] = jsonString(a)
		}
		b.text("[" + strings.Join(quoted, ", ") + "]")
	}})
	multiline := bytes.IndexByte(pl.src[n.Off:n.End], '\n') >= 0
	outer := lineIndent(pl.src, n.Off)
	inner := outer + indentUnit(outer)
	if multiline && len(n.Keys) > 0 && startsLine(pl.src, n.Keys[0].Off) {
		inner = lineIndent(pl.src, n.Keys[0].Off)
	}
	if len(pass) > 0 {
		members = append(members, member{"env", func(b *builder, ind string) {
			sep, open, end := ", ", "{", "}"
			if multiline {
				sep, open, end = ",\n"+ind+indentUnit(ind), "{\n"+ind+indentUnit(ind), "\n"+ind+"}"
			}
			b.text(open)
			for i, pv := range pass {
				if i > 0 {
					b.text(sep)
				}
				b.text(jsonString(pv.Name) + ": ")
				if pv.val != nil {
					b.copy(pv.val.Off, pv.val.End)
				} else {
					b.text(jsonString("${input:" + pl.inputs[pv.Name] + "}"))
				}
			}
			b.text(end)
		}})
	}
	for _, f := range n.Keys {
		if slices.Contains(movedKeys, f.Name) {
			continue
		}
		v := f.Val
		members = append(members, member{f.Name, func(b *builder, _ string) { b.copy(v.Off, v.End) }})
	}
	comments := jsonpos.Comments(pl.src, n.Off, n.End)
	return edit{from: n.Off, to: n.End, write: func(b *builder) {
		if !multiline {
			b.text("{")
			for _, c := range comments {
				b.text(c + " ")
			}
			for i, m := range members {
				if i > 0 {
					b.text(", ")
				}
				b.text(jsonString(m.key) + ": ")
				m.write(b, outer)
			}
			b.text("}")
			return
		}
		b.text("{\n")
		for _, c := range comments {
			b.text(inner + c + "\n")
		}
		for i, m := range members {
			b.text(inner + jsonString(m.key) + ": ")
			m.write(b, inner)
			if i < len(members)-1 {
				b.text(",")
			}
			b.text("\n")
		}
		b.text(outer + "}")
	}}
}

// lineIndent is the blank space that starts the line holding off.
func lineIndent(src []byte, off int) string {
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	end := start
	for end < off && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// startsLine reports whether only blank space precedes off on its line.
func startsLine(src []byte, off int) bool {
	return len(lineIndent(src, off)) == off-(bytes.LastIndexByte(src[:off], '\n')+1)
}

// indentUnit is one more level of indent after ind: a tab where the file
// indents with tabs, else two spaces.
func indentUnit(ind string) string {
	if strings.Contains(ind, "\t") {
		return "\t"
	}
	return "  "
}

// jsonString is s as a JSON string, <, > and & as they are.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

// span is a byte range [from, to) of a text.
type span struct{ from, to int }

// builder writes the new file: text copied from the old one (the secret
// spans it holds carried over) and new text.
type builder struct {
	src     []byte
	secrets []span // in src, sorted
	buf     []byte
	out     []span // the secrets' spans in buf
}

func (b *builder) copy(from, to int) {
	for _, s := range b.secrets {
		if s.from >= from && s.to <= to {
			d := len(b.buf) - from
			b.out = append(b.out, span{s.from + d, s.to + d})
		}
	}
	b.buf = append(b.buf, b.src[from:to]...)
}

func (b *builder) text(s string) { b.buf = append(b.buf, s...) }

// secretLooking are parts of key names whose string values may be secret
// wherever they are in a file (Claude Code's ~/.claude.json holds more
// than servers).
var secretLooking = []string{"token", "secret", "password", "passwd", "apikey", "api_key", "api-key", "authorization", "bearer", "credential", "cookie", "private"}

// secretSpans are the values of the file that a diff must not show: the
// values of every env and headers object that are not only ${VAR}
// references — the rule of Server.Redacted — and strings under keys that
// look like a secret's. In the file's order.
func secretSpans(root *jsonpos.Node) []span {
	var out []span
	var walk func(n *jsonpos.Node)
	walk = func(n *jsonpos.Node) {
		for _, f := range n.Keys {
			v := f.Val
			lower := strings.ToLower(f.Name)
			switch {
			case (f.Name == "env" || f.Name == "headers") && v.Kind == jsonpos.Object:
				for _, kv := range v.Keys {
					if kv.Val.Kind != jsonpos.Object && kv.Val.Kind != jsonpos.Array && !(kv.Val.Kind == jsonpos.String && onlyRefs(kv.Val.Str)) {
						out = append(out, span{kv.Val.Off, kv.Val.End})
					}
				}
			case v.Kind == jsonpos.String && !onlyRefs(v.Str) && slices.ContainsFunc(secretLooking, func(s string) bool { return strings.Contains(lower, s) }):
				out = append(out, span{v.Off, v.End})
			}
			walk(v)
		}
		for _, it := range n.Items {
			walk(it)
		}
	}
	walk(root)
	slices.SortFunc(out, func(a, b span) int { return a.from - b.from })
	// A header named like a secret is found twice: keep the spans
	// disjoint.
	var disjoint []span
	for _, s := range out {
		if n := len(disjoint); n == 0 || s.from >= disjoint[n-1].to {
			disjoint = append(disjoint, s)
		}
	}
	return disjoint
}

// onlyRefs reports whether s, as a client wrote it, is made of ${…}
// references only (${NAME}, ${env:NAME}, ${input:ID}, …): it shows no
// secret.
func onlyRefs(s string) bool {
	for s != "" {
		end := strings.IndexByte(s, '}')
		if !strings.HasPrefix(s, "${") || end < 0 {
			return false
		}
		s = s[end+1:]
	}
	return true
}

// redactedJSON stands for a secret value in the diff (Server.Redacted's
// word).
const redactedJSON = `"<redacted>"`

// redact returns text with each span replaced by redactedJSON.
func redact(text []byte, spans []span) []byte {
	var out []byte
	at := 0
	for _, s := range spans {
		out = append(append(out, text[at:s.from]...), redactedJSON...)
		at = s.to
	}
	return append(out, text[at:]...)
}

// unifiedDiff is the unified diff of old to new, both named file.
func unifiedDiff(file string, old, new []byte) []byte {
	d := diff.Diff(file, old, file, new)
	if i := bytes.Index(d, []byte("\n--- ")); bytes.HasPrefix(d, []byte("diff ")) && i >= 0 {
		d = d[i+1:] // the "diff A B" line is Go's, not patch's
	}
	return d
}

// installYAML is mcpflow.yaml's servers: for the entries routed that it
// does not define yet, as their Server fields say; nil when there are none.
// A name routed twice (Claude Code's user and local scopes) gets the last
// entry, the one Claude Code uses.
func installYAML(entries []InstallEntry) ([]byte, error) {
	byName := map[string]*Server{}
	var names []string
	for _, e := range entries {
		if e.Action != InstallProxy || e.Configured != "" {
			continue
		}
		if _, dup := byName[e.Name]; !dup {
			names = append(names, e.Name)
		}
		byName[e.Name] = e.Server
	}
	if len(names) == 0 {
		return nil, nil
	}
	servers := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range names {
		servers.Content = append(servers.Content, scalar(name), yamlEntry(byName[name]))
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{scalar("servers"), servers}}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// yamlEntry is s as an entry of mcpflow.yaml, its keys in the order the
// documentation gives them.
func yamlEntry(s *Server) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, v *yaml.Node) { n.Content = append(n.Content, scalar(key), v) }
	str := func(key, v string) {
		if v != "" {
			add(key, scalar(v))
		}
	}
	list := func(key string, l []string) {
		if len(l) == 0 {
			return
		}
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, v := range l {
			seq.Content = append(seq.Content, scalar(v))
		}
		add(key, seq)
	}
	mapping := func(key string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		mn := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range sortedKeys(m) {
			mn.Content = append(mn.Content, scalar(k), scalar(m[k]))
		}
		add(key, mn)
	}
	str("command", s.Command)
	list("args", s.Args)
	mapping("env", s.Env)
	str("cwd", s.Cwd)
	str("env_file", s.EnvFile)
	str("url", s.URL)
	str("type", s.Type)
	mapping("headers", s.Headers)
	if s.Trust {
		add("trust", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	if s.CallTimeout > 0 {
		str("call_timeout", s.CallTimeout.String())
	}
	list("include_tools", s.IncludeTools)
	list("exclude_tools", s.ExcludeTools)
	return n
}

// RoutedThroughProxy reports whether srv starts mcpflow proxy itself: an
// entry a client's configuration routes through the proxy, imported back.
// Proxying it would start the proxy again, without end.
func RoutedThroughProxy(srv *Server) bool {
	if srv.Command == "" || strings.TrimSuffix(strings.ToLower(filepath.Base(srv.Command)), ".exe") != "mcpflow" {
		return false
	}
	for _, a := range srv.Args {
		if a == "proxy" {
			return true
		}
	}
	return false
}
