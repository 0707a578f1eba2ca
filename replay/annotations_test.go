package replay_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/replay"
)

var hints = [3]replay.Hint{replay.Absent, replay.False, replay.True}

func TestHintStringAndHintOf(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		in   *bool
		want replay.Hint
		str  string
	}{{nil, replay.Absent, "absent"}, {&no, replay.False, "false"}, {&yes, replay.True, "true"}} {
		if got := replay.HintOf(tc.in); got != tc.want || got.String() != tc.str {
			t.Errorf("HintOf(%v) = %v (%q), want %v (%q)", tc.in, got, got.String(), tc.want, tc.str)
		}
	}
	if got := replay.Hint(7).String(); got != "Hint(7)" {
		t.Errorf("Hint(7).String() = %q", got)
	}
}

func TestParseAnnotations(t *testing.T) {
	const (
		A = replay.Absent
		F = replay.False
		T = replay.True
	)
	for _, tc := range []struct {
		raw  string
		want *replay.Annotations // nil: no annotations object
	}{
		{"", nil},
		{"  \n", nil},
		{"null", nil},
		{" null ", nil},
		{`{}`, &replay.Annotations{}},
		{`{"readOnlyHint":true}`, &replay.Annotations{ReadOnly: T}},
		{`{"readOnlyHint":false}`, &replay.Annotations{ReadOnly: F}},
		{`{"readOnlyHint":true,"idempotentHint":false}`, &replay.Annotations{ReadOnly: T, Idempotent: F}},
		{`{"destructiveHint":true,"idempotentHint":true}`, &replay.Annotations{Destructive: T, Idempotent: T}},
		// What a go-sdk >= v1.7.0 server sends for a read-only tool.
		{`{"title":"Read","readOnlyHint":true,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true}`,
			&replay.Annotations{ReadOnly: T, Destructive: F, Idempotent: F, OpenWorld: T}},
		{`{ "openWorldHint" : false , "x" : [1,2] }`, &replay.Annotations{OpenWorld: F}},
		// Unknown and nested members are ignored; names match exactly.
		{`{"extra":{"readOnlyHint":true},"ReadOnlyHint":true,"readonlyhint":true}`, &replay.Annotations{ReadOnly: A}},
	} {
		got, err := replay.ParseAnnotations(json.RawMessage(tc.raw))
		if err != nil {
			t.Errorf("ParseAnnotations(%q) error: %v", tc.raw, err)
			continue
		}
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("ParseAnnotations(%q) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
	if got, err := replay.ParseAnnotations(nil); got != nil || err != nil {
		t.Errorf("ParseAnnotations(nil) = %v, %v; want nil, nil", got, err)
	}
}

func TestParseAnnotationsErrors(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		notBool string // field named in an ErrHintNotBool error; "" means a JSON error
	}{
		{`{"readOnlyHint":"true"}`, "readOnlyHint"},
		{`{"idempotentHint":null}`, "idempotentHint"},
		{`{"destructiveHint":1}`, "destructiveHint"},
		{`{"openWorldHint":{}}`, "openWorldHint"},
		{`[]`, ""},
		{`true`, ""},
		{`{`, ""},
		{`{"readOnlyHint":true}x`, ""},
	} {
		got, err := replay.ParseAnnotations(json.RawMessage(tc.raw))
		if err == nil || got != nil {
			t.Errorf("ParseAnnotations(%q) = %+v, %v; want nil and an error", tc.raw, got, err)
			continue
		}
		if errors.Is(err, replay.ErrHintNotBool) != (tc.notBool != "") {
			t.Errorf("ParseAnnotations(%q) error %v; want errors.Is(err, ErrHintNotBool) == %v", tc.raw, err, tc.notBool != "")
		}
		if tc.notBool != "" {
			if want := "replay: annotation hint is not a boolean: " + tc.notBool; err.Error() != want {
				t.Errorf("ParseAnnotations(%q) error %q, want %q", tc.raw, err, want)
			}
		}
	}
}

func TestAnnotationsMarshalJSON(t *testing.T) {
	for _, tc := range []struct {
		in   replay.Annotations
		want string
	}{
		{replay.Annotations{}, `{}`},
		{replay.Annotations{ReadOnly: replay.True}, `{"readOnlyHint":true}`},
		{replay.Annotations{Idempotent: replay.False}, `{"idempotentHint":false}`},
		{replay.Annotations{ReadOnly: replay.True, Destructive: replay.False, Idempotent: replay.False, OpenWorld: replay.True},
			`{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true}`},
	} {
		got, err := json.Marshal(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := json.Marshal(replay.Annotations{Destructive: 9}); err == nil {
		t.Error("Marshal with Hint(9) succeeded, want an error")
	}
}

// Every one of the 81 annotation values survives JSON exactly, directly and
// as an optional member of a record.
func TestAnnotationsJSONRoundTrip(t *testing.T) {
	type record struct {
		Annotations *replay.Annotations `json:"annotations,omitempty"`
	}
	n := 0
	for _, r := range hints {
		for _, d := range hints {
			for _, i := range hints {
				for _, o := range hints {
					in := replay.Annotations{ReadOnly: r, Destructive: d, Idempotent: i, OpenWorld: o}
					b, err := json.Marshal(record{&in})
					if err != nil {
						t.Fatalf("Marshal(%+v): %v", in, err)
					}
					var out record
					if err := json.Unmarshal(b, &out); err != nil || out.Annotations == nil || *out.Annotations != in {
						t.Errorf("round trip of %+v via %s = %+v, %v", in, b, out.Annotations, err)
					}
					n++
				}
			}
		}
	}
	if n != 81 {
		t.Fatalf("checked %d values, want 81", n)
	}
	var out record
	if err := json.Unmarshal([]byte(`{"annotations":null}`), &out); err != nil || out.Annotations != nil {
		t.Errorf("null annotations decoded as %+v, %v; want nil", out.Annotations, err)
	}
	if b, _ := json.Marshal(record{}); string(b) != `{}` {
		t.Errorf("nil annotations encoded as %s, want {}", b)
	}
}

func FuzzParseAnnotations(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `{"readOnlyHint":true}`, `{"readOnlyHint":null}`,
		`{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true}`,
		`{"readOnlyHint":true,"readOnlyHint":false}`, `{"idempotentHint":"yes","x":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := replay.ParseAnnotations(raw)
		if err != nil || a == nil {
			return
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("Marshal(%+v) of parsed %q: %v", *a, raw, err)
		}
		again, err := replay.ParseAnnotations(b)
		if err != nil || again == nil || *again != *a {
			t.Fatalf("parse(%q) = %+v; parse(marshal) = %+v, %v", raw, *a, again, err)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Fatalf("marshal not stable: %s then %s", b, b2)
		}
	})
}
