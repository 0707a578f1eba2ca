package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
)

// Expressions are CEL (cel.dev): typed, side-effect free, no unbounded
// loops. Each evaluation is bounded by a cost limit and a time limit.
const (
	exprCostLimit = 1_000_000
	exprTimeLimit = time.Second
)

var (
	celEnvOnce sync.Once
	celEnv     *cel.Env
	celEnvErr  error
)

// exprEnv declares what expressions can see: inputs, steps, item and index
// (inside for_each) and env (only the names the workflow lists).
func exprEnv() (*cel.Env, error) {
	celEnvOnce.Do(func() {
		celEnv, celEnvErr = cel.NewEnv(
			cel.Variable("inputs", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("steps", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("item", cel.DynType),
			cel.Variable("index", cel.IntType),
			cel.Variable("env", cel.MapType(cel.StringType, cel.StringType)),
			ext.Strings(),
			ext.Lists(),
			ext.Math(),
			ext.Encoders(),
		)
	})
	return celEnv, celEnvErr
}

// expression is one compiled CEL expression.
type expression struct {
	src  string
	prog cel.Program
	refs refs
	// file, line and col locate the string holding the expression.
	file      string
	line, col int
}

// where is the expression's position for error messages.
func (e *expression) where() string {
	if e.line == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d: ", e.file, e.line, e.col)
}

// refs are the names an expression reads, for validation.
type refs struct {
	inputs, steps, env []string
	item               bool
}

func compileExpr(src string) (*expression, error) {
	env, err := exprEnv()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	checked, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		e := iss.Errors()[0]
		msg := e.Message
		if i := strings.Index(msg, " expecting {"); i > 0 {
			msg = msg[:i] // the list of every token CEL would accept helps nobody
		}
		return nil, fmt.Errorf("expression %q: column %d: %s", src, e.Location.Column()+1, msg)
	}
	prog, err := env.Program(checked, cel.CostLimit(exprCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("expression %q: %v", src, err)
	}
	return &expression{src: src, prog: prog, refs: collectRefs(checked)}, nil
}

// collectRefs finds inputs.X, steps.X (or steps['X']), env.X and item.
func collectRefs(a *cel.Ast) refs {
	var r refs
	add := func(root, name string) {
		switch root {
		case "inputs":
			r.inputs = append(r.inputs, name)
		case "steps":
			r.steps = append(r.steps, name)
		case "env":
			r.env = append(r.env, name)
		}
	}
	ast.PreOrderVisit(ast.NavigateAST(a.NativeRep()), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.IdentKind:
			if n := e.AsIdent(); n == "item" || n == "index" {
				r.item = true
			}
		case ast.SelectKind:
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == ast.IdentKind {
				add(op.AsIdent(), sel.FieldName())
			}
		case ast.CallKind:
			call := e.AsCall()
			if call.FunctionName() == "_[_]" && len(call.Args()) == 2 {
				op, key := call.Args()[0], call.Args()[1]
				if op.Kind() == ast.IdentKind && key.Kind() == ast.LiteralKind {
					if s, ok := key.AsLiteral().Value().(string); ok {
						add(op.AsIdent(), s)
					}
				}
			}
		}
	}))
	return r
}

// vars are the values an evaluation sees.
type vars struct {
	inputs map[string]any
	steps  map[string]any
	env    map[string]string
	item   any
	index  int
	inLoop bool
}

func (e *expression) eval(ctx context.Context, v vars) (any, error) {
	act := map[string]any{
		"inputs": celValue(v.inputs),
		"steps":  celValue(v.steps),
		"env":    v.env,
	}
	if v.inLoop {
		act["item"], act["index"] = celValue(v.item), int64(v.index)
	}
	ctx, cancel := context.WithTimeout(ctx, exprTimeLimit)
	defer cancel()
	out, _, err := e.prog.ContextEval(ctx, act)
	if err != nil {
		return nil, fmt.Errorf("%sexpression %q: %v", e.where(), e.src, err)
	}
	return nativeValue(out)
}

// celValue makes JSON values comfortable in CEL: whole numbers become ints,
// so steps.a.structuredContent.count + 1 works.
func celValue(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = celValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = celValue(e)
		}
		return out
	}
	return v
}

// nativeValue turns a CEL value into plain JSON-shaped Go values.
func nativeValue(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, nil
	case types.BoolType, types.StringType, types.IntType, types.DoubleType:
		return v.Value(), nil
	case types.UintType:
		return v.Value(), nil
	case types.BytesType:
		return base64.StdEncoding.EncodeToString(v.Value().([]byte)), nil
	case types.DurationType, types.TimestampType:
		return fmt.Sprint(v.Value()), nil
	}
	if l, ok := v.(traits.Lister); ok {
		var out []any
		for it := l.Iterator(); it.HasNext() == types.True; {
			e, err := nativeValue(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.Value().(string)
			if !ok {
				ks = fmt.Sprint(k.Value())
			}
			e, err := nativeValue(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[ks] = e
		}
		return out, nil
	}
	if err, ok := v.(*types.Err); ok {
		return nil, err
	}
	return nil, fmt.Errorf("value of type %s cannot be passed to a tool", v.Type().TypeName())
}

// A template is a string holding ${{ … }} expressions. A string that is
// exactly one expression keeps the expression's type; otherwise the parts
// are interpolated as text.
type template struct {
	parts []part
}

type part struct {
	literal string
	expr    *expression
}

// parseTemplate splits s into literals and compiled expressions. It returns
// nil, nil when s holds no expression.
func parseTemplate(s string) (*template, error) {
	if !strings.Contains(s, "${{") {
		return nil, nil
	}
	t := &template{}
	rest := s
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, part{literal: rest})
			}
			return t, nil
		}
		if i > 0 {
			t.parts = append(t.parts, part{literal: rest[:i]})
		}
		body := rest[i+3:]
		j := closing(body)
		if j < 0 {
			return nil, fmt.Errorf("unclosed ${{ … }}: expected }} after %q", strings.TrimSpace(body))
		}
		e, err := compileExpr(strings.TrimSpace(body[:j]))
		if err != nil {
			return nil, err
		}
		t.parts = append(t.parts, part{expr: e})
		rest = body[j+2:]
	}
}

// closing finds the }} that ends an expression, skipping string literals
// and nested braces.
func closing(s string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			return i
		}
	}
	return -1
}

func (t *template) exprs() []*expression {
	var out []*expression
	for _, p := range t.parts {
		if p.expr != nil {
			out = append(out, p.expr)
		}
	}
	return out
}

func (t *template) eval(ctx context.Context, v vars) (any, error) {
	if len(t.parts) == 1 && t.parts[0].expr != nil {
		return t.parts[0].expr.eval(ctx, v)
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.literal)
			continue
		}
		val, err := p.expr.eval(ctx, v)
		if err != nil {
			return nil, err
		}
		b.WriteString(text(val))
	}
	return b.String(), nil
}

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool, int, int64, uint64:
		return fmt.Sprint(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// value is a step argument: a literal, or a template to evaluate, possibly
// nested in maps and lists.
type value struct {
	literal  any
	tmpl     *template
	mapping  map[string]*value
	keys     []string // mapping keys in a stable order
	sequence []*value
}

func (v *value) eval(ctx context.Context, vs vars) (any, error) {
	switch {
	case v.tmpl != nil:
		return v.tmpl.eval(ctx, vs)
	case v.mapping != nil:
		out := make(map[string]any, len(v.mapping))
		for _, k := range v.keys {
			e, err := v.mapping[k].eval(ctx, vs)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case v.sequence != nil:
		out := make([]any, len(v.sequence))
		for i, e := range v.sequence {
			x, err := e.eval(ctx, vs)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return v.literal, nil
}

// exprs lists every expression inside v.
func (v *value) exprs() []*expression {
	var out []*expression
	if v.tmpl != nil {
		out = append(out, v.tmpl.exprs()...)
	}
	for _, k := range v.keys {
		out = append(out, v.mapping[k].exprs()...)
	}
	for _, e := range v.sequence {
		out = append(out, e.exprs()...)
	}
	return out
}
