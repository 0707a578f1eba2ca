package service

import (
	"context"
	"errors"
	"net/http"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// Code is what an error stands for, the same on both sides of the HTTP
// API: its stable name on the wire, its HTTP status, the CLI's exit code,
// and the errors it is (errors.Is finds each of them, in this process and
// in a client that read the code back).
type Code struct {
	Name   string
	Status int
	// Exit is the CLI's exit code: 1 failed, 2 usage or validation, 4
	// journal unavailable, 130 interrupted (the README lists them).
	Exit int
	errs []error
}

// codes is the table of codes, most specific first: an error takes the
// first code whose first error it is.
var codes = []Code{
	// A journal that fails wins over what the request asked: the error
	// that ended the command is the journal's (as an exit code, 4).
	{"journal_busy", http.StatusConflict, 4, []error{ErrBusy, journal.ErrLocked}},
	{"journal_locked", http.StatusServiceUnavailable, 4, []error{journal.ErrLocked}},
	{"journal_damaged", http.StatusServiceUnavailable, 4, []error{journal.ErrDamaged}},
	{"journal_inaccessible", http.StatusServiceUnavailable, 4, []error{journal.ErrInaccessible}},
	{"not_a_journal", http.StatusServiceUnavailable, 4, []error{journal.ErrNotJournal}},
	{"foreign_log", http.StatusServiceUnavailable, 4, []error{journal.ErrForeignLog}},
	{"newer_schema", http.StatusServiceUnavailable, 4, []error{journal.ErrNewerSchema}},
	{"journal_failure", http.StatusServiceUnavailable, 4, []error{ErrJournal}},
	// The journal's own refusals, as a journal client (client.Journal)
	// reads them back from the process that holds the journal.
	{"journal_closed", http.StatusServiceUnavailable, 4, []error{journal.ErrClosed}},
	{"stopping", http.StatusServiceUnavailable, 4, []error{ErrStopping}},
	{"unreachable", http.StatusServiceUnavailable, 4, []error{ErrUnreachable}},
	{"trust_flag_needed", http.StatusBadRequest, 2, []error{ErrTrustFlagNeeded, ErrInvalid}},
	{"not_found", http.StatusNotFound, 2, []error{journal.ErrNotFound, ErrInvalid}},
	{"ambiguous", http.StatusBadRequest, 2, []error{journal.ErrAmbiguous, ErrInvalid}},
	{"running", http.StatusConflict, 2, []error{ErrRunning, ErrInvalid}},
	{"not_running", http.StatusConflict, 1, []error{ErrNotRunning}},
	{"abandoned", http.StatusConflict, 1, []error{ErrAbandoned}},
	{"nothing_to_resume", http.StatusConflict, 1, []error{ErrNothingToResume}},
	{"not_shared", http.StatusConflict, 2, []error{ErrNotShared}},
	{"invalid_transition", http.StatusConflict, 1, []error{journal.ErrTransition}},
	{"forbidden", http.StatusForbidden, 2, []error{ErrForbidden}},
	{"invalid", http.StatusBadRequest, 2, []error{ErrInvalid}},
	{"workflow_invalid", http.StatusBadRequest, 2, []error{workflow.ErrInvalid}},
	{"input_invalid", http.StatusBadRequest, 2, []error{workflow.ErrInput}},
	{"config_invalid", http.StatusBadRequest, 2, []error{upstream.ErrConfig}},
	{"interrupted", http.StatusServiceUnavailable, 130, []error{context.Canceled}},
	// The doors of a TCP listener, written by the server before any
	// handler runs.
	{"host_not_allowed", http.StatusForbidden, 2, []error{ErrForbidden}},
	{"unauthorized", http.StatusUnauthorized, 2, []error{ErrForbidden}},
	{"cross_site", http.StatusForbidden, 2, []error{ErrForbidden}},
	{"too_large", http.StatusRequestEntityTooLarge, 2, []error{ErrInvalid}},
}

// internal is the code of every other error.
var internal = Code{"internal", http.StatusInternalServerError, 1, nil}

// CodeOf is err's code.
func CodeOf(err error) Code {
	for _, c := range codes {
		if errors.Is(err, c.errs[0]) {
			return c
		}
	}
	return internal
}

// CodeNamed is the code called name; an unknown name (a newer server's)
// is internal.
func CodeNamed(name string) Code {
	for _, c := range codes {
		if c.Name == name {
			return c
		}
	}
	return internal
}

// Fielder is an error that says more as data: a run's id, who holds a
// journal. The fields cross the wire with its code.
type Fielder interface {
	Fields() map[string]string
}

// FieldsOf are the fields of the first error in err's chain that has
// some.
func FieldsOf(err error) map[string]string {
	var f Fielder
	if errors.As(err, &f) {
		return f.Fields()
	}
	return nil
}

// Error is an error read back from the wire: its code, its message and
// its fields. errors.Is finds the errors its code stands for, as it does
// for the error the other side returned.
type Error struct {
	Code    string
	Message string
	Values  map[string]string
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() []error { return CodeNamed(e.Code).errs }

// Fields are the fields the error came with.
func (e *Error) Fields() map[string]string { return e.Values }
