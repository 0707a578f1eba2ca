package postgres_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestPipelineChecksEveryRecordItRead: a write that reads a cached record
// and writes nothing of it (RequestApproval of a gate already reached,
// approved meanwhile by another process) in a group with a pipelined
// write: no statement would check its read, so the group goes as a
// transaction, which reads the approval.
func TestPipelineChecksEveryRecordItRead(t *testing.T) {
	location := journaltest.PostgresURL(t)
	a := openWorker(t, location, "a", true)
	other := openWorker(t, location, "other", false)
	run := newRun(t, a)
	in := begin(t, a, run, "srv", "t")
	if _, err := a.RequestApproval(run, "gate", "ok?"); err != nil { // cached: running, gate pending
		t.Fatal(err)
	}
	if _, err := other.DecideApproval(run, "gate", journal.ApprovalApproved, "op", "fine"); err != nil {
		t.Fatal(err)
	}
	p, err := a.FinishLater(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: json.RawMessage(`[]`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.RequestApproval(run, "gate", "ok?")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if got.State != journal.ApprovalApproved {
		t.Errorf("RequestApproval returned %s from a stale cache; the database says approved", got.State)
	}
}
