package engine

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/servers"
)

// LoadFile reads and validates the workflow at path.
func LoadFile(path string) (*Workflow, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow: %w", err)
	}
	return Load(path, src)
}

// Load parses and validates a workflow. Every error names the file, line and
// column, and what was expected.
func Load(file string, src []byte) (wf *Workflow, err error) {
	l := &loader{file: file}
	defer func() {
		// yaml.v3 can panic on some malformed inputs; no panic reaches a user.
		if r := recover(); r != nil {
			wf, err = nil, &PosError{File: file, Msg: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil {
		return nil, l.yamlError(err)
	}
	if len(doc.Content) == 0 {
		return nil, &PosError{File: file, Msg: "empty workflow: expected a mapping with name and steps"}
	}
	wf = &Workflow{Path: file, Source: src, Servers: servers.Set{}}
	if err := l.workflow(doc.Content[0], wf); err != nil {
		return nil, err
	}
	return wf, nil
}

type loader struct{ file string }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (l *loader) yamlError(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		var line int
		fmt.Sscanf(m[1], "%d", &line)
		return &PosError{File: l.file, Line: line, Column: 1, Msg: m[2]}
	}
	return &PosError{File: l.file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
}

func (l *loader) errAt(n *yaml.Node, format string, args ...any) error {
	return &PosError{File: l.file, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
}

// fields checks that n is a mapping whose keys are all in allowed, and
// returns its values by key.
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, l.errAt(n, "%s: expected a mapping, found %s", what, kindName(n))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !contains(allowed, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", what, k.Value)
			if s := suggest(k.Value, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += fmt.Sprintf(" (expected one of: %s)", strings.Join(allowed, ", "))
			}
			return nil, l.errAt(k, "%s", msg)
		}
		if _, dup := out[k.Value]; dup {
			return nil, l.errAt(k, "%s: duplicate key %q", what, k.Value)
		}
		out[k.Value] = v
	}
	return out, nil
}

func (l *loader) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", l.errAt(n, "%s: expected a string, found %s", what, kindName(n))
	}
	return n.Value, nil
}

func (l *loader) boolean(n *yaml.Node, what string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, l.errAt(n, "%s: expected true or false, found %q", what, n.Value)
	}
	if err := n.Decode(&b); err != nil {
		return false, l.errAt(n, "%s: %v", what, err)
	}
	return b, nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func (l *loader) workflow(n *yaml.Node, wf *Workflow) error {
	f, err := l.fields(n, "workflow", "name", "description", "inputs", "servers", "steps")
	if err != nil {
		return err
	}
	if v, ok := f["name"]; ok {
		if wf.Name, err = l.str(v, "name"); err != nil {
			return err
		}
	} else {
		return l.errAt(n, "workflow: missing required key \"name\"")
	}
	if v, ok := f["description"]; ok {
		if wf.Description, err = l.str(v, "description"); err != nil {
			return err
		}
	}
	if v, ok := f["inputs"]; ok {
		if err := l.inputs(v, wf); err != nil {
			return err
		}
	}
	if v, ok := f["servers"]; ok {
		if err := l.servers(v, wf); err != nil {
			return err
		}
	}
	v, ok := f["steps"]
	if !ok {
		return l.errAt(n, "workflow: missing required key \"steps\"")
	}
	return l.steps(v, wf)
}

func (l *loader) inputs(n *yaml.Node, wf *Workflow) error {
	if n.Kind != yaml.MappingNode {
		return l.errAt(n, "inputs: expected a mapping of input names, found %s", kindName(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		what := "input " + k.Value
		if !idPattern.MatchString(k.Value) {
			return l.errAt(k, "%s: name must be letters, digits, _ or -", what)
		}
		f, err := l.fields(v, what, "type", "description", "required", "default", "secret")
		if err != nil {
			return err
		}
		in := &Input{Name: k.Value, Type: TypeString}
		if t, ok := f["type"]; ok {
			s, err := l.str(t, what+".type")
			if err != nil {
				return err
			}
			switch InputType(s) {
			case TypeString, TypeNumber, TypeBoolean:
				in.Type = InputType(s)
			default:
				return l.errAt(t, "%s.type: unknown type %q (expected string, number or boolean)", what, s)
			}
		}
		if d, ok := f["description"]; ok {
			if in.Description, err = l.str(d, what+".description"); err != nil {
				return err
			}
		}
		if r, ok := f["required"]; ok {
			if in.Required, err = l.boolean(r, what+".required"); err != nil {
				return err
			}
		}
		if s, ok := f["secret"]; ok {
			if in.Secret, err = l.boolean(s, what+".secret"); err != nil {
				return err
			}
		}
		if d, ok := f["default"]; ok {
			var val any
			if err := d.Decode(&val); err != nil {
				return l.errAt(d, "%s.default: %v", what, err)
			}
			if in.Default, err = convertInput(in, val); err != nil {
				return l.errAt(d, "%s.default: %v", what, err)
			}
			in.HasDefault = true
		}
		wf.Inputs = append(wf.Inputs, in)
	}
	return nil
}

func (l *loader) servers(n *yaml.Node, wf *Workflow) error {
	if n.Kind != yaml.MappingNode {
		return l.errAt(n, "servers: expected a mapping of server names, found %s", kindName(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		what := "server " + k.Value
		if _, err := l.fields(v, what, "builtin", "command", "args", "env", "cwd", "trust", "connect_timeout"); err != nil {
			return err
		}
		srv := &servers.Server{}
		if err := v.Decode(srv); err != nil {
			return l.yamlError(err)
		}
		srv.Name = k.Value
		if err := srv.Validate(); err != nil {
			return l.errAt(v, "%s", strings.TrimSuffix(err.Error(), ": "+servers.ErrConfig.Error()))
		}
		wf.Servers[k.Value] = srv
	}
	return nil
}

func (l *loader) steps(n *yaml.Node, wf *Workflow) error {
	if n.Kind != yaml.SequenceNode {
		return l.errAt(n, "steps: expected a list of steps, found %s", kindName(n))
	}
	if len(n.Content) == 0 {
		return l.errAt(n, "steps: a workflow needs at least one step")
	}
	seen := map[string]bool{}
	for i, sn := range n.Content {
		what := fmt.Sprintf("steps[%d]", i)
		f, err := l.fields(sn, what, "id", "server", "tool", "with")
		if err != nil {
			return err
		}
		st := &Step{pos: pos{sn.Line, sn.Column}}
		for _, req := range []string{"id", "server", "tool"} {
			if _, ok := f[req]; !ok {
				return l.errAt(sn, "%s: missing required key %q", what, req)
			}
		}
		if st.ID, err = l.str(f["id"], what+".id"); err != nil {
			return err
		}
		if !idPattern.MatchString(st.ID) {
			return l.errAt(f["id"], "%s.id: %q must start with a letter or _ and hold only letters, digits, _ or -", what, st.ID)
		}
		if seen[st.ID] {
			return l.errAt(f["id"], "%s.id: duplicate step id %q", what, st.ID)
		}
		what = "step " + st.ID
		if st.Server, err = l.str(f["server"], what+".server"); err != nil {
			return err
		}
		if _, ok := wf.Servers[st.Server]; !ok {
			return l.errAt(f["server"], "%s: unknown server %q (%s)", what, st.Server, serverNames(wf.Servers))
		}
		if st.Tool, err = l.str(f["tool"], what+".tool"); err != nil {
			return err
		}
		if w, ok := f["with"]; ok {
			if w.Kind != yaml.MappingNode {
				return l.errAt(w, "%s.with: expected a mapping of arguments, found %s", what, kindName(w))
			}
			if err := w.Decode(&st.With); err != nil {
				return l.errAt(w, "%s.with: %v", what, err)
			}
			if err := l.checkRefs(w, what, wf, seen); err != nil {
				return err
			}
		}
		seen[st.ID] = true
		wf.Steps = append(wf.Steps, st)
	}
	return nil
}

// checkRefs validates every ${{ … }} inside n: it must parse, and refer to
// declared inputs or to earlier steps.
func (l *loader) checkRefs(n *yaml.Node, what string, wf *Workflow, earlier map[string]bool) error {
	if n.Kind == yaml.ScalarNode {
		_, err := parseTemplate(n.Value)
		if err == nil {
			err = checkTemplate(n.Value, wf, earlier)
		}
		if err != nil {
			return l.errAt(n, "%s: %v", what, err)
		}
		return nil
	}
	for _, c := range n.Content {
		if err := l.checkRefs(c, what, wf, earlier); err != nil {
			return err
		}
	}
	return nil
}

func serverNames(s servers.Set) string {
	if len(s) == 0 {
		return "the workflow declares no servers"
	}
	return "declared servers: " + strings.Join(s.Names(), ", ")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest returns the allowed word closest to s, if it is close enough to be
// a likely typo.
func suggest(s string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := distance(strings.ToLower(s), a); d < bestD || (d == bestD && a < best) {
			best, bestD = a, d
		}
	}
	if bestD > len(s)/2 {
		return ""
	}
	return best
}

// distance is the Levenshtein edit distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// ParseInputs turns --input key=value pairs into typed values, applies
// defaults and checks required inputs. Unknown names list the declared ones.
func (w *Workflow) ParseInputs(pairs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q: expected key=value", ErrInput, p)
		}
		in := w.input(k)
		if in == nil {
			names := make([]string, 0, len(w.Inputs))
			for _, i := range w.Inputs {
				names = append(names, i.Name)
			}
			sort.Strings(names)
			if len(names) == 0 {
				return nil, fmt.Errorf("%w: %q: workflow %q declares no inputs", ErrInput, k, w.Name)
			}
			return nil, fmt.Errorf("%w: unknown input %q (declared: %s)", ErrInput, k, strings.Join(names, ", "))
		}
		val, err := convertInput(in, v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInput, k, err)
		}
		out[k] = val
	}
	for _, in := range w.Inputs {
		if _, ok := out[in.Name]; ok {
			continue
		}
		switch {
		case in.HasDefault:
			out[in.Name] = in.Default
		case in.Required:
			return nil, fmt.Errorf("%w: missing required input %q (pass --input %s=VALUE)", ErrInput, in.Name, in.Name)
		}
	}
	return out, nil
}

func (w *Workflow) input(name string) *Input {
	for _, in := range w.Inputs {
		if in.Name == name {
			return in
		}
	}
	return nil
}

func convertInput(in *Input, v any) (any, error) {
	s, isString := v.(string)
	switch in.Type {
	case TypeString:
		if !isString {
			return fmt.Sprint(v), nil
		}
		return s, nil
	case TypeNumber:
		switch x := v.(type) {
		case int:
			return float64(x), nil
		case float64:
			return x, nil
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", x)
			}
			return f, nil
		}
	case TypeBoolean:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			switch x {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
		}
	}
	return nil, fmt.Errorf("%v is not a %s", v, in.Type)
}
