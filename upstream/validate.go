package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Validate checks args against the tool's inputSchema as the server sent
// it, before anything is sent: a call that fails here was never delivered.
// The error is an *ArgsError naming the tool and the failing argument,
// without the argument's value (it may be a secret).
//
// A tool without a schema, or with one this package cannot use (not JSON,
// an unsupported $schema version, unresolvable references), accepts any
// arguments: the server remains the judge.
func (t Tool) Validate(args json.RawMessage) error {
	if len(bytes.TrimSpace(t.InputSchema)) == 0 {
		return nil
	}
	resolved := resolveSchema(t.InputSchema)
	if resolved == nil {
		return nil
	}
	var instance any = map[string]any{}
	if trimmed := bytes.TrimSpace(args); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if err := json.Unmarshal(trimmed, &instance); err != nil {
			return &ArgsError{Tool: t.Name, Reason: "not valid JSON (expected a JSON object)"}
		}
	}
	if _, ok := instance.(map[string]any); !ok {
		return &ArgsError{Tool: t.Name, Reason: "not an object (expected a JSON object of named arguments)"}
	}
	err := resolved.Validate(instance)
	if err == nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), "cannot validate version") {
		return nil
	}
	return argsError(t.Name, err)
}

// resolvedSchemas are the input schemas resolved so far, by their text:
// every call of a step checks its arguments, and unmarshalling and
// resolving the schema each time took a tenth of mcpflow server's CPU
// with a thousand runs going. A nil value is a schema this package cannot
// use. A *jsonschema.Resolved is only read by Validate, so calls share it.
var resolvedSchemas struct {
	mu sync.Mutex
	m  map[string]*jsonschema.Resolved
}

// maxResolvedSchemas bounds resolvedSchemas: past it, the cache starts
// again empty (servers whose schemas change with every list cannot grow
// it without end).
const maxResolvedSchemas = 1024

// resolveSchema returns the resolved schema of raw, or nil when it is not
// JSON or cannot be resolved.
func resolveSchema(raw json.RawMessage) *jsonschema.Resolved {
	resolvedSchemas.mu.Lock()
	r, ok := resolvedSchemas.m[string(raw)] // no copy of raw for a lookup
	resolvedSchemas.mu.Unlock()
	if ok {
		return r
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err == nil {
		if res, err := schema.Resolve(nil); err == nil {
			r = res
		}
	}
	resolvedSchemas.mu.Lock()
	if resolvedSchemas.m == nil || len(resolvedSchemas.m) >= maxResolvedSchemas {
		resolvedSchemas.m = map[string]*jsonschema.Resolved{}
	}
	resolvedSchemas.m[string(raw)] = r
	resolvedSchemas.mu.Unlock()
	return r
}

// argsError turns a jsonschema-go error chain ("validating root:
// validating /properties/a: type: …") into the failing field and a reason.
func argsError(tool string, err error) *ArgsError {
	path := "root"
	leaf := err
	for e := err; e != nil; e = errors.Unwrap(e) {
		if inner := errors.Unwrap(e); inner != nil {
			if p, ok := strings.CutPrefix(strings.TrimSuffix(e.Error(), ": "+inner.Error()), "validating "); ok {
				path = p
			}
		}
		leaf = e
	}
	field, ok := fieldOf(path)
	msg := leaf.Error()
	if !ok {
		return &ArgsError{Tool: tool, Reason: redactValues(msg)}
	}
	join := func(name string) string {
		if field == "" {
			return name
		}
		return field + "." + name
	}
	p := patterns()
	if m := p.missing.FindStringSubmatch(msg); m != nil {
		names := p.quoted.FindAllStringSubmatch(m[1], -1)
		if len(names) == 1 {
			return &ArgsError{Tool: tool, Field: join(names[0][1]), Reason: "missing (required)"}
		}
		return &ArgsError{Tool: tool, Field: field, Reason: "missing required " + m[1]}
	}
	if m := p.extra.FindStringSubmatch(msg); m != nil {
		names := p.quoted.FindAllStringSubmatch(m[1], -1)
		if len(names) == 1 {
			return &ArgsError{Tool: tool, Field: join(names[0][1]), Reason: "not accepted by the tool (unexpected additional property)"}
		}
		return &ArgsError{Tool: tool, Field: field, Reason: "unexpected additional properties " + m[1]}
	}
	return &ArgsError{Tool: tool, Field: field, Reason: redactValues(msg)}
}

// messagePatterns are the patterns that reword jsonschema-go's messages,
// compiled when a message first needs them, not at every start of the
// binary.
type messagePatterns struct {
	missing, extra, quoted, trailingZeros *regexp.Regexp
	// messages of jsonschema-go that quote the instance's value
	values []valueMsg
}

type valueMsg struct {
	re  *regexp.Regexp
	out string
}

var patterns = sync.OnceValue(func() *messagePatterns {
	return &messagePatterns{
		missing:       regexp.MustCompile(`^required: missing properties: (\[.*\])$`),
		extra:         regexp.MustCompile(`^unexpected additional properties (\[.*\])$`),
		quoted:        regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`),
		trailingZeros: regexp.MustCompile(`\b\d+\.\d*0\b`),
		values: []valueMsg{
			{regexp.MustCompile(`^type: .* has type ("[^"]*"), want (.*)$`), "has type $1, want $2"},
			{regexp.MustCompile(`^enum: .* does not equal any of: (.*)$`), "not one of $1"},
			{regexp.MustCompile(`^const: .* does not equal (.*)$`), "does not equal $1"},
			{regexp.MustCompile(`^minimum: .* is less than (.*)$`), "less than the minimum $1"},
			{regexp.MustCompile(`^maximum: .* is greater than (.*)$`), "greater than the maximum $1"},
			{regexp.MustCompile(`^exclusiveMinimum: .* is less than or equal to (.*)$`), "not greater than $1"},
			{regexp.MustCompile(`^exclusiveMaximum: .* is greater than or equal to (.*)$`), "not less than $1"},
			{regexp.MustCompile(`^multipleOf: .* is not a multiple of (.*)$`), "not a multiple of $1"},
			{regexp.MustCompile(`^minLength: .* contains (\d+) Unicode code points, fewer than (\d+)$`), "$1 characters, fewer than $2"},
			{regexp.MustCompile(`^maxLength: .* contains (\d+) Unicode code points, more than (\d+)$`), "$1 characters, more than $2"},
			{regexp.MustCompile(`^pattern: .* does not match regular expression (.*)$`), "does not match the pattern $1"},
			{regexp.MustCompile(`^contains: .* does not have an item matching .*$`), "has no item the schema's contains accepts"},
		},
	}
})

// redactValues rewords messages that quote an argument's value.
func redactValues(msg string) string {
	p := patterns()
	for _, v := range p.values {
		if v.re.MatchString(msg) {
			// jsonschema-go prints bounds with %f: 1000.000000 → 1000
			return p.trailingZeros.ReplaceAllStringFunc(v.re.ReplaceAllString(msg, v.out), func(n string) string {
				return strings.TrimSuffix(strings.TrimRight(n, "0"), ".")
			})
		}
	}
	return msg
}

// fieldOf maps a schema location ("root", "/properties/a/items") to an
// argument path ("a[]"). ok is false for locations that are not a plain
// walk through properties and items (references, combinators).
func fieldOf(schemaPath string) (field string, ok bool) {
	if schemaPath == "root" || schemaPath == "" {
		return "", true
	}
	parts := strings.Split(strings.TrimPrefix(schemaPath, "/"), "/")
	var b strings.Builder
	for i := 0; i < len(parts); i++ {
		switch parts[i] {
		case "properties":
			if i+1 >= len(parts) {
				return "", false
			}
			name := strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[i+1])
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
			i++
		case "items", "additionalItems":
			b.WriteString("[]")
		case "prefixItems":
			if i+1 >= len(parts) {
				return "", false
			}
			fmt.Fprintf(&b, "[%s]", parts[i+1])
			i++
		default:
			return "", false
		}
	}
	return b.String(), true
}
