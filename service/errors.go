package service

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mcpflow/mcpflow/journal"
)

var (
	// ErrInvalid marks a request that cannot be carried out as given: an
	// unknown or ambiguous id, an unknown server or tool, arguments that do
	// not fit the tool, a resolution the invocation's state does not allow.
	// Front ends show it as a usage error (exit 2, HTTP 400).
	ErrInvalid = errors.New("invalid request")
	// ErrNotRunning: Cancel was given a run that is not going in this
	// service.
	ErrNotRunning = errors.New("run is not running here")
	// ErrRunning: Resume was given a run that is going in this service
	// (resuming it would send its calls twice).
	ErrRunning = errors.New("run is running")
	// ErrJournal: a run stopped because the journal could not be read or
	// written (a full disk, an I/O error, damage found while running). What
	// was committed before stands; resume continues from it once the
	// journal is usable. Front ends show it as the journal being
	// unavailable (exit 4).
	ErrJournal = errors.New("journal failure")
	// ErrTrustFlagNeeded: a run whose calls were sent with workspace trust
	// from --trust-workspace is resumed without it, in a workspace the
	// trust store does not trust, and without ResumeRequest.Untrusted.
	// Every call that then needs a replay would be decided
	// workspace_not_trusted for good, so Resume refuses (an ErrInvalid).
	ErrTrustFlagNeeded = errors.New("run was started with --trust-workspace")
	// ErrNothingToResume: a run asked to go on has nothing to do: it
	// succeeded, or waits for an operator.
	ErrNothingToResume = errors.New("nothing to resume")
	// ErrForbidden: the request reaches what its door does not open (a
	// file outside the workspace, over TCP).
	ErrForbidden = errors.New("forbidden")
	// ErrUnreachable: the process that serves the journal went away (it
	// ended, or was killed) between being found and being asked.
	ErrUnreachable = errors.New("the journal's owner does not answer")
	// ErrStopping: the service is stopping and takes no new work.
	ErrStopping = errors.New("stopping")
)

// TrustFlagError is ErrTrustFlagNeeded for one run, with its workspace:
// the choices (the flag again, trusting the workspace, going on without
// trust) are the front end's to word.
type TrustFlagError struct {
	Run       journal.ID
	Workspace string
}

func (e *TrustFlagError) Error() string {
	return fmt.Sprintf("run %s was started with --trust-workspace, and %s is not in your trust store: resumed without it, every call that needs a replay would be marked outcome unknown (workspace_not_trusted) for good", e.Run.Short(), e.Workspace)
}

func (e *TrustFlagError) Unwrap() []error { return []error{ErrTrustFlagNeeded, ErrInvalid} }

func (e *TrustFlagError) Fields() map[string]string {
	return map[string]string{"run": e.Run.String(), "workspace": e.Workspace}
}

// ErrBusy: the journal is held by a command that runs one run (mcpflow
// run, resume or call without mcpflow server). It answers queries,
// cancels, approvals and resolutions from other terminals, and starts no
// other run: that needs mcpflow server, or waiting for the command to end.
var ErrBusy = errors.New("journal is held by a running command")

// BusyError is ErrBusy with who holds the journal. It is a
// journal.ErrLocked too.
type BusyError struct {
	PID     int
	Command string
	Run     journal.ID // zero before its run started
}

func (e *BusyError) Error() string {
	run := ""
	if !e.Run.IsZero() {
		run = ", run " + e.Run.Short()
	}
	return fmt.Sprintf("the journal is held by %s (pid %d%s), which runs one run at a time", e.Command, e.PID, run)
}

func (e *BusyError) Unwrap() []error { return []error{ErrBusy, journal.ErrLocked} }

func (e *BusyError) Fields() map[string]string {
	f := map[string]string{"pid": strconv.Itoa(e.PID), "command": e.Command}
	if !e.Run.IsZero() {
		f["run"] = e.Run.String()
	}
	return f
}

// RunningError is ErrRunning for one run: going in this service, or held
// by another worker (Held says by what).
type RunningError struct {
	Run  journal.ID
	Held error
}

func (e *RunningError) Error() string {
	if e.Held != nil {
		return fmt.Sprintf("run %s is running: %v", e.Run.Short(), e.Held)
	}
	return fmt.Sprintf("run %s is running", e.Run.Short())
}

func (e *RunningError) Unwrap() []error { return []error{ErrRunning, ErrInvalid} }

func (e *RunningError) Fields() map[string]string {
	f := map[string]string{"run": e.Run.String()}
	if e.Held != nil {
		f["where"] = "another worker"
	}
	return f
}

// journalFailed marks an error of the engine, which fails only when the
// journal does.
func journalFailed(err error) error {
	if err == nil || errors.Is(err, ErrJournal) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrJournal, err)
}

// invalidError is an ErrInvalid with its own message, the error that
// caused it, if any, and fields that say more, as data (see Fielder).
type invalidError struct {
	msg    string
	cause  error
	fields map[string]string
}

// Fields are the error's fields: nil for most.
func (e *invalidError) Fields() map[string]string { return e.fields }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.cause}
}

// fieldsError is err, its code and message unchanged, with fields that
// say more (see Fielder).
type fieldsError struct {
	err    error
	fields map[string]string
}

func (e *fieldsError) Error() string             { return e.err.Error() }
func (e *fieldsError) Unwrap() error             { return e.err }
func (e *fieldsError) Fields() map[string]string { return e.fields }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
