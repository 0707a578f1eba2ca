package journal_test

import (
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestRelayedIntent: an Intent copied field by field (as one decoded from
// another process's answer is) is not Valid, and Finish refuses it;
// Relayed makes it Valid, and the journal still checks it against the
// invocation's open attempt, as it checks its own.
func TestRelayedIntent(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Server: "srv", Tool: "t"})
		if err != nil {
			t.Fatal(err)
		}
		copied := journal.Intent{ID: in.ID, RunID: in.RunID, IdempotencyKey: in.IdempotencyKey, Attempt: in.Attempt, Kind: in.Kind}
		if copied.Valid() {
			t.Fatal("an Intent copied field by field is Valid")
		}
		if err := j.Finish(copied, journal.Outcome{State: journal.StateCompleted}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("Finish of a copied Intent: %v, want ErrTransition", err)
		}
		wrong := journal.Relayed(copied)
		wrong.Attempt = 2
		if err := j.Finish(wrong, journal.Outcome{State: journal.StateCompleted}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("Finish of a relayed Intent of no open attempt: %v, want ErrTransition", err)
		}
		relayed := journal.Relayed(copied)
		if !relayed.Valid() {
			t.Fatal("a relayed Intent is not Valid")
		}
		if err := j.Finish(relayed, journal.Outcome{State: journal.StateCompleted}); err != nil {
			t.Fatal(err)
		}
		if inv, err := j.Invocation(in.ID); err != nil || inv.State != journal.StateCompleted {
			t.Errorf("after Finish: %v, %v", inv, err)
		}
	})
}

// TestCommitted: the Pending of a write committed at once is done, and
// Wait returns nil without waiting.
func TestCommitted(t *testing.T) {
	p := journal.Committed()
	if !p.Done() || p.Wait() != nil || !p.Done() {
		t.Errorf("Committed: done %v, wait %v", p.Done(), p.Wait())
	}
}
