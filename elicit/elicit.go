// Package elicit is what mcpflow knows of a server's elicitation: the
// question (elicitation/create's params), and the answers to it — from a
// step's elicit:, from an operator's fields (mcpflow answer, the web UI's
// form) — checked against the schema the server asked with before they
// are journaled or sent.
package elicit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Method is the MCP method of an elicitation request.
const Method = "elicitation/create"

// Actions an answer may take: accept (with content), decline, cancel.
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// Question is an elicitation request as mcpflow shows it.
type Question struct {
	// Mode is "form" (the default) or "url".
	Mode    string `json:"mode,omitempty"`
	Message string `json:"message"`
	// Schema is the requested schema (form mode), raw.
	Schema json.RawMessage `json:"requestedSchema,omitempty"`
	// URL is where the person goes (url mode).
	URL string `json:"url,omitempty"`
}

// Field is one property of a form question's schema.
type Field struct {
	Name        string
	Type        string // string, number, integer, boolean
	Title       string
	Description string
	Enum        []string
	Required    bool
	Default     any
	// Secret: the schema marks the field as one not to show or keep
	// (writeOnly, or format password).
	Secret bool
}

// Parse decodes elicitation/create's params.
func Parse(params json.RawMessage) (*Question, error) {
	var q Question
	if err := json.Unmarshal(params, &q); err != nil {
		return nil, fmt.Errorf("elicitation request: %w", err)
	}
	if q.Mode == "" {
		q.Mode = "form"
	}
	return &q, nil
}

// Fields lists the question's fields, in the order of the schema's
// properties.
func (q *Question) Fields() ([]Field, error) {
	if len(q.Schema) == 0 {
		return nil, nil
	}
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(q.Schema, &s); err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	names, err := keysInOrder(s.Properties)
	if err != nil {
		return nil, fmt.Errorf("requested schema: properties: %w", err)
	}
	var props map[string]struct {
		Type        string   `json:"type"`
		Title       string   `json:"title"`
		Description string   `json:"description"`
		Enum        []string `json:"enum"`
		Format      string   `json:"format"`
		WriteOnly   bool     `json:"writeOnly"`
		Default     any      `json:"default"`
	}
	if len(s.Properties) > 0 {
		if err := json.Unmarshal(s.Properties, &props); err != nil {
			return nil, fmt.Errorf("requested schema: properties: %w", err)
		}
	}
	out := make([]Field, 0, len(names))
	for _, n := range names {
		p := props[n]
		out = append(out, Field{Name: n, Type: p.Type, Title: p.Title, Description: p.Description, Enum: p.Enum,
			Required: slices.Contains(s.Required, n), Default: p.Default, Secret: p.WriteOnly || p.Format == "password"})
	}
	return out, nil
}

// keysInOrder returns the keys of a JSON object in the order written.
func keysInOrder(obj json.RawMessage) ([]string, error) {
	if len(obj) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(obj)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Check validates content against the question's requested schema.
func (q *Question) Check(content map[string]any) error {
	if len(q.Schema) == 0 {
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(q.Schema, &s); err != nil {
		return fmt.Errorf("the server's requested schema is not a JSON schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("the server's requested schema: %w", err)
	}
	// Validate a JSON round trip: numbers as float64, as the schema sees them.
	b, err := json.Marshal(content)
	if err != nil {
		return err
	}
	var inst any
	if err := json.Unmarshal(b, &inst); err != nil {
		return err
	}
	if err := r.Validate(inst); err != nil {
		return fmt.Errorf("the answer does not match the requested schema: %w", err)
	}
	return nil
}

// WithDefaults returns content completed with the defaults of the
// requested schema: each field content lacks whose schema gives a
// default is answered with it, as a form pre-filled with the defaults and
// accepted would be (SEP-1034). content itself is not changed; a field it
// has, even null, is kept as given.
func (q *Question) WithDefaults(content map[string]any) (map[string]any, error) {
	fs, err := q.Fields()
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(content)+len(fs))
	maps.Copy(out, content)
	for _, f := range fs {
		if _, given := out[f.Name]; !given && f.Default != nil {
			out[f.Name] = f.Default
		}
	}
	return out, nil
}

// FromFields builds a form answer's content from NAME=VALUE fields, each
// value converted to its field's type (true/false for a boolean, a number
// for a number or integer). A field the schema does not have names those
// it has.
func (q *Question) FromFields(fields []string) (map[string]any, error) {
	fs, err := q.Fields()
	if err != nil {
		return nil, err
	}
	content := map[string]any{}
	for _, kv := range fields {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("field %q: want NAME=VALUE", kv)
		}
		i := slices.IndexFunc(fs, func(f Field) bool { return f.Name == name })
		if i < 0 {
			var names []string
			for _, f := range fs {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("field %q is not asked for (the question asks: %s)", name, strings.Join(names, ", "))
		}
		v, err := fs[i].convert(value)
		if err != nil {
			return nil, err
		}
		content[name] = v
	}
	return content, nil
}

func (f Field) convert(value string) (any, error) {
	switch f.Type {
	case "boolean":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("field %s: want true or false, not %q", f.Name, value)
		}
		return b, nil
	case "integer":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("field %s: want an integer, not %q", f.Name, value)
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("field %s: want a number, not %q", f.Name, value)
		}
		return n, nil
	}
	return value, nil
}

// Response is the JSON of an elicitation answer (ElicitResult).
func Response(action string, content map[string]any) (json.RawMessage, error) {
	switch action {
	case Accept:
	case Decline, Cancel:
		content = nil
	default:
		return nil, fmt.Errorf("answer action %q: want accept, decline or cancel", action)
	}
	return json.Marshal(struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content,omitempty"`
	}{action, content})
}

// Redact returns response with the question's secret fields replaced by
// "[redacted]", for what is kept or shown (the journal, when it does not
// seal its payloads; every view).
func (q *Question) Redact(response json.RawMessage) json.RawMessage {
	fs, err := q.Fields()
	if err != nil {
		return response
	}
	var r struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content,omitempty"`
	}
	if json.Unmarshal(response, &r) != nil || r.Content == nil {
		return response
	}
	changed := false
	for _, f := range fs {
		if _, ok := r.Content[f.Name]; ok && f.Secret {
			r.Content[f.Name] = "[redacted]"
			changed = true
		}
	}
	if !changed {
		return response
	}
	b, _ := json.Marshal(r)
	return b
}
