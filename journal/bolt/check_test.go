package bolt_test

import (
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func TestCheckFindsBrokenIndexes(t *testing.T) {
	j := journaltest.Open(t, nil)
	in := begin(t, j, newRun(t, j), "srv", "t")
	finish(t, j, in, done)
	bad := begin(t, j, newRun(t, j), "srv", "t") // written before any damage: damage stops writes
	finish(t, j, bad, failed)
	expect := func(what string, want ...string) {
		t.Helper()
		probs, err := j.Check()
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for _, p := range probs {
			text += p.String() + "\n"
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: Check reported %q, want %q", what, text, w)
			}
		}
		if len(want) == 0 && text != "" {
			t.Errorf("%s: Check reported %q", what, text)
		}
	}
	expect("healthy")

	ghost := journal.NewID()
	if err := j.PutStrayStateKey(done, ghost, false); err != nil {
		t.Fatal(err)
	}
	expect("entry without a record", "idx_state: stray entry")
	j.PutStrayStateKey(done, ghost, true)

	if err := j.PutStrayStateKey(failed, in.ID, false); err != nil {
		t.Fatal(err)
	}
	expect("entry with the wrong state", "idx_state: stray entry 03"+strings.ReplaceAll(in.ID.String(), "-", ""))
	j.PutStrayStateKey(failed, in.ID, true)

	// Completed invocations are not in the state index; a journal written
	// before that has their entries, which are accepted.
	if err := j.PutStrayStateKey(done, in.ID, false); err != nil {
		t.Fatal(err)
	}
	expect("a completed invocation's legacy entry")
	j.PutStrayStateKey(done, in.ID, true)

	if err := j.PutStrayStateKey(failed, bad.ID, true); err != nil {
		t.Fatal(err)
	}
	expect("record missing from its index", "invocation "+bad.ID.String()+": missing from the state index")
	j.PutStrayStateKey(failed, bad.ID, false)
	expect("repaired")
}
