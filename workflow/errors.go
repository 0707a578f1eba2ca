package workflow

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpflow/mcpflow/upstream"
)

var (
	// ErrInvalid marks a workflow that failed validation.
	ErrInvalid = errors.New("invalid workflow")
	// ErrInput marks bad --input values.
	ErrInput = errors.New("invalid input")
)

// PosError is an error at a position in a workflow file.
type PosError struct {
	File   string
	Line   int // 1-based; 0 when the error is about the file as a whole
	Column int // 1-based, in characters
	Msg    string
	// Cause, when set, is what the error is about as a value callers can
	// find with errors.As (an *UnknownServerError).
	Cause error
}

func (e *PosError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

func (e *PosError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrInvalid, e.Cause}
	}
	return []error{ErrInvalid}
}

// UnknownServerError is the cause of a step's error that names a server
// which neither the workflow declares nor the configuration given to Load
// defines. It is a upstream.ErrUnknownServer.
type UnknownServerError struct {
	// Server is the name the step gives.
	Server string
	// Closest is the declared or configured name it is likely a typo
	// of, or "".
	Closest string
}

func (e *UnknownServerError) Error() string { return fmt.Sprintf("unknown server %q", e.Server) }

func (e *UnknownServerError) Unwrap() error { return upstream.ErrUnknownServer }

// Errors is every error found in a workflow file, sorted by position, then
// message (see [Join]): validation goes on after an error, so that one run
// of mcpflow validate names them all. Its text is one error a line.
// errors.Is(err, ErrInvalid) holds, and errors.As finds the first
// *PosError.
type Errors []*PosError

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, pe := range e {
		lines[i] = pe.Error()
	}
	return strings.Join(lines, "\n")
}

func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, pe := range e {
		out[i] = pe
	}
	return out
}

// Join returns errs as one Errors sorted by file, line, column and message,
// each error once (an error inside an aliased node is found at every use of
// the alias, at the anchor's position), or nil when errs is empty.
func Join(errs ...*PosError) error {
	if len(errs) == 0 {
		return nil
	}
	out := slices.Clone(Errors(errs))
	slices.SortStableFunc(out, func(a, b *PosError) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Msg, b.Msg))
	})
	return slices.CompactFunc(out, func(a, b *PosError) bool { return *a == *b })
}
