// Package yamlpos is mcpflow's one positioned YAML reader, used by
// workflows and by server configuration alike: [Parse] returns the root node
// of a file with every alias replaced by the node it names and every merge
// key (<<) applied, so that callers read plain mappings, lists and scalars
// with their lines and columns, and a construct means the same thing in
// every file mcpflow reads.
//
// # Caveats
//
//   - A file holds one document: a second one (after ---) is an error, as
//     is text that is not UTF-8 (with its line and column).
//   - An aliased node keeps the position of its anchor: an error inside it
//     names the place where the anchor was defined.
//   - Expanding aliases is bounded ([MaxNodes]): a file that expands to more
//     nodes (an "alias bomb") is refused with an error, never read.
package yamlpos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxNodes bounds the nodes a file may expand to once its aliases are
// followed.
const MaxNodes = 100_000

// Error is a file that is not YAML mcpflow reads: a syntax error, an
// alias bomb, a bad merge key. Line is 0 when the parser gave no position.
type Error struct {
	Line, Column int
	Msg          string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

// yamlLine reads the line out of yaml.v3's messages; compiled when first
// needed, not at every start of the binary.
var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// withoutText rewords the one message of yaml.v3 that quotes the
// document's text (an alias's name), so that no error shows what a file
// read by mistake holds.
func withoutText(msg string) string {
	if strings.HasPrefix(msg, "unknown anchor ") {
		return "an alias names an anchor that is not defined before it"
	}
	return msg
}

// Parse reads the first document of src and returns its root node, with
// aliases and merge keys resolved (see the package comment). An empty file,
// or one holding only comments, returns nil and no error. Every error is an
// *Error; no panic of the YAML parser escapes.
func Parse(src []byte) (root *yaml.Node, err error) {
	defer func() {
		// yaml.v3 can panic on some malformed inputs.
		if r := recover(); r != nil {
			root, err = nil, &Error{Msg: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	if !utf8.Valid(src) {
		off := 0
		for off < len(src) {
			r, n := utf8.DecodeRune(src[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		line := bytes.Count(src[:off], []byte("\n")) + 1
		col := utf8.RuneCount(src[bytes.LastIndexByte(src[:off], '\n')+1:off]) + 1
		return nil, &Error{Line: line, Column: col, Msg: fmt.Sprintf("byte 0x%02x is not UTF-8 (expected UTF-8 text)", src[off])}
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &Error{Line: line, Column: 1, Msg: withoutText(m[2])}
		}
		return nil, &Error{Msg: withoutText(strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		if len(second.Content) > 0 && !(second.Content[0].Kind == yaml.ScalarNode && second.Content[0].Tag == "!!null") {
			n := second.Content[0]
			return nil, &Error{Line: n.Line, Column: n.Column, Msg: "a second YAML document (after ---): a file holds one"}
		}
	} else if !errors.Is(err, io.EOF) {
		if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &Error{Line: line, Column: 1, Msg: m[2]}
		}
		return nil, &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	x := &expander{}
	root, err = x.expand(doc.Content[0], 0)
	if err != nil {
		return nil, err
	}
	return root, nil
}

type expander struct{ nodes int }

// maxDepth bounds nesting (and alias cycles, which yaml.v3 refuses anyway).
const maxDepth = 1000

// expand returns n with its aliases replaced and merge keys applied. Nodes
// without an alias below them are returned as they are; the others are
// copied, so the tree yaml.v3 built is never changed.
func (x *expander) expand(n *yaml.Node, depth int) (*yaml.Node, error) {
	x.nodes++
	if x.nodes > MaxNodes {
		return nil, &Error{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("the file expands to more than %d nodes once its aliases are followed", MaxNodes)}
	}
	if depth > maxDepth {
		return nil, &Error{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, &Error{Line: n.Line, Column: n.Column, Msg: "an alias names an anchor that is not defined before it"}
		}
		return x.expand(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := *n
		out.Content = make([]*yaml.Node, len(n.Content))
		for i, c := range n.Content {
			e, err := x.expand(c, depth+1)
			if err != nil {
				return nil, err
			}
			out.Content[i] = e
		}
		return &out, nil
	case yaml.MappingNode:
		return x.mapping(n, depth)
	}
	return n, nil
}

// mapping expands a mapping and applies its merge keys: the keys of the
// merged mappings that the mapping does not set itself, the first merged
// mapping winning over later ones, as YAML 1.1's merge key says.
func (x *expander) mapping(n *yaml.Node, depth int) (*yaml.Node, error) {
	out := *n
	out.Content = nil
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ev, err := x.expand(v, depth+1)
		if err != nil {
			return nil, err
		}
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			switch ev.Kind {
			case yaml.MappingNode:
				merged = append(merged, ev)
			case yaml.SequenceNode:
				for _, m := range ev.Content {
					if m.Kind != yaml.MappingNode {
						return nil, &Error{Line: m.Line, Column: m.Column, Msg: "<<: expected a mapping or a list of mappings to merge"}
					}
					merged = append(merged, m)
				}
			default:
				return nil, &Error{Line: v.Line, Column: v.Column, Msg: "<<: expected a mapping or a list of mappings to merge"}
			}
			continue
		}
		ek, err := x.expand(k, depth+1)
		if err != nil {
			return nil, err
		}
		out.Content = append(out.Content, ek, ev)
	}
	if len(merged) == 0 {
		return &out, nil
	}
	has := map[string]bool{}
	for i := 0; i+1 < len(out.Content); i += 2 {
		has[out.Content[i].Value] = true
	}
	for _, m := range merged {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k := m.Content[i]; !has[k.Value] {
				has[k.Value] = true
				out.Content = append(out.Content, k, m.Content[i+1])
			}
		}
	}
	return &out, nil
}

// KindName says what a node is, for errors: "a mapping", "a list",
// "nothing" (null), or the kind of scalar ("a string", "a number"…). It
// never quotes a scalar's value: a file read by mistake (a key, a token)
// must not come back in an error message.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.Tag {
	case "!!null":
		return "nothing"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	case "!!timestamp":
		return "a date"
	case "!!binary":
		return "binary data"
	}
	return "a string"
}
