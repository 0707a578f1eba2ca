package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/internal/didyoumean"
	"github.com/mcpflow/mcpflow/internal/inputfile"
	"github.com/mcpflow/mcpflow/internal/yamlpos"

	"github.com/mcpflow/mcpflow/upstream"
)

// LoadFile reads and validates the workflow at path. external holds the
// servers configured outside the workflow (mcpflow.yaml, --servers); the
// workflow's own servers: entries override them by name.
func LoadFile(path string, external upstream.Set) (*Workflow, error) {
	src, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, src, external)
}

// ReadFile reads the text of the workflow at path, for Load.
func ReadFile(path string) ([]byte, error) {
	src, err := inputfile.Read(path, 0)
	if err != nil {
		return nil, &PosError{File: path, Msg: fmt.Sprintf("cannot read the workflow: %v", unwrapPath(err))}
	}
	return src, nil
}

// Load parses and validates a workflow (see LoadFile). Every error names the
// file, line and column, and what was expected. Validation goes on after an
// error: the error is an Errors holding every one found.
func Load(file string, src []byte, external upstream.Set) (*Workflow, error) {
	wf, err := LoadPartial(file, src, external)
	if err != nil {
		return nil, err
	}
	return wf, nil
}

// LoadPartial is Load for a check that adds errors of its own (validate
// --discover): besides every error Load finds (an Errors), it returns the
// workflow as far as it could be read, without the steps and outputs that
// have errors (nil when the file is not YAML or holds nothing). A workflow
// returned with an error must never be run.
func LoadPartial(file string, src []byte, external upstream.Set) (*Workflow, error) {
	root, err := yamlpos.Parse(src)
	if err != nil {
		return nil, Join(syntaxError(file, src, err))
	}
	if root == nil {
		return nil, Join(&PosError{File: file, Msg: "empty workflow: expected a mapping with name and steps"})
	}
	l := &loader{file: file, badServers: map[string]bool{}}
	wf := &Workflow{Path: file, Source: src, Servers: upstream.Merge(external), Own: upstream.Set{}}
	l.workflow(root, wf)
	return wf, Join(l.errs...)
}

// loader reads a workflow's nodes into a Workflow. It records every error
// it finds and goes on with what it can still check.
type loader struct {
	file string
	errs []*PosError
	// badServers are the workflow's own servers whose entries have errors:
	// a step that uses one is not told the server is unknown.
	badServers map[string]bool
}

// position is where a node starts in the file; zero when unknown.
type position struct{ line, col int }

func posOf(n *yaml.Node) position { return position{n.Line, n.Column} }

// fail records an error at n.
func (l *loader) fail(n *yaml.Node, format string, args ...any) {
	l.errs = append(l.errs, &PosError{File: l.file, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)})
}

// failedSince reports whether an error was recorded since mark, a length
// of l.errs taken before.
func (l *loader) failedSince(mark int) bool { return len(l.errs) > mark }

// mapping is a YAML mapping read by fields: the value of each allowed key
// it holds, and the allowed keys that an unknown key of it was taken for
// (its error says "did you mean").
type mapping struct {
	node    *yaml.Node
	what    string
	values  map[string]*yaml.Node
	guessed map[string]bool
}

// fields checks that n is a mapping whose keys are all in allowed, each
// once, and returns the values of the keys it allows. ok is false when n
// is not a mapping.
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (m *mapping, ok bool) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, "%s: expected a mapping, found %s", what, yamlpos.KindName(n))
		return nil, false
	}
	m = &mapping{node: n, what: what, values: map[string]*yaml.Node{}, guessed: map[string]bool{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(allowed, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", what, k.Value)
			if s := didyoumean.Closest(k.Value, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
				m.guessed[s] = true
			} else {
				msg += fmt.Sprintf(" (expected one of: %s)", strings.Join(allowed, ", "))
			}
			l.fail(k, "%s", msg)
			continue
		}
		if _, dup := m.values[k.Value]; dup {
			l.fail(k, "%s: duplicate key %q", what, k.Value)
			continue
		}
		m.values[k.Value] = v
	}
	return m, true
}

// require reports each of keys that m lacks, but for a key an unknown key
// of m was taken for: that key's error says it already.
func (l *loader) require(m *mapping, keys ...string) {
	for _, k := range keys {
		if _, ok := m.values[k]; !ok && !m.guessed[k] {
			l.fail(m.node, "%s: missing required key %q", m.what, k)
		}
	}
}

func (l *loader) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		hint := ""
		if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
			if h, ok := brokenValue(n.Content[0], n.Content[1], true); ok {
				hint = " (" + h + ")"
			}
		}
		l.fail(n, "%s: expected a string, found %s%s", what, yamlpos.KindName(n), hint)
		return "", false
	}
	return n.Value, true
}

func (l *loader) boolean(n *yaml.Node, what string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		l.fail(n, "%s: expected true or false, found %s", what, yamlpos.KindName(n))
		return false, false
	}
	if err := n.Decode(&b); err != nil {
		l.fail(n, "%s: %v", what, err)
		return false, false
	}
	return b, true
}

// The keys each level of a workflow file accepts (also in
// schema/workflow.schema.json; a test keeps the two in step).
var (
	workflowKeys = []string{"name", "description", "inputs", "env", "servers", "roots", "steps", "outputs"}
	inputKeys    = []string{"type", "description", "required", "default", "enum", "secret"}
	stepKeys     = []string{"id", "name", "server", "tool", "resource", "prompt", "with", "if", "for_each", "concurrency", "timeout", "retry", "continue_on_error", "approve", "elicit"}
	retryKeys    = []string{"attempts", "backoff"}
	resourceKeys = []string{"server", "uri"}
	// targetKeys are the step keys of which a step has exactly one.
	targetKeys = []string{"tool", "resource", "prompt"}
)

var idPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func (l *loader) workflow(n *yaml.Node, wf *Workflow) {
	m, ok := l.fields(n, "workflow", workflowKeys...)
	if !ok {
		return
	}
	l.require(m, "name", "steps")
	f := m.values
	if v, ok := f["name"]; ok {
		wf.Name, _ = l.str(v, "name")
	}
	if v, ok := f["description"]; ok {
		wf.Description, _ = l.str(v, "description")
	}
	if v, ok := f["inputs"]; ok {
		l.inputs(v, wf)
	}
	if v, ok := f["env"]; ok {
		l.env(v, wf)
	}
	if v, ok := f["servers"]; ok {
		l.servers(v, wf)
	}
	if v, ok := f["roots"]; ok {
		l.roots(v, wf)
	}
	var ids []string
	if v, ok := f["steps"]; ok {
		ids = l.steps(v, wf)
	}
	if v, ok := f["outputs"]; ok {
		l.outputs(v, wf, ids)
	}
}

func (l *loader) env(n *yaml.Node, wf *Workflow) {
	if n.Kind != yaml.SequenceNode {
		l.fail(n, "env: expected a list of environment variable names, found %s", yamlpos.KindName(n))
		return
	}
	for _, e := range n.Content {
		if name, ok := l.str(e, "env"); ok {
			wf.Env = append(wf.Env, name)
		}
	}
}

// outputs reads the outputs, which may name every step of ids.
func (l *loader) outputs(n *yaml.Node, wf *Workflow, ids []string) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, "outputs: expected a mapping of names to values, found %s", yamlpos.KindName(n))
		return
	}
	sc := scope{wf: wf, earlier: map[string]bool{}}
	for _, id := range ids {
		sc.earlier[id] = true
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		mark := len(l.errs)
		val := l.value(v, "output "+k.Value, sc)
		if !l.failedSince(mark) {
			wf.Outputs = append(wf.Outputs, &Output{Name: k.Value, Value: val})
		}
	}
}

// value compiles a YAML value holding ${{ … }} expressions and checks every
// name they read. The value is never nil; it is of no use when an error
// was recorded.
func (l *loader) value(n *yaml.Node, what string, sc scope) *Value {
	at := posOf(n)
	if n.Tag == LiteralTag {
		// Sent exactly as written: no ${{ … }} in it is evaluated.
		var raw any
		if err := n.Decode(&raw); err != nil {
			l.fail(n, "%s: %v", what, err)
			return &Value{at: at}
		}
		return &Value{literal: jsonShape(raw), at: at}
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := &Value{mapping: map[string]*Value{}, at: at}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				l.fail(k, "%s: expected a string key, found %s", what, yamlpos.KindName(k))
				continue
			}
			if hint, ok := brokenValue(k, v, len(n.Content) == 2); ok {
				l.fail(k, "%s: a key holding ${{ … }} is never evaluated (%s)", what, hint)
				continue
			}
			if _, dup := out.mapping[k.Value]; dup {
				l.fail(k, "%s: duplicate key %q", what, k.Value)
				continue
			}
			out.mapping[k.Value] = l.value(v, what, sc)
			out.keys = append(out.keys, k.Value)
		}
		sort.Strings(out.keys)
		return out
	case yaml.SequenceNode:
		out := &Value{sequence: []*Value{}, at: at}
		for _, e := range n.Content {
			out.sequence = append(out.sequence, l.value(e, what, sc))
		}
		return out
	}
	var raw any
	if err := n.Decode(&raw); err != nil {
		l.fail(n, "%s: %v", what, err)
		return &Value{at: at}
	}
	str, ok := raw.(string)
	if !ok {
		return &Value{literal: jsonShape(raw), at: at}
	}
	t, errs := parseTemplate(str)
	for _, err := range errs {
		l.fail(n, "%s: %v", what, err)
	}
	if errs != nil {
		return &Value{at: at}
	}
	if t == nil {
		return &Value{literal: str, at: at}
	}
	for _, e := range t.exprs() {
		// Runtime errors name the expression's own line and column.
		e.file, e.line, e.col = l.file, n.Line, n.Column
		for _, err := range sc.check(e) {
			l.fail(n, "%s: %v", what, err)
		}
	}
	return &Value{tmpl: t, at: at}
}

// condition compiles an if or for_each expression: either ${{ … }} or a
// bare CEL expression. It is nil when the expression has errors.
func (l *loader) condition(n *yaml.Node, what string, sc scope) *Expression {
	src, ok := l.str(n, what)
	if !ok {
		return nil
	}
	src = strings.TrimSpace(src)
	if strings.HasPrefix(src, "${{") && strings.HasSuffix(src, "}}") && closing(src[3:]) == len(src)-5 {
		src = strings.TrimSpace(src[3 : len(src)-2])
	}
	e, err := compileExpr(src)
	if err != nil {
		l.fail(n, "%s: %v", what, err)
		return nil
	}
	e.file, e.line, e.col = l.file, n.Line, n.Column
	errs := sc.check(e)
	for _, err := range errs {
		l.fail(n, "%s: %v", what, err)
	}
	if errs != nil {
		return nil
	}
	return e
}

// scope is what an expression may name at one place of a workflow: the
// declared inputs and listed env variables, the steps that run before it,
// and item/index inside the with: of a for_each step. The ids of the steps
// that do not run before it are known only to say so.
type scope struct {
	wf      *Workflow
	earlier map[string]bool
	later   map[string]bool
	loop    bool
}

// check checks every name an expression reads against the scope, and
// returns an error for each it may not read.
func (sc scope) check(e *Expression) []error {
	wf := sc.wf
	var errs []error
	for _, name := range e.refs.inputs {
		if wf.Input(name) == nil {
			names := make([]string, len(wf.Inputs))
			for i, in := range wf.Inputs {
				names[i] = in.Name
			}
			if s := didyoumean.Closest(name, names); s != "" {
				errs = append(errs, fmt.Errorf("expression %q: unknown input %q (did you mean %q?)", e.src, name, s))
			} else {
				errs = append(errs, fmt.Errorf("expression %q: unknown input %q (declared: %s)", e.src, name, inputNames(wf)))
			}
		}
	}
	for _, name := range e.refs.env {
		if !slices.Contains(wf.Env, name) {
			errs = append(errs, fmt.Errorf("expression %q: env.%s is not listed in the workflow's env: (add it there to read it)", e.src, name))
		}
	}
	for _, name := range e.refs.steps {
		switch {
		case sc.earlier[name]:
		case sc.later[name]:
			errs = append(errs, fmt.Errorf("expression %q: step %q does not run before this one (only earlier steps can be referenced)", e.src, name))
		default:
			ids := slices.Sorted(maps.Keys(sc.earlier))
			if s := didyoumean.Closest(name, ids); s != "" {
				errs = append(errs, fmt.Errorf("expression %q: unknown step %q (did you mean %q?)", e.src, name, s))
			} else {
				errs = append(errs, fmt.Errorf("expression %q: unknown step %q", e.src, name))
			}
		}
	}
	if e.refs.item && !sc.loop {
		errs = append(errs, fmt.Errorf("expression %q: item and index exist only in the with: of a step that has for_each", e.src))
	}
	return errs
}

func inputNames(wf *Workflow) string {
	if len(wf.Inputs) == 0 {
		return "none"
	}
	names := make([]string, len(wf.Inputs))
	for i, in := range wf.Inputs {
		names[i] = in.Name
	}
	return strings.Join(names, ", ")
}

func (l *loader) inputs(n *yaml.Node, wf *Workflow) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, "inputs: expected a mapping of input names, found %s", yamlpos.KindName(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		what := "input " + k.Value
		if !idPattern.MatchString(k.Value) {
			l.fail(k, "%s: name must be letters, digits, _ or -", what)
		}
		// Declared even with errors: an expression that reads it is not
		// told it is unknown.
		in := &Input{Name: k.Value, Type: TypeString}
		wf.Inputs = append(wf.Inputs, in)
		m, ok := l.fields(v, what, inputKeys...)
		if !ok {
			continue
		}
		f := m.values
		typed := true
		if t, ok := f["type"]; ok {
			s, ok := l.str(t, what+".type")
			switch InputType(s) {
			case TypeString, TypeNumber, TypeBoolean, TypeObject, TypeArray:
				in.Type = InputType(s)
			default:
				typed = false
				if ok {
					l.fail(t, "%s.type: unknown type %q (expected string, number, boolean, object or array)", what, s)
				}
			}
		}
		if d, ok := f["description"]; ok {
			in.Description, _ = l.str(d, what+".description")
		}
		if r, ok := f["required"]; ok {
			in.Required, _ = l.boolean(r, what+".required")
		}
		if s, ok := f["secret"]; ok {
			in.Secret, _ = l.boolean(s, what+".secret")
		}
		if e, ok := f["enum"]; ok && typed {
			l.enum(e, in, what)
		}
		if d, ok := f["default"]; ok && typed {
			var val any
			if err := d.Decode(&val); err != nil {
				l.fail(d, "%s.default: %v", what, err)
			} else if in.Default, err = convertInput(in, val); err != nil {
				l.fail(d, "%s.default: %v", what, err)
			} else if !in.allows(in.Default) {
				l.fail(d, "%s.default: not one of its enum: (%s)", what, in.enumList())
			} else {
				in.HasDefault = true
			}
		}
	}
}

// enum reads an input's enum: a list of values of its type, at least
// one, none twice.
func (l *loader) enum(n *yaml.Node, in *Input, what string) {
	if n.Kind != yaml.SequenceNode {
		l.fail(n, "%s.enum: expected a list of the values it takes, found %s", what, yamlpos.KindName(n))
		return
	}
	if len(n.Content) == 0 {
		l.fail(n, "%s.enum: an empty list: give the values it takes, or no enum:", what)
		return
	}
	values := []any{}
	for _, e := range n.Content {
		var val any
		if err := e.Decode(&val); err != nil {
			l.fail(e, "%s.enum: %v", what, err)
			return
		}
		v, err := convertInput(in, val)
		if err != nil {
			l.fail(e, "%s.enum: %v", what, err)
			return
		}
		for _, seen := range values {
			if reflect.DeepEqual(seen, v) {
				l.fail(e, "%s.enum: a value given twice", what)
				return
			}
		}
		values = append(values, v)
	}
	in.Enum = values
}

// allows reports whether v (typed) is a value the input takes: any, or
// one of its enum.
func (in *Input) allows(v any) bool {
	if in.Enum == nil {
		return true
	}
	for _, e := range in.Enum {
		if reflect.DeepEqual(e, v) {
			return true
		}
	}
	return false
}

// enumList is an input's enum as messages show it.
func (in *Input) enumList() string {
	parts := make([]string, len(in.Enum))
	for i, e := range in.Enum {
		b, _ := json.Marshal(e)
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}

func (l *loader) servers(n *yaml.Node, wf *Workflow) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, "servers: expected a mapping of server names, found %s", yamlpos.KindName(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		srv, err := upstream.ParseEntry(l.file, k.Value, v)
		if err != nil {
			l.badServers[k.Value] = true
			if ce := (*upstream.ConfigError)(nil); errors.As(err, &ce) {
				l.errs = append(l.errs, &PosError{File: ce.File, Line: ce.Line, Column: ce.Column, Msg: ce.Message()})
			} else {
				l.fail(v, "server %s: %v", k.Value, err)
			}
			continue
		}
		// A workflow's own servers read only the environment it lists: a
		// workflow someone else wrote cannot send AWS_SECRET_ACCESS_KEY to
		// a server of its choosing.
		for _, name := range srv.EnvRefs() {
			if !slices.Contains(wf.Env, name) {
				l.badServers[k.Value] = true
				l.fail(v, "server %s: ${%s} reads an environment variable the workflow does not list (add %s to the workflow's env: to pass it)", k.Value, name, name)
			}
		}
		if l.badServers[k.Value] {
			continue
		}
		srv.EnvAllowed = append([]string{}, wf.Env...)
		wf.Servers[k.Value], wf.Own[k.Value] = srv, srv
	}
}

// roots reads the workflow's roots: into wf.Roots and gives them to every
// server the workflow can use whose entry declares no roots of its own
// (upstream.Server.InheritRoots): the entry's own roots: win, the
// workflow's come next, the workspace is the default.
func (l *loader) roots(n *yaml.Node, wf *Workflow) {
	if n.Kind != yaml.SequenceNode {
		l.fail(n, "roots: expected a list of directories (relative to the workspace) or file:// URIs, found %s", yamlpos.KindName(n))
		return
	}
	rl, err := upstream.ParseRoots(l.file, n)
	if err != nil {
		if ce := (*upstream.ConfigError)(nil); errors.As(err, &ce) {
			l.errs = append(l.errs, &PosError{File: ce.File, Line: ce.Line, Column: ce.Column, Msg: ce.Message()})
		} else {
			l.fail(n, "roots: %v", err)
		}
		return
	}
	wf.Roots = rl.Roots
	for name, srv := range wf.Servers {
		wf.Servers[name] = srv.InheritRoots(rl)
		if _, own := wf.Own[name]; own {
			wf.Own[name] = wf.Servers[name]
		}
	}
}

// steps reads the steps into wf.Steps, leaving out those with errors, and
// returns the ids of all of them (with errors or not), for the outputs.
func (l *loader) steps(n *yaml.Node, wf *Workflow) (ids []string) {
	if n.Kind != yaml.SequenceNode {
		l.fail(n, "steps: expected a list of steps, found %s", yamlpos.KindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		l.fail(n, "steps: a workflow needs at least one step")
		return nil
	}
	// Every id first, so a reference to a later step says so.
	later := map[string]bool{}
	for _, sn := range n.Content {
		if sn.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(sn.Content); i += 2 {
				if sn.Content[i].Value == "id" {
					later[sn.Content[i+1].Value] = true
				}
			}
		}
	}
	earlier := map[string]bool{}
	for i, sn := range n.Content {
		mark := len(l.errs)
		st := l.step(sn, i, scope{wf: wf, earlier: maps.Clone(earlier), later: later})
		// A step with errors is still one the next steps may name.
		if st.ID != "" && !earlier[st.ID] {
			earlier[st.ID] = true
			ids = append(ids, st.ID)
		}
		if !l.failedSince(mark) {
			wf.Steps = append(wf.Steps, st)
		}
	}
	return ids
}

func (l *loader) step(sn *yaml.Node, i int, sc scope) *Step {
	wf := sc.wf
	st := &Step{Concurrency: 1, Retry: Retry{Attempts: 1}}
	what := fmt.Sprintf("steps[%d]", i)
	m, ok := l.fields(sn, what, stepKeys...)
	if !ok {
		return st
	}
	l.require(m, "id")
	f := m.values
	// resource: {server, uri} names the server itself.
	res, resourceServer := f["resource"], false
	if res != nil && res.Kind == yaml.MappingNode {
		for i := 0; i < len(res.Content); i += 2 {
			resourceServer = resourceServer || res.Content[i].Value == "server"
		}
	}
	if !resourceServer {
		l.require(m, "server")
	}
	if v, ok := f["id"]; ok {
		if id, ok := l.str(v, what+".id"); ok {
			st.ID = id
			switch {
			case !idPattern.MatchString(id):
				l.fail(v, "%s.id: %q must start with a letter or _ and hold only letters, digits, _ or -", what, id)
			case sc.earlier[id]:
				l.fail(v, "%s.id: duplicate step id %q", what, id)
			default:
				what = "step " + id
			}
		}
	}
	l.target(m, what)
	if v, ok := f["name"]; ok {
		st.Name, _ = l.str(v, what+".name")
	}
	_, loop := f["for_each"]
	server, serverAt := f["server"], what
	if v, ok := f["tool"]; ok {
		st.at.tool = posOf(v)
		st.Tool, _ = l.str(v, what+".tool")
	}
	if v, ok := f["prompt"]; ok {
		st.at.tool = posOf(v)
		if st.Prompt, _ = l.str(v, what+".prompt"); st.Prompt == "" && v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			l.fail(v, "%s.prompt: expected the name of a prompt, found an empty string", what)
		}
	}
	if v, ok := f["resource"]; ok {
		st.at.tool = posOf(v)
		uri := v
		if v.Kind == yaml.MappingNode {
			// resource: {server, uri}: the server given here, not twice.
			if rm, ok := l.fields(v, what+".resource", resourceKeys...); ok {
				l.require(rm, resourceKeys...)
				if s, ok := rm.values["server"]; ok {
					if server != nil {
						l.fail(s, "%s.resource.server: the step names its server twice (server: and resource.server); keep one", what)
					}
					server, serverAt = s, what+".resource"
				}
				uri = rm.values["uri"]
			} else {
				uri = nil
			}
		}
		if uri != nil {
			st.at.tool = posOf(uri)
			st.Resource, st.resourceText = l.resource(uri, what, scope{wf: wf, earlier: sc.earlier, later: sc.later, loop: loop})
		}
	}
	if v := server; v != nil {
		st.at.server = posOf(v)
		if name, ok := l.str(v, serverAt+".server"); ok {
			st.Server = name
			if _, known := wf.Servers[name]; !known && !l.badServers[name] {
				names := l.serverNames(wf)
				msg := fmt.Sprintf("%s: unknown server %q (%s)", what, name, declared(names))
				closest := didyoumean.Closest(name, names)
				if closest != "" {
					msg = fmt.Sprintf("%s: unknown server %q (did you mean %q? %s)", what, name, closest, declared(names))
				}
				l.errs = append(l.errs, &PosError{File: l.file, Line: v.Line, Column: v.Column, Msg: msg, Cause: &UnknownServerError{Server: name, Closest: closest}})
			}
		}
	}
	if v, ok := f["if"]; ok {
		st.If = l.condition(v, what+".if", sc)
	}
	if v, ok := f["for_each"]; ok {
		st.ForEach = l.forEach(v, what+".for_each", sc)
	}
	if v, ok := f["concurrency"]; ok {
		switch {
		case !loop:
			l.fail(v, "%s.concurrency: only a step with for_each runs calls concurrently", what)
		case v.Tag != "!!int" || v.Decode(&st.Concurrency) != nil || st.Concurrency < 1 || st.Concurrency > 256:
			l.fail(v, "%s.concurrency: expected a whole number from 1 to 256, found %s", what, outOfRange(v))
		}
	}
	if v, ok := f["timeout"]; ok {
		st.Timeout = l.duration(v, what+".timeout")
	}
	if v, ok := f["retry"]; ok {
		st.Retry.Backoff = time.Second
		if rm, ok := l.fields(v, what+".retry", retryKeys...); ok {
			if a, ok := rm.values["attempts"]; ok {
				if a.Tag != "!!int" || a.Decode(&st.Retry.Attempts) != nil || st.Retry.Attempts < 1 || st.Retry.Attempts > 100 {
					l.fail(a, "%s.retry.attempts: expected a whole number from 1 to 100 (the total number of attempts), found %s", what, outOfRange(a))
				}
			}
			if b, ok := rm.values["backoff"]; ok {
				st.Retry.Backoff = l.duration(b, what+".retry.backoff")
			}
		}
	}
	if v, ok := f["continue_on_error"]; ok {
		st.ContinueOnError, _ = l.boolean(v, what+".continue_on_error")
	}
	if v, ok := f["approve"]; ok {
		st.Approve, st.ApproveMessage = l.approve(v, what+".approve")
	}
	if v, ok := f["elicit"]; ok {
		switch {
		case f["resource"] != nil || f["prompt"] != nil:
			// mcpflow answers questions asked during a tools/call only.
			l.fail(v, "%s.elicit: only a tool: step answers a server's questions (elicit: is for the questions asked during a tool call)", what)
		case v.Kind == yaml.ScalarNode && (v.Value == "decline" || v.Value == "cancel"):
			st.ElicitAction = v.Value
		case v.Kind == yaml.MappingNode:
			st.ElicitAction = "accept"
			st.Elicit = l.value(v, what+".elicit", scope{wf: wf, earlier: sc.earlier, later: sc.later, loop: loop})
		default:
			l.fail(v, "%s.elicit: expected a mapping of the answer's fields (the server's question is answered with them), decline or cancel, found %s", what, yamlpos.KindName(v))
		}
	}
	if w, ok := f["with"]; ok {
		switch {
		case f["resource"] != nil:
			l.fail(w, "%s.with: a resource read takes no arguments (with: is for tool: and prompt:)", what)
		case w.Kind != yaml.MappingNode:
			l.fail(w, "%s.with: expected a mapping of arguments, found %s", what, yamlpos.KindName(w))
		default:
			st.With = l.value(w, what+".with", scope{wf: wf, earlier: sc.earlier, later: sc.later, loop: loop})
			if f["prompt"] != nil {
				l.promptArguments(w, what+".with")
			}
		}
	}
	return st
}

// target checks that a step has exactly one of tool:, resource: and
// prompt:. A step with none is told so unless an unknown key of it was
// taken for one (its error says it); a step with more than one is told
// at each after the first, in the order they are written.
func (l *loader) target(m *mapping, what string) {
	var given []string
	for _, k := range targetKeys {
		if _, ok := m.values[k]; ok {
			given = append(given, k)
		}
	}
	slices.SortFunc(given, func(a, b string) int {
		pa, pb := posOf(m.values[a]), posOf(m.values[b])
		if pa.line != pb.line {
			return pa.line - pb.line
		}
		return pa.col - pb.col
	})
	switch {
	case len(given) == 0 && !m.guessed["tool"] && !m.guessed["resource"] && !m.guessed["prompt"]:
		l.fail(m.node, "%s: missing one of \"tool\", \"resource\" or \"prompt\" (a step calls a tool, reads a resource or gets a prompt)", what)
	case len(given) > 1:
		for _, k := range given[1:] {
			l.fail(m.values[k], "%s.%s: a step has exactly one of tool:, resource: and prompt:, and this one has %s: too", what, k, given[0])
		}
	}
}

// resource reads a step's resource URI: a string, possibly with ${{ … }}
// expressions. It returns the value and the URI as written; a nil value
// when it has errors.
func (l *loader) resource(n *yaml.Node, what string, sc scope) (*Value, string) {
	s, ok := l.str(n, what+".resource")
	if !ok {
		return nil, ""
	}
	if strings.TrimSpace(s) == "" {
		l.fail(n, "%s.resource: expected a URI, found an empty string", what)
		return nil, ""
	}
	mark := len(l.errs)
	v := l.value(n, what+".resource", sc)
	if l.failedSince(mark) {
		return nil, ""
	}
	return v, s
}

// promptArguments checks a prompt step's with: holds what MCP sends as a
// prompt's arguments: values that are text (a number or a boolean is sent
// as its text), never a mapping, a list or null.
func (l *loader) promptArguments(w *yaml.Node, what string) {
	for i := 0; i+1 < len(w.Content); i += 2 {
		k, v := w.Content[i], w.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			l.fail(v, "%s: prompt argument %s: expected a string, found %s (prompt arguments are strings)", what, k.Value, yamlpos.KindName(v))
		}
	}
}

// forEach reads a step's for_each: a list, or an expression yielding one.
// It is nil when it has errors.
func (l *loader) forEach(n *yaml.Node, what string, sc scope) *Value {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		if e := l.condition(n, what, sc); e != nil {
			return &Value{tmpl: &template{parts: []part{{expr: e}}}, at: posOf(n)}
		}
		return nil
	case n.Kind == yaml.SequenceNode:
		return l.value(n, what, sc)
	}
	l.fail(n, "%s: expected a list or an expression yielding one, found %s", what, yamlpos.KindName(n))
	return nil
}

// approve reads a step's approve: true, false, or the message shown to the
// approver (which implies true).
func (l *loader) approve(n *yaml.Node, what string) (bool, string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		b, _ := l.boolean(n, what)
		return b, ""
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		l.fail(n, "%s: expected true, false or a message for the approver, found %s", what, yamlpos.KindName(n))
		return false, ""
	}
	msg := strings.TrimSpace(n.Value)
	switch {
	case msg == "":
		l.fail(n, "%s: the message for the approver is empty (write approve: true for none)", what)
		return false, ""
	case strings.Contains(msg, "${{"):
		l.fail(n, "%s: the message is shown as written; expressions are not evaluated here", what)
		return false, ""
	}
	return true, msg
}

// duration reads a positive duration; 0 when it is not one.
func (l *loader) duration(n *yaml.Node, what string) time.Duration {
	s, ok := l.str(n, what)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		l.fail(n, "%s: expected a positive duration such as 30s or 2m", what)
		return 0
	}
	return d
}

// serverNames are the names of the servers steps may use, sorted: those
// whose entries have errors too.
func (l *loader) serverNames(wf *Workflow) []string {
	names := append(wf.Servers.Names(), slices.Collect(maps.Keys(l.badServers))...)
	slices.Sort(names)
	return slices.Compact(names)
}

func declared(names []string) string {
	if len(names) == 0 {
		return "no servers: the workflow declares none, and none are configured"
	}
	return "declared servers: " + strings.Join(names, ", ")
}

// ParseInputs turns --input key=value pairs into typed values, applies
// defaults and checks required inputs. Unknown names list the declared ones.
//
// A value "@FILE" is read from FILE (a regular file of at most 1 MiB, one
// trailing newline dropped), and an input not given is read from the
// environment variable MCPFLOW_INPUT_<NAME> (NAME upper-cased, - as _) when
// set: secrets given either way never show in the process list.
func (w *Workflow) ParseInputs(pairs []string) (map[string]any, error) {
	return w.ParseInputsFrom(nil, pairs)
}

// IsInputFile reports whether an input pair's value is "@FILE": a value
// read from FILE (see ParseInputs).
func IsInputFile(value string) bool { return len(value) > 1 && value[0] == '@' }

// ReadInputFile reads an inputs file (--input-file): a YAML (or JSON)
// mapping of input names to values, typed as written.
func ReadInputFile(path string) (map[string]any, error) {
	src, err := inputfile.Read(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("%w: --input-file: %v", ErrInput, err)
	}
	root, err := yamlpos.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %s:%v", ErrInput, path, err)
	}
	var values map[string]any
	if root != nil {
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%w: %s: expected a mapping of input names to values, found %s", ErrInput, path, yamlpos.KindName(root))
		}
		if err := root.Decode(&values); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInput, path, err)
		}
	}
	return values, nil
}

// ParseInputsFrom is ParseInputs with values read from an inputs file
// (ReadInputFile) under the --input pairs: a pair wins over the file, the
// file over the environment.
func (w *Workflow) ParseInputsFrom(file map[string]any, pairs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, in := range w.Inputs {
		if v, ok := os.LookupEnv(InputEnv(in.Name)); ok {
			val, err := typedInput(in, v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s (from %s): %v", ErrInput, in.Name, InputEnv(in.Name), err)
			}
			out[in.Name] = val
		}
	}
	for _, k := range slices.Sorted(maps.Keys(file)) {
		in := w.Input(k)
		if in == nil {
			return nil, fmt.Errorf("%w: unknown input %q in the inputs file (declared: %s)", ErrInput, k, inputNames(w))
		}
		val, err := typedInput(in, file[k])
		if err != nil {
			return nil, fmt.Errorf("%w: %s (from the inputs file): %v", ErrInput, k, err)
		}
		out[k] = val
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q: expected key=value", ErrInput, p)
		}
		if IsInputFile(v) {
			b, err := inputfile.Read(v[1:], 1<<20)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrInput, k, err)
			}
			v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		}
		in := w.Input(k)
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
		val, err := typedInput(in, v)
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

// InputEnv is the environment variable that supplies an input not given
// on the command line: MCPFLOW_INPUT_ and the name upper-cased, - as _.
func InputEnv(name string) string {
	return "MCPFLOW_INPUT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ParseSecretInputs parses the --input pairs given to resume: only secret
// inputs, which the journal does not keep; every other input comes from
// the journal.
func (w *Workflow) ParseSecretInputs(pairs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q: expected key=value", ErrInput, p)
		}
		in := w.Input(k)
		switch {
		case in == nil:
			return nil, fmt.Errorf("%w: unknown input %q", ErrInput, k)
		case !in.Secret:
			return nil, fmt.Errorf("%w: input %q is not secret: resume takes it from the journal, as the run started", ErrInput, k)
		}
		val, err := typedInput(in, v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInput, k, err)
		}
		out[k] = val
	}
	return out, nil
}

// Input returns the declared input with the given name, or nil.
func (w *Workflow) Input(name string) *Input {
	for _, in := range w.Inputs {
		if in.Name == name {
			return in
		}
	}
	return nil
}

// typedInput is v typed as in's type, and one of its enum: when it has
// one. A value outside the enum is named only when the input is not
// secret.
func typedInput(in *Input, v any) (any, error) {
	val, err := convertInput(in, v)
	if err != nil {
		return nil, err
	}
	if !in.allows(val) {
		if in.Secret {
			return nil, fmt.Errorf("not one of the values it takes")
		}
		return nil, fmt.Errorf("%s is not one of %s", jsonText(val), in.enumList())
	}
	return val, nil
}

// jsonText is v as JSON, for messages.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
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
	case TypeObject, TypeArray:
		if str, ok := v.(string); ok {
			var parsed any
			if err := json.Unmarshal([]byte(str), &parsed); err != nil {
				return nil, fmt.Errorf("%q is not JSON", str)
			}
			v = parsed
		}
		v = jsonShape(v)
		if _, isMap := v.(map[string]any); isMap == (in.Type == TypeObject) {
			if _, isList := v.([]any); isList == (in.Type == TypeArray) {
				return v, nil
			}
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

// jsonShape converts YAML-decoded values (ints, map[string]interface{})
// into the shapes encoding/json produces.
func jsonShape(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// unwrapPath drops the *fs.PathError wrapper, whose path the message names
// already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// outOfRange says what a node that should be a whole number in a range
// is: "a number out of range" for a whole number, else its kind — never its
// value (see yamlpos.KindName).
func outOfRange(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		return "a number out of range"
	}
	return yamlpos.KindName(n)
}
