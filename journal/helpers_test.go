package journal_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// Shorthands for the states, as the tests write them.
const (
	intent   = journal.StateIntent
	done     = journal.StateCompleted
	failed   = journal.StateFailed
	unknown  = journal.StateOutcomeUnknown
	aborted  = journal.StateAborted
	timedOut = journal.StateTimedOut
	skipped  = journal.StateSkipped
	retry    = journal.StateRetryApproved
)

// The journal's tests share their helpers (journaltest).
var (
	newRun = journaltest.NewRun
	begin  = journaltest.Begin
	finish = journaltest.Finish
	state  = journaltest.StateOf
)

func raw[T any](t testing.TB, get func(journal.ID) (T, error), id journal.ID) []byte {
	t.Helper()
	return journaltest.Raw(t, get, id)
}
