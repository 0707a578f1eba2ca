package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
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

	"github.com/mcpflow/mcpflow/servers"
)

// LoadFile reads and validates the workflow at path. external holds the
// servers configured outside the workflow (mcpflow.yaml, --servers); the
// workflow's own servers: entries override them by name.
func LoadFile(path string, external servers.Set) (*Workflow, error) {
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
// file, line and column, and what was expected.
func Load(file string, src []byte, external servers.Set) (wf *Workflow, err error) {
	l := &loader{file: file}
	root, err := yamlpos.Parse(src)
	if err != nil {
		if ye := (*yamlpos.Error)(nil); errors.As(err, &ye) {
			return nil, &PosError{File: file, Line: ye.Line, Column: ye.Column, Msg: ye.Msg}
		}
		return nil, &PosError{File: file, Msg: err.Error()}
	}
	if root == nil {
		return nil, &PosError{File: file, Msg: "empty workflow: expected a mapping with name and steps"}
	}
	wf = &Workflow{Path: file, Source: src, Servers: servers.Merge(external), Own: servers.Set{}}
	if err := l.workflow(root, wf); err != nil {
		return nil, err
	}
	return wf, nil
}

type loader struct{ file string }

func (l *loader) errAt(n *yaml.Node, format string, args ...any) error {
	return &PosError{File: l.file, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
}

// fields checks that n is a mapping whose keys are all in allowed, and
// returns its values by key.
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, l.errAt(n, "%s: expected a mapping, found %s", what, yamlpos.KindName(n))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(allowed, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", what, k.Value)
			if s := didyoumean.Closest(k.Value, allowed); s != "" {
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
		return "", l.errAt(n, "%s: expected a string, found %s", what, yamlpos.KindName(n))
	}
	return n.Value, nil
}

func (l *loader) boolean(n *yaml.Node, what string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, l.errAt(n, "%s: expected true or false, found %s", what, yamlpos.KindName(n))
	}
	if err := n.Decode(&b); err != nil {
		return false, l.errAt(n, "%s: %v", what, err)
	}
	return b, nil
}

// The keys each level of a workflow file accepts (also in
// schema/workflow.schema.json; a test keeps the two in step).
var (
	workflowKeys = []string{"name", "description", "inputs", "env", "servers", "steps", "outputs"}
	inputKeys    = []string{"type", "description", "required", "default", "secret"}
	stepKeys     = []string{"id", "name", "server", "tool", "with", "if", "for_each", "concurrency", "timeout", "retry", "continue_on_error", "approve"}
	retryKeys    = []string{"attempts", "backoff"}
)

var idPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func (l *loader) workflow(n *yaml.Node, wf *Workflow) error {
	f, err := l.fields(n, "workflow", workflowKeys...)
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
	if v, ok := f["env"]; ok {
		if v.Kind != yaml.SequenceNode {
			return l.errAt(v, "env: expected a list of environment variable names, found %s", yamlpos.KindName(v))
		}
		for _, e := range v.Content {
			name, err := l.str(e, "env")
			if err != nil {
				return err
			}
			wf.Env = append(wf.Env, name)
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
	if err := l.steps(v, wf); err != nil {
		return err
	}
	if v, ok := f["outputs"]; ok {
		return l.outputs(v, wf)
	}
	return nil
}

func (l *loader) outputs(n *yaml.Node, wf *Workflow) error {
	if n.Kind != yaml.MappingNode {
		return l.errAt(n, "outputs: expected a mapping of names to values, found %s", yamlpos.KindName(n))
	}
	sc := scope{wf: wf, earlier: map[string]bool{}}
	for _, st := range wf.Steps {
		sc.earlier[st.ID] = true
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		val, err := l.value(v, "output "+k.Value, sc)
		if err != nil {
			return err
		}
		wf.Outputs = append(wf.Outputs, &Output{Name: k.Value, Value: val})
	}
	return nil
}

// value compiles a YAML value holding ${{ … }} expressions and checks every
// name they read.
func (l *loader) value(n *yaml.Node, what string, sc scope) (*Value, error) {
	if n.Tag == LiteralTag {
		// Sent exactly as written: no ${{ … }} in it is evaluated.
		var raw any
		if err := n.Decode(&raw); err != nil {
			return nil, l.errAt(n, "%s: %v", what, err)
		}
		return &Value{literal: jsonShape(raw)}, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := &Value{mapping: map[string]*Value{}}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, l.errAt(k, "%s: expected a string key, found %s", what, yamlpos.KindName(k))
			}
			if _, dup := out.mapping[k.Value]; dup {
				return nil, l.errAt(k, "%s: duplicate key %q", what, k.Value)
			}
			c, err := l.value(v, what, sc)
			if err != nil {
				return nil, err
			}
			out.mapping[k.Value] = c
			out.keys = append(out.keys, k.Value)
		}
		sort.Strings(out.keys)
		return out, nil
	case yaml.SequenceNode:
		out := &Value{sequence: []*Value{}}
		for _, e := range n.Content {
			c, err := l.value(e, what, sc)
			if err != nil {
				return nil, err
			}
			out.sequence = append(out.sequence, c)
		}
		return out, nil
	}
	var raw any
	if err := n.Decode(&raw); err != nil {
		return nil, l.errAt(n, "%s: %v", what, err)
	}
	str, ok := raw.(string)
	if !ok {
		return &Value{literal: jsonShape(raw)}, nil
	}
	t, err := parseTemplate(str)
	if err != nil {
		return nil, l.errAt(n, "%s: %v", what, err)
	}
	if t == nil {
		return &Value{literal: str}, nil
	}
	for _, e := range t.exprs() {
		// Runtime errors name the expression's own line and column.
		e.file, e.line, e.col = l.file, n.Line, n.Column
		if err := sc.check(e); err != nil {
			return nil, l.errAt(n, "%s: %v", what, err)
		}
	}
	return &Value{tmpl: t}, nil
}

// condition compiles an if or for_each expression: either ${{ … }} or a
// bare CEL expression.
func (l *loader) condition(n *yaml.Node, what string, sc scope) (*Expression, error) {
	src, err := l.str(n, what)
	if err != nil {
		return nil, err
	}
	src = strings.TrimSpace(src)
	if strings.HasPrefix(src, "${{") && strings.HasSuffix(src, "}}") && closing(src[3:]) == len(src)-5 {
		src = strings.TrimSpace(src[3 : len(src)-2])
	}
	e, err := compileExpr(src)
	if err != nil {
		return nil, l.errAt(n, "%s: %v", what, err)
	}
	e.file, e.line, e.col = l.file, n.Line, n.Column
	if err := sc.check(e); err != nil {
		return nil, l.errAt(n, "%s: %v", what, err)
	}
	return e, nil
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

// check checks every name an expression reads against the scope.
func (sc scope) check(e *Expression) error {
	wf := sc.wf
	for _, name := range e.refs.inputs {
		if wf.Input(name) == nil {
			names := make([]string, len(wf.Inputs))
			for i, in := range wf.Inputs {
				names[i] = in.Name
			}
			if s := didyoumean.Closest(name, names); s != "" {
				return fmt.Errorf("expression %q: unknown input %q (did you mean %q?)", e.src, name, s)
			}
			return fmt.Errorf("expression %q: unknown input %q (declared: %s)", e.src, name, inputNames(wf))
		}
	}
	for _, name := range e.refs.env {
		if !slices.Contains(wf.Env, name) {
			return fmt.Errorf("expression %q: env.%s is not listed in the workflow's env: (add it there to read it)", e.src, name)
		}
	}
	for _, name := range e.refs.steps {
		if sc.earlier[name] {
			continue
		}
		if sc.later[name] {
			return fmt.Errorf("expression %q: step %q does not run before this one (only earlier steps can be referenced)", e.src, name)
		}
		ids := slices.Sorted(maps.Keys(sc.earlier))
		if s := didyoumean.Closest(name, ids); s != "" {
			return fmt.Errorf("expression %q: unknown step %q (did you mean %q?)", e.src, name, s)
		}
		return fmt.Errorf("expression %q: unknown step %q", e.src, name)
	}
	if e.refs.item && !sc.loop {
		return fmt.Errorf("expression %q: item and index exist only in the with: of a step that has for_each", e.src)
	}
	return nil
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

func (l *loader) inputs(n *yaml.Node, wf *Workflow) error {
	if n.Kind != yaml.MappingNode {
		return l.errAt(n, "inputs: expected a mapping of input names, found %s", yamlpos.KindName(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		what := "input " + k.Value
		if !idPattern.MatchString(k.Value) {
			return l.errAt(k, "%s: name must be letters, digits, _ or -", what)
		}
		f, err := l.fields(v, what, inputKeys...)
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
			case TypeString, TypeNumber, TypeBoolean, TypeObject, TypeArray:
				in.Type = InputType(s)
			default:
				return l.errAt(t, "%s.type: unknown type %q (expected string, number, boolean, object or array)", what, s)
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
		return l.errAt(n, "servers: expected a mapping of server names, found %s", yamlpos.KindName(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		srv, err := servers.ParseEntry(l.file, k.Value, v)
		if ce := (*servers.ConfigError)(nil); errors.As(err, &ce) {
			return &PosError{File: ce.File, Line: ce.Line, Column: ce.Column, Msg: ce.Message()}
		}
		if err != nil {
			return l.errAt(v, "server %s: %v", k.Value, err)
		}
		// A workflow's own servers read only the environment it lists: a
		// workflow someone else wrote cannot send AWS_SECRET_ACCESS_KEY to
		// a server of its choosing.
		for _, name := range srv.EnvRefs() {
			if !slices.Contains(wf.Env, name) {
				return l.errAt(v, "server %s: ${%s} reads an environment variable the workflow does not list (add %s to the workflow's env: to pass it)", k.Value, name, name)
			}
		}
		srv.EnvAllowed = append([]string{}, wf.Env...)
		wf.Servers[k.Value], wf.Own[k.Value] = srv, srv
	}
	return nil
}

func (l *loader) steps(n *yaml.Node, wf *Workflow) error {
	if n.Kind != yaml.SequenceNode {
		return l.errAt(n, "steps: expected a list of steps, found %s", yamlpos.KindName(n))
	}
	if len(n.Content) == 0 {
		return l.errAt(n, "steps: a workflow needs at least one step")
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
		st, err := l.step(sn, i, scope{wf: wf, earlier: maps.Clone(earlier), later: later})
		if err != nil {
			return err
		}
		earlier[st.ID] = true
		wf.Steps = append(wf.Steps, st)
	}
	return nil
}

func (l *loader) step(sn *yaml.Node, i int, sc scope) (*Step, error) {
	wf := sc.wf
	what := fmt.Sprintf("steps[%d]", i)
	f, err := l.fields(sn, what, stepKeys...)
	if err != nil {
		return nil, err
	}
	st := &Step{Concurrency: 1, Retry: Retry{Attempts: 1}}
	for _, req := range []string{"id", "server", "tool"} {
		if _, ok := f[req]; !ok {
			return nil, l.errAt(sn, "%s: missing required key %q", what, req)
		}
	}
	if st.ID, err = l.str(f["id"], what+".id"); err != nil {
		return nil, err
	}
	if !idPattern.MatchString(st.ID) {
		return nil, l.errAt(f["id"], "%s.id: %q must start with a letter or _ and hold only letters, digits, _ or -", what, st.ID)
	}
	if sc.earlier[st.ID] {
		return nil, l.errAt(f["id"], "%s.id: duplicate step id %q", what, st.ID)
	}
	what = "step " + st.ID
	if v, ok := f["name"]; ok {
		if st.Name, err = l.str(v, what+".name"); err != nil {
			return nil, err
		}
	}
	if st.Server, err = l.str(f["server"], what+".server"); err != nil {
		return nil, err
	}
	if _, ok := wf.Servers[st.Server]; !ok {
		msg := fmt.Sprintf("%s: unknown server %q (%s)", what, st.Server, serverNames(wf.Servers))
		if s := didyoumean.Closest(st.Server, wf.Servers.Names()); s != "" {
			msg = fmt.Sprintf("%s: unknown server %q (did you mean %q? %s)", what, st.Server, s, serverNames(wf.Servers))
		}
		n := f["server"]
		return nil, &UnknownServerError{PosError: PosError{File: l.file, Line: n.Line, Column: n.Column, Msg: msg}, Server: st.Server}
	}
	if st.Tool, err = l.str(f["tool"], what+".tool"); err != nil {
		return nil, err
	}
	if v, ok := f["if"]; ok {
		if st.If, err = l.condition(v, what+".if", sc); err != nil {
			return nil, err
		}
	}
	if v, ok := f["for_each"]; ok {
		if v.Kind == yaml.ScalarNode && v.Tag != "!!str" {
			return nil, l.errAt(v, "%s.for_each: expected a list or an expression yielding one, found %s", what, yamlpos.KindName(v))
		}
		if v.Kind == yaml.ScalarNode {
			e, err := l.condition(v, what+".for_each", sc)
			if err != nil {
				return nil, err
			}
			st.ForEach = &Value{tmpl: &template{parts: []part{{expr: e}}}}
		} else if v.Kind == yaml.SequenceNode {
			if st.ForEach, err = l.value(v, what+".for_each", sc); err != nil {
				return nil, err
			}
		} else {
			return nil, l.errAt(v, "%s.for_each: expected a list or an expression yielding one, found %s", what, yamlpos.KindName(v))
		}
	}
	if v, ok := f["concurrency"]; ok {
		if st.ForEach == nil {
			return nil, l.errAt(v, "%s.concurrency: only a step with for_each runs calls concurrently", what)
		}
		if v.Tag != "!!int" || v.Decode(&st.Concurrency) != nil || st.Concurrency < 1 || st.Concurrency > 256 {
			return nil, l.errAt(v, "%s.concurrency: expected a whole number from 1 to 256, found %s", what, outOfRange(v))
		}
	}
	if v, ok := f["timeout"]; ok {
		if st.Timeout, err = l.duration(v, what+".timeout"); err != nil {
			return nil, err
		}
	}
	if v, ok := f["retry"]; ok {
		rf, err := l.fields(v, what+".retry", retryKeys...)
		if err != nil {
			return nil, err
		}
		if a, ok := rf["attempts"]; ok {
			if a.Tag != "!!int" || a.Decode(&st.Retry.Attempts) != nil || st.Retry.Attempts < 1 || st.Retry.Attempts > 100 {
				return nil, l.errAt(a, "%s.retry.attempts: expected a whole number from 1 to 100 (the total number of attempts), found %s", what, outOfRange(a))
			}
		}
		st.Retry.Backoff = time.Second
		if b, ok := rf["backoff"]; ok {
			if st.Retry.Backoff, err = l.duration(b, what+".retry.backoff"); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := f["continue_on_error"]; ok {
		if st.ContinueOnError, err = l.boolean(v, what+".continue_on_error"); err != nil {
			return nil, err
		}
	}
	if v, ok := f["approve"]; ok {
		if st.Approve, st.ApproveMessage, err = l.approve(v, what+".approve"); err != nil {
			return nil, err
		}
	}
	if w, ok := f["with"]; ok {
		if w.Kind != yaml.MappingNode {
			return nil, l.errAt(w, "%s.with: expected a mapping of arguments, found %s", what, yamlpos.KindName(w))
		}
		if st.With, err = l.value(w, what+".with", scope{wf: wf, earlier: sc.earlier, later: sc.later, loop: st.ForEach != nil}); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// approve reads a step's approve: true, false, or the message shown to the
// approver (which implies true).
func (l *loader) approve(n *yaml.Node, what string) (bool, string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		b, err := l.boolean(n, what)
		return b, "", err
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return false, "", l.errAt(n, "%s: expected true, false or a message for the approver, found %s", what, yamlpos.KindName(n))
	}
	msg := strings.TrimSpace(n.Value)
	switch {
	case msg == "":
		return false, "", l.errAt(n, "%s: the message for the approver is empty (write approve: true for none)", what)
	case strings.Contains(msg, "${{"):
		return false, "", l.errAt(n, "%s: the message is shown as written; expressions are not evaluated here", what)
	}
	return true, msg, nil
}

func (l *loader) duration(n *yaml.Node, what string) (time.Duration, error) {
	s, err := l.str(n, what)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, l.errAt(n, "%s: expected a positive duration such as 30s or 2m", what)
	}
	return d, nil
}

func serverNames(s servers.Set) string {
	if len(s) == 0 {
		return "no servers: the workflow declares none, and none are configured"
	}
	return "declared servers: " + strings.Join(s.Names(), ", ")
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
			val, err := convertInput(in, v)
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
		val, err := convertInput(in, file[k])
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
		val, err := convertInput(in, v)
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
