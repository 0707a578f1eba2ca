package service

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestCodesCrossTheWire: every code's error, as the owner's process
// returns it, has that code; read back from the wire (an *Error with the
// code) it is every error the code stands for and has the same code, exit
// code and status; an unknown code is internal.
func TestCodesCrossTheWire(t *testing.T) {
	seen := map[string]bool{}
	var firsts []error
	for _, c := range codes {
		if seen[c.Name] {
			t.Errorf("code %s twice in the table", c.Name)
		}
		seen[c.Name] = true
		if got := CodeNamed(c.Name); got.Name != c.Name || got.Status != c.Status || got.Exit != c.Exit {
			t.Errorf("CodeNamed(%s) = %+v", c.Name, got)
		}
		back := &Error{Code: c.Name, Message: "m"}
		for _, e := range c.errs {
			if !errors.Is(back, e) {
				t.Errorf("%s read back is not %v", c.Name, e)
			}
		}
		// Codes that share their first error with an earlier one (the
		// TCP doors' codes) are written by the server by name, never
		// derived from an error.
		if !slices.Contains(firsts, c.errs[0]) {
			if got := CodeOf(fmt.Errorf("wrapped: %w", c.errs[0])); got.Name != c.Name {
				t.Errorf("%s: CodeOf its own error is %s", c.Name, got.Name)
			}
		}
		firsts = append(firsts, c.errs[0])
		if got := CodeOf(back); got.Exit != c.Exit {
			t.Errorf("%s read back exits %d, want %d", c.Name, got.Exit, c.Exit)
		}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&TrustFlagError{Workspace: "/w"}, "trust_flag_needed"},
		{&BusyError{PID: 1, Command: "mcpflow run x.yaml"}, "journal_busy"},
		{fmt.Errorf("%w: %w", ErrJournal, invalid("run x: not found")), "journal_failure"},
		{invalid("bad"), "invalid"},
		{errors.New("anything else"), "internal"},
	} {
		if got := CodeOf(tc.err).Name; got != tc.want {
			t.Errorf("CodeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if got := CodeNamed("from_a_newer_server"); got.Name != "internal" || got.Exit != 1 {
		t.Errorf("an unknown code: %+v", got)
	}
	if f := FieldsOf(fmt.Errorf("x: %w", &BusyError{PID: 7, Command: "mcpflow call a b"})); f["pid"] != "7" || f["command"] != "mcpflow call a b" {
		t.Errorf("BusyError's fields: %v", f)
	}
}
