// Package jsonpos is mcpflow's positioned JSON reader: [Parse] reads JSON or
// JSONC (comments and trailing commas, as VS Code and Gemini CLI accept)
// into a tree of [Node]s that remember their byte offsets, so that errors
// about imported client configurations and the trust store can name a line
// and a column ([LineCol], [ErrorPos]).
//
// # Caveats
//
//   - Offsets refer to the original source: comments are blanked, never
//     removed ([StripJSONC]).
//   - Duplicate keys are kept in order; [Node.Field] returns the last, as
//     encoding/json does.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Node is a JSON value that remembers where it starts in its source, so
// that errors about imported files can name a line and a column.
type Node struct {
	Kind  Kind
	Off   int     // byte offset of the value's first byte
	End   int     // byte offset just past the value's last byte
	Str   string  // String: the value; Number: its text
	Bool  bool    // Bool
	Keys  []Field // Object, in source order (duplicates kept)
	Items []*Node // Array
}

type Field struct {
	Name string
	Off  int // byte offset of the key
	Val  *Node
}

type Kind int

const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// KindName says what a value is, for errors: "null", true/false, "a
// number", "a string", "an array" or "an object" — never a string's or a
// number's value: a file read by mistake must not come back in an error.
func (n *Node) KindName() string {
	switch n.Kind {
	case Null:
		return "null"
	case Bool:
		return fmt.Sprint(n.Bool)
	case Number:
		return "a number"
	case String:
		return "a string"
	case Array:
		return "an array"
	}
	return "an object"
}

// Field returns the value of the last key named name (JSON's "last wins").
func (n *Node) Field(name string) (*Node, bool) {
	if n == nil || n.Kind != Object {
		return nil, false
	}
	for i := len(n.Keys) - 1; i >= 0; i-- {
		if n.Keys[i].Name == name {
			return n.Keys[i].Val, true
		}
	}
	return nil, false
}

// Parse parses src, which may be JSONC (comments and trailing commas,
// as VS Code and Gemini CLI accept). Syntax errors are positioned. The
// returned tree's offsets refer to src.
func Parse(src []byte) (*Node, error) {
	clean := StripJSONC(src)
	if i := unclosedComment(clean); i >= 0 {
		return nil, &jsonPosError{off: i, msg: "unterminated /* comment (expected */)"}
	}
	var probe any
	if err := json.Unmarshal(clean, &probe); err != nil {
		return nil, err // positioned by jsonErrorPos
	}
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.UseNumber()
	p := &jparser{src: clean, dec: dec}
	return p.value()
}

type jparser struct {
	src []byte
	dec *json.Decoder
}

// next returns the next token and the offset of its first byte.
func (p *jparser) next() (json.Token, int, error) {
	off := int(p.dec.InputOffset())
	for off < len(p.src) {
		switch p.src[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	tok, err := p.dec.Token()
	return tok, off, err
}

func (p *jparser) value() (*Node, error) {
	tok, off, err := p.next()
	if err != nil {
		return nil, err
	}
	return p.valueFrom(tok, off)
}

func (p *jparser) valueFrom(tok json.Token, off int) (*Node, error) {
	n := &Node{Off: off}
	switch t := tok.(type) {
	case nil:
		n.Kind = Null
	case bool:
		n.Kind, n.Bool = Bool, t
	case json.Number:
		n.Kind, n.Str = Number, string(t)
	case string:
		n.Kind, n.Str = String, t
	case json.Delim:
		switch t {
		case '{':
			n.Kind = Object
			for {
				tok, koff, err := p.next()
				if err != nil {
					return nil, err
				}
				if d, ok := tok.(json.Delim); ok && d == '}' {
					n.End = int(p.dec.InputOffset())
					return n, nil
				}
				name, _ := tok.(string)
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				n.Keys = append(n.Keys, Field{Name: name, Off: koff, Val: v})
			}
		case '[':
			n.Kind = Array
			for {
				tok, voff, err := p.next()
				if err != nil {
					return nil, err
				}
				if d, ok := tok.(json.Delim); ok && d == ']' {
					n.End = int(p.dec.InputOffset())
					return n, nil
				}
				v, err := p.valueFrom(tok, voff)
				if err != nil {
					return nil, err
				}
				n.Items = append(n.Items, v)
			}
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	n.End = int(p.dec.InputOffset())
	return n, nil
}

// jsonPosError is a JSON problem found by this package, at a byte offset.
type jsonPosError struct {
	off int
	msg string
}

func (e *jsonPosError) Error() string { return e.msg }

// unclosedComment returns the offset of a "/*" that stripJSONC left in
// place because it has no end, or -1.
func unclosedComment(clean []byte) int {
	inString := false
	for i := 0; i < len(clean); i++ {
		c := clean[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && c == '/' && i+1 < len(clean) && clean[i+1] == '*':
			return i
		}
	}
	return -1
}

// lineCol converts a byte offset into a 1-based line and a 1-based column
// counted in characters.
func LineCol(src []byte, off int) (line, col int) {
	off = max(0, min(off, len(src)))
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return bytes.Count(src[:off], []byte{'\n'}) + 1, utf8.RuneCount(src[start:off]) + 1
}

// ErrorPos turns an encoding/json error into a message and the byte
// offset it is about.
func ErrorPos(src []byte, err error) (msg string, off int) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var pos *jsonPosError
	switch {
	case errors.As(err, &pos):
		return pos.msg, pos.off
	case errors.As(err, &syn):
		// Offset counts the bytes read, including the offending one.
		off = int(syn.Offset) - 1
		if syn.Offset >= int64(len(src)) {
			off = len(src)
		}
		return syn.Error() + " (expected valid JSON)", off
	case errors.As(err, &typ):
		return fmt.Sprintf("%s: expected %s, found %s", typ.Field, typ.Type, typ.Value), int(typ.Offset) - 1
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of JSON input (expected valid JSON)", len(src)
	}
	return err.Error() + " (expected valid JSON)", 0
}

// StripJSONC blanks out // and /* */ comments and trailing commas with
// spaces (newlines kept), so that offsets, lines and columns still match the
// original text. A UTF-8 byte order mark is blanked too.
func StripJSONC(src []byte) []byte {
	out := bytes.Clone(src)
	if bytes.HasPrefix(out, []byte("\xef\xbb\xbf")) {
		copy(out, "   ")
	}
	for _, c := range commentsIn(out, 0, len(out)) {
		if c.open {
			return out // unterminated: let the JSON parser report it
		}
		for i := c.start; i < c.end; i++ {
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	// Trailing commas: a comma whose next non-space byte closes a container.
	inString := false
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ',':
			j := i + 1
			for j < len(out) && (out[j] == ' ' || out[j] == '\t' || out[j] == '\n' || out[j] == '\r') {
				j++
			}
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
		}
	}
	return out
}

// Comments returns the text of each // and /* */ comment that starts in
// src[from:to], in order. from must not be inside a string (the offset of a
// value, a key or 0 is fine).
func Comments(src []byte, from, to int) []string {
	var out []string
	for _, c := range commentsIn(src, from, to) {
		text := src[c.start:c.end]
		if !c.open && bytes.HasPrefix(text, []byte("//")) {
			text = bytes.TrimRight(text, " \t\r")
		}
		out = append(out, string(text))
	}
	return out
}

// comment is the span of a comment in a JSONC text, src[start:end]: a //
// comment up to its line's end (the newline left out), a /* */ one with
// its */; open: a /* never closed, which runs to the end of src.
type comment struct {
	start, end int
	open       bool
}

// commentsIn lists the comments that start in src[from:to], in order,
// stopping at an unclosed one. from must not be inside a string.
func commentsIn(src []byte, from, to int) []comment {
	var out []comment
	to = min(to, len(src))
	inString := false
	for i := max(from, 0); i < to; i++ {
		c := src[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			end := bytes.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			out = append(out, comment{start: i, end: i + end})
			i += end - 1
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return append(out, comment{start: i, end: len(src), open: true})
			}
			out = append(out, comment{start: i, end: i + 2 + end + 2})
			i += 2 + end + 1
		}
	}
	return out
}
