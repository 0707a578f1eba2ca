package workflow

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
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
		if celEnvErr == nil {
			celEnv, celEnvErr = celEnv.Extend(cel.CustomTypeAdapter(jsonAdapter{celEnv.CELTypeAdapter()}))
		}
	})
	return celEnv, celEnvErr
}

// jsonAdapter hands JSON-shaped Go values to CEL as an expression reads
// them, whole numbers as ints (so steps.a.structuredContent.count + 1
// works): nothing an expression does not read is converted or copied, so
// an expression costs the same whatever the size of the results it could
// reach.
type jsonAdapter struct{ base types.Adapter }

func (a jsonAdapter) NativeToValue(v any) ref.Val {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return types.Int(int64(x))
		}
		return types.Double(x)
	case *Lazy:
		return a.NativeToValue(x.Value())
	case map[string]any:
		return types.NewStringInterfaceMap(a, x)
	case []any:
		return types.NewDynamicList(a, x)
	case ref.Val, map[string]string, []string, []byte:
		return a.base.NativeToValue(v) // CEL's own, or nothing in them to convert
	}
	// Other Go containers ([]float64, map[string][]any...) are given the
	// shape JSON gives them, as the engine gives its inputs: whole numbers
	// in them are then ints however an expression reaches them, by index
	// or by iteration.
	if k := reflect.ValueOf(v).Kind(); k == reflect.Map || k == reflect.Slice || k == reflect.Array {
		if b, err := json.Marshal(v); err == nil {
			var shaped any
			if json.Unmarshal(b, &shaped) == nil {
				return a.NativeToValue(shaped)
			}
		}
	}
	return a.base.NativeToValue(v)
}

// Lazy is a value of the steps' that expressions compute only when one
// reads it, and then once: a step's content list, say, which most
// workflows never read but which would cost a JSON decode at every step.
// It is safe for concurrent use (for_each items evaluate side by side).
type Lazy struct {
	once sync.Once
	fn   func() any
	v    any
}

// NewLazy is the value fn returns, computed when first read.
func NewLazy(fn func() any) *Lazy { return &Lazy{fn: fn} }

// Value computes the value, the first time, and returns it.
func (l *Lazy) Value() any {
	l.once.Do(func() { l.v, l.fn = l.fn(), nil })
	return l.v
}

// expression is one compiled CEL expression.
type Expression struct {
	src  string
	prog cel.Program
	refs refs
	// file, line and col locate the string holding the expression.
	file      string
	line, col int
}

// where is the expression's position for error messages.
func (e *Expression) where() string {
	if e.line == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d: ", e.file, e.line, e.col)
}

// refs are the names an expression reads, for validation.
type refs struct {
	inputs, steps, env []string
	item               bool
	// allSteps: steps is read other than by a literal name (size(steps),
	// steps[x]), so an evaluation needs every step.
	allSteps bool
}

func compileExpr(src string) (*Expression, error) {
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
	return &Expression{src: src, prog: prog, refs: collectRefs(checked)}, nil
}

// collectRefs finds inputs.X, steps.X (or steps['X']), env.X and item.
func collectRefs(a *cel.Ast) refs {
	var r refs
	stepsIdents, stepsNamed := 0, 0
	add := func(root, name string) {
		switch root {
		case "inputs":
			r.inputs = append(r.inputs, name)
		case "steps":
			r.steps = append(r.steps, name)
			stepsNamed++
		case "env":
			r.env = append(r.env, name)
		}
	}
	ast.PreOrderVisit(ast.NavigateAST(a.NativeRep()), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.IdentKind:
			switch e.AsIdent() {
			case "item", "index":
				r.item = true
			case "steps":
				stepsIdents++
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
	r.allSteps = stepsIdents > stepsNamed
	return r
}

// Vars are the values an evaluation sees. Eval reads them, and neither
// changes nor keeps them.
type Vars struct {
	Inputs map[string]any
	Steps  map[string]any
	Env    map[string]string
	// Item and Index are the for_each item and its position; they exist
	// only when InLoop.
	Item   any
	Index  int
	InLoop bool
}

func (e *Expression) Eval(ctx context.Context, v Vars) (any, error) {
	act := map[string]any{
		"inputs": v.Inputs,
		"steps":  e.stepsFor(v.Steps),
		"env":    v.Env,
	}
	if v.InLoop {
		act["item"], act["index"] = v.Item, int64(v.Index)
	}
	ctx, cancel := context.WithTimeout(ctx, exprTimeLimit)
	defer cancel()
	out, _, err := e.prog.ContextEval(ctx, act)
	if err != nil {
		return nil, fmt.Errorf("%sexpression %q: %v", e.where(), e.src, err)
	}
	return nativeValue(out)
}

// stepsFor is what e sees of the steps: the ones it names, unless it
// reads steps other than by a literal name.
func (e *Expression) stepsFor(steps map[string]any) map[string]any {
	if e.refs.allSteps {
		return steps
	}
	out := make(map[string]any, len(e.refs.steps))
	for _, name := range e.refs.steps {
		if v, ok := steps[name]; ok {
			out[name] = v
		}
	}
	return out
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
	expr    *Expression
}

// parseTemplate splits s into literals and compiled expressions. It returns
// nil and no error when s holds no expression. Its errors are those of every
// expression that does not compile, in order; an unclosed ${{ is the last.
func parseTemplate(s string) (*template, []error) {
	if !strings.Contains(s, "${{") {
		return nil, nil
	}
	t := &template{}
	var errs []error
	rest := s
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, part{literal: rest})
			}
			if errs != nil {
				return nil, errs
			}
			return t, nil
		}
		if i > 0 {
			t.parts = append(t.parts, part{literal: rest[:i]})
		}
		body := rest[i+3:]
		j := closing(body)
		if j < 0 {
			return nil, append(errs, fmt.Errorf("unclosed ${{ … }}: expected }} after %q", strings.TrimSpace(body)))
		}
		if e, err := compileExpr(strings.TrimSpace(body[:j])); err != nil {
			errs = append(errs, err)
		} else {
			t.parts = append(t.parts, part{expr: e})
		}
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

func (t *template) exprs() []*Expression {
	var out []*Expression
	for _, p := range t.parts {
		if p.expr != nil {
			out = append(out, p.expr)
		}
	}
	return out
}

func (t *template) Eval(ctx context.Context, v Vars) (any, error) {
	if len(t.parts) == 1 && t.parts[0].expr != nil {
		return t.parts[0].expr.Eval(ctx, v)
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.literal)
			continue
		}
		val, err := p.expr.Eval(ctx, v)
		if err != nil {
			return nil, err
		}
		b.WriteString(Text(val))
	}
	return b.String(), nil
}

func Text(v any) string {
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
type Value struct {
	literal  any
	tmpl     *template
	mapping  map[string]*Value
	keys     []string // mapping keys in a stable order
	sequence []*Value
	// at is where the value is written (zero for one built in Go, such
	// as Literal's): an error found after Load points there.
	at position
}

func (v *Value) Eval(ctx context.Context, vs Vars) (any, error) {
	switch {
	case v.tmpl != nil:
		return v.tmpl.Eval(ctx, vs)
	case v.mapping != nil:
		out := make(map[string]any, len(v.mapping))
		for _, k := range v.keys {
			e, err := v.mapping[k].Eval(ctx, vs)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case v.sequence != nil:
		out := make([]any, len(v.sequence))
		for i, e := range v.sequence {
			x, err := e.Eval(ctx, vs)
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
func (v *Value) exprs() []*Expression {
	var out []*Expression
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
