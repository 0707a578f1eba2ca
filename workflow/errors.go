package workflow

import (
	"errors"
	"fmt"

	"github.com/mcpflow/mcpflow/servers"
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
	Line   int
	Column int
	Msg    string
}

func (e *PosError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

func (e *PosError) Unwrap() error { return ErrInvalid }

// UnknownServerError is a step naming a server that neither the workflow
// declares nor the configuration given to Load defines. It is a *PosError
// and a servers.ErrUnknownServer.
type UnknownServerError struct {
	PosError
	// Server is the name the step gives.
	Server string
}

func (e *UnknownServerError) Unwrap() []error {
	return []error{&e.PosError, servers.ErrUnknownServer}
}
