package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mattn/go-runewidth"
)

// Human views lay values out for people; machine formats (-o json, -o
// jsonl, --json, --jq) print them exactly as they are, through the
// printer. The functions here are where a value is shortened or reflowed,
// and only for the table format.

// previewWidth is the most columns a one-line preview of a value takes: a
// step's result on its progress line, an error in a table's ERROR column.
const previewWidth = 60

// inlineJSON is the most columns JSON keeps on one line in a detail view;
// longer JSON is indented, one member a line.
const inlineJSON = 60

// preview is s on one line, in at most width columns: JSON compacted,
// other text its first line (followed by " …" when more lines follow),
// each run of white space one space; cut with an ellipsis when longer.
func preview(s string, width int) string {
	s = strings.TrimSpace(s)
	var b bytes.Buffer
	if (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) && json.Compact(&b, []byte(s)) == nil {
		s = b.String()
	} else if first, rest, more := strings.Cut(s, "\n"); more && strings.TrimSpace(rest) != "" {
		// The first line, marked as one of several: lines run together
		// would read as one sentence.
		s = strings.Join(strings.Fields(first), " ") + " …"
	} else {
		s = strings.Join(strings.Fields(s), " ")
	}
	return runewidth.Truncate(s, width, "…")
}

// jsonText is JSON as a detail view shows it: compact when it fits in
// inlineJSON columns, else indented two spaces a level. JSON that does not
// parse is shown as it is.
func jsonText(raw []byte) string {
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return string(raw)
	}
	if runewidth.StringWidth(c.String()) <= inlineJSON {
		return c.String()
	}
	var b bytes.Buffer
	json.Indent(&b, c.Bytes(), "", "  ")
	return b.String()
}

// valueText is a value of a workflow (an input, an output) as a detail
// view shows it: a string as it is, anything else as JSON (jsonText), with
// <, > and & as they are.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return jsonText(b.Bytes())
}

// fields writes the "key: value" lines of a detail view, the way gh and
// kubectl describe do: values start in one column, width columns after
// indent; a value of several lines starts on the line after its key,
// each of its lines indented two spaces under the key, so that no line of
// a value reads as a key of the view.
type fields struct {
	w      io.Writer
	indent string
	width  int // of the widest key with its colon
}

// add writes one key and its value (one trailing newline of the value
// aside).
func (f fields) add(key, value string) {
	value = strings.TrimSuffix(strings.TrimSuffix(value, "\n"), "\r")
	if !strings.Contains(value, "\n") {
		fmt.Fprintln(f.w, strings.TrimRight(fmt.Sprintf("%s%-*s %s", f.indent, f.width, key+":", value), " "))
		return
	}
	fmt.Fprintf(f.w, "%s%s:\n", f.indent, key)
	block(f.w, f.indent+"  ", value)
}

// block writes text one line at a time, each line after indent (an empty
// line stays empty).
func block(w io.Writer, indent, text string) {
	for l := range strings.SplitSeq(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if l == "" {
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintln(w, indent+l)
	}
}
