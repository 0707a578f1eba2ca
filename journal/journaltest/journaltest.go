// Package journaltest opens temporary journals for tests and checks their
// integrity when the test ends.
package journaltest

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// Open opens a fresh journal in t.TempDir(). On cleanup it runs Check,
// fails the test on any problem, and closes the journal.
func Open(t testing.TB, opts *journal.Options) *journal.Journal {
	t.Helper()
	return OpenPath(t, filepath.Join(t.TempDir(), "journal.db"), opts)
}

// OpenPath opens (or creates) the journal at path, with the same cleanup as
// Open. A journal the test closed itself (after CheckAndClose, say) is left
// alone on cleanup.
func OpenPath(t testing.TB, path string, opts *journal.Options) *journal.Journal {
	t.Helper()
	j, err := journal.Open(path, opts)
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	t.Cleanup(func() {
		if _, err := j.Invocations(journal.Filter{Limit: 1}); errors.Is(err, journal.ErrClosed) {
			return
		}
		CheckAndClose(t, j)
	})
	return j
}

// CheckAndClose runs Check, reports every problem, and closes j.
func CheckAndClose(t testing.TB, j *journal.Journal) {
	t.Helper()
	probs, err := j.Check()
	if err != nil {
		t.Errorf("journal check: %v", err)
	}
	for _, p := range probs {
		t.Errorf("journal check: %s", p)
	}
	if err := j.Close(); err != nil {
		t.Errorf("close journal: %v", err)
	}
}

// CheckFile opens the journal at path read-only, runs Check and closes it.
func CheckFile(t testing.TB, path string) {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open journal %s: %v", path, err)
	}
	CheckAndClose(t, j)
}
