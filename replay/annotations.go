package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Hint is one annotation field as declared on the wire. The zero value is
// Absent: the field was not sent, which is not the same as False.
type Hint uint8

const (
	Absent Hint = iota // the field is not present on the wire
	False              // the field is present with value false
	True               // the field is present with value true
)

// String returns "absent", "false" or "true".
func (h Hint) String() string {
	switch h {
	case Absent:
		return "absent"
	case False:
		return "false"
	case True:
		return "true"
	}
	return "Hint(" + strconv.Itoa(int(h)) + ")"
}

// HintOf converts an optional bool (nil = absent), as in go-sdk's
// mcp.ToolAnnotations pointer fields, to a Hint.
func HintOf(b *bool) Hint {
	switch {
	case b == nil:
		return Absent
	case *b:
		return True
	}
	return False
}

// Annotations are a tool's annotations exactly as declared. A nil
// *Annotations means the tool sent no annotations object at all.
type Annotations struct {
	ReadOnly    Hint // readOnlyHint
	Destructive Hint // destructiveHint
	Idempotent  Hint // idempotentHint
	OpenWorld   Hint // openWorldHint; never affects a decision
}

// field is one hint with its wire name.
type field struct {
	name string
	hint *Hint
}

// fields lists a's hints in the order MarshalJSON writes them.
func (a *Annotations) fields() [4]field {
	return [4]field{
		{"readOnlyHint", &a.ReadOnly},
		{"destructiveHint", &a.Destructive},
		{"idempotentHint", &a.Idempotent},
		{"openWorldHint", &a.OpenWorld},
	}
}

// ParseAnnotations parses the raw JSON of a tool's "annotations" member as
// sent on the wire. Nil, empty (or blank) and null input mean the member was
// not sent and give (nil, nil). A hint field with a non-boolean value, null
// included, is an error wrapping ErrHintNotBool; so is input that is not a
// JSON object. Unknown members are ignored; names match exactly.
func ParseAnnotations(raw json.RawMessage) (*Annotations, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("replay: parsing annotations: %w", err)
	}
	a := new(Annotations)
	for _, f := range a.fields() {
		v, ok := members[f.name]
		if !ok {
			continue
		}
		switch string(bytes.TrimSpace(v)) {
		case "true":
			*f.hint = True
		case "false":
			*f.hint = False
		default:
			return nil, fmt.Errorf("%w: %s", ErrHintNotBool, f.name)
		}
	}
	return a, nil
}

// MarshalJSON writes only the present fields, in a fixed order, e.g.
// {"readOnlyHint":true}. All fields absent gives {}.
func (a Annotations) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range a.fields() {
		if *f.hint == Absent {
			continue
		}
		if *f.hint != True && *f.hint != False {
			return nil, fmt.Errorf("replay: %s has invalid value %v", f.name, *f.hint)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", f.name, *f.hint)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON parses like ParseAnnotations. As encoding/json expects, null
// leaves a unchanged; decode into a *Annotations to keep "not sent" as nil.
func (a *Annotations) UnmarshalJSON(data []byte) error {
	p, err := ParseAnnotations(data)
	if err != nil || p == nil {
		return err
	}
	*a = *p
	return nil
}
