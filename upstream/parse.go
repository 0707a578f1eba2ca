package upstream

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/internal/didyoumean"
	"github.com/mcpflow/mcpflow/internal/yamlpos"
	"github.com/mcpflow/mcpflow/oauth"
)

// entryKeys are the keys of a server entry in mcpflow's own YAML.
var entryKeys = []string{
	"builtin", "command", "args", "env", "env_file", "cwd",
	"url", "type", "headers",
	"trust", "connect_timeout", "call_timeout", "reconnect_timeout", "max_message_size",
	"include_tools", "exclude_tools", "roots", "sessions", "oauth",
}

// synonyms maps keys that other MCP clients use to the mcpflow key, for
// "did you mean" hints.
var synonyms = map[string]string{
	"httpurl": "url", "serverurl": "url", "endpoint": "url", "transport": "type",
	"environment": "env", "workingdirectory": "cwd", "working_dir": "cwd", "workdir": "cwd", "dir": "cwd",
	"timeout": "call_timeout", "calltimeout": "call_timeout", "connecttimeout": "connect_timeout",
	"arguments": "args",
	"envfile":   "env_file", "includetools": "include_tools", "excludetools": "exclude_tools", "tools": "include_tools",
}

// ParseEntry parses one server entry of mcpflow's YAML (a workflow's or
// mcpflow.yaml's servers: mapping), strictly: unknown keys, wrong types and
// inconsistent transports are errors. node is the entry's value; name its
// key. Every error is a *ConfigError positioned in file:
//
//	FILE:LINE:COL: server NAME: MESSAGE (expected …)
//
// Nothing is expanded: ${VAR} references are kept for Connect.
func ParseEntry(file, name string, node *yaml.Node) (srv *Server, err error) {
	p := &yamlParser{file: file, server: name}
	defer func() {
		if r := recover(); r != nil { // a malformed node must not crash the caller
			srv, err = nil, &ConfigError{File: file, Server: name, Msg: fmt.Sprintf("cannot read entry: %v", r)}
		}
	}()
	if node == nil {
		return nil, &ConfigError{File: file, Server: name, Msg: "missing entry (expected a mapping with builtin, command or url)"}
	}
	fields, keys, err := p.fields(node, entryKeys)
	if err != nil {
		return nil, err
	}
	srv = &Server{Name: name, Origin: position(file, node), File: file}
	if file != "" {
		srv.at = position(canonicalFile(file), node)
	}
	for _, k := range keys {
		v := fields[k]
		switch k {
		case "builtin":
			srv.Builtin, err = p.str(v, k)
		case "command":
			srv.Command, err = p.str(v, k)
		case "cwd":
			srv.Cwd, err = p.str(v, k)
		case "url":
			srv.URL, err = p.str(v, k)
		case "type":
			srv.Type, err = p.str(v, k)
		case "args":
			srv.Args, err = p.strList(v, k)
		case "env_file":
			srv.EnvFile, err = p.str(v, k)
		case "include_tools":
			srv.IncludeTools, err = p.strList(v, k)
		case "exclude_tools":
			srv.ExcludeTools, err = p.strList(v, k)
		case "roots":
			var rl *RootList
			if rl, err = p.roots(v); err == nil {
				srv.Roots, srv.rootsAt = rl.Roots, rl.at
			}
		case "env":
			srv.Env, err = p.strMap(v, k)
		case "headers":
			srv.Headers, err = p.strMap(v, k)
		case "trust":
			srv.Trust, err = p.boolean(v, k)
		case "connect_timeout":
			srv.ConnectTimeout, err = p.duration(v, k)
		case "reconnect_timeout":
			srv.ReconnectTimeout, err = p.duration(v, k)
		case "max_message_size":
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				err = p.errAt(v, "%s: expected a size such as \"64MiB\", found %s", k, yamlpos.KindName(v))
			} else if srv.MaxMessageSize, err = ParseSize(v.Value); err != nil {
				err = p.errAt(v, "%s: %v", k, err)
			}
		case "call_timeout":
			srv.CallTimeout, err = p.duration(v, k)
		case "sessions":
			srv.Sessions, err = p.count(v, k)
		case "oauth":
			srv.OAuth, err = p.oauth(v)
		}
		if err != nil {
			return nil, err
		}
	}
	if pr := srv.check(); pr != nil {
		at := node
		if v, ok := fields[pr.key]; ok {
			at = v
		}
		return nil, p.errAt(at, "%s", pr.msg)
	}
	for _, k := range keys {
		v := fields[k]
		switch k {
		case "command", "cwd", "url", "env_file":
			srv.place(k, position(file, v))
		case "args":
			for i, it := range v.Content {
				srv.place(fmt.Sprintf("args[%d]", i), position(file, it))
			}
		case "env", "headers":
			for i := 0; i+1 < len(v.Content); i += 2 {
				srv.place(placeKey(k, v.Content[i].Value), position(file, v.Content[i+1]))
			}
		case "oauth":
			for i := 0; i+1 < len(v.Content); i += 2 {
				kk, vv := v.Content[i].Value, v.Content[i+1]
				if slices.Contains(oauthVars, kk) {
					srv.place("oauth "+kk, position(file, vv))
				}
				if (kk == "client_secret" || kk == "private_key" && strings.Contains(vv.Value, "-----BEGIN")) && !onlyVars(vv.Value) {
					srv.Warnings = append(srv.Warnings, fmt.Sprintf("%s: oauth %s is written into the file: write it as ${VAR} and keep it in the environment (workflow files are journaled)", position(file, vv), kk))
				}
			}
		}
	}
	return srv, nil
}

// oauthVars are the keys of an oauth: mapping whose values may refer to
// the environment (${VAR}).
var oauthVars = []string{"client_id", "client_secret", "private_key"}

// oauth reads an entry's oauth: mapping. Its consistency is checked with
// the entry's (Server.check), where the key at fault is "oauth".
func (p *yamlParser) oauth(n *yaml.Node) (*oauth.Config, error) {
	fields, keys, err := p.fields(n, oauth.Keys)
	if err != nil {
		return nil, err
	}
	c := &oauth.Config{}
	for _, k := range keys {
		v := fields[k]
		key := "oauth " + k
		switch k {
		case "grant":
			c.Grant, err = p.str(v, key)
		case "client_id":
			c.ClientID, err = p.str(v, key)
		case "client_secret":
			c.ClientSecret, err = p.str(v, key)
		case "private_key":
			c.PrivateKey, err = p.str(v, key)
		case "signing_alg":
			c.SigningAlg, err = p.str(v, key)
		case "scopes":
			c.Scopes, err = p.strList(v, key)
		case "client_metadata_url":
			c.ClientMetadataURL, err = p.str(v, key)
		case "redirect_port":
			c.RedirectPort, err = p.count(v, key)
		}
		if err != nil {
			return nil, err
		}
	}
	if k, msg := c.Check(); msg != "" {
		return nil, p.errAt(fields[k], "oauth: %s", msg)
	}
	return c, nil
}

// yamlParser reads nodes of one server entry (server != "") or of a file's
// top level (server == "").
type yamlParser struct {
	file   string
	server string
}

func (p *yamlParser) errAt(n *yaml.Node, format string, args ...any) *ConfigError {
	e := &ConfigError{File: p.file, Server: p.server, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

func position(file string, n *yaml.Node) string {
	if file == "" || n == nil || n.Line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d:%d", file, n.Line, n.Column)
}

// fields checks that n is a mapping of known, unique keys, and returns the
// values by key and the keys in file order.
func (p *yamlParser) fields(n *yaml.Node, allowed []string) (map[string]*yaml.Node, []string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil, p.errAt(n, "expected a mapping with %s, found %s", strings.Join(allowed, ", "), yamlpos.KindName(n))
	}
	out := map[string]*yaml.Node{}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, nil, p.errAt(k, "expected a key, found %s", yamlpos.KindName(k))
		}
		if !slices.Contains(allowed, k.Value) {
			return nil, nil, p.errAt(k, "%s", unknownKey(k.Value, allowed))
		}
		if _, dup := out[k.Value]; dup {
			return nil, nil, p.errAt(k, "duplicate key %q (expected each key once)", k.Value)
		}
		out[k.Value] = v
		keys = append(keys, k.Value)
	}
	return out, keys, nil
}

// unknownKey words the error for a key that is not allowed.
func unknownKey(k string, allowed []string) string {
	if isWorkspaceTrustKey(k) || strings.HasPrefix(strings.ToLower(k), "trust") && !slices.Contains(allowed, "trust") {
		return fmt.Sprintf("unknown key %q: workspace trust cannot be granted by a file (expected `mcpflow trust add DIR` or --trust-workspace; a server entry's trust: is server trust)", k)
	}
	msg := fmt.Sprintf("unknown key %q", k)
	if s, ok := synonyms[strings.ToLower(k)]; ok && slices.Contains(allowed, s) {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	if s := didyoumean.Closest(k, allowed); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + fmt.Sprintf(" (expected one of: %s)", strings.Join(allowed, ", "))
}

func isWorkspaceTrustKey(k string) bool {
	l := strings.ToLower(k)
	return strings.Contains(l, "trust") && (strings.Contains(l, "workspace") || strings.Contains(l, "folder") || strings.Contains(l, "director"))
}

func (p *yamlParser) str(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errAt(n, "%s: expected a string, found %s", key, yamlpos.KindName(n))
	}
	return n.Value, nil
}

func (p *yamlParser) strList(n *yaml.Node, key string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errAt(n, "%s: expected a list of strings, found %s", key, yamlpos.KindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
			return nil, p.errAt(c, "%s[%d]: expected a string, found %s", key, i, yamlpos.KindName(c))
		}
		out = append(out, c.Value)
	}
	return out, nil
}

func (p *yamlParser) strMap(n *yaml.Node, key string) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errAt(n, "%s: expected a mapping of NAME: VALUE, found %s", key, yamlpos.KindName(n))
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, p.errAt(k, "%s: expected a name, found %s", key, yamlpos.KindName(k))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errAt(k, "%s: duplicate name %q (expected each name once)", key, k.Value)
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, p.errAt(v, "%s.%s: expected a string, found %s", key, k.Value, yamlpos.KindName(v))
		}
		out[k.Value] = v.Value
	}
	return out, nil
}

func (p *yamlParser) boolean(n *yaml.Node, key string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, p.errAt(n, "%s: expected true or false, found %s", key, yamlpos.KindName(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, p.errAt(n, "%s: %v (expected true or false)", key, err)
	}
	return b, nil
}

func (p *yamlParser) count(n *yaml.Node, key string) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, p.errAt(n, "%s: expected a whole number such as 4, found %s", key, yamlpos.KindName(n))
	}
	var c int
	if err := n.Decode(&c); err != nil {
		return 0, p.errAt(n, "%s: %v (expected a whole number such as 4)", key, err)
	}
	return c, nil
}

func (p *yamlParser) duration(n *yaml.Node, key string) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return 0, p.errAt(n, "%s: expected a duration such as \"30s\", found %s", key, yamlpos.KindName(n))
	}
	d, err := parseDuration(n.Value)
	if err != nil {
		return 0, p.errAt(n, "%s: %v", key, err)
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (expected a number with a unit, such as \"30s\" or \"2m\")", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative (expected a positive duration such as \"30s\")", s)
	}
	return d, nil
}
