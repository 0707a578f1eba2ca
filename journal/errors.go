package journal

import "errors"

// Sentinel errors. Wrapped errors name the record or file they concern.
var (
	// ErrLocked: another process holds the journal open.
	ErrLocked = errors.New("journal is in use by another mcpflow process")
	// ErrNotJournal: the file exists but is not an mcpflow journal.
	ErrNotJournal = errors.New("file is not an mcpflow journal")
	// ErrForeignLog: the file beside the journal where its write-ahead
	// log belongs is not that journal's log.
	ErrForeignLog = errors.New("not this journal's log")
	// ErrDamaged: the file is an unreadable or truncated database, or a
	// record in it cannot be decoded.
	ErrDamaged = errors.New("journal file is damaged")
	// ErrInaccessible: the file cannot be opened as asked — permission
	// denied, a read-only file system, a dangling symbolic link — whatever
	// its contents. It is not damage: the file is left alone.
	ErrInaccessible = errors.New("journal cannot be opened")
	// ErrNewerSchema: the journal was written by a newer mcpflow.
	ErrNewerSchema = errors.New("journal was written by a newer version of mcpflow")
	// ErrNotFound: no record with that id (or id prefix).
	ErrNotFound = errors.New("not found")
	// ErrExists: a record with that id exists already.
	ErrExists = errors.New("exists already")
	// ErrAmbiguous: an id prefix matches more than one record.
	ErrAmbiguous = errors.New("ambiguous id prefix")
	// ErrInvalid: records break the journal's rules (what Check reports
	// of a journal); nothing of them was written (see ImportError).
	ErrInvalid = errors.New("records break the journal's rules")
	// ErrTransition: an illegal state transition; nothing was written.
	ErrTransition = errors.New("illegal state transition")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal is closed")
	// ErrLeaseLost: another worker took the run over (this process's
	// lease expired while it was paused or cut off): nothing more is
	// written for it here.
	ErrLeaseLost = errors.New("the run was taken over by another worker")
	// ErrHeld: another live worker holds the run.
	ErrHeld = errors.New("the run is held by another worker")
)
