package workflow

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/internal/yamlpos"
)

// A plain (unquoted) YAML value ends at ": ", which starts a mapping:
//
//	text: ${{ steps.a.result: x }}
//
// does not parse ("mapping values are not allowed in this context"), and
//
//	text:
//	  ${{ steps.a.result: x }}
//
// parses as a mapping from "${{ steps.a.result" to "x }}". Both get a hint
// to quote the value, pointing at where the value starts.

// colonHint is the hint for a value broken at ": ", showing it quoted
// when known ("" when not).
func colonHint(value string) string {
	if value == "" {
		return `hint: a value containing ": " must be quoted`
	}
	return `hint: a value containing ": " must be quoted: ` + quoteYAML(value)
}

// quoteYAML writes s as a YAML string that reads back as s: in double
// quotes, or in single quotes when s holds a double quote or a backslash
// (which double quotes would make an escape).
func quoteYAML(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// syntaxError is the PosError of a file yamlpos.Parse refused. A value
// broken at ": " gets the hint to quote it, at the value's column (the
// parser names only the line).
func syntaxError(file string, src []byte, err error) *PosError {
	var ye *yamlpos.Error
	if !errors.As(err, &ye) {
		return &PosError{File: file, Msg: err.Error()}
	}
	pe := &PosError{File: file, Line: ye.Line, Column: ye.Column, Msg: ye.Msg}
	if ye.Msg == "mapping values are not allowed in this context" {
		if col, value, ok := colonInValue(src, ye.Line); ok {
			pe.Column = col
			pe.Msg = fmt.Sprintf("%s (%s)", pe.Msg, colonHint(value))
		}
	}
	return pe
}

// keyValueLine is a line "key: value" (a list item's too: "- key: value")
// whose value is plain: not quoted, not a block scalar, a flow collection,
// an anchor, an alias or a tag. Group 1 is what comes before the value.
var keyValueLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\s*(?:-\s+)*(?:"[^"]*"|'[^']*'|[^\s"'#{}\[\]][^#]*?)\s*:\s+)([^\s"'{}\[\]&*!|>#].*)$`)
})

// colonInValue finds, on line (1-based) of src, a plain value that holds
// ": " or ends with ":": its column and its text (without a comment).
func colonInValue(src []byte, line int) (col int, value string, ok bool) {
	lines := strings.Split(string(src), "\n")
	if line < 1 || line > len(lines) {
		return 0, "", false
	}
	m := keyValueLine().FindStringSubmatch(strings.TrimSuffix(lines[line-1], "\r"))
	if m == nil {
		return 0, "", false
	}
	value = m[2]
	if i := strings.Index(value, " #"); i >= 0 {
		value = value[:i]
	}
	value = strings.TrimRight(value, " \t")
	if !strings.Contains(value, ": ") && !strings.HasSuffix(value, ":") {
		return 0, "", false
	}
	return utf8.RuneCountInString(m[1]) + 1, value, true
}

// brokenValue reports whether the key k of a mapping is a plain value that
// YAML split at ": " (it holds "${{": a key is never evaluated), and the
// hint for it. v is k's value; one says whether the pair is the mapping's
// only one, when the value is shown quoted.
func brokenValue(k, v *yaml.Node, one bool) (hint string, ok bool) {
	if k.Kind != yaml.ScalarNode || k.Style != 0 || !strings.Contains(k.Value, "${{") {
		return "", false
	}
	if !one || v.Kind != yaml.ScalarNode || v.Style != 0 {
		return colonHint(""), true
	}
	if v.Tag == "!!null" && v.Value == "" {
		return colonHint(k.Value + ":"), true
	}
	return colonHint(k.Value + ": " + v.Value), true
}
