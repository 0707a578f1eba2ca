package yamlpos

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// flat renders a node tree as compact text, so a test can compare what the
// callers see.
func flat(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		var parts []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			parts = append(parts, n.Content[i].Value+": "+flat(n.Content[i+1]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case yaml.SequenceNode:
		var parts []string
		for _, c := range n.Content {
			parts = append(parts, flat(c))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case yaml.AliasNode:
		return "ALIAS"
	}
	return n.Value
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"plain", "a: 1\nb: [x, y]\n", "{a: 1, b: [x, y]}"},
		{"alias of a mapping", "r: &r {attempts: 3}\ns: {retry: *r}\n", "{r: {attempts: 3}, s: {retry: {attempts: 3}}}"},
		{"alias of a scalar", "t: &t true\nu: *t\n", "{t: true, u: true}"},
		{"alias in a list", "x: &x 1\nl: [*x, *x]\n", "{x: 1, l: [1, 1]}"},
		{"merge key", "base: &b {a: 1, b: 2}\nm: {<<: *b, b: 3}\n", "{base: {a: 1, b: 2}, m: {b: 3, a: 1}}"},
		{"merge list, first wins", "p: &p {a: 1}\nq: &q {a: 2, c: 3}\nm: {<<: [*p, *q]}\n", "{p: {a: 1}, q: {a: 2, c: 3}, m: {a: 1, c: 3}}"},
		{"an empty second document", "a: 1\n---\n", "{a: 1}"},
		{"nested alias", "a: &a {k: v}\nb: &b {in: *a}\nc: *b\n", "{a: {k: v}, b: {in: {k: v}}, c: {in: {k: v}}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := Parse([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := flat(root); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "\n\n"} {
		root, err := Parse([]byte(src))
		if root != nil || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want nil, nil", src, root, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g"} {
		bomb += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	for _, tc := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"syntax", "a: [1, 2\n", 1, "did not find expected ',' or ']'"},
		{"tab indent", "a:\n\tb: 1\n", 2, "found character that cannot start any token"},
		{"unknown anchor", "a: *nope\n", 0, "an alias names an anchor that is not defined before it"},
		{"alias bomb", bomb, 0, "expands to more than 100000 nodes"},
		{"merge of a scalar", "m: {<<: 1}\n", 1, "<<: expected a mapping or a list of mappings to merge"},
		{"second document", "name: x\n---\nname: y\n", 3, "a second YAML document"},
		{"not UTF-8", "name: ok\nsteps: \xff\n", 2, "byte 0xff is not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %v (%T), want *Error", err, err)
			}
			if !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("message %q does not contain %q", e.Msg, tc.msg)
			}
			if tc.line != 0 && e.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", e.Line, tc.line, e)
			}
		})
	}
}

// FuzzParse: Parse never panics, returns only *Error, and leaves no alias
// in the tree it returns.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a: &a 1\nb: *a\n", "m: {<<: [&x {a: 1}, {b: 2}]}", "- [", "a: &a [*a]", "x: !!binary aGk="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		root, err := Parse(src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			return
		}
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.AliasNode {
				t.Fatalf("alias left in the tree of %q", src)
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		if root != nil {
			walk(root)
		}
	})
}
