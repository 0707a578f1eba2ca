package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A template is a string that may hold ${{ … }} references.
type template []segment

type segment struct {
	literal string
	ref     []string // nil for a literal
	expr    string   // the reference as written
}

var refPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*|\[[0-9]+\])*$`)

func parseTemplate(s string) (template, error) {
	var t template
	for {
		i := strings.Index(s, "${{")
		if i < 0 {
			if s != "" {
				t = append(t, segment{literal: s})
			}
			return t, nil
		}
		if i > 0 {
			t = append(t, segment{literal: s[:i]})
		}
		rest := s[i+3:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed ${{ in %q: expected }}", s)
		}
		expr := strings.TrimSpace(rest[:j])
		if !refPattern.MatchString(expr) {
			return nil, fmt.Errorf("expression %q: expected a reference such as inputs.NAME or steps.ID.structuredContent.FIELD", expr)
		}
		t = append(t, segment{ref: splitRef(expr), expr: expr})
		s = rest[j+2:]
	}
}

// splitRef splits a.b[0].c into a, b, 0, c.
func splitRef(expr string) []string {
	expr = strings.ReplaceAll(expr, "[", ".")
	expr = strings.ReplaceAll(expr, "]", "")
	return strings.Split(expr, ".")
}

// checkTemplate checks that references name declared inputs and earlier steps.
func checkTemplate(s string, wf *Workflow, earlier map[string]bool) error {
	t, err := parseTemplate(s)
	if err != nil {
		return err
	}
	for _, seg := range t {
		if seg.ref == nil {
			continue
		}
		switch seg.ref[0] {
		case "inputs":
			if len(seg.ref) < 2 || wf.input(seg.ref[1]) == nil {
				return fmt.Errorf("expression %q: unknown input (declared: %s)", seg.expr, inputNames(wf))
			}
		case "steps":
			if len(seg.ref) < 2 {
				return fmt.Errorf("expression %q: name a step: steps.ID", seg.expr)
			}
			if earlier[seg.ref[1]] {
				continue
			}
			if wf.Step(seg.ref[1]) != nil {
				return fmt.Errorf("expression %q: step %q does not run before this one (only earlier steps can be referenced)", seg.expr, seg.ref[1])
			}
			return fmt.Errorf("expression %q: unknown step %q", seg.expr, seg.ref[1])
		default:
			return fmt.Errorf("expression %q: unknown name %q (expected inputs or steps)", seg.expr, seg.ref[0])
		}
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

// scope is what expressions can see.
type scope map[string]any

// eval evaluates a template: a value that is exactly one reference keeps the
// referenced value's type; anything else is interpolated as text.
func (t template) eval(sc scope) (any, error) {
	if len(t) == 1 && t[0].ref != nil {
		return lookup(sc, t[0])
	}
	var b strings.Builder
	for _, seg := range t {
		if seg.ref == nil {
			b.WriteString(seg.literal)
			continue
		}
		v, err := lookup(sc, seg)
		if err != nil {
			return nil, err
		}
		b.WriteString(text(v))
	}
	return b.String(), nil
}

func lookup(sc scope, seg segment) (any, error) {
	var cur any = map[string]any(sc)
	for i, name := range seg.ref {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[name]
			if !ok {
				return nil, fmt.Errorf("expression %q: %s has no field %q", seg.expr, strings.Join(seg.ref[:i], "."), name)
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(name)
			if err != nil || n < 0 || n >= len(c) {
				return nil, fmt.Errorf("expression %q: index %s out of range (length %d)", seg.expr, name, len(c))
			}
			cur = c[n]
		default:
			return nil, fmt.Errorf("expression %q: %s is not an object", seg.expr, strings.Join(seg.ref[:i], "."))
		}
	}
	return cur, nil
}

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool, int, int64:
		return fmt.Sprint(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// evalValue evaluates every string inside v (maps and lists included).
func evalValue(v any, sc scope) (any, error) {
	switch x := v.(type) {
	case string:
		t, err := parseTemplate(x)
		if err != nil {
			return nil, err
		}
		if len(t) == 0 {
			return x, nil
		}
		return t.eval(sc)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ev, err := evalValue(e, sc)
			if err != nil {
				return nil, err
			}
			out[k] = ev
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			ev, err := evalValue(e, sc)
			if err != nil {
				return nil, err
			}
			out[i] = ev
		}
		return out, nil
	}
	return v, nil
}
