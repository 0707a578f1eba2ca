package upstream

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpflow/mcpflow/oauth"
)

// expandVars replaces ${VAR} and ${VAR:-default} with values from lookup.
// $${ is a literal ${. Any other $ is left alone. A variable that is unset
// (lookup reports false) and has no default is an error wrapping
// ErrUnsetVariable; a set but empty one expands to "" unless it has a
// default (:- means "unset or empty", as in the shell).
func expandVars(s string, lookup func(string) (string, bool)) (string, error) {
	return walkVars(s, func(name, def string, hasDef bool) (string, error) {
		v, _, ok := refValue(name, def, hasDef, lookup)
		if !ok {
			return "", &unsetError{name: name}
		}
		return v, nil
	})
}

// refValue is the value of one reference, ${name} or ${name:-def}: the
// variable's (fromEnv), or the default when the variable is unset or empty;
// ok is false when it is unset and there is no default. Connect and
// Displayed both decide by it.
func refValue(name, def string, hasDef bool, lookup func(string) (string, bool)) (v string, fromEnv, ok bool) {
	v, set := lookup(name)
	switch {
	case hasDef && v == "":
		return def, false, true
	case !set:
		return "", false, false
	}
	return v, true, true
}

// walkVars rewrites s, each reference replaced by what ref returns for it,
// $${ by a literal ${.
func walkVars(s string, ref func(name, def string, hasDef bool) (string, error)) (string, error) {
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
		if i > 0 && s[i-1] == '$' { // $${ → ${
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		name, def, hasDef, rest, err := parseRef(s[i:])
		if err != nil {
			return "", err
		}
		v, err := ref(name, def, hasDef)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = rest
	}
}

// Displayed returns a copy of the entry whose command, args, cwd and url
// read as Connect would use them now, for showing: each ${VAR:-default}
// whose variable is unset or empty is its default. A reference to a set
// variable stays ${VAR} (the environment's values are not shown: they may
// be secrets), and so does one to an unset variable without a default
// (Connect fails on it). lookup is read as Connect reads
// Options.LookupEnv, EnvAllowed applied.
func (s *Server) Displayed(lookup func(string) (string, bool)) *Server {
	lookup = s.lookup(lookup)
	show := func(v string) string {
		out, err := walkVars(v, func(name, def string, hasDef bool) (string, error) {
			if v, fromEnv, ok := refValue(name, def, hasDef, lookup); ok && !fromEnv {
				return v, nil
			}
			return "${" + name + "}", nil
		})
		if err != nil {
			return v // malformed: shown as written
		}
		return out
	}
	c := *s
	c.Command, c.Cwd, c.URL = show(s.Command), show(s.Cwd), show(s.URL)
	c.Args = make([]string, len(s.Args))
	for i, a := range s.Args {
		c.Args[i] = show(a)
	}
	return &c
}

// lookup is lookup restricted to the variables the entry may read (see
// EnvAllowed).
func (s *Server) lookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	if s.EnvAllowed == nil {
		return lookup
	}
	return func(name string) (string, bool) {
		if !slices.Contains(s.EnvAllowed, name) {
			return "", false
		}
		return lookup(name)
	}
}

// unsetError is a ${NAME} whose variable is not set (ErrUnsetVariable).
// spelled is the reference as the user wrote it, when an imported file
// spelled it otherwise (${env:NAME}).
type unsetError struct {
	name, spelled string
}

func (e *unsetError) Unwrap() error { return ErrUnsetVariable }

func (e *unsetError) Error() string {
	switch {
	case strings.HasPrefix(e.name, "MCPFLOW_INPUT_"):
		return fmt.Sprintf("${%s}: %v: the server's configuration asks for a VS Code input (${input:…}); set %s in the environment", e.name, ErrUnsetVariable, e.name)
	case e.spelled != "":
		return fmt.Sprintf("%s: %v (expected %s set in mcpflow's environment)", e.spelled, ErrUnsetVariable, e.name)
	}
	return fmt.Sprintf("${%s}: %v (expected it set, or ${%s:-DEFAULT})", e.name, ErrUnsetVariable, e.name)
}

// expand is expandVars for one of the entry's values, its errors naming
// the server, what was expanded (a key of Server.places: "command",
// "args[0]", "env NAME", …) and where it was read, and variables as the
// user spelled them.
func (s *Server) expand(what, v string, lookup func(string) (string, bool)) (string, error) {
	out, err := expandVars(v, lookup)
	if ue, ok := err.(*unsetError); ok {
		ue.spelled = s.spelled[ue.name]
	}
	switch {
	case err == nil:
		return out, nil
	case s.places[what] != "":
		return "", fmt.Errorf("%s: server %q: %s: %w", s.places[what], s.Name, what, err)
	}
	return "", fmt.Errorf("server %q: %s: %w", s.Name, what, err)
}

// place records that the value the key names (see Server.places) was
// read at where, FILE:LINE:COL; where "" records nothing.
func (s *Server) place(key, where string) {
	if where == "" {
		return
	}
	if s.places == nil {
		s.places = map[string]string{}
	}
	s.places[key] = where
}

// placeKey is the key of Server.places for the value of name in an
// entry's env or headers.
func placeKey(field, name string) string {
	if field == "headers" {
		return "header " + name
	}
	return "env " + name
}

// parseRef parses "${NAME}" or "${NAME:-default}" at the start of s.
func parseRef(s string) (name, def string, hasDef bool, rest string, err error) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return "", "", false, "", fmt.Errorf("unclosed %q (expected ${NAME})", s)
	}
	body := s[2:end]
	name, def, hasDef = strings.Cut(body, ":-")
	if !validVarName(name) {
		return "", "", false, "", fmt.Errorf("bad variable reference ${%s} (expected ${NAME} or ${NAME:-DEFAULT}, NAME of letters, digits and _)", body)
	}
	return name, def, hasDef, s[end+1:], nil
}

func validVarName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// EnvRefs lists, sorted and once each, the environment variables the
// entry's ${VAR} references read (command, args, env, cwd, url, headers,
// oauth's client_id, client_secret and private_key).
func (s *Server) EnvRefs() []string {
	seen := map[string]bool{}
	record := func(name string) (string, bool) { seen[name] = true; return "x", true }
	vals := append(append([]string{s.Command, s.Cwd, s.EnvFile, s.URL}, s.Args...), append(mapValues(s.Env), mapValues(s.Headers)...)...)
	if o := s.OAuth; o != nil {
		vals = append(vals, o.ClientID, o.ClientSecret, o.PrivateKey)
	}
	for _, v := range vals {
		expandVars(v, record)
	}
	return sortedKeys(seen)
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// checkVars reports malformed references, without looking anything up.
func checkVars(s string) error {
	_, err := expandVars(s, func(string) (string, bool) { return "x", true })
	return err
}

// onlyVars reports whether s is made of ${VAR} references and nothing else
// (so that showing it reveals no secret).
func onlyVars(s string) bool {
	if s == "" {
		return true
	}
	for s != "" {
		if !strings.HasPrefix(s, "${") {
			return false
		}
		name, _, hasDef, rest, err := parseRef(s)
		if err != nil || hasDef || name == "" {
			return false
		}
		s = rest
	}
	return true
}

// OAuthConfig is the entry's oauth: mapping with its ${VAR} references
// expanded, and a private_key path made absolute (relative to workspace).
func (s *Server) OAuthConfig(workspace string, lookup func(string) (string, bool)) (oauth.Config, error) {
	cfg := *s.OAuth
	for _, f := range []struct {
		key string
		v   *string
	}{{"client_id", &cfg.ClientID}, {"client_secret", &cfg.ClientSecret}, {"private_key", &cfg.PrivateKey}} {
		v, err := s.expand("oauth "+f.key, *f.v, lookup)
		if err != nil {
			return oauth.Config{}, err
		}
		*f.v = v
	}
	if k := cfg.PrivateKey; k != "" && !strings.Contains(k, "-----BEGIN") && !filepath.IsAbs(k) {
		cfg.PrivateKey = filepath.Join(workspace, k)
	}
	return cfg, nil
}
