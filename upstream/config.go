package upstream

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/oauth"
)

// Transport names, as returned by [Server.Transport] and accepted by the
// type key of a server entry.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // streamable HTTP
	TransportSSE   = "sse"  // the older HTTP+SSE transport
)

// Server is one configured MCP server, shaped like the mcpServers entries of
// other MCP clients. Exactly one of Builtin, Command and URL is set.
//
// Values of Command, Args, Cwd, URL, Env and Headers may refer to the
// environment as ${VAR} or ${VAR:-default}; they are expanded when the
// session connects, never when the entry is read, so secrets stay out of
// parsed configuration. $${ stands for a literal ${.
type Server struct {
	// Name is the key the server is configured under.
	Name string `yaml:"-" json:"name"`
	// Builtin names a server built into mcpflow ("demo"), started as a stdio
	// subprocess of mcpflow's own executable ("mcpflow demo-server ARGS...").
	Builtin string `yaml:"builtin,omitempty" json:"builtin,omitempty"`
	// Command, Args, Env and Cwd start a stdio server. A command server's
	// environment is a small default set taken from mcpflow's own
	// (DefaultEnv) plus Env; Args and Env also apply to Builtin, which gets
	// mcpflow's whole environment (it is mcpflow). A relative Cwd is
	// relative to the workspace.
	Command string            `yaml:"command,omitempty" json:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Cwd     string            `yaml:"cwd,omitempty" json:"cwd,omitempty"`
	// EnvFile is a dotenv file (NAME=VALUE lines, # comments, optional
	// quotes and "export ") read when the server starts, its variables
	// given to the server under Env's (Env wins). A relative path is
	// relative to the workspace. VS Code's envFile imports as this.
	EnvFile string `yaml:"env_file,omitempty" json:"env_file,omitempty"`
	// URL reaches a remote server over streamable HTTP, or over the older
	// SSE transport when Type is "sse". Headers are added to every request.
	URL     string            `yaml:"url,omitempty" json:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Type is "stdio", "http" or "sse"; optional except that "sse" must be
	// said explicitly. See [Server.Transport].
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
	// Trust opts the server into automatic replay of calls that its tools
	// declare safe. Default false. This is server trust only: workspace
	// trust is never read from any file (see package trust).
	Trust bool `yaml:"trust,omitempty" json:"trust"`
	// ConnectTimeout bounds starting and initializing the session; 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration `yaml:"connect_timeout,omitempty" json:"connect_timeout,omitempty"`
	// CallTimeout bounds each tools/call; 0 = none. A call that runs out of
	// time fails with context.DeadlineExceeded: it may have executed.
	CallTimeout time.Duration `yaml:"call_timeout,omitempty" json:"call_timeout,omitempty"`
	// ReconnectTimeout bounds reconnecting after a lost connection, when the
	// replay rule cleared sending the call again: a server that restarts
	// after its side effect committed has that long to come back; 0 means
	// DefaultReconnectTimeout.
	ReconnectTimeout time.Duration `yaml:"reconnect_timeout,omitempty" json:"reconnect_timeout,omitempty"`
	// MaxMessageSize bounds one message read from a stdio server, in bytes;
	// 0 means DefaultMaxMessageSize. A result over it fails its call as
	// ErrResultTooLarge.
	MaxMessageSize int64 `yaml:"max_message_size,omitempty" json:"max_message_size,omitempty"`
	// IncludeTools, when set, are the only tools of the server mcpflow
	// lists, validates against and calls; ExcludeTools are never listed or
	// called (exclusion wins). Gemini CLI's includeTools and excludeTools
	// import as these: a client's allowlist is never widened.
	IncludeTools []string `yaml:"include_tools,omitempty" json:"include_tools,omitempty"`
	ExcludeTools []string `yaml:"exclude_tools,omitempty" json:"exclude_tools,omitempty"`
	// Sessions, when above 0, lets the runs of one process (mcpflow
	// server) share up to this many sessions of the server, instead of
	// each run connecting its own (a process for a stdio server) and
	// closing it at its end. A call goes to the open session with the
	// fewest calls in flight; another is connected while every open one
	// is busy. Only for servers that keep no state between calls that a
	// run relies on, and that ask nothing during a call on protocols
	// before 2026-07-28 (a question on a session with several calls in
	// flight is refused: no one can tell which call asks). See Shared.
	Sessions int `yaml:"sessions,omitempty" json:"sessions,omitempty"`
	// OAuth, for a url server over streamable HTTP, says how to get the
	// access token the server asks for (MCP authorization): unattended
	// (client_credentials) or from a person's login (mcpflow servers
	// login NAME). Nil: no token is asked for, and a 401 says how to
	// configure one.
	OAuth *oauth.Config `yaml:"oauth,omitempty" json:"oauth,omitempty"`
	// Roots are the directories the server is told it may work in (MCP
	// roots, sent as file:// URIs), each a path or a file:// URI (see
	// [CheckRoot]); a relative path is relative to the workspace. Nil means
	// the workspace itself; an empty list declares the roots capability
	// with no root, so a server that confines itself to its roots
	// (server-filesystem started without directories) refuses every path.
	// Roots are taken as written: no ${VAR}.
	Roots []string `yaml:"roots,omitempty" json:"roots,omitempty"`
	// rootsAt says where each of Roots was written, when read from a file.
	rootsAt []filePos
	// EnvAllowed, when not nil, lists the only environment variables that
	// ${VAR} in the entry may read: a workflow's own servers may read only
	// the variables the workflow lists in env:. Nil (entries of the user's
	// own configuration files) allows any.
	EnvAllowed []string `yaml:"-" json:"-"`
	// Shadows are the origins of entries of the same name that this one
	// overrides (an import read earlier, mcpflow.yaml under --servers, …),
	// nearest first. Informational: servers list shows them.
	Shadows []string `yaml:"-" json:"-"`
	// Warnings say what of the entry mcpflow does not apply (a key it does
	// not use), each with its FILE:LINE:COL.
	Warnings []string `yaml:"-" json:"-"`
	// spelled maps a variable of a ${NAME} reference to the spelling the
	// imported file used for it (${env:NAME}), for messages.
	spelled map[string]string
	// places says where each value that may refer to a variable was read,
	// FILE:LINE:COL, by the name messages give it: "command", "args[0]",
	// "cwd", "env_file", "url", "env NAME", "header NAME".
	places map[string]string
	// Origin is where the entry was read, "FILE:LINE:COL"; "" if not from a
	// file. Informational only.
	Origin string `yaml:"-" json:"origin,omitempty"`
	// at is Origin with the file absolute and its symbolic links resolved:
	// two readings of one file, however it was named, give one entry.
	// shadowAt are the same of Shadows, when known.
	at       string
	shadowAt []string
	// scope is the Claude Code scope the entry was read from (see
	// claudecode.go); scopeNone for every other entry.
	scope scope
	// File is the file the entry was read from, as it was named; "" if not
	// from a file. A command that only looks does not start a server whose
	// entry comes from a file of a workspace the user has not trusted.
	File string `yaml:"-" json:"-"`
}

// Transport names how the server is reached: "stdio" for builtin and
// command servers, "sse" for a url with type sse, "http" for any other url.
func (s *Server) Transport() string {
	switch {
	case s.URL != "" && s.Type == TransportSSE:
		return TransportSSE
	case s.URL != "":
		return TransportHTTP
	}
	return TransportStdio
}

// Validate checks that the entry says, unambiguously, how to reach the
// server. The error is a *ConfigError without a position.
func (s *Server) Validate() error {
	if p := s.check(); p != nil {
		return &ConfigError{Server: s.Name, Msg: p.msg}
	}
	return nil
}

// problem is a validation failure and the key it is about ("" = the entry).
type problem struct {
	key string
	msg string
}

// Allows reports whether the configuration lets mcpflow use tool (see
// IncludeTools), and if not, why.
func (s *Server) Allows(tool string) (bool, string) {
	if slices.Contains(s.ExcludeTools, tool) {
		return false, fmt.Sprintf("the configuration of server %q excludes tool %q (exclude_tools%s)", s.Name, tool, s.from())
	}
	if len(s.IncludeTools) > 0 && !slices.Contains(s.IncludeTools, tool) {
		return false, fmt.Sprintf("the configuration of server %q allows only %s (include_tools%s)", s.Name, strings.Join(s.IncludeTools, ", "), s.from())
	}
	return true, ""
}

// from says where the entry came from, for messages.
func (s *Server) from() string {
	if s.Origin == "" {
		return ""
	}
	return " at " + s.Origin
}

func (s *Server) check() *problem {
	var set []string
	for _, kv := range [][2]string{{"builtin", s.Builtin}, {"command", s.Command}, {"url", s.URL}} {
		if kv[1] != "" {
			set = append(set, kv[0])
		}
	}
	switch {
	case s.Name == "":
		return &problem{"", "empty server name (expected a non-empty key under servers)"}
	case len(set) == 0:
		return &problem{"", "says neither how to start nor where to reach the server (expected one of builtin: demo, command: PROGRAM or url: https://HOST/PATH)"}
	case len(set) > 1:
		return &problem{set[1], fmt.Sprintf("sets both %s and %s (expected exactly one of builtin, command or url)", set[0], set[1])}
	}
	switch s.Type {
	case "", TransportStdio, TransportHTTP, TransportSSE:
	default:
		return &problem{"type", fmt.Sprintf("unknown type %q (expected stdio, http or sse)", s.Type)}
	}
	if s.URL != "" {
		if s.Type == TransportStdio {
			return &problem{"type", "type stdio with a url (expected type http or sse, or a command instead of the url)"}
		}
		if msg := checkURL(s.URL); msg != "" {
			return &problem{"url", msg}
		}
		for _, k := range []struct {
			key string
			set bool
		}{{"args", len(s.Args) > 0}, {"env", len(s.Env) > 0}, {"env_file", s.EnvFile != ""}, {"cwd", s.Cwd != ""}} {
			if k.set {
				return &problem{k.key, k.key + " applies only to servers started with builtin or command (expected no " + k.key + " with a url)"}
			}
		}
	} else {
		if s.Type == TransportHTTP || s.Type == TransportSSE {
			return &problem{"type", fmt.Sprintf("type %s without a url (expected url: https://HOST/PATH, or type stdio)", s.Type)}
		}
		if len(s.Headers) > 0 {
			return &problem{"headers", "headers apply only to url servers (expected no headers with " + set[0] + ")"}
		}
	}
	if s.Builtin != "" && s.Builtin != "demo" {
		return &problem{"builtin", fmt.Sprintf("unknown builtin %q (expected demo)", s.Builtin)}
	}
	if s.ConnectTimeout < 0 {
		return &problem{"connect_timeout", "negative connect_timeout (expected a positive duration such as \"30s\")"}
	}
	if s.MaxMessageSize < 0 {
		return &problem{"max_message_size", "negative max_message_size (expected a size such as \"64MiB\")"}
	}
	if s.ReconnectTimeout < 0 {
		return &problem{"reconnect_timeout", "negative reconnect_timeout (expected a positive duration such as \"30s\")"}
	}
	if s.Sessions < 0 {
		return &problem{"sessions", fmt.Sprintf("negative sessions %d (expected how many sessions runs share, such as 4; 0 or none for one per run)", s.Sessions)}
	}
	if s.OAuth != nil {
		if s.URL == "" {
			return &problem{"oauth", "oauth applies only to url servers (expected no oauth with " + set[0] + ")"}
		}
		if s.Transport() == TransportSSE {
			return &problem{"oauth", "oauth needs streamable HTTP (expected no type: sse with oauth; the older SSE transport has no authorization)"}
		}
		if key, msg := s.OAuth.Check(); msg != "" {
			return &problem{"oauth", "oauth " + key + ": " + msg}
		}
		for _, k := range oauthVars {
			v := map[string]string{"client_id": s.OAuth.ClientID, "client_secret": s.OAuth.ClientSecret, "private_key": s.OAuth.PrivateKey}[k]
			if err := checkVars(v); err != nil {
				return &problem{"oauth", fmt.Sprintf("oauth %s: %v", k, err)}
			}
		}
	}
	if s.CallTimeout < 0 {
		return &problem{"call_timeout", "negative call_timeout (expected a positive duration such as \"30s\")"}
	}
	for _, kv := range []struct {
		key string
		m   map[string]string
	}{{"env", s.Env}, {"headers", s.Headers}} {
		for _, k := range sortedKeys(kv.m) {
			if k == "" {
				return &problem{kv.key, "empty name in " + kv.key + " (expected NAME: VALUE)"}
			}
			if err := checkVars(kv.m[k]); err != nil {
				return &problem{kv.key, fmt.Sprintf("%s %s: %v", kv.key, k, err)}
			}
		}
	}
	for _, f := range []struct{ key, v string }{{"command", s.Command}, {"cwd", s.Cwd}, {"url", s.URL}} {
		if err := checkVars(f.v); err != nil {
			return &problem{f.key, fmt.Sprintf("%s: %v", f.key, err)}
		}
	}
	for _, a := range s.Args {
		if err := checkVars(a); err != nil {
			return &problem{"args", fmt.Sprintf("args: %v", err)}
		}
	}
	for i, r := range s.Roots {
		if err := CheckRoot(r); err != nil {
			return &problem{"roots", fmt.Sprintf("%s: %v", rootKey(i), err)}
		}
	}
	return nil
}

// checkURL accepts an http or https URL with a host. ${VAR} references are
// allowed anywhere after the scheme, so only the scheme is checked when
// there are any.
func checkURL(raw string) string {
	const want = " (expected an http:// or https:// URL such as https://example.com/mcp)"
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return fmt.Sprintf("url %q is not http or https%s", raw, want)
	}
	if strings.Contains(raw, "${") {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("url %q does not parse%s", raw, want)
	}
	if u.Host == "" {
		return fmt.Sprintf("url %q has no host%s", raw, want)
	}
	return ""
}

// serverJSON is Server's JSON form, with durations as strings ("30s").
type serverJSON struct {
	Name           string            `json:"name"`
	Builtin        string            `json:"builtin,omitempty"`
	Command        string            `json:"command,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	EnvFile        string            `json:"env_file,omitempty"`
	URL            string            `json:"url,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Type           string            `json:"type,omitempty"`
	Trust          bool              `json:"trust"`
	ConnectTimeout string            `json:"connect_timeout,omitempty"`
	CallTimeout    string            `json:"call_timeout,omitempty"`
	Reconnect      string            `json:"reconnect_timeout,omitempty"`
	MaxMessageSize int64             `json:"max_message_size,omitempty"`
	IncludeTools   []string          `json:"include_tools,omitempty"`
	ExcludeTools   []string          `json:"exclude_tools,omitempty"`
	Sessions       int               `json:"sessions,omitempty"`
	OAuth          *oauth.Config     `json:"oauth,omitempty"`
	Roots          *[]string         `json:"roots,omitempty"` // nil: the workspace; empty: none
	Origin         string            `json:"origin,omitempty"`
	Shadows        []string          `json:"shadows,omitempty"`
	Warnings       []string          `json:"warnings,omitempty"`
}

// MarshalJSON writes durations as Go duration strings ("1m30s").
func (s Server) MarshalJSON() ([]byte, error) {
	j := serverJSON{
		Name: s.Name, Builtin: s.Builtin, Command: s.Command, Args: s.Args, Env: s.Env, Cwd: s.Cwd, EnvFile: s.EnvFile,
		URL: s.URL, Headers: s.Headers, Type: s.Type, Trust: s.Trust, Origin: s.Origin,
		IncludeTools: s.IncludeTools, ExcludeTools: s.ExcludeTools, Sessions: s.Sessions, OAuth: s.OAuth, Shadows: s.Shadows, Warnings: s.Warnings,
	}
	if s.Roots != nil {
		j.Roots = &s.Roots
	}
	if s.ConnectTimeout != 0 {
		j.ConnectTimeout = s.ConnectTimeout.String()
	}
	if s.CallTimeout != 0 {
		j.CallTimeout = s.CallTimeout.String()
	}
	if s.ReconnectTimeout != 0 {
		j.Reconnect = s.ReconnectTimeout.String()
	}
	j.MaxMessageSize = s.MaxMessageSize
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Server) UnmarshalJSON(b []byte) error {
	var j serverJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Server{
		Name: j.Name, Builtin: j.Builtin, Command: j.Command, Args: j.Args, Env: j.Env, Cwd: j.Cwd, EnvFile: j.EnvFile,
		URL: j.URL, Headers: j.Headers, Type: j.Type, Trust: j.Trust, Origin: j.Origin, MaxMessageSize: j.MaxMessageSize,
		IncludeTools: j.IncludeTools, ExcludeTools: j.ExcludeTools, Sessions: j.Sessions, OAuth: j.OAuth, Shadows: j.Shadows, Warnings: j.Warnings,
	}
	if j.Roots != nil {
		out.Roots = append([]string{}, *j.Roots...)
	}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{j.ConnectTimeout, &out.ConnectTimeout}, {j.CallTimeout, &out.CallTimeout}, {j.Reconnect, &out.ReconnectTimeout}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return fmt.Errorf("server %s: %w", j.Name, err)
		}
		*d.dst = v
	}
	*s = out
	return nil
}

// Redacted returns a copy whose header and env values are replaced by
// "<redacted>" unless they consist only of ${VAR} references: for showing
// configuration without showing secrets written into it.
func (s *Server) Redacted() *Server {
	c := *s
	c.Args = append([]string(nil), s.Args...)
	redact := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			if onlyVars(v) {
				out[k] = v
			} else {
				out[k] = "<redacted>"
			}
		}
		return out
	}
	c.Env, c.Headers = redact(s.Env), redact(s.Headers)
	c.OAuth = s.OAuth.Redacted(onlyVars)
	return &c
}

// Set is the servers a workflow can use, by name.
type Set map[string]*Server

// Names lists the configured names in order.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the named server or an error naming the ones that exist.
func (s Set) Lookup(name string) (*Server, error) {
	if srv, ok := s[name]; ok {
		return srv, nil
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%w %q: no servers are configured", ErrUnknownServer, name)
	}
	return nil, fmt.Errorf("%w %q (configured: %s)", ErrUnknownServer, name, strings.Join(s.Names(), ", "))
}

// Merge returns the union of sets. When a name is in more than one set, the
// entry of the LATER set wins, whole: fields are never mixed from two
// entries, so trust: true cannot leak from an overridden entry. The entries
// are shared with the inputs, not copied; treat them as read-only.
//
// Two exceptions. An entry read twice (one file imported by mcpflow.yaml
// and given with --servers, under two spellings of its path) is one entry:
// it shadows nothing. Of two entries of Claude Code's, the higher scope
// wins, whatever the order: local (~/.claude.json's projects[DIR]), then
// project (.mcp.json), then user (~/.claude.json's mcpServers), as Claude
// Code itself decides.
//
// mcpflow merges in this order (later wins):
//
//	Merge(workspace, serversFlag, workflow)
//
// that is, mcpflow.yaml (itself imports, then its own servers:), then a
// --servers FILE, then the servers the workflow declares.
func Merge(sets ...Set) Set {
	out := Set{}
	for _, s := range sets {
		for name, srv := range s {
			if prev, ok := out[name]; ok {
				srv = prevailing(prev, srv)
			}
			out[name] = srv
		}
	}
	return out
}

// prevailing is the entry of a name that wins when next is merged over
// prev: next, unless both are Claude Code's and prev's scope is the higher
// (see outranks). The loser and what it overrode join the winner's
// shadows — less the winner itself, when an entry was read twice. The
// entries as read stay as they were: a winner that gains shadows is a
// copy.
func prevailing(prev, next *Server) *Server {
	winner, loser := next, prev
	if outranks(prev, next) {
		winner, loser = prev, next
	}
	var origins, ats []string
	add := func(origin, at string) {
		if samePlace(origin, at, winner.Origin, winner.at) {
			return
		}
		for i := range origins {
			if samePlace(origin, at, origins[i], ats[i]) {
				return
			}
		}
		origins, ats = append(origins, origin), append(ats, at)
	}
	add(loser.Origin, loser.at)
	for _, s := range []*Server{loser, winner} {
		for i, origin := range s.Shadows {
			at := ""
			if i < len(s.shadowAt) {
				at = s.shadowAt[i]
			}
			add(origin, at)
		}
	}
	if slices.Equal(origins, winner.Shadows) {
		return winner
	}
	c := *winner
	c.Shadows, c.shadowAt = origins, ats
	return &c
}

// samePlace reports whether two entries, each known by its Origin and its
// canonical position (at, "" when unknown), were read at one place of one
// file.
func samePlace(origin, at, origin2, at2 string) bool {
	if at != "" && at2 != "" {
		return at == at2
	}
	return origin == origin2
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// maxMessageSize is MaxMessageSize or its default.
func (s *Server) maxMessageSize() int64 {
	if s.MaxMessageSize > 0 {
		return s.MaxMessageSize
	}
	return DefaultMaxMessageSize
}

// sizeText writes a byte count as people read it: "64 MiB", "1500 bytes".
func sizeText(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// ParseSize reads a size: a whole number of bytes, or one with a unit
// (KiB, MiB, GiB; KB, MB, GB are read as the binary units too).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a size (expected bytes, or a number with KiB, MiB or GiB, such as \"64MiB\")", s)
	}
	return n * mult, nil
}
