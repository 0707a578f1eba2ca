package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// Helpers of the kill campaigns (workers_test.go, serverkill_test.go):
// the check of every settled invocation against the demo server's ledger,
// and the figures each campaign logs.

// figures are what a kill campaign counts and logs.
type figures struct {
	kills, inFlight    int // SIGKILLs; of them, with an unsafe call in flight (where counted)
	pauses, longPauses int // SIGSTOPs; of them, past the lease
	restarts, refused  int // database restarts; processes that could not start meanwhile
	resubmits          int // submissions tried again while the database or server was down
	resumes            int // runs taken up again after a fault (a worker's claim, a server's start)
	replays            int // calls in flight at a fault, replayed (a decision each)
	unknown            int // invocations decided outcome_unknown: calls in flight at a fault
	resolved           int // resolutions from the ledger (of those, and of calls aborted)
	duplicated, lost   int // the promise broken: an unsafe call run twice; a result lost or changed
}

func (f figures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d kills", f.kills)
	if f.inFlight > 0 {
		fmt.Fprintf(&b, " (%d with an unsafe call in flight)", f.inFlight)
	}
	if f.pauses > 0 {
		fmt.Fprintf(&b, ", %d pauses (%d past the lease)", f.pauses, f.longPauses)
	}
	if f.restarts > 0 {
		fmt.Fprintf(&b, ", %d database restarts (%d starts refused meanwhile)", f.restarts, f.refused)
	}
	fmt.Fprintf(&b, ", %d submissions tried again; %d resumes, %d calls replayed, %d outcome_unknown, %d resolutions from the ledger; %d duplicated unsafe calls, %d lost results",
		f.resubmits, f.resumes, f.replays, f.unknown, f.resolved, f.duplicated, f.lost)
	return b.String()
}

// unsafeTool says whether a demo tool of trialTools must never run twice.
func unsafeTool(name string) bool {
	for _, tool := range trialTools {
		if tool.name == name {
			return tool.unsafe
		}
	}
	return false
}

// ledgerByKey is the demo server's ledger, its rows by idempotency key.
func (c *cli) ledgerByKey() map[string][]map[string]any {
	rows := map[string][]map[string]any{}
	for _, r := range c.ledger() {
		k, _ := r["idempotency_key"].(string)
		rows[k] = append(rows[k], r)
	}
	return rows
}

// checkSettled checks the invocations of a run that succeeded against the
// ledger (rows by idempotency key) and adds what it finds to f: every
// invocation sent is completed and was executed, an unsafe one once; a
// ledger tool's journaled result is the one one of its executions
// produced; an unsafe call in flight at a fault was never replayed, a
// safe one (trusted) left outcome_unknown only once its replays were spent.
func checkSettled(t *testing.T, invs []journal.Invocation, rows map[string][]map[string]any, f *figures, seed uint64) {
	t.Helper()
	for _, inv := range invs {
		if inv.State == journal.StateSkipped {
			continue // never sent
		}
		unsafe := unsafeTool(inv.Tool)
		unknown := false
		for _, dec := range inv.Decisions {
			switch {
			case dec.View == verdict.Operator:
				// The resolution from the ledger.
			case unsafe && dec.Verdict == verdict.Replay:
				t.Errorf("unsafe %s (invocation %s) was decided replay: %s, %s (seed %d)", inv.Tool, inv.ID.Short(), dec.Reason, dec.View, seed)
			case !unsafe && dec.Verdict == verdict.OutcomeUnknown && dec.Reason != string(replay.ReasonBudgetSpent):
				// A safe call in flight at fault after fault is replayed
				// replay.MaxReplays times, then left to an operator.
				t.Errorf("safe %s (invocation %s), trusted, was decided outcome_unknown: %s (seed %d)", inv.Tool, inv.ID.Short(), dec.Reason, seed)
			case dec.Verdict == verdict.Replay:
				f.replays++
			case dec.Verdict == verdict.OutcomeUnknown:
				unknown = true
			}
		}
		if unknown {
			f.unknown++
		}
		got := rows[inv.IdempotencyKey]
		if unsafe && len(got) > 1 {
			f.duplicated++
			t.Errorf("unsafe %s (invocation %s) executed %d times (seed %d): %v", inv.Tool, inv.ID.Short(), len(got), seed, got)
		}
		if inv.State != journal.StateCompleted {
			t.Errorf("invocation %s of a succeeded run is %s (seed %d)", inv.ID.Short(), inv.State, seed)
			continue
		}
		if len(got) == 0 {
			f.lost++
			t.Errorf("%s (invocation %s) is completed but never executed (seed %d)", inv.Tool, inv.ID.Short(), seed)
			continue
		}
		if inv.Tool != "ledger_append" && inv.Tool != "not_idempotent" {
			continue
		}
		// The journaled result is the one an execution produced: its row.
		var res struct {
			Row *int `json:"row"`
		}
		if inv.Result == nil || json.Unmarshal(inv.Result.StructuredContent, &res) != nil || res.Row == nil {
			f.lost++
			t.Errorf("%s (invocation %s) has no result (seed %d)", inv.Tool, inv.ID.Short(), seed)
			continue
		}
		match := false
		for _, r := range got {
			if seq, _ := r["seq"].(float64); int(seq) == *res.Row {
				match = true
			}
		}
		if !match {
			f.lost++
			t.Errorf("%s (invocation %s): journaled row %d is not an execution of it (seed %d): %v", inv.Tool, inv.ID.Short(), *res.Row, seed, got)
		}
	}
}

// waitUnsettled is an invocation an operator resolves before its run can go
// on.
func waitUnsettled(inv journal.Invocation) bool {
	return inv.State == journal.StateOutcomeUnknown || inv.State == journal.StateAborted || inv.State == journal.StateTimedOut
}

// exited reports whether the process pid, a child of the test not yet
// waited for, has exited (it is a zombie), without reaping it.
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(stat), ") Z ")
}

// sendSignal sends sig to pid; a process gone already is not an error.
func sendSignal(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
		t.Fatalf("kill -%d %d: %v", sig, pid, err)
	}
}
